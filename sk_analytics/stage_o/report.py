"""EXPERIMENT_REPORT.md (Chinese by default, ``lang="en"``) and its HTML twin with inline SVG plots.

Everything comes from the session's own evidence: the ledger (decisions), the
frozen matrix, the option-trial summaries and stability files each gate
wrote, the DCCI diff and the BASE identity. The Markdown is the single text
of the report; :func:`markdown_to_html` renders the same text as HTML and
puts the figures (:mod:`sk_analytics.stage_o.figures`: run metrics per
round, ΔP50 per SK structure) where the Markdown has a figure marker. The
English report renders recorded Chinese reasons through
:mod:`sk_analytics.stage_o.reasons`. Presentation only: nothing here decides.
"""

from __future__ import annotations

import html
import json
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sk_analytics.dcci.classify import CLASS_ZH
from sk_analytics.dcci.groups import format_range, group_sks, occurrence_ranges
from sk_analytics.ledger import read_records
from sk_analytics.markdown import table
from sk_analytics.stage_o.figures import RunColumn, svg_run_metrics, svg_sk_deltas
from sk_analytics.stage_o.layout import ENVIRONMENT_BLOCKERS_FILE, EXPERIMENTS
from sk_analytics.stage_o.machine import O0, SessionState, fold
from sk_analytics.stage_o.matrix import load_matrix
from sk_analytics.stage_o.reasons import failure_text, settled_reason, stop_reason
from sk_analytics.strict_json import load_json_file

FIGURE = re.compile(r"^<!-- figure:([a-z-]+) -->$")

# key -> (Chinese, English): each message's two renderings side by side
_MESSAGES: dict[str, tuple[str, str]] = {
    "title": ("Stage O 实验报告", "Stage O experiment report"),
    "outcome_base": ("结果：已冻结 Sbest-BASE", "Outcome: Sbest-BASE frozen"),
    "outcome_stopped": ("结果：会话已停止", "Outcome: session stopped"),
    "overview": ("总览", "Overview"),
    "cols": ("阶段/候选|测量口径|基线耗时 ms|实验耗时 ms|耗时差 ms|改善率|运行数|门禁/状态|证据",
             "Stage/candidate|Measure|Baseline ms|Trial ms|Delta ms|Improvement|Runs|Gate/status|Evidence"),
    "metric": ("worst-rank 均值（预热后 decode）", "worst-rank mean (post-warm-up decode)"),
    "metric_vs": ("worst-rank 均值，对比 {base}", "worst-rank mean vs {base}"),
    "o0_runs": ("O0-INCUMBENT 逐次运行", "O0-INCUMBENT per run"),
    "env_blockers": ("环境阻断（实验命令启动前，不是失败现场）",
                     "Environment blockers (before any experiment command started; not failure scenes)"),
    "env_blockers_cols": ("轮次|阶段|时间（UTC）|原因", "Round|Stage|Time (UTC)|Reason"),
    "o0_cols": ("运行|最慢 rank|worst-rank 均值 ms|相对均值偏差", "Run|Slowest rank|Worst-rank mean ms|Deviation from mean"),
    "trials": ("各 O 轮试验", "O-round trials"),
    "dcci": ("DCCI（数据缓存控制）家族", "DCCI (data-cache control) family"),
    "figures": ("图表", "Figures"),
    "fig_md_note": ("图表见同目录的 report.html（每张图下附同数据的表格）。",
                    "Figures are in report.html next to this file (each with a table of the same numbers)."),
    "fig_table": ("同数据表格", "Table of the same data"),
    "fig_runs": ("各轮逐次运行的 worst-rank 均值（ms）", "Worst-rank mean of every clean run per round (ms)"),
    "fig_runs_desc": ("每个点是一次干净运行的 worst-rank 均值，颜色表示该轮结果，黑色短线为该轮均值，虚线为 O0 均值。",
                      "Each dot is one clean run's worst-rank mean, coloured by the round's outcome; the black tick is the "
                      "round's mean, the dashed line the O0 mean."),
    "fig_runs_y": ("worst-rank 均值（ms）", "worst-rank mean (ms)"),
    "fig_runs_x": ("轮次", "round"),
    "fig_runs_cols": ("轮次|条目|结果|干净运行数|逐次 worst-rank 均值 ms|均值 ms",
                      "Round|Entry|Outcome|Clean runs|Worst-rank mean per run ms|Mean ms"),
    "fig_mean": ("该轮均值", "round mean"),
    "fig_o0_mean": ("O0 均值", "O0 mean"),
    "fig_no_runs": ("失败，无干净运行", "failed, no clean run"),
    "outcome_incumbent": ("O0 基线", "O0 incumbent"),
    "outcome_accepted": ("接受（成为新基线）", "accepted (new incumbent)"),
    "outcome_rejected": ("拒绝", "rejected"),
    "outcome_diagnosis": ("可重复回退 → 诊断", "repeatable regression → diagnosis"),
    "outcome_failed": ("失败", "failed"),
    "outcome_pending": ("未定", "pending"),
    "fig_sk": ("各 SK 结构的 P50 变化（disable-all 相对 O0，%）", "P50 change per SK structure (disable-all vs O0, %)"),
    "fig_sk_desc": ("每行一种 SK 结构（同一分类的各次出现合并）：条形为各次出现 ΔP50 % 的中位数，细线为最小–最大范围，灰色区域为噪声带。",
                    "One row per SK structure (its occurrences of one class merged): the bar is the median ΔP50 % of its "
                    "occurrences, the thin line their min–max range, the grey area the noise band."),
    "fig_sk_x": ("ΔP50 %（SK 墙钟时间，正值 = disable-all 更慢）", "ΔP50 % (SK wall time; positive = slower under disable-all)"),
    "fig_sk_cols": ("SK 结构|分类|出现次数（序号）|ΔP50 % 中位数|ΔP50 % 范围|ΔP50 µs 范围|结构标识",
                    "SK structure|Class|Occurrences (indices)|Median ΔP50 %|ΔP50 % range|ΔP50 µs range|Structure key"),
    "fig_band": ("噪声带", "noise band"),
    "fig_range": ("各次出现的范围", "range over occurrences"),
    "option": ("选项", "Option"), "pointer": ("指针", "Pointer"), "value": ("取值", "Value"), "original": ("原值", "Original"),
    "base_round": ("配置派生自", "Config derived from"),
    "status": ("状态", "Status"), "reason": ("原因", "Reason"), "evidence": ("证据", "Evidence"), "risk": ("风险", "Risk"),
    "failure_scene": ("失败现场", "failure scene"), "joint_repair": ("联合修复", "joint repair"),
    "gate_cols": ("检查项|数值|是否通过", "Check|Value|Passed"),
    "stats": ("统计（协议门禁之外，仅供参考）", "Statistics (beside the protocol gate, advisory)"),
    "runs_base": ("基线逐次", "baseline runs"), "runs_cand": ("实验逐次", "trial runs"),
    "dcci_cols": ("配置|干净运行数|worst-rank 均值 ms|median-run ms|P50 ms|P90 ms|stddev ms|spread|门禁|基线变化",
                  "Config|Clean runs|Worst-rank mean ms|Median-run ms|P50 ms|P90 ms|stddev ms|Spread|Gate|Incumbent change"),
    "collections": ("诊断采集", "Diagnostic collections"),
    "coll_cols": ("侧|角色|采集根目录|清单指纹", "Side|Role|Collection root|Manifest fingerprint"),
    "diff_report": ("完整的逐 SK（逐次出现）对比统计、显著变慢 SK 表、每个显著变慢 SK 的子节点计时表见",
                    "Full per-SK (per-occurrence) statistics, the significantly slower SKs and each one's child timing table:"),
    "slower": ("显著变慢 SK（按结构合并）", "Significantly slower SKs (grouped by structure)"),
    "slower_cols": ("SK 结构|出现次数|出现序号|Δ P50 µs 范围|Δ P50 % 范围|结构标识",
                    "SK structure|Occurrences|Occurrence indices|Δ P50 µs range|Δ P50 % range|Structure key"),
    "union": ("子节点并集与符号→正则映射", "Child union and symbol-to-regex mapping"),
    "union_cols": ("子节点算子 token|正则|校验|匹配的元数据符号", "Child op token|Regex|Verified|Matched metadata symbols"),
    "repair_settings": ("联合修复的精确选项与配置差异", "Exact options and config diff of the joint repair"),
    "no_dcci": ("矩阵中没有 DCCI 条目。", "The matrix has no DCCI entry."),
    "no_diag": ("disable-all 没有可重复的回退，未进入诊断。", "Disable-all showed no repeatable regression; no diagnosis was run."),
    "correlation": ("相关不等于根因：只有完整修复相对 O0 的干净 A/B 对比才能决定是否接受。",
                    "Correlation is not a root cause: only the clean A/B of the complete repair against O0 decides."),
    "base": ("Sbest-BASE", "Sbest-BASE"),
    "stable": ("稳定", "stable"), "unstable": ("不稳定", "unstable"),
    "yes": ("是", "yes"), "no": ("否", "no"), "none": ("无", "none"),
    "incumbent_changed": ("成为新基线", "new incumbent"), "incumbent_kept": ("保留原基线", "incumbent kept"),
    "stop_reason": ("停止原因", "Stop reason"),
    "to_diagnosis": ("可重复回退 → 诊断", "repeatable regression → diagnosis"),
    "next": ("下一步", "Next steps"),
    "sep": ("；", "; "),
}
TEXT: dict[str, dict[str, str]] = {lang: {k: v[i] for k, v in _MESSAGES.items()} for i, lang in enumerate(("zh", "en"))}


def _paren(text: str, lang: str) -> str:
    """A parenthetical in the language's own brackets."""
    return f"（{text}）" if lang == "zh" else f" ({text})"


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
    next_steps: list[str] = field(default_factory=list)  # in the report's language
    environment_blockers: list[Mapping[str, Any]] = field(default_factory=list)


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
    return SessionView(root, matrix, records, state, rounds, diff, base,
                       environment_blockers=load_environment_blockers(root))


def load_environment_blockers(root: Path) -> list[Mapping[str, Any]]:
    """Every round's environment blockers in time order (protocol §8: they go
    into the parent report). A line cut by a crash is shown as unreadable."""
    blockers: list[Mapping[str, Any]] = []
    for path in sorted((root / EXPERIMENTS).glob(f"*/{ENVIRONMENT_BLOCKERS_FILE}")):
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                record = None
            if not isinstance(record, dict):
                record = {"round": path.parent.name, "stage": "?", "message": f"{path.name}:{number}: unreadable line"}
            blockers.append(record)
    return sorted(blockers, key=lambda r: r.get("ts_ns") if isinstance(r.get("ts_ns"), int) else 0)


def _environment_blockers(view: SessionView, t: Mapping[str, str]) -> list[str]:
    if not view.environment_blockers:
        return []
    rows = [[b.get("round", "?"), b.get("stage", "?"), _utc(b.get("ts_ns")), b.get("message", "")]
            for b in view.environment_blockers]
    return [f"## {t['env_blockers']}", "", *table(t["env_blockers_cols"].split("|"), rows)]


def _utc(ts_ns: Any) -> str:
    if not isinstance(ts_ns, int):
        return "—"
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(ts_ns / 1e9))


# --------------------------------------------------------------------------- Markdown


def _num(value: Any, digits: int = 3) -> str:
    return "—" if value is None else f"{float(value):.{digits}f}"


def _pct(value: Any) -> str:
    return "—" if value is None else f"{float(value):+.2f}%"


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


def _settled_status(view: SessionView, entry: Mapping[str, Any], lang: str) -> tuple[str, str, Mapping[str, Any]]:
    """(status, reason in ``lang``, evidence) of an entry; ``pending`` while unsettled."""
    s = view.state.settled.get(entry["id"])
    if s is None:
        return "pending", "", {}
    return s["status"], settled_reason(entry, s, view.state, lang), s.get("evidence") or {}


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
        status = (t["stable"] if st.get("stable") else t["unstable"]) + _paren(f"spread {_num(st.get('spread_pct'), 2)}%", lang) if st else "—"
        rows.append([O0, t["metric"], "—", _num(st.get("mean_ms")), "—", "—", str(_runs(o0)), status, str(st.get("path", "—"))])
    for entry in view.matrix["entries"]:
        eid = entry["id"]
        status, _, evidence = _settled_status(view, entry, lang)
        trial = _trial_round(view, eid, "trial")
        repair = _trial_round(view, eid, "repair")
        label = f"{trial.name} {eid}" if trial else f"— {eid}"
        trial_status = t["to_diagnosis"] if repair is not None else status
        rows.append(_row_for(view, trial, label, trial_status, _evidence_of(trial, evidence), t))
        if repair is not None:
            rows.append(_row_for(view, repair, f"{repair.name} {eid}" + _paren(t["joint_repair"], lang), status,
                                 _evidence_of(repair, evidence), t))
    if view.base is not None and o0 is not None and o0.stability is not None:
        base_round = view.rounds.get(view.base["round"])
        base_mean = (base_round.stability or {}).get("mean_ms") if base_round else None
        o0_mean = o0.stability.get("mean_ms")
        delta = None if base_mean is None or o0_mean is None else base_mean - o0_mean
        imp = None if delta is None or not o0_mean else -delta / o0_mean * 100
        rows.append([t["base"] + _paren(view.base["round"], lang), t["metric_vs"].format(base=O0), _num(o0_mean), _num(base_mean),
                     _num(delta, 4), _pct(imp), "5 vs 5", t["base"], "BASE/sbest-base.json"])
    return rows


def _o0_runs(view: SessionView, t: Mapping[str, str]) -> list[str]:
    o0 = view.rounds.get(O0)
    per_run = ((o0.stability_file or {}).get("baseline") or {}).get("per_run_metrics") if o0 else None
    if not per_run:
        return [t["none"], ""]
    mean = sum(r["mean_ms"] for r in per_run) / len(per_run)
    rows = [[r["run"], r["worst_rank"], _num(r["mean_ms"], 4), _pct((r["mean_ms"] - mean) / mean * 100)] for r in per_run]
    return table(t["o0_cols"].split("|"), rows)


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
    sep = t["sep"]
    eid = entry["id"]
    status, reason, evidence = _settled_status(view, entry, lang)
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
            lines += ["", *table(t["gate_cols"].split("|"), _gate_rows(g, t))]
            lines.append(f"- {t['stats']}: verdict={g.get('verdict')}{sep}95% CI={_ci(g.get('ci_pct'))}")
            lines.append(f"- {t['runs_base']}: {[round(x, 4) for x in g.get('baseline_run_metrics') or []]}{sep}"
                         f"{t['runs_cand']}: {[round(x, 4) for x in g.get('candidate_run_metrics') or []]}")
            lines.append(f"- {t['evidence']}: `{g.get('summary_path')}`")
        for tr in info.trials:
            if tr.get("failure"):
                lines.append(f"- {t['evidence']}{_paren(t['failure_scene'], lang)}: `{tr['failure'].get('scene')}` — "
                             f"{failure_text(tr['failure'], lang)}")
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


def _dcci_row(label: str, side: Mapping[str, Any], runs: int, gate: str, change: str) -> list[Any]:
    """One §6 table row from an option-trial summary side (baseline or candidate)."""
    decode = side.get("decode") or {}
    return [label, runs, _num(side.get("worst_rank_mean_ms")), _num(side.get("median_run_worst_rank_mean_ms")),
            _num(decode.get("p50_ms")), _num(decode.get("p90_ms")), _num(decode.get("stddev_ms"), 4),
            _pct(_spread(side.get("run_worst_rank_means_ms") or [])), gate, change]


def _dcci_table(view: SessionView, entry: Mapping[str, Any], lang: str) -> list[list[Any]]:
    """Protocol §6 rows: O0 (the baseline side of the disable-all gate), disable-all and the repair."""
    t = TEXT[lang]
    eid = entry["id"]
    settled = view.state.settled.get(eid, {})
    trial, repair = _trial_round(view, eid, "trial"), _trial_round(view, eid, "repair")
    rows: list[list[Any]] = []
    if trial is not None and trial.summary is not None:
        base = trial.summary["baseline"]
        rows.append(_dcci_row(O0, base, len(base.get("run_worst_rank_means_ms") or []), "—", "—"))
    for info, label in ((trial, "disable-all"), (repair, "disable+before+after")):
        if info is None or info.summary is None:
            continue
        accepted = bool(info.gate and info.gate.get("accepted"))
        changed = settled.get("status") == "accepted" and settled.get("incumbent_round") == info.name
        rows.append(_dcci_row(label + _paren(info.name, lang), info.summary["candidates"].get(info.name, {}), _runs(info),
                              t["yes"] if accepted else t["no"], t["incumbent_changed"] if changed else t["incumbent_kept"]))
    return rows


def _slower_groups(diff: Mapping[str, Any], t: Mapping[str, str]) -> list[str]:
    """The significantly slower SKs, one row per structure (the per-occurrence rows are in the diff report)."""
    groups = [g for g in group_sks(diff.get("sks") or []) if g.cls == "significantly_slower"]
    if not groups:
        return []
    rows = [[g.short_name, len(g.occurrences), occurrence_ranges(g.occurrences),
             format_range(g.delta_p50_us), format_range(g.delta_p50_pct), g.structure] for g in groups]
    return [f"### {t['slower']}", "", *table(t["slower_cols"].split("|"), rows)]


def _repair_sections(rep: Mapping[str, Any], t: Mapping[str, str]) -> list[str]:
    """Child union with its symbol-to-regex mapping, then the exact option settings and config diff."""
    lines = [f"### {t['union']}", ""]
    rows = [[p.get("token"), f"`{p.get('pattern')}`" if p.get("pattern") else "—", p.get("status"),
             ", ".join(f"`{s}`" for s in p.get("matched_symbols") or []) or "—"] for p in rep.get("patterns") or []]
    lines += table(t["union_cols"].split("|"), rows) if rows else [t["none"], ""]
    if rep.get("proposed"):
        options = (rep.get("config") or {}).get("super_kernel_optimize_options") or {}
        lines += [f"### {t['repair_settings']}", ""]
        lines += [f"- `{name}`: {_code(options.get(name))}"
                  for name in ("dcci_disable_on_kernel", "dcci_before_kernel_start", "dcci_after_kernel_end")]
        lines += [f"- diff (RFC 6902): {_code(rep.get('diff'))}", ""]
    return lines


def _dcci_section(view: SessionView, lang: str) -> list[str]:
    t = TEXT[lang]
    entry = next((e for e in view.matrix["entries"] if e["category"] == "dcci"), None)
    lines = [f"## {t['dcci']}", ""]
    if entry is None:
        return lines + [t["no_dcci"], ""]
    eid = entry["id"]
    status, reason, _ = _settled_status(view, entry, lang)
    rows = _dcci_table(view, entry, lang)
    lines += table(t["dcci_cols"].split("|"), rows) if rows else []
    lines += [f"- {t['status']}: **{status}** — {reason}", ""]
    profiles = [d for k, d in view.records if k == "profile_result" and d.get("entry_id") == eid]
    if not profiles:
        lines += [t["no_diag"], ""]
    else:
        lines += [f"### {t['collections']}", ""]
        lines += table(t["coll_cols"].split("|"),
                       [[p["side"], p.get("role"), p.get("root") or (p.get("reason_zh") if lang == "zh" else p.get("reason")),
                         p.get("manifest_fingerprint") or "—"] for p in profiles])
    diff_rec = next((d for k, d in view.records if k == "dcci_diff_result" and d.get("entry_id") == eid), None)
    if diff_rec is not None:
        md = str(diff_rec.get("path") or "").removesuffix(".json") + ".md"
        lines += [f"- {t['diff_report']} [{md}]({md})" + _paren(f"JSON: `{diff_rec.get('path')}`", lang), ""]
    if view.dcci_diff is not None:
        lines += _slower_groups(view.dcci_diff, t)
        lines += _repair_sections(view.dcci_diff.get("repair") or {}, t)
    return lines + [f"> {t['correlation']}", ""]


def render_markdown(view: SessionView, lang: str = "zh") -> str:
    """The full report text (Markdown)."""
    lang = "en" if lang == "en" else "zh"
    t = TEXT[lang]
    outcome = t["outcome_stopped"] if view.state.stopped else t["outcome_base"]
    lines = [f"# {t['title']}", "", f"**{outcome}**", ""]
    if view.state.stopped:
        lines += [f"- {t['stop_reason']}: {stop_reason(view.state.stopped, view.state, lang)}", ""]
    if view.base is not None:
        lines += [f"- {t['base']}: {view.base['round']}{t['sep']}base_fingerprint `{view.base['base_fingerprint']}`",
                  f"- options: {_code(view.base.get('options'))}", ""]
    lines += [f"## {t['overview']}", ""]
    lines += table(t["cols"].split("|"), overview_rows(view, lang))
    lines += [f"## {t['o0_runs']}", ""]
    lines += _o0_runs(view, t)
    lines += [f"## {t['trials']}", ""]
    for entry in view.matrix["entries"]:
        lines += _trial_section(view, entry, lang)
    lines += _dcci_section(view, lang)
    lines += _environment_blockers(view, t)
    lines += [f"## {t['figures']}", "", t["fig_md_note"], "", "<!-- figure:run-metrics -->", ""]
    if view.dcci_diff is not None:
        lines += ["<!-- figure:sk-deltas -->", ""]
    if view.next_steps:
        lines += [f"## {t['next']}", "", *[f"- {s}" for s in view.next_steps], ""]
    return "\n".join(lines)


# --------------------------------------------------------------------------- figure data


def round_outcome(view: SessionView, info: RoundInfo) -> str:
    """What a round came to, for the run-metrics colours (a key of ``figures.OUTCOME_COLOURS``)."""
    if any(tr.get("failure") for tr in info.trials) or (info.stability is not None and not info.stability.get("stable")):
        return "failed"
    if info.name == O0:
        return "incumbent"
    settled = view.state.settled.get(info.entry_id or "")
    if settled is not None and settled["status"] == "accepted" and settled.get("incumbent_round") == info.name:
        return "accepted"
    if info.gate is None or info.gate.get("accepted"):
        return "pending"
    if info.phase == "trial" and _trial_round(view, info.entry_id or "", "repair") is not None:
        return "diagnosis"
    return "rejected"


def run_columns(view: SessionView) -> list[RunColumn]:
    """Every round in order with its clean runs' worst-rank means (five-run stability file, else the gate's)."""
    columns = []
    for name, info in view.rounds.items():
        values: Sequence[float] = ()
        if info.stability and info.stability.get("run_metrics"):
            values = info.stability["run_metrics"]
        elif info.gate and info.gate.get("candidate_run_metrics"):
            values = info.gate["candidate_run_metrics"]
        columns.append(RunColumn(name, info.entry_id, round_outcome(view, info), tuple(float(v) for v in values)))
    return columns


def report_figures(view: SessionView, lang: str) -> dict[str, str]:
    """The HTML figures keyed by their Markdown marker name."""
    t = TEXT[lang]
    o0 = view.rounds.get(O0)
    reference = (o0.stability or {}).get("mean_ms") if o0 else None
    classes = CLASS_ZH if lang == "zh" else {k: k.replace("_", " ") for k in CLASS_ZH}
    groups = group_sks((view.dcci_diff or {}).get("sks") or [])
    return {"run-metrics": svg_run_metrics(run_columns(view), t, reference), "sk-deltas": svg_sk_deltas(groups, t, classes)}


# --------------------------------------------------------------------------- HTML


def _inline(text: str) -> str:
    out = html.escape(text)
    out = re.sub(r"\*\*(.+?)\*\*", r"<strong>\1</strong>", out)
    out = re.sub(r"\[([^\]]+)\]\(([^)\s]+)\)", r'<a href="\2">\1</a>', out)
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", out)


STYLE = ("body{font-family:sans-serif;max-width:1140px;margin:2em auto;padding:0 1em;color:#222}"
         "table{border-collapse:collapse;margin:0.5em 0 1.2em}td,th{border:1px solid #ccc;padding:3px 6px;font-size:13px}"
         "th{background:#f3f3f3}code{background:#f6f6f6;padding:0 3px;word-break:break-all}"
         "blockquote{border-left:4px solid #c62828;margin:0;padding:0.3em 1em;background:#fff5f5}"
         "figure.chart{margin:1.5em 0;overflow-x:auto}figcaption{font-weight:bold;margin:0.3em 0}"
         "details summary{cursor:pointer;color:#1565c0;font-size:13px}td:last-child{overflow-wrap:anywhere}")


def markdown_to_html(markdown: str, figures: Mapping[str, str], title: str, lang: str = "zh") -> str:
    """HTML of the report's Markdown subset (headings, lists, tables, quotes, links, paragraphs) plus figures."""
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
    return (f'<!DOCTYPE html><html lang="{html.escape(lang)}"><head><meta charset="utf-8"><title>{html.escape(title)}</title>'
            f"<style>{STYLE}</style></head><body>" + "\n".join(out) + "</body></html>\n")


def render_reports(view: SessionView, lang: str = "zh") -> tuple[str, str]:
    """(Markdown, HTML) of the session report in ``lang``."""
    lang = "en" if lang == "en" else "zh"
    markdown = render_markdown(view, lang)
    return markdown, markdown_to_html(markdown, report_figures(view, lang), TEXT[lang]["title"], lang)
