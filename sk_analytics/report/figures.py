"""Inline SVG figures of the Stage O report, each with a caption, legend, axis titles and a table twin.

Written by hand (no plotting dependency). Pure functions of plain data: the
report builds :class:`RunColumn` lists and :class:`~sk_analytics.dcci.groups.SkGroup`
lists, this module only draws them. Every figure is one ``<figure>`` holding
one ``<svg role="img">`` (scaled down to the page width by CSS) and a
``<details>`` table with the same numbers for readers who cannot see it.
"""

from __future__ import annotations

import html
import math
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sk_analytics.dcci.groups import SkGroup, format_range, occurrence_ranges

PAGE_W = 1100  # drawing width in px; the page's max content width

OUTCOME_COLOURS: dict[str, str] = {
    "incumbent": "#1565c0",
    "accepted": "#2e7d32",
    "rejected": "#757575",
    "diagnosis": "#ef6c00",
    "failed": "#c62828",
    "pending": "#8e24aa",
}
CLASS_COLOURS: dict[str, str] = {
    "significantly_slower": "#c62828",
    "significantly_faster": "#2e7d32",
    "neutral": "#9e9e9e",
    "insufficient_evidence": "#ffb300",
}


@dataclass(frozen=True)
class RunColumn:
    """One round of the run-metrics chart: its clean runs' worst-rank means and its outcome."""

    round: str
    entry_id: str | None
    outcome: str  # a key of OUTCOME_COLOURS
    values: tuple[float, ...]
    runs_label: str = ""  # which runs the values are (``5 after top-up``); the count alone when empty
    mean_ms: float | None = None
    """The round's mean as recorded (:func:`sk_analytics.explore.rounds`), the number the report's tables show;
    the float mean of ``values`` only where none was recorded. A float sum of the run metrics differs from the
    gate's exact mean in the last binary digit, which can change the fourth decimal (11.24435 vs 11.244349999999999)."""

    def mean(self) -> float:
        return self.mean_ms if self.mean_ms is not None else sum(self.values) / len(self.values)


def _esc(text: object) -> str:
    return html.escape(str(text))


def text_width(text: str, size: float = 12.0) -> float:
    """Approximate rendered width in px of ``text`` (wide CJK glyphs count a full em, others about 0.55 em)."""
    return sum(size if unicodedata.east_asian_width(ch) in "WF" else size * 0.55 for ch in text)


def nice_ticks(lo: float, hi: float, count: int = 5) -> list[float]:
    """Round tick values (1/2/5 × 10^k steps) covering [lo, hi]."""
    if hi <= lo:
        lo, hi = lo - 1.0, hi + 1.0
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step + 1e-9) * step
    n = math.ceil((hi - first) / step - 1e-9)
    return [round(first + i * step, 10) for i in range(n + 1)]


def _tick_label(value: float, ticks: Sequence[float]) -> str:
    step = ticks[1] - ticks[0] if len(ticks) > 1 else 1.0
    digits = max(0, -math.floor(math.log10(step))) if step < 1 else 0
    return f"{value:.{digits}f}"


def _figure(width: int, height: int, body: list[str], title: str, desc: str, table: str, table_label: str) -> str:
    return (f'<figure class="chart"><svg xmlns="http://www.w3.org/2000/svg" role="img" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" style="max-width:100%;height:auto" font-family="sans-serif" font-size="12">'
            f"<title>{_esc(title)}</title><desc>{_esc(desc)}</desc>" + "".join(body)
            + f"</svg><figcaption>{_esc(title)}</figcaption>"
            f"<details><summary>{_esc(table_label)}</summary>{table}</details></figure>")


def _html_table(header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    return ("<table><thead><tr>" + "".join(f"<th>{_esc(h)}</th>" for h in header) + "</tr></thead><tbody>"
            + "".join("<tr>" + "".join(f"<td>{_esc(c)}</td>" for c in row) + "</tr>" for row in rows) + "</tbody></table>")


LEGEND_ROW = 20  # px per legend row


def legend_rows(items: Sequence[tuple[str, str]], x0: int, width: float) -> list[list[tuple[float, str, str]]]:
    """Legend items wrapped into rows that fit ``width``: each row a list of (x, marker, label)."""
    rows: list[list[tuple[float, str, str]]] = [[]]
    x = float(x0)
    for marker, label in items:
        span = 34 + text_width(label)
        if rows[-1] and x + span > width:
            rows.append([])
            x = float(x0)
        rows[-1].append((x, marker, label))
        x += span
    return rows


def _legend(items: Sequence[tuple[str, str]], y: int, x0: int, width: float = PAGE_W) -> list[str]:
    """Legend items (svg marker snippet at (0,0), label) above the plot, wrapped into rows within ``width``
    (the plot starts :data:`LEGEND_ROW` px per extra row lower: :func:`legend_rows` tells how many)."""
    return [f'<g transform="translate({x:.0f},{y + LEGEND_ROW * i})">{marker}<text x="12" y="4">{_esc(label)}</text></g>'
            for i, row in enumerate(legend_rows(items, x0, width)) for x, marker, label in row]


MIN_W = 640  # px: narrower charts would cut their legend


def _run_legend_items(columns: Sequence[RunColumn], t: Mapping[str, str], reference: float | None) -> list[tuple[str, str]]:
    """Legend of the run-metrics chart: only outcomes that have dots (no empty entry), the mean tick, the O0 line, ✕."""
    shown = [o for o in OUTCOME_COLOURS if any(c.outcome == o and c.values for c in columns)]
    items = [(f'<circle r="5" fill="{OUTCOME_COLOURS[o]}"/>', t[f"outcome_{o}"]) for o in shown]
    items.append(('<line x1="-6" x2="6" stroke="#222" stroke-width="2"/>', t["fig_mean"]))
    if reference is not None:
        items.append(('<line x1="-8" x2="8" stroke="#1565c0" stroke-dasharray="5 4"/>', t["fig_o0_mean"]))
    if any(not c.values for c in columns):
        items.append((f'<text y="5" text-anchor="middle" fill="{OUTCOME_COLOURS["failed"]}" font-size="15">✕</text>', t["fig_no_runs"]))
    return items


def svg_run_metrics(columns: Sequence[RunColumn], t: Mapping[str, str], reference: float | None = None) -> str:
    """Dot strip chart: every clean run's worst-rank mean (ms) per round, coloured by the round's outcome.

    Dots of one round are spread sideways so equal values do not hide each
    other; a black tick marks the round's mean, a dashed line the O0 mean
    (``reference``); a round without any clean run shows a red ✕ on the axis.
    """
    if not any(c.values for c in columns):
        return ""
    values = [v for c in columns for v in c.values] + ([reference] if reference is not None else [])
    ticks = nice_ticks(min(values), max(values))
    lo, hi = ticks[0], ticks[-1]
    left, right, plot_h = 78, 20, 280
    step = max(36.0, min(72.0, (PAGE_W - left - right) / len(columns)))
    width = max(MIN_W, int(left + right + step * len(columns)))
    step = (width - left - right) / len(columns)
    items = _run_legend_items(columns, t, reference)
    top = 26 + LEGEND_ROW * len(legend_rows(items, left + 6, width - right))  # the legend wraps above the plot, never on it
    slanted = any(text_width(c.round) * 1.2 > step - 6 for c in columns)  # long round names (capitals run wide): slant them
    height = top + plot_h + (96 if slanted else 58)

    def y_of(v: float) -> float:
        return top + plot_h - (v - lo) / (hi - lo) * plot_h

    body: list[str] = []
    for tick in ticks:
        y = y_of(tick)
        body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#e0e0e0"/>'
                    f'<text x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_tick_label(tick, ticks)}</text>')
    body.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#444"/>'
                f'<line x1="{left}" y1="{top + plot_h}" x2="{width - right}" y2="{top + plot_h}" stroke="#444"/>')
    body.append(f'<text transform="translate(16,{top + plot_h / 2:.0f}) rotate(-90)" text-anchor="middle">{_esc(t["fig_runs_y"])}</text>')
    body.append(f'<text x="{left + (width - left - right) / 2:.0f}" y="{height - 6}" text-anchor="middle">{_esc(t["fig_runs_x"])}</text>')
    if reference is not None:
        y = y_of(reference)
        body.append(f'<line x1="{left}" y1="{y:.1f}" x2="{width - right}" y2="{y:.1f}" stroke="#1565c0" stroke-dasharray="5 4"/>')
    for i, col in enumerate(columns):
        cx = left + step * (i + 0.5)
        colour = OUTCOME_COLOURS.get(col.outcome, OUTCOME_COLOURS["pending"])
        label = f"{col.round} {col.entry_id or ''}".strip()
        anchor = f'text-anchor="end" transform="rotate(-35 {cx:.1f} {top + plot_h + 16})"' if slanted else 'text-anchor="middle"'
        body.append(f'<text x="{cx:.1f}" y="{top + plot_h + 18}" {anchor}>{_esc(col.round)}</text>')
        if not col.values:
            y = top + plot_h - 8
            body.append(f'<text x="{cx:.1f}" y="{y + 5}" text-anchor="middle" fill="{OUTCOME_COLOURS["failed"]}" font-size="15">✕'
                        f'<title>{_esc(label)}: {_esc(t["fig_no_runs"])}</title></text>')
            continue
        gap = min(7.0, step * 0.6 / len(col.values))
        for j, v in enumerate(col.values):
            x = cx + (j - (len(col.values) - 1) / 2) * gap
            body.append(f'<circle cx="{x:.1f}" cy="{y_of(v):.1f}" r="4" fill="{colour}" fill-opacity="0.8" stroke="#fff" stroke-width="0.8">'
                        f"<title>{_esc(label)} run {j + 1}: {v:.4f} ms</title></circle>")
        mean = col.mean()
        body.append(f'<line x1="{cx - step * 0.32:.1f}" y1="{y_of(mean):.1f}" x2="{cx + step * 0.32:.1f}" y2="{y_of(mean):.1f}" '
                    f'stroke="#222" stroke-width="2"><title>{_esc(label)} mean: {mean:.4f} ms</title></line>')
    body += _legend(items, 18, left + 6, width - right)
    rows = [[c.round, c.entry_id or "—", t[f"outcome_{c.outcome}"], c.runs_label or len(c.values),
             ", ".join(f"{v:.4f}" for v in c.values) or "—", f"{c.mean():.4f}" if c.values else "—"]
            for c in columns]
    table = _html_table(t["fig_runs_cols"].split("|"), rows)
    return _figure(width, height, body, t["fig_runs"], t["fig_runs_desc"], table, t["fig_table"])


def _group_label(g: SkGroup) -> str:
    """``name ×16`` (distinct occurrences, however many ranks each was measured on), ``name #3`` for one."""
    n = len(set(g.occurrences))
    return f"{g.short_name} ×{n}" if n > 1 else f"{g.short_name} #{g.occurrences[0]}"


def svg_sk_deltas(groups: Sequence[SkGroup], t: Mapping[str, str], class_names: Mapping[str, str]) -> str:
    """Horizontal bars, largest slowdown on top: median ΔP50 % of each SK structure (per class), disable-all vs O0.

    The whisker spans the structure's occurrences (min–max ΔP50 %); the grey
    band is the noise band (±the widest per-SK band); red = significantly
    slower, green = significantly faster, grey = neutral.
    """
    if not groups:
        return ""
    band = max((g.noise_band_pct or 0.0) for g in groups)
    lows = [min(g.delta_p50_pct) for g in groups] + [-band, 0.0]
    highs = [max(g.delta_p50_pct) for g in groups] + [band, 0.0]
    ticks = nice_ticks(min(lows), max(highs), 8)
    lo, hi = ticks[0], ticks[-1]
    labels = [_group_label(g) for g in groups]
    label_w = int(min(420, 24 + max(text_width(s) for s in labels)))
    items = [(f'<rect x="-5" y="-5" width="10" height="10" fill="{CLASS_COLOURS[c]}"/>', class_names.get(c, c))
             for c in CLASS_COLOURS if any(g.cls == c for g in groups)]
    if band:
        items.append(('<rect x="-5" y="-5" width="10" height="10" fill="#eeeeee" stroke="#bbb"/>', f"{t['fig_band']} ±{band:g}%"))
    items.append(('<line x1="-6" x2="6" stroke="#222"/>', t["fig_range"]))
    right, row_h = 110, 24
    top = 26 + LEGEND_ROW * len(legend_rows(items, 10, PAGE_W - 10))
    plot_w = PAGE_W - label_w - right
    height = top + row_h * len(groups) + 52
    bottom = top + row_h * len(groups)

    def x_of(v: float) -> float:
        return label_w + (v - lo) / (hi - lo) * plot_w

    body: list[str] = []
    if band:
        body.append(f'<rect x="{x_of(-band):.1f}" y="{top}" width="{x_of(band) - x_of(-band):.1f}" height="{bottom - top}" '
                    f'fill="#eeeeee"><title>{_esc(t["fig_band"])} ±{band:g}%</title></rect>')
    for tick in ticks:
        x = x_of(tick)
        body.append(f'<line x1="{x:.1f}" y1="{top}" x2="{x:.1f}" y2="{bottom}" stroke="#e0e0e0"/>'
                    f'<text x="{x:.1f}" y="{bottom + 16}" text-anchor="middle">{"0" if tick == 0 else f"{tick:+g}"}</text>')
    zero = x_of(0.0)
    body.append(f'<line x1="{zero:.1f}" y1="{top - 4}" x2="{zero:.1f}" y2="{bottom}" stroke="#444"/>')
    body.append(f'<text x="{label_w + plot_w / 2:.0f}" y="{height - 8}" text-anchor="middle">{_esc(t["fig_sk_x"])}</text>')
    for i, (g, label) in enumerate(zip(groups, labels, strict=True)):
        y = top + i * row_h
        mid = y + row_h / 2
        colour = CLASS_COLOURS.get(g.cls, CLASS_COLOURS["insufficient_evidence"])
        median, lo_v, hi_v = g.median_pct, min(g.delta_p50_pct), max(g.delta_p50_pct)
        tip = (f"{g.structure} · {class_names.get(g.cls, g.cls)} · occ {occurrence_ranges(g.occurrences)} (n={len(g.occurrences)}) · "
               f"ΔP50 {median:+.2f}% [{lo_v:+.2f}%, {hi_v:+.2f}%]")
        x0, x1 = sorted((zero, x_of(median)))
        body.append(f'<text x="{label_w - 8}" y="{mid + 4:.1f}" text-anchor="end">{_esc(label)}</text>')
        body.append(f'<rect x="{x0:.1f}" y="{y + 5}" width="{max(x1 - x0, 1.0):.1f}" height="{row_h - 10}" fill="{colour}">'
                    f"<title>{_esc(tip)}</title></rect>")
        if hi_v > lo_v:
            body.append(f'<line x1="{x_of(lo_v):.1f}" y1="{mid:.1f}" x2="{x_of(hi_v):.1f}" y2="{mid:.1f}" stroke="#222"/>')
        value_x = max(x1, x_of(hi_v)) + 6
        body.append(f'<text x="{value_x:.1f}" y="{mid + 4:.1f}">{median:+.1f}%</text>')
    body += _legend(items, 18, 10, PAGE_W - 10)
    rows = [[g.short_name, class_names.get(g.cls, g.cls), f"{len(g.occurrences)} ({occurrence_ranges(g.occurrences)})",
             f"{g.median_pct:+.2f}", format_range(g.delta_p50_pct), format_range(g.delta_p50_us, "+.3f"), g.structure] for g in groups]
    table = _html_table(t["fig_sk_cols"].split("|"), rows)
    return _figure(PAGE_W, height, body, t["fig_sk"], t["fig_sk_desc"], table, t["fig_table"])
