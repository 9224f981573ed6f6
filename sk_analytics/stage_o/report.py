"""EXPERIMENT_REPORT.md (Chinese by default, ``lang="en"``) and its HTML twin with inline SVG plots.

Everything comes from the session's own evidence: the ledger (decisions), the
frozen matrix, the option-trial summaries and stability files each gate
wrote, the DCCI diff and the BASE identity. The Markdown is the single text
of the report; :func:`markdown_to_html` renders the same text as HTML and
puts the figures (run metrics per round, per-SK deltas) where the Markdown
has a figure marker. No plotting dependency: the SVG is written by hand.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sk_analytics.ledger import read_records
from sk_analytics.stage_o.machine import O0, SessionState, fold
from sk_analytics.stage_o.matrix import load_matrix
from sk_analytics.strict_json import load_json_file

FIGURE = re.compile(r"^<!-- figure:([a-z-]+) -->$")

TEXT: dict[str, dict[str, str]] = {
    "zh": {
        "title": "Stage O 实验报告",
        "outcome_base": "结果：已冻结 Sbest-BASE",
        "outcome_stopped": "结果：会话已停止",
        "overview": "总览",
        "cols": "阶段/候选|测量口径|基线耗时 ms|实验耗时 ms|耗时差 ms|改善率|运行数|门禁/状态|证据",
        "metric": "worst-rank 均值（预热后 decode）",
        "metric_vs": "worst-rank 均值，对比 {base}",
        "o0_runs": "O0-INCUMBENT 逐次运行",
        "o0_cols": "运行|最慢 rank|worst-rank 均值 ms|相对均值偏差",
        "trials": "各 O 轮试验",
        "dcci": "DCCI（数据缓存控制）家族",
        "figures": "图表",
        "fig_runs": "各轮逐次运行的 worst-rank 均值（ms）",
        "fig_sk": "各对齐 SK 的 P50 变化（disable-all 相对 O0，%）",
        "fig_md_note": "图表见同目录的 report.html。",
        "option": "选项", "pointer": "指针", "value": "取值", "original": "原值", "base_round": "配置派生自",
        "status": "状态", "reason": "原因", "evidence": "证据", "risk": "风险",
        "gate_cols": "检查项|数值|是否通过",
        "stats": "统计（协议门禁之外，仅供参考）",
        "runs_base": "基线逐次", "runs_cand": "实验逐次",
        "dcci_cols": "配置|干净运行数|worst-rank 均值 ms|median-run ms|P50 ms|P90 ms|stddev ms|spread|门禁|基线变化",
        "collections": "诊断采集", "coll_cols": "侧|角色|采集根目录|清单指纹",
        "diff_report": "完整的逐 SK 对比统计、显著变慢 SK 表、子节点计时表、子节点并集与符号→正则映射见",
        "repair_settings": "联合修复的精确选项与配置差异",
        "no_dcci": "矩阵中没有 DCCI 条目。",
        "no_diag": "disable-all 没有可重复的回退，未进入诊断。",
        "correlation": "相关不等于根因：只有完整修复相对 O0 的干净 A/B 对比才能决定是否接受。",
        "base": "Sbest-BASE", "base_vs": "对比 O0-INCUMBENT", "stable": "稳定", "unstable": "不稳定",
        "yes": "是", "no": "否", "none": "无", "incumbent_changed": "成为新基线", "incumbent_kept": "保留原基线",
        "stop_reason": "停止原因",
        "to_diagnosis": "可重复回退 → 诊断",
        "slower_cols": "显著变慢 SK（结构标识）|图中出现序号|Δ P50 µs|Δ P50 %|类别",
        "next": "下一步",
    },
    "en": {
        "title": "Stage O experiment report",
        "outcome_base": "Outcome: Sbest-BASE frozen",
        "outcome_stopped": "Outcome: session stopped",
        "overview": "Overview",
        "cols": "Stage/candidate|Measure|Baseline ms|Trial ms|Delta ms|Improvement|Runs|Gate/status|Evidence",
        "metric": "worst-rank mean (post-warm-up decode)",
        "metric_vs": "worst-rank mean vs {base}",
        "o0_runs": "O0-INCUMBENT per run",
        "o0_cols": "Run|Slowest rank|Worst-rank mean ms|Deviation from mean",
        "trials": "O-round trials",
        "dcci": "DCCI (data-cache control) family",
        "figures": "Figures",
        "fig_runs": "Worst-rank mean of every run per round (ms)",
        "fig_sk": "P50 change of every aligned SK (disable-all vs O0, %)",
        "fig_md_note": "Figures are in report.html next to this file.",
        "option": "Option", "pointer": "Pointer", "value": "Value", "original": "Original", "base_round": "Config derived from",
        "status": "Status", "reason": "Reason", "evidence": "Evidence", "risk": "Risk",
        "gate_cols": "Check|Value|Passed",
        "stats": "Statistics (beside the protocol gate, advisory)",
        "runs_base": "baseline runs", "runs_cand": "trial runs",
        "dcci_cols": "Config|Clean runs|Worst-rank mean ms|Median-run ms|P50 ms|P90 ms|stddev ms|Spread|Gate|Incumbent change",
        "collections": "Diagnostic collections", "coll_cols": "Side|Role|Collection root|Manifest fingerprint",
        "diff_report": "Full per-SK statistics, significantly slower SKs, child timing tables, child union and symbol-to-pattern mapping:",
        "repair_settings": "Exact options and config diff of the joint repair",
        "no_dcci": "The matrix has no DCCI entry.",
        "no_diag": "Disable-all showed no repeatable regression; no diagnosis was run.",
        "correlation": "Correlation is not a root cause: only the clean A/B of the complete repair against O0 decides.",
        "base": "Sbest-BASE", "base_vs": "vs O0-INCUMBENT", "stable": "stable", "unstable": "unstable",
        "yes": "yes", "no": "no", "none": "none", "incumbent_changed": "new incumbent", "incumbent_kept": "incumbent kept",
        "stop_reason": "Stop reason",
        "to_diagnosis": "repeatable regression → diagnosis",
        "slower_cols": "Significantly slower SK (structure)|Graph occurrence|Δ P50 µs|Δ P50 %|Class",
        "next": "Next steps",
    },
}


# --------------------------------------------------------------------------- the session as read from disk


@dataclass
class RoundInfo:
    """One round's records: trial results, gate, stability, and the files they name."""

    name: str
    entry_id: str | None
    phase: str
    trials: list[Mapping[str, Any]] = field(default_factory=list)
    gate: Mapping[str, Any] | None = None
    stability: Mapping[str, Any] | None = None
    summary: Mapping[str, Any] | None = None
    stability_file: Mapping[str, Any] | None = None


@dataclass
class SessionView:
    """Everything the report shows, loaded once."""

    root: Path
    matrix: Mapping[str, Any]
    records: list[tuple[str, Mapping[str, Any]]]
    state: SessionState
    rounds: dict[str, RoundInfo]
    dcci_diff: Mapping[str, Any] | None
    base: Mapping[str, Any] | None
    next_steps_zh: list[str] = field(default_factory=list)


def _json_or_none(root: Path, rel: str | None) -> Any:
    if not rel:
        return None
    path = root / rel
    return load_json_file(path) if path.is_file() else None


def load_view(root: Path) -> SessionView:
    """Read the ledger, matrix and every file the ledger names."""
    records = [(r.kind, r.data) for r in read_records(root)]
    matrix = load_matrix(root / "matrix.json")
    state = fold(records, matrix)
    rounds: dict[str, RoundInfo] = {}
    for kind, data in records:
        name = data.get("round")
        if kind == "trial_result":
            info = rounds.setdefault(name, RoundInfo(name, data.get("entry_id"), data["phase"]))
            info.trials.append(data)
        elif kind == "gate_result" and name in rounds:
            rounds[name].gate = data
            rounds[name].summary = _json_or_none(root, data.get("summary_path"))
        elif kind == "stability_result" and name in rounds:
            rounds[name].stability = data
            rounds[name].stability_file = _json_or_none(root, data.get("path"))
    diff = None
    base = None
    for kind, data in records:
        if kind == "dcci_diff_result" and data.get("ok"):
            diff = _json_or_none(root, data.get("path"))
        if kind == "base_frozen":
            base = _json_or_none(root, data.get("path"))
    return SessionView(root, matrix, records, state, rounds, diff, base)


# --------------------------------------------------------------------------- Markdown


def _num(value: Any, digits: int = 3) -> str:
    return "—" if value is None else f"{float(value):.{digits}f}"


def _pct(value: Any) -> str:
    return "—" if value is None else f"{float(value):+.2f}%"


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _table(header: str, rows: Sequence[Sequence[Any]]) -> list[str]:
    cols = header.split("|")
    lines = ["| " + " | ".join(cols) + " |", "|" + "|".join("---" for _ in cols) + "|"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return lines + [""]


def _code(value: Any) -> str:
    return "`" + json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True) + "`"


def _trial_round(view: SessionView, entry_id: str, phase: str) -> RoundInfo | None:
    for info in view.rounds.values():
        if info.entry_id == entry_id and info.phase == phase:
            return info
    return None


def _runs(info: RoundInfo | None) -> int:
    return max((t.get("runs_total", 0) for t in info.trials), default=0) if info else 0


def _row_for(view: SessionView, info: RoundInfo | None, label: str, status: str, evidence: str, t: Mapping[str, str]) -> list[str]:
    gate = info.gate if info else None
    if gate is None:
        return [label, "—", "—", "—", "—", "—", str(_runs(info)) if info else "0", status, evidence]
    base, cand = gate.get("baseline_mean_ms"), gate.get("candidate_mean_ms")
    delta = None if base is None or cand is None else cand - base
    at_gate = len(gate.get("candidate_run_metrics") or [])
    runs = f"{len(gate.get('baseline_run_metrics') or [])} vs {at_gate}" + (f" → {_runs(info)}" if _runs(info) > at_gate else "")
    return [label, t["metric_vs"].format(base=gate["baseline_round"]), _num(base), _num(cand), _num(delta, 4),
            _pct(gate.get("mean_improvement_pct")), runs, status, evidence]


def _settled_status(view: SessionView, entry_id: str) -> tuple[str, str, Mapping[str, Any]]:
    s = view.state.settled.get(entry_id)
    if s is None:
        return "pending", "", {}
    return s["status"], s.get("reason_zh", ""), s.get("evidence") or {}


def _evidence_of(info: RoundInfo | None, evidence: Mapping[str, Any]) -> str:
    if evidence.get("scene"):
        return str(evidence["scene"])
    if info is not None and info.gate is not None:
        return str(info.gate.get("summary_path"))
    if "probe_evidence" in evidence:
        return "probe"
    return "; ".join(f"{k}={v}" for k, v in evidence.items() if isinstance(v, (str, int, float, bool)))[:80] or "—"


def overview_rows(view: SessionView, lang: str) -> list[list[str]]:
    """The first table: O0, every matrix entry (plus the DCCI repair), BASE."""
    t = TEXT[lang]
    rows: list[list[str]] = []
    o0 = view.rounds.get(O0)
    if o0 is not None:
        st = o0.stability or {}
        status = f"{t['stable'] if st.get('stable') else t['unstable']}（spread {_num(st.get('spread_pct'), 2)}%）" if st else "—"
        rows.append([O0, t["metric"], "—", _num(st.get("mean_ms")), "—", "—", str(_runs(o0)), status, str(st.get("path", "—"))])
    for entry in view.matrix["entries"]:
        eid = entry["id"]
        status, _, evidence = _settled_status(view, eid)
        trial = _trial_round(view, eid, "trial")
        repair = _trial_round(view, eid, "repair")
        label = f"{trial.name} {eid}" if trial else f"— {eid}"
        trial_status = t["to_diagnosis"] if repair is not None else status
        rows.append(_row_for(view, trial, label, trial_status, _evidence_of(trial, evidence), t))
        if repair is not None:
            rows.append(_row_for(view, repair, f"{repair.name} {eid}（joint repair）", status, _evidence_of(repair, evidence), t))
    if view.base is not None and o0 is not None and o0.stability is not None:
        base_round = view.rounds.get(view.base["round"])
        base_mean = (base_round.stability or {}).get("mean_ms") if base_round else None
        o0_mean = o0.stability.get("mean_ms")
        delta = None if base_mean is None or o0_mean is None else base_mean - o0_mean
        imp = None if delta is None or not o0_mean else -delta / o0_mean * 100
        rows.append([f"{t['base']}（{view.base['round']}）", t["metric_vs"].format(base=O0), _num(o0_mean), _num(base_mean),
                     _num(delta, 4), _pct(imp), "5 vs 5", t["base"], "BASE/sbest-base.json"])
    return rows


def _o0_runs(view: SessionView, t: Mapping[str, str]) -> list[str]:
    o0 = view.rounds.get(O0)
    per_run = ((o0.stability_file or {}).get("baseline") or {}).get("per_run_metrics") if o0 else None
    if not per_run:
        return [t["none"], ""]
    mean = sum(r["mean_ms"] for r in per_run) / len(per_run)
    rows = [[r["run"], r["worst_rank"], _num(r["mean_ms"], 4), _pct((r["mean_ms"] - mean) / mean * 100)] for r in per_run]
    return _table(t["o0_cols"], rows)


def _gate_rows(gate: Mapping[str, Any], t: Mapping[str, str]) -> list[list[str]]:
    checks = gate.get("checks") or {}
    values = {
        "mean_improvement": _pct(gate.get("mean_improvement_pct")),
        "median_run_direction": _pct(gate.get("median_run_improvement_pct")),
        "p90_no_material_regression": _pct(gate.get("p90_regression_pct")),
        "stddev_no_material_regression": _pct(gate.get("stddev_regression_pct")),
    }
    return [[name, values.get(name, "—"), t["yes"] if ok else t["no"]] for name, ok in checks.items()]


def _trial_section(view: SessionView, entry: Mapping[str, Any], lang: str) -> list[str]:
    t = TEXT[lang]
    sep = "；" if lang == "zh" else "; "
    eid = entry["id"]
    status, reason, evidence = _settled_status(view, eid)
    trial = _trial_round(view, eid, "trial")
    lines = [f"### {trial.name if trial else '—'} · {eid}", ""]
    lines += [
        f"- {t['option']}: `{entry['option']}`{sep}{t['value']}: {_code(entry['value'])}{sep}{t['original']}: {_code(entry['original'])}",
        f"- {t['pointer']}: `{entry['pointer']}`{sep}{t['risk']}: {entry['risk']}",
        f"- {t['status']}: **{status}** — {reason}",
    ]
    for info in (trial, _trial_round(view, eid, "repair")):
        if info is None:
            continue
        last = info.trials[-1]
        lines.append(f"- {info.name} ({info.phase}) {t['base_round']}: {last.get('base_round') or 'SEED'}{sep}config: `{last.get('config_path')}`")
        if info.gate:
            g = info.gate
            lines += ["", *_table(t["gate_cols"], _gate_rows(g, t))]
            lines.append(f"- {t['stats']}: verdict={g.get('verdict')}{sep}95% CI={_ci(g.get('ci_pct'))}")
            lines.append(f"- {t['runs_base']}: {[round(x, 4) for x in g.get('baseline_run_metrics') or []]}{sep}"
                         f"{t['runs_cand']}: {[round(x, 4) for x in g.get('candidate_run_metrics') or []]}")
            lines.append(f"- {t['evidence']}: `{g.get('summary_path')}`")
        for tr in info.trials:
            if tr.get("failure"):
                lines.append(f"- {t['evidence']}（failure scene）: `{tr['failure'].get('scene')}` — {tr['failure'].get('reason_zh')}")
    if evidence.get("probe_evidence") is not None:
        lines.append(f"- probe: {_code(evidence['probe_evidence'].get('evidence'))[:200]}")
    return lines + [""]


def _ci(interval: Sequence[float] | None) -> str:
    return "—" if not interval else "[" + ", ".join(f"{float(x):+.3f}%" for x in interval) + "]"


def _spread(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    return (max(values) - min(values)) / mean * 100 if mean else None


def _side_stats(summary: Mapping[str, Any] | None, key: str | None) -> Mapping[str, Any]:
    if summary is None:
        return {}
    return summary["baseline"] if key is None else summary["candidates"].get(key, {})


def _dcci_section(view: SessionView, lang: str) -> list[str]:
    t = TEXT[lang]
    entry = next((e for e in view.matrix["entries"] if e["category"] == "dcci"), None)
    lines = [f"## {t['dcci']}", ""]
    if entry is None:
        return lines + [t["no_dcci"], ""]
    eid = entry["id"]
    status, reason, _ = _settled_status(view, eid)
    trial, repair = _trial_round(view, eid, "trial"), _trial_round(view, eid, "repair")
    rows = []
    if trial is not None and trial.summary is not None:
        base = _side_stats(trial.summary, None)
        o0_runs = base.get("run_worst_rank_means_ms") or []
        rows.append([O0, len(o0_runs), _num(base.get("worst_rank_mean_ms")), _num(base.get("median_run_worst_rank_mean_ms")),
                     _num((base.get("decode") or {}).get("p50_ms")), _num((base.get("decode") or {}).get("p90_ms")),
                     _num((base.get("decode") or {}).get("stddev_ms"), 4), _pct(_spread(o0_runs)), "—", "—"])
    for info, label in ((trial, "disable-all"), (repair, "disable+before+after")):
        if info is None or info.summary is None:
            continue
        c = _side_stats(info.summary, info.name)
        runs = c.get("run_worst_rank_means_ms") or []
        accepted = bool(info.gate and info.gate.get("accepted"))
        changed = status == "accepted" and view.state.settled.get(eid, {}).get("incumbent_round") == info.name
        rows.append([f"{label}（{info.name}）", _runs(info), _num(c.get("worst_rank_mean_ms")), _num(c.get("median_run_worst_rank_mean_ms")),
                     _num((c.get("decode") or {}).get("p50_ms")), _num((c.get("decode") or {}).get("p90_ms")),
                     _num((c.get("decode") or {}).get("stddev_ms"), 4), _pct(_spread(runs)),
                     t["yes"] if accepted else t["no"], t["incumbent_changed"] if changed else t["incumbent_kept"]])
    lines += _table(t["dcci_cols"], rows) if rows else []
    lines += [f"- {t['status']}: **{status}** — {reason}", ""]
    profiles = [d for k, d in view.records if k == "profile_result" and d.get("entry_id") == eid]
    if not profiles:
        lines += [t["no_diag"], ""]
    else:
        lines += [f"### {t['collections']}", ""]
        lines += _table(t["coll_cols"], [[p["side"], p.get("role"), p.get("root") or p.get("reason_zh"), p.get("manifest_fingerprint") or "—"]
                                         for p in profiles])
    diff_rec = next((d for k, d in view.records if k == "dcci_diff_result" and d.get("entry_id") == eid), None)
    if diff_rec is not None:
        md = str(diff_rec.get("path") or "").removesuffix(".json") + ".md"
        lines += [f"- {t['diff_report']} `{md}`（JSON: `{diff_rec.get('path')}`）", ""]
    if view.dcci_diff is not None:
        sks = view.dcci_diff.get("sks") or []
        slower = [s for s in sks if s.get("class") == "significantly_slower"]
        if slower:
            lines += _table(t["slower_cols"],
                            [[s.get("structure_key") or s.get("uid"), s.get("occurrence_index"), _num(s.get("delta_p50_us"), 2),
                              _pct(s.get("delta_p50_pct")), s.get("class_zh") if lang == "zh" else s.get("class")] for s in slower])
        rep = view.dcci_diff.get("repair") or {}
        if rep.get("proposed"):
            lines += [f"### {t['repair_settings']}", ""]
            lines += [f"- tokens: {_code(rep.get('tokens'))}", f"- patterns: {_code(rep.get('list'))}"]
            for p in rep.get("patterns") or []:
                lines.append(f"  - `{p.get('token')}` → `{p.get('pattern')}`：{_code(p.get('matched_symbols') or p.get('matches'))[:300]}")
            lines += [f"- diff: {_code(rep.get('diff'))}", ""]
    return lines + [f"> {t['correlation']}", ""]


def render_markdown(view: SessionView, lang: str = "zh") -> str:
    """The full report text (Markdown)."""
    lang = "en" if lang == "en" else "zh"
    t = TEXT[lang]
    outcome = t["outcome_stopped"] if view.state.stopped else t["outcome_base"]
    lines = [f"# {t['title']}", "", f"**{outcome}**", ""]
    if view.state.stopped:
        lines += [f"- {t['stop_reason']}: {view.state.stopped.get('reason_zh')}", ""]
    if view.base is not None:
        lines += [f"- {t['base']}: {view.base['round']}；base_fingerprint `{view.base['base_fingerprint']}`",
                  f"- options: {_code(view.base.get('options'))}", ""]
    lines += [f"## {t['overview']}", ""]
    lines += _table(t["cols"], overview_rows(view, lang))
    lines += [f"## {t['o0_runs']}", ""]
    lines += _o0_runs(view, t)
    lines += [f"## {t['trials']}", ""]
    for entry in view.matrix["entries"]:
        lines += _trial_section(view, entry, lang)
    lines += _dcci_section(view, lang)
    lines += [f"## {t['figures']}", "", t["fig_md_note"], "", "<!-- figure:run-metrics -->", ""]
    if view.dcci_diff is not None:
        lines += ["<!-- figure:sk-deltas -->", ""]
    if view.next_steps_zh:
        lines += [f"## {t['next']}", "", *[f"- {s}" for s in view.next_steps_zh], ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- SVG figures


def _svg_frame(width: int, height: int, body: list[str], title: str) -> str:
    return (f'<figure><svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">'
            + "".join(body) + f"</svg><figcaption>{html.escape(title)}</figcaption></figure>")


def svg_run_metrics(view: SessionView, title: str) -> str:
    """Dots: every clean run's worst-rank mean, one column per round (gates' and stability files' numbers)."""
    columns: list[tuple[str, list[float], str]] = []
    for name, info in view.rounds.items():
        values: list[float] = []
        if info.stability and info.stability.get("run_metrics"):
            values = list(info.stability["run_metrics"])
        elif info.gate and info.gate.get("candidate_run_metrics"):
            values = list(info.gate["candidate_run_metrics"])
        if values:
            settled = view.state.settled.get(info.entry_id or "", {})
            colour = {"accepted": "#2e7d32", "rejected": "#9e9e9e", "failed": "#c62828"}.get(settled.get("status", ""), "#1565c0")
            columns.append((name, values, colour))
    if not columns:
        return ""
    lo = min(min(v) for _, v, _ in columns)
    hi = max(max(v) for _, v, _ in columns)
    span = (hi - lo) or 1.0
    width, height, left, top, plot_h = max(320, 70 * len(columns) + 80), 260, 60, 20, 190
    body = [f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#444"/>',
            f'<line x1="{left}" y1="{top + plot_h}" x2="{width - 10}" y2="{top + plot_h}" stroke="#444"/>']
    for frac in (0.0, 0.5, 1.0):
        y = top + plot_h - frac * plot_h
        body.append(f'<text x="{left - 4}" y="{y + 4:.1f}" text-anchor="end">{lo + frac * span:.3f}</text>')
    for i, (name, values, colour) in enumerate(columns):
        x = left + 40 + i * 70
        for v in values:
            y = top + plot_h - (v - lo) / span * plot_h
            body.append(f'<circle cx="{x}" cy="{y:.1f}" r="3.5" fill="{colour}"><title>{html.escape(name)}: {v:.4f} ms</title></circle>')
        body.append(f'<text x="{x}" y="{top + plot_h + 16}" text-anchor="middle">{html.escape(name)}</text>')
    return _svg_frame(width, height, body, title)


def svg_sk_deltas(diff: Mapping[str, Any] | None, title: str) -> str:
    """Bars: P50 change (%) of every aligned SK, coloured by class."""
    if diff is None:
        return ""
    sks = [s for s in diff.get("sks") or [] if s.get("delta_p50_pct") is not None]
    if not sks:
        return ""
    limit = max(abs(float(s["delta_p50_pct"])) for s in sks) or 1.0
    bar_w, height, top, mid_h = 8, 240, 20, 100
    width = max(320, len(sks) * (bar_w + 2) + 80)
    zero = top + mid_h
    colours = {"significantly_slower": "#c62828", "significantly_faster": "#2e7d32", "neutral": "#9e9e9e"}
    body = [f'<line x1="50" y1="{zero}" x2="{width - 10}" y2="{zero}" stroke="#444"/>',
            f'<text x="46" y="{top + 4}" text-anchor="end">+{limit:.1f}%</text>',
            f'<text x="46" y="{top + 2 * mid_h + 4}" text-anchor="end">-{limit:.1f}%</text>']
    for i, s in enumerate(sks):
        v = float(s["delta_p50_pct"])
        h = abs(v) / limit * mid_h
        y = zero - h if v > 0 else zero
        label = html.escape(str(s.get("structure_key") or s.get("uid")))
        body.append(f'<rect x="{56 + i * (bar_w + 2)}" y="{y:.1f}" width="{bar_w}" height="{max(h, 0.5):.1f}" '
                    f'fill="{colours.get(s.get("class"), "#ffb300")}"><title>{label}: {v:+.2f}%</title></rect>')
    return _svg_frame(width, height, body, title)


# --------------------------------------------------------------------------- HTML


def _inline(text: str) -> str:
    out = html.escape(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


def markdown_to_html(markdown: str, figures: Mapping[str, str], title: str, lang: str = "zh") -> str:
    """HTML of the report's Markdown subset (headings, lists, tables, quotes, paragraphs) plus figures."""
    out: list[str] = []
    lines = markdown.splitlines()
    i = 0
    in_list = False
    while i < len(lines):
        line = lines[i]
        if in_list and not line.startswith(("- ", "  - ")):
            out.append("</ul>")
            in_list = False
        fig = FIGURE.match(line)
        if fig:
            out.append(figures.get(fig.group(1), ""))
        elif line.startswith("#"):
            level = len(line) - len(line.lstrip("#"))
            out.append(f"<h{level}>{_inline(line[level:].strip())}</h{level}>")
        elif line.startswith("| "):
            rows = []
            while i < len(lines) and lines[i].startswith("|"):
                rows.append(lines[i])
                i += 1
            cells = [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", r.strip())[1:-1]] for r in rows]
            head, body = cells[0], cells[2:]
            out.append("<table><thead><tr>" + "".join(f"<th>{_inline(c)}</th>" for c in head) + "</tr></thead><tbody>"
                       + "".join("<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in body) + "</tbody></table>")
            continue
        elif line.startswith(("- ", "  - ")):
            if not in_list:
                out.append("<ul>")
                in_list = True
            out.append(f"<li>{_inline(line.lstrip()[2:])}</li>")
        elif line.startswith("> "):
            out.append(f"<blockquote>{_inline(line[2:])}</blockquote>")
        elif line.strip():
            out.append(f"<p>{_inline(line)}</p>")
        i += 1
    if in_list:
        out.append("</ul>")
    style = ("body{font-family:sans-serif;max-width:1200px;margin:2em auto;padding:0 1em;color:#222}"
             "table{border-collapse:collapse;margin:0.5em 0 1.2em}td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}"
             "th{background:#f3f3f3}code{background:#f6f6f6;padding:0 3px;word-break:break-all}"
             "blockquote{border-left:4px solid #c62828;margin:0;padding:0.3em 1em;background:#fff5f5}")
    return (f'<!DOCTYPE html><html lang="{html.escape(lang)}"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{style}</style></head><body>" + "\n".join(out) + "</body></html>\n")


def render_reports(view: SessionView, lang: str = "zh") -> tuple[str, str]:
    """(Markdown, HTML) of the session report in ``lang``."""
    lang = "en" if lang == "en" else "zh"
    t = TEXT[lang]
    markdown = render_markdown(view, lang)
    figures = {"run-metrics": svg_run_metrics(view, t["fig_runs"]), "sk-deltas": svg_sk_deltas(view.dcci_diff, t["fig_sk"])}
    return markdown, markdown_to_html(markdown, figures, t["title"], lang)
