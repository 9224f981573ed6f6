"""The campaign report: per option value, its outcomes across sessions and its improvement spread.

Markdown plus HTML (the session report's Markdown subset renderer) with one
inline SVG: every session's gate improvement per option value, coloured by the
value's status in that session. Chinese by default, English on request.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import polars as pl

from sk_analytics.campaign.layout import SESSION_KEY, SESSIONS_DIR
from sk_analytics.campaign.options import STATUSES, option_summary, settled_entries
from sk_analytics.campaign.tables import session_folders
from sk_analytics.errors import InputError
from sk_analytics.files.atomic import write_text
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.markdown import table
from sk_analytics.messages import Messages, tables
from sk_analytics.report.figures import (
    OUTCOME_COLOURS,
    _esc,
    _figure,
    _html_table,
    _legend,
    nice_ticks,
)
from sk_analytics.report.render import markdown_to_html

REPORT_MD = "CAMPAIGN_REPORT.md"
REPORT_HTML = "campaign-report.html"

TEXT: dict[str, Messages] = tables("campaign.")
"""The campaign report's messages (``campaign.*`` of the catalogs) in each language."""


def _session_rows(root: Path, t: Mapping[str, str]) -> list[list[str]]:
    out = []
    for name, folder in session_folders(root).items():
        identity = load_json_file(folder / "session.json") if (folder / "session.json").is_file() else {}
        node = (identity.get("placement") or {}).get("node_name") or "—"
        handoff = folder / "handoff.json"
        if handoff.is_file():
            base = folder / "BASE" / "sbest-base.json"
            outcome = t["outcome_base"] if base.is_file() else t["outcome_stopped"]
            options = ", ".join(f"{k}={v}" for k, v in load_json_file(base)["options"].items()) if base.is_file() else "—"
        else:
            outcome, options = t["outcome_unfinished"], "—"
        out.append([name, node, outcome, options or "—"])
    return out


def _fmt(value: float | None) -> str:
    return "—" if value is None else f"{value:+.2f}"


def render_markdown(root: Path, summary: pl.DataFrame, lang: str) -> str:
    t = TEXT[lang]
    lines = [f"# {t['title']}: {Path(root).name}", "", f"## {t['sessions']}", ""]
    lines += table(t["cols_sessions"].split("|"), _session_rows(root, t))
    lines += ["", f"## {t['options']}", "", f"> {t['note']}", ""]
    if summary.is_empty():
        return "\n".join([*lines, t["none"], ""])
    rows = [[r["option"], r["value"], r["sessions"], *(r[s] for s in STATUSES), _fmt(r["improvement_median_pct"]),
             "—" if r["improvement_min_pct"] is None else f"{_fmt(r['improvement_min_pct'])} … {_fmt(r['improvement_max_pct'])}",
             t[f"verdict_{r['verdict']}"]] for r in summary.iter_rows(named=True)]
    lines += table(t["cols_options"].split("|"), rows)
    lines += ["", "<!-- figure:gains -->", ""]
    return "\n".join(lines)


def svg_gains(entries: pl.DataFrame, t: Mapping[str, str]) -> str:
    """Dot strip chart: one column per trialled option value, one dot per session's gate improvement."""
    points = entries.filter(pl.col("improvement_pct").is_not_null()).sort("entry_id", "session")
    if points.is_empty():
        return ""
    ids = points["entry_id"].unique(maintain_order=True).to_list()
    values = points["improvement_pct"].to_list() + [0.0]
    ticks = nice_ticks(min(values), max(values))
    lo, hi = ticks[0], ticks[-1]
    left, top, plot_h, step = 78, 46, 260, 90.0
    width, height = int(left + 20 + step * len(ids)), top + plot_h + 110

    def y_of(v: float) -> float:
        return top + plot_h - (v - lo) / (hi - lo) * plot_h

    body = [f'<line x1="{left}" y1="{y_of(tk):.1f}" x2="{width - 20}" y2="{y_of(tk):.1f}" stroke="#e0e0e0"/>'
            f'<text x="{left - 6}" y="{y_of(tk) + 4:.1f}" text-anchor="end">{tk:g}</text>' for tk in ticks]
    body.append(f'<line x1="{left}" y1="{y_of(0):.1f}" x2="{width - 20}" y2="{y_of(0):.1f}" stroke="#444"/>')
    body.append(f'<text transform="translate(16,{top + plot_h / 2:.0f}) rotate(-90)" text-anchor="middle">{_esc(t["fig_y"])}</text>')
    for i, entry in enumerate(ids):
        cx = left + step * (i + 0.5)
        body.append(f'<text x="{cx:.1f}" y="{top + plot_h + 16}" text-anchor="end" transform="rotate(-30 {cx:.1f} {top + plot_h + 16})">{_esc(entry)}</text>')
        col = points.filter(pl.col("entry_id") == entry)
        for j, (session, status, gain) in enumerate(col.select("session", "status", "improvement_pct").iter_rows()):
            x = cx + (j - (col.height - 1) / 2) * min(8.0, step * 0.6 / col.height)
            colour = OUTCOME_COLOURS.get(status, OUTCOME_COLOURS["pending"])
            body.append(f'<circle cx="{x:.1f}" cy="{y_of(gain):.1f}" r="4.5" fill="{colour}" fill-opacity="0.85" stroke="#fff">'
                        f"<title>{_esc(entry)} · {_esc(session)}: {gain:+.3f} %</title></circle>")
    shown = [s for s in ("accepted", "rejected", "failed") if s in set(points["status"].to_list())]
    body += _legend([(f'<circle r="5" fill="{OUTCOME_COLOURS[s]}"/>', t[f"outcome_{s}"]) for s in shown], 18, left + 6)
    rows = [[e, s, t.get(f"outcome_{st}", st), f"{g:+.3f}"] for e, s, st, g in points.select("entry_id", "session", "status", "improvement_pct").iter_rows()]
    return _figure(width, height, body, t["fig"], t["fig_desc"], _html_table(t["fig_cols"].split("|"), rows), t["fig_table"])


def write_campaign_report(root: str | Path, lang: str = "zh", out: str | Path | None = None) -> dict[str, Path]:
    """Write ``CAMPAIGN_REPORT.md`` and ``campaign-report.html`` (into ``out``, default the campaign root)."""
    root = Path(root)
    lang = "en" if lang == "en" else "zh"
    if not session_folders(root):  # a report of no session would say nothing: refused, not written
        raise InputError(root / SESSIONS_DIR, "no session folder: the campaign holds no session to report on",
                         expected=f"{SESSIONS_DIR}/{SESSION_KEY}=<name>/ folders written by sk-run campaign")
    entries = settled_entries(root)
    summary = option_summary(entries)
    markdown = render_markdown(root, summary, lang)
    html = markdown_to_html(markdown, {"gains": svg_gains(entries, TEXT[lang])}, TEXT[lang]["title"], lang)
    folder = Path(out) if out is not None else root
    return {"report": write_text(folder / REPORT_MD, markdown), "html": write_text(folder / REPORT_HTML, html)}
