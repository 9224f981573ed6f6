"""The session report's words and number formats, in Chinese and English.

``TEXT[lang][key]``: each message's two renderings are kept side by side in
``_MESSAGES`` so that a new message cannot exist in one language only.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

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
    "devices": ("设备与租约", "Devices and leases"),
    "lease_line": ("租约：{modes}{sep}根目录 {roots}{sep}NPU {ids}", "Lease: {modes}{sep}root {roots}{sep}NPUs {ids}"),
    "lease_mode_acquired": ("本会话持有（acquired）", "held by this session (acquired)"),
    "lease_mode_inherited": ("继承自父进程（inherited）", "inherited from the parent (inherited)"),
    "lease_runs": ("{n} 个试验记录中 {m} 个的干净运行在租约内，运行前后均由 npu-smi 证明设备上无外来进程。",
                   "{m} of {n} trial records ran their clean runs inside the lease, the devices proven free by npu-smi before and after each run."),
    "lease_runs_sim": ("{n} 个试验记录中 {m} 个的干净运行在租约内；运行前后查看的是模拟设备登记表（{sources}），"
                       "它只反映模拟主机上的进程，不能证明真实 NPU 空闲。",
                       "{m} of {n} trial records ran their clean runs inside the lease; before and after each run the devices were "
                       "checked in the simulated device registry ({sources}), which sees a simulated host's processes only and proves "
                       "nothing about a real NPU."),
    "lease_runs_other": ("{n} 个试验记录中 {m} 个的干净运行在租约内；运行前后的设备检查来源：{sources}。",
                         "{m} of {n} trial records ran their clean runs inside the lease; the device checks before and after each run: {sources}."),
    "lease_unleased_opt_out": ("用户明确选择不使用设备租约（--unleased，已记录）。",
                               "The user opted out of a device lease explicitly (--unleased, recorded)."),
    "lease_none": ("未持有设备租约的轮次：{rounds}。无法证明这些轮次的 NPU 上没有其他负载（协议 §9）。",
                   "Rounds that held no device lease: {rounds}. Nothing shows that no other work shared their NPUs (protocol §9)."),
    "lease_discarded": ("因外来进程占用设备而作废并重跑的运行（不计入）：",
                        "Runs discarded and made again because a foreign process used the devices (not counted):"),
    "lease_discarded_cols": ("轮次|运行|第几次|外来进程", "Round|Run|Try|Foreign process"),
    "lease_blocked": ("设备租约未取得（未运行、未决策）：", "Device lease not obtained (nothing ran, nothing decided):"),
    "session_root": ("<会话>", "<session>"),
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
    "fig_runs_cols": ("轮次|条目|结果|运行|逐次 worst-rank 均值 ms|均值 ms",
                      "Round|Entry|Outcome|Runs|Worst-rank mean per run ms|Mean ms"),
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
    "decided_by": ("判定依据", "Decided by"), "protocol_gate": ("协议门禁", "protocol gate"),
    "stats_policy": ("统计策略（非协议）", "statistics policy (not the protocol)"),
    "passed": ("通过", "passed"), "not_passed": ("未通过", "failed"),
    "advice": ("建议", "Advice"),
    "truth": ("协议门禁、统计策略与模拟器真值对照", "Protocol gate vs statistics policy vs the simulator's ground truth"),
    "truth_note": ("真值来自模拟器对每轮精确配置的无噪声步长（|改善| < {band:g}% 视为无变化），仅用于本对照，从不参与任何决策。"
                   "统计策略不是 Stage O 协议；“统计策略”一列是若按该策略判定会得出的结论。",
                   "The truth is the simulator's noise-free step time of each round's exact config (|improvement| < {band:g}% "
                   "counts as no change); it is read only for this comparison, never for a decision. The statistics policy is not "
                   "the Stage O protocol; its column is what it would have decided."),
    "truth_cols": ("轮次|条目|协议门禁|统计策略（非协议）|序贯统计策略（非协议，候选运行数）|判定依据|真值改善率|真值|建议",
                   "Round|Entry|Protocol gate|Statistics policy (not the protocol)|Sequential policy (not the protocol, candidate runs)"
                   "|Decided by|True improvement|Truth|Advice"),
    "truth_agree": ("与真值一致：协议门禁 {p}/{n}，统计策略 {s}/{n}，序贯统计策略 {q}/{n}（提升应接受，无变化或退化应拒绝）。",
                    "Agreement with the truth: protocol gate {p}/{n}, statistics policy {s}/{n}, sequential policy {q}/{n} "
                    "(a gain should be accepted, no change or a loss rejected)."),
    "undecided": ("未判定", "undecided"),
    "seq_runs": ("（{n} 次）", "({n} runs)"),
    "truth_class": ("提升|无变化|退化", "gain|no change|loss"),
    "accept": ("接受", "accept"), "reject": ("拒绝", "reject"),
    "dcci_cols": ("配置|统计所用运行|worst-rank 均值 ms|median-run ms|P50 ms|P90 ms|stddev ms|spread|门禁|基线变化",
                  "Config|Runs the figures are over|Worst-rank mean ms|Median-run ms|P50 ms|P90 ms|stddev ms|Spread|Gate|Incumbent change"),
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
    "occ_times_ranks": ("{n} × {r} 个 rank", "{n} × {r} ranks"),
    "runs_gate": ("{n} 次门禁运行", "{n} gate runs"),
    "runs_clean": ("{n} 次干净运行", "{n} clean runs"),
    "runs_topped": ("补足后 {n} 次", "{n} after top-up"),
    "verdict": ("结论", "verdict"),
    "status_accepted": ("接受", "accepted"), "status_rejected": ("拒绝", "rejected"), "status_failed": ("失败", "failed"),
    "status_blocked": ("被阻断", "blocked"), "status_skipped": ("跳过", "skipped"), "status_pending": ("未定", "pending"),
    "status_verified": ("已校验", "verified"), "status_unverified": ("未通过校验", "unverified"),
    "verdict_win": ("确有提升", "win"), "verdict_loss": ("确有退化", "loss"), "verdict_neutral": ("无实质差异", "neutral"),
    "verdict_inconclusive": ("证据不足", "inconclusive"),
    "risk_low": ("低", "low"), "risk_medium": ("中", "medium"), "risk_high": ("高", "high"),
    "phase_trial": ("试验", "trial"), "phase_repair": ("联合修复", "repair"), "phase_o0": ("O0", "o0"),
}
TEXT: dict[str, dict[str, str]] = {lang: {k: v[i] for k, v in _MESSAGES.items()} for i, lang in enumerate(("zh", "en"))}


def paren(text: str, lang: str) -> str:
    """A parenthetical in the language's own brackets."""
    return f"（{text}）" if lang == "zh" else f" ({text})"


MS_DIGITS = 4
"""Decimals of every millisecond figure of the report (run metrics are ~10 ms; 0.1 µs resolution)."""


def num(value: Any, digits: int = MS_DIGITS) -> str:
    return "—" if value is None else f"{float(value):.{digits}f}"


def word(t: dict[str, str] | Any, kind: str, value: Any) -> str:
    """A recorded status or verdict word in the report's language (the word itself when the report does not know it)."""
    return t.get(f"{kind}_{value}", str(value))


def runs_label(t: dict[str, str] | Any, run_set: str | None, runs: int, round_name: str) -> str:
    """Which runs a figure is over, in the report's language: ``3 gate runs``, ``5 after top-up``, ``5 clean runs``."""
    if run_set == "gate":
        return t["runs_gate"].format(n=runs)
    return t["runs_clean" if round_name == "O0-INCUMBENT" else "runs_topped"].format(n=runs)


def pct(value: Any) -> str:
    return "—" if value is None else f"{float(value):+.2f}%"


def code(value: Any) -> str:
    return "`" + json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True) + "`"


def ci_text(interval: Sequence[float] | None) -> str:
    return "—" if not interval else "[" + ", ".join(f"{float(x):+.2f}%" for x in interval) + "]"
