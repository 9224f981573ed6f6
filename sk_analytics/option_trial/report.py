"""Readable tables of an option-trial summary / stability result (zh default, en).

Pure functions: summary JSON in, text out. The JSON stays the machine truth;
these tables only render it.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any

from sk_analytics.messages import LANGS, Messages, tables, text

__all__ = ["LANGS", "render_option_trial", "render_stability"]

_TEXT: dict[str, Messages] = tables("option_trial.")
"""The tables' messages (``option_trial.*`` of the catalogs) in each language."""


def _num(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _width(text: str) -> int:
    """Terminal columns of ``text`` (CJK characters take two)."""
    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def _table(rows: list[list[str]]) -> list[str]:
    widths = [max(_width(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell + " " * (w - _width(cell)) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]


def _side_row(label: str, s: Mapping[str, Any], improvement: str, decision: str) -> list[str]:
    return [
        label,
        str(s["run_count"]),
        _num(s["worst_rank_mean_ms"]),
        _num(s["median_run_worst_rank_mean_ms"]),
        _num(s["decode"]["p50_ms"]),
        _num(s["decode"]["p90_ms"]),
        _num(s["decode"]["stddev_ms"]),
        improvement,
        decision,
    ]


def _allow_text(evaluation: Mapping[str, Any], t: Mapping[str, str]) -> str:
    """The P90/stddev allowances the checks used (``g`` format: 0, 2.5)."""
    return str(t["allow"]).format(p90=f"{evaluation['allow_p90_regression_pct']:g}", sd=f"{evaluation['allow_stddev_regression_pct']:g}")


def _stability_lines(stability: Mapping[str, Any], t: Mapping[str, str]) -> list[str]:
    runs = ", ".join(_num(v) for v in stability["run_worst_rank_means_ms"])
    stable = t["yes"] if stability["stable"] else t["no"]
    return [f"{t['stable']}: {stable}  {t['spread']}: {_num(stability['spread_pct'], 3)}", f"{t['runs']}: [{runs}]"]


def _marks(checks: Mapping[str, bool], t: Mapping[str, str], lang: str) -> str:
    """Each check's name in words and its mark, in a list (a name of several words stays readable); a check the
    catalogs do not name is shown as recorded."""
    return text("format.list_sep", lang).join(f"{t.get('check_names.' + k, k)}={'✓' if v else '✗'}" for k, v in checks.items())


def _gate_label(result: Mapping[str, Any], lang: str) -> str:
    """What decides, as recorded in ``gate_policy`` (the statistics policy says it is not the protocol)."""
    policy = result.get("gate_policy") or {}
    return str(policy.get("label_zh" if lang == "zh" else "label") or _TEXT[lang]["gate_default"])


def _stats_line(name: str, s: Mapping[str, Any], t: Mapping[str, str], lang: str) -> list[str]:
    """The statistics policy's answer beside the protocol's (absent in summaries written before it existed)."""
    sp = s.get("stats_policy_evaluation")
    if sp is None:
        return []
    verdict = t["accepted"] if sp["accepted"] else t["rejected"]
    return [f"[{name}] {t['stats_policy'].format(level=sp['level_one_sided'] * 100)}: {_marks(sp['checks'], t, lang)} → {t['would']}{verdict}"]


def _decision(gate: Mapping[str, Any], t: Mapping[str, str]) -> str:
    """The effective decision; the sequential gate's "undecided" is not a rejection."""
    if gate["accepted"]:
        return str(t["accepted"])
    return str(t["undecided"] if gate["mode"] == "sequential" and gate.get("sequential_state") == "undecided" else t["rejected"])


def _sequential_line(name: str, s: Mapping[str, Any], t: Mapping[str, str]) -> list[str]:
    """The sequential policy's state (absent in summaries written before it existed)."""
    sq = s.get("sequential_policy_evaluation")
    if sq is None:
        return []
    words = t.get("seq_state." + str(sq["state"]))  # a state this version does not know (a newer record's): as recorded
    reason = t.get("seq_reason." + str(sq["reason"]), sq["reason"])
    state = str(sq["state"]) if words is None else words.format(runs=sq["runs_used"], reason=reason)
    head = t["sequential"].format(first=sq["first_look"], cap=sq["cap"], level=sq["level_one_sided"] * 100)
    return [f"[{name}] {head}: {state}"]


def _interval(ci: list[float] | None) -> str:
    return "-" if ci is None else f"[{ci[0]:+.2f}%, {ci[1]:+.2f}%]"


def _need_text(st: Mapping[str, Any], t: Mapping[str, str], lang: str) -> str:
    """Runs needed, for the observed effect only when one was detected; else the equivalence test and the margin's
    figure; then what sk-tune will run (candidate runs against the incumbent's runs as they are, or the family policy)."""
    figure = st.get("runs_needed")
    executable = None if figure is None else figure.get("executable")
    per_side = _per_side_text(st, t)
    if executable is None:  # summaries written before issue 43
        return per_side
    return f"{per_side}\n  {t['executable']}: {executable['text_zh' if lang == 'zh' else 'text']}"


def _per_side_text(st: Mapping[str, Any], t: Mapping[str, str]) -> str:
    """The per-side figure (a statistician's count; sk-tune keeps the incumbent's runs, see the executable one)."""
    figure = st.get("runs_needed")
    if figure is None:  # summaries written before the figure had a basis, or no logarithm
        return f"{t['need']}: {st['runs_needed_per_side'] if st['runs_needed_per_side'] is not None else t['none']}"
    runs = t["none"] if figure["per_side"] is None else str(figure["per_side"])
    noise = "?" if figure.get("planned_noise_pct") is None else f"{figure['planned_noise_pct']:.2f}%"
    if figure["basis"] == "observed_effect":
        return str(t["need_observed"]).format(effect=figure["effect_pct"], planned=figure.get("planned_effect_pct", figure["effect_pct"]),
                                         noise=noise, power=figure["power"] * 100, runs=runs)
    eq = st["equivalence"]
    tost = t["equivalent" if eq["equivalent"] else "not_equivalent"].format(margin=eq["margin_pct"], ci=_interval(eq["ci90_pct"]))
    return str(t["no_effect"]).format(tost=tost, margin=figure["effect_pct"], noise=noise, power=figure["power"] * 100, runs=runs)


def _advice_line(name: str, s: Mapping[str, Any], t: Mapping[str, str], lang: str) -> list[str]:
    advice = s.get("advice")
    if advice is None:
        return []
    return [f"[{name}] {t['advice']}: {advice['text_zh'] if lang == 'zh' else advice['text']}"]


def render_option_trial(result: Mapping[str, Any], lang: str = "zh") -> str:
    """The option-trial table in ``lang``."""
    t = _TEXT[lang]
    base = result["baseline"]
    rows = [t["head"].split("|"), _side_row(t["baseline"], base, "-", "-")]
    for name, s in result["candidates"].items():
        ev = s["option_trial_evaluation"]
        rows.append(_side_row(name, s, _num(s["improvement_pct"], 2), t["accepted"] if ev["accepted"] else t["rejected"]))
    lines = [t["title"].format(label=_gate_label(result, lang)), *_table(rows), *_stability_lines(result["baseline_stability"], t)]
    for name, s in result["candidates"].items():
        ev, st, gate = s["option_trial_evaluation"], s["statistics"], s["gate"]
        lines += [f"[{name}] {t['checks']}: {_marks(ev['checks'], t, lang)}  ({_allow_text(ev, t)})", *_stats_line(name, s, t, lang),
                  *_sequential_line(name, s, t), f"[{name}] {t['beside']}:"]
        verdict = st["verdict_zh"] if lang == "zh" else st["verdict"]
        lines += [
            f"  {t['ci']}: {_interval(st['ci_pct'])}  {t['boot']}: {_interval(st['bootstrap_ci_pct'])}",
            f"  {t['noise']}: {_num(st['noise']['baseline_run_cv_pct'], 2)}  {t['verdict']}: {verdict}",
            f"  {t['risk']}: {_num(st['false_win_risk']['p_value_one_sided'], 3)}"
            f"  {t['null_rate']}: {_num(st['false_win_risk']['null_run_checks_pass_rate'], 3)}",
            f"  {_need_text(st, t, lang)}",
            *_advice_line(name, s, t, lang),
            f"[{name}] {t['gate']}: {gate['mode']} ({_gate_label(result, lang)})  {t['decision']}: {_decision(gate, t)}",
        ]
    lines.append(f"{t['recommended']}: {result['selection']['recommended']}")
    return "\n".join(lines) + "\n"


def render_stability(result: Mapping[str, Any], lang: str = "zh") -> str:
    """The stability table in ``lang``."""
    t = _TEXT[lang]
    rows = [t["head"].split("|")[:7], _side_row(t["baseline"], result["baseline"], "-", "-")[:7]]
    return "\n".join([t["stability_title"], *_table(rows), *_stability_lines(result["baseline_stability"], t)]) + "\n"
