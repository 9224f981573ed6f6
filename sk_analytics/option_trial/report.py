"""Readable tables of an option-trial summary / stability result (zh default, en).

Pure functions: summary JSON in, text out. The JSON stays the machine truth;
these tables only render it.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping
from typing import Any

LANGS = ("zh", "en")

# Per language: sentence templates (str) and the table heading (list of str).
_TEXT: dict[str, dict[str, Any]] = {
    "zh": {
        "title": "Stage O 选项试验（{label}）",
        "stability_title": "五次运行稳定性检查",
        "head": ["对象", "运行数", "最慢rank均值ms", "中位运行ms", "P50ms", "P90ms", "标准差ms", "提升%", "协议门禁"],
        "baseline": "基线",
        "stable": "基线稳定",
        "spread": "极差%",
        "runs": "各运行最慢rank均值ms",
        "checks": "检查项",
        "accepted": "接受",
        "rejected": "拒绝",
        "undecided": "未判定（再加一次候选运行）",
        "beside": "门禁之外的统计（仅供参考，不改变协议结论）",
        "ci": "提升的95%置信区间（Welch，对数）",
        "boot": "自助法交叉验证区间",
        "noise": "基线运行间噪声CV%",
        "verdict": "判断",
        "risk": "误判为提升的风险：单侧p值",
        "null_rate": "无变化时均值+中位检查同时通过的概率",
        "need": "分辨该效应所需每侧运行数",
        "need_observed": "分辨该效应（{effect:+.2f}%，按其单侧95%下界{planned:.2f}%与噪声80%上界{noise}计算，{power:g}%把握）所需每侧运行数: {runs}",
        "no_effect": "未检出效应；{tost}；检出{margin:g}%效应（噪声按80%上界{noise}计算，{power:g}%把握）每侧所需运行数: {runs}",
        "equivalent": "±{margin:g}%等效性检验（TOST）：等效，90%区间{ci}",
        "not_equivalent": "±{margin:g}%等效性检验（TOST）：未能证明等效，90%区间{ci}",
        "advice": "建议",
        "gate": "门禁模式",
        "stats_policy": "统计策略（非协议，单侧{level:g}%检验）",
        "sequential": "序贯统计策略（非协议，第{first}至{cap}次候选运行逐次判断，总单侧{level:g}%）",
        "seq_state": {"accepted": "第{runs}次候选运行时接受", "rejected": "第{runs}次候选运行时拒绝（{reason}）",
                      "undecided": "{runs}次候选运行后尚未判定：再加一次候选运行后重新评估"},
        "seq_reason": {"not_faster": "候选平均不更快", "cap_reached": "达到上限仍未判定", "preconditions": "前提检查未通过", "crossed": "越过边界"},
        "would": "会",
        "allow": "允许退化：P90 ≤ +{p90}%，标准差 ≤ +{sd}%",
        "decision": "结论",
        "recommended": "推荐",
        "yes": "是",
        "no": "否",
        "none": "无",
        "check_names": {
            "baseline_stable": "基线稳定",
            "baseline_min_runs": "基线恰为5次",
            "candidate_min_runs": "候选至少3次",
            "mean_improvement": "均值严格提升",
            "median_run_direction": "中位运行提升",
            "p90_no_material_regression": "P90不变差",
            "stddev_no_material_regression": "标准差不变差",
            "mean_improvement_significant": "均值显著提升",
            "p90_not_significantly_worse": "P90不显著变差",
            "stddev_not_significantly_worse": "标准差不显著变差",
        },
    },
    "en": {
        "title": "Stage O option trial ({label})",
        "stability_title": "Five-run stability check",
        "head": ["side", "runs", "worst-rank-mean-ms", "median-run-ms", "p50-ms", "p90-ms", "stddev-ms", "improvement%", "protocol-gate"],
        "baseline": "baseline",
        "stable": "baseline stable",
        "spread": "spread%",
        "runs": "per-run worst-rank means ms",
        "checks": "checks",
        "accepted": "accepted",
        "rejected": "rejected",
        "undecided": "undecided (add one candidate run)",
        "beside": "Statistics beside the gate (informative, never change the protocol answer)",
        "ci": "95% CI of the improvement (Welch, log)",
        "boot": "bootstrap cross-check",
        "noise": "baseline run-to-run noise CV%",
        "verdict": "verdict",
        "risk": "false-win risk: one-sided p",
        "null_rate": "null pass rate of mean+median checks",
        "need": "runs per side to resolve this effect",
        "need_observed": "runs per side to resolve this effect ({effect:+.2f}%, planned at its 95% lower bound {planned:.2f}% and the noise's 80% upper "
                         "bound {noise}, {power:g}% power): {runs}",
        "no_effect": "no effect detected; {tost}; runs per side to detect a {margin:g}% effect (noise at its 80% upper bound {noise}, {power:g}% power): "
                     "{runs}",
        "equivalent": "TOST at ±{margin:g}%: equivalent, 90% CI {ci}",
        "not_equivalent": "TOST at ±{margin:g}%: not shown equivalent, 90% CI {ci}",
        "advice": "advice",
        "gate": "gate mode",
        "stats_policy": "statistics policy (NOT the protocol, one-sided {level:g}% tests)",
        "sequential": "sequential statistics policy (NOT the protocol, looks at candidate runs {first}..{cap}, {level:g}% one-sided overall)",
        "seq_state": {"accepted": "accepted at {runs} candidate runs", "rejected": "rejected at {runs} candidate runs ({reason})",
                      "undecided": "undecided after {runs} candidate runs: add one candidate run and evaluate again"},
        "seq_reason": {"not_faster": "not faster on average", "cap_reached": "cap reached undecided", "preconditions": "preconditions failed",
                       "crossed": "boundary crossed"},
        "would": "would be ",
        "allow": "allowed regression: P90 <= +{p90}%, stddev <= +{sd}%",
        "decision": "decision",
        "recommended": "recommended",
        "yes": "yes",
        "no": "no",
        "none": "n/a",
        "check_names": {name: name for name in (
            "baseline_stable", "baseline_min_runs", "candidate_min_runs", "mean_improvement",
            "median_run_direction", "p90_no_material_regression", "stddev_no_material_regression",
            "mean_improvement_significant", "p90_not_significantly_worse", "stddev_not_significantly_worse",
        )},
    },
}


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


def _allow_text(evaluation: Mapping[str, Any], t: Mapping[str, Any]) -> str:
    """The P90/stddev allowances the checks used (``g`` format: 0, 2.5)."""
    return str(t["allow"]).format(p90=f"{evaluation['allow_p90_regression_pct']:g}", sd=f"{evaluation['allow_stddev_regression_pct']:g}")


def _stability_lines(stability: Mapping[str, Any], t: Mapping[str, Any]) -> list[str]:
    runs = ", ".join(_num(v) for v in stability["run_worst_rank_means_ms"])
    stable = t["yes"] if stability["stable"] else t["no"]
    return [f"{t['stable']}: {stable}  {t['spread']}: {_num(stability['spread_pct'], 3)}", f"{t['runs']}: [{runs}]"]


def _marks(checks: Mapping[str, bool], t: Mapping[str, Any]) -> str:
    return " ".join(f"{t['check_names'][k]}={'✓' if v else '✗'}" for k, v in checks.items())


def _gate_label(result: Mapping[str, Any], lang: str) -> str:
    """What decides, as recorded in ``gate_policy`` (the statistics policy says it is not the protocol)."""
    policy = result.get("gate_policy") or {}
    default = "协议门禁" if lang == "zh" else "protocol gate"
    return str(policy.get("label_zh" if lang == "zh" else "label") or default)


def _stats_line(name: str, s: Mapping[str, Any], t: Mapping[str, Any]) -> list[str]:
    """The statistics policy's answer beside the protocol's (absent in summaries written before it existed)."""
    sp = s.get("stats_policy_evaluation")
    if sp is None:
        return []
    verdict = t["accepted"] if sp["accepted"] else t["rejected"]
    return [f"[{name}] {t['stats_policy'].format(level=sp['level_one_sided'] * 100)}: {_marks(sp['checks'], t)} → {t['would']}{verdict}"]


def _decision(gate: Mapping[str, Any], t: Mapping[str, Any]) -> str:
    """The effective decision; the sequential gate's "undecided" is not a rejection."""
    if gate["accepted"]:
        return str(t["accepted"])
    return str(t["undecided"] if gate["mode"] == "sequential" and gate.get("sequential_state") == "undecided" else t["rejected"])


def _sequential_line(name: str, s: Mapping[str, Any], t: Mapping[str, Any]) -> list[str]:
    """The sequential policy's state (absent in summaries written before it existed)."""
    sq = s.get("sequential_policy_evaluation")
    if sq is None:
        return []
    state = t["seq_state"][sq["state"]].format(runs=sq["runs_used"], reason=t["seq_reason"].get(sq["reason"], sq["reason"]))
    head = t["sequential"].format(first=sq["first_look"], cap=sq["cap"], level=sq["level_one_sided"] * 100)
    return [f"[{name}] {head}: {state}"]


def _interval(ci: list[float] | None) -> str:
    return "-" if ci is None else f"[{ci[0]:+.2f}%, {ci[1]:+.2f}%]"


def _need_text(st: Mapping[str, Any], t: Mapping[str, Any]) -> str:
    """Runs needed, for the observed effect only when one was detected; else the equivalence test and the margin's figure."""
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


def _advice_line(name: str, s: Mapping[str, Any], t: Mapping[str, Any], lang: str) -> list[str]:
    advice = s.get("advice")
    if advice is None:
        return []
    return [f"[{name}] {t['advice']}: {advice['text_zh'] if lang == 'zh' else advice['text']}"]


def render_option_trial(result: Mapping[str, Any], lang: str = "zh") -> str:
    """The option-trial table in ``lang``."""
    t = _TEXT[lang]
    base = result["baseline"]
    rows = [t["head"], _side_row(t["baseline"], base, "-", "-")]
    for name, s in result["candidates"].items():
        ev = s["option_trial_evaluation"]
        rows.append(_side_row(name, s, _num(s["improvement_pct"], 2), t["accepted"] if ev["accepted"] else t["rejected"]))
    lines = [t["title"].format(label=_gate_label(result, lang)), *_table(rows), *_stability_lines(result["baseline_stability"], t)]
    for name, s in result["candidates"].items():
        ev, st, gate = s["option_trial_evaluation"], s["statistics"], s["gate"]
        lines += [f"[{name}] {t['checks']}: {_marks(ev['checks'], t)}  ({_allow_text(ev, t)})", *_stats_line(name, s, t),
                  *_sequential_line(name, s, t), f"[{name}] {t['beside']}:"]
        verdict = st["verdict_zh"] if lang == "zh" else st["verdict"]
        lines += [
            f"  {t['ci']}: {_interval(st['ci_pct'])}  {t['boot']}: {_interval(st['bootstrap_ci_pct'])}",
            f"  {t['noise']}: {_num(st['noise']['baseline_run_cv_pct'], 2)}  {t['verdict']}: {verdict}",
            f"  {t['risk']}: {_num(st['false_win_risk']['p_value_one_sided'], 3)}"
            f"  {t['null_rate']}: {_num(st['false_win_risk']['null_run_checks_pass_rate'], 3)}",
            f"  {_need_text(st, t)}",
            *_advice_line(name, s, t, lang),
            f"[{name}] {t['gate']}: {gate['mode']} ({_gate_label(result, lang)})  {t['decision']}: {_decision(gate, t)}",
        ]
    lines.append(f"{t['recommended']}: {result['selection']['recommended']}")
    return "\n".join(lines) + "\n"


def render_stability(result: Mapping[str, Any], lang: str = "zh") -> str:
    """The stability table in ``lang``."""
    t = _TEXT[lang]
    rows = [t["head"][:7], _side_row(t["baseline"], result["baseline"], "-", "-")[:7]]
    return "\n".join([t["stability_title"], *_table(rows), *_stability_lines(result["baseline_stability"], t)]) + "\n"
