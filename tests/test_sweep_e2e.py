"""End-to-end sweeps on the simulated device, checked against the simulator's ground truth."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
from sweep_helpers import base_identity, settled_statuses, small_session
from zh_words import stray_english

from sk_analytics.cli import cli as analyze_cli
from sk_analytics.cli._base import run_cli
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.handoff.crosscheck import first_disagreement
from sk_analytics.ledger.chain import read_records, verify
from sk_analytics.messages import render
from sk_analytics.stage_o.matrix import protocol_candidates
from sk_runner.sim.network import load_network
from sk_runner.sim.truth import ground_truth
from sk_runner.sweep.driver import run_sweep

pytestmark = pytest.mark.slow

ORDINARY = [
    "auto-op-parallel-1",        # truth: about -3.7 % (helps)
    "aggressive-task1-value0",   # truth: crash
    "aggressive-task0-value3",   # truth: hang
    "aggressive-event1-task0-value0",  # not authorised
    "early-start-1",             # no declared operator adaptation
    "split-mode-3",              # truth: neutral (+0.1 %)
    "stream-fusion-0",           # truth: about +10 % (hurts)
]


def _effect(truth: dict, option: str, value: object) -> dict:
    return next(e for e in truth["option_effects"] if e["option"] == option and e["value"] == value)


def test_ordinary_entries_follow_ground_truth(tmp_path: Path) -> None:
    truth = ground_truth(load_network(None))
    assert _effect(truth, "auto_op_parallel", 1)["sign"] == -1
    assert _effect(truth, "split_mode", 3)["sign"] == 0
    assert _effect(truth, "stream_fusion", 0)["sign"] == 1
    assert _effect(truth, "aggressive_opt_strategies", {"event_breaker_bypass": 0, "task_breaker_bypass": 1, "value_breaker_bypass": 0})["outcome"] == "crash"
    assert _effect(truth, "aggressive_opt_strategies", {"event_breaker_bypass": 0, "task_breaker_bypass": 0, "value_breaker_bypass": 3})["outcome"] == "hang"

    root = tmp_path / "s"
    session = small_session(root, ORDINARY)
    lines: list[str] = []
    outcome = run_sweep(session, say=lines.append)
    assert outcome is not None and outcome.outcome == "base"

    assert settled_statuses(root) == {
        "auto-op-parallel-1": "accepted",
        "aggressive-task1-value0": "failed",
        "aggressive-task0-value3": "failed",
        "aggressive-event1-task0-value0": "blocked",
        "early-start-1": "blocked",
        "split-mode-3": "rejected",
        "stream-fusion-0": "rejected",
    }
    handoff = load_json_file(root / "handoff.json")
    assert handoff["base"]["round"] == "O1"
    assert handoff["option_maps_kept"] == {"/super_kernel_optimize_options/auto_op_parallel": 1}
    assert base_identity(root)["options"] == {"auto_op_parallel": 1}
    assert len(handoff["failure_scenes"]) == 2
    for scene in handoff["failure_scenes"]:
        assert (root / scene).is_dir()
    entries = {e["id"]: e for e in handoff["entries"]}
    assert "超时" in render(entries["aggressive-task0-value3"]["reason"], "zh")
    assert "授权" in render(entries["aggressive-event1-task0-value0"]["reason"], "zh")
    assert "timeout/hang" in render(entries["aggressive-task0-value3"]["reason"], "en")
    # rejected trials were compared with the accepted incumbent O1, the failed ones never changed it
    gates = {r.data["round"]: r.data["baseline_round"] for r in read_records(root) if r.kind == "gate_result"}
    assert gates == {"O1": "O0-INCUMBENT", "O4": "O1", "O5": "O1"}
    base = load_json_file(root / "BASE" / "sbest-base.json")
    assert len(base["run_fingerprints"]) == 5 and base["config"]["super_kernel_optimize_options"] == {"auto_op_parallel": 1}

    report = (root / "EXPERIMENT_REPORT.md").read_text(encoding="utf-8")
    header = "| 阶段/候选 | 测量口径 | 基线耗时 ms | 实验耗时 ms | 耗时差 ms | 改善率 | 运行数 | 门禁/状态 | 证据 |"
    assert header in report and "## O0-INCUMBENT 逐次运行" in report and "## DCCI（数据缓存控制）家族" in report
    html = (root / "report.html").read_text(encoding="utf-8")
    assert html.count("<svg") == 1 and "<table>" in html
    assert verify(root).ok
    assert run_cli(analyze_cli, "sk-analyze", ["ledger", "verify", str(root)]) == 0
    assert any("门禁" in line for line in lines)


def test_o0_unstable_stops_and_reports(tmp_path: Path) -> None:
    root = tmp_path / "s"
    session = small_session(root, ["auto-op-parallel-1"], noise=40.0)
    outcome = run_sweep(session, say=lambda _: None)
    assert outcome is not None and outcome.outcome == "stopped"
    handoff = json.loads((root / "handoff.json").read_text(encoding="utf-8"))
    assert handoff["base"] is None and "不稳定" in render(handoff["stop"]["reason"], "zh")
    assert handoff["entries"][0]["status"] == "skipped"
    # the way forward, machine-readable: the exact command the console prints (a session without a task: the demo's)
    from sk_runner.sweep.cli import fresh_session_advice, sweep

    argv = handoff["fresh_session_argv"]
    assert argv == ["sk-run", "sweep", "--demo", "--session", f"{root.resolve()}-2", "--seed", "7", "--ranks", "2", "--iterations", "30",
                    "--full-profile"]  # its policy profiles the full window (profile_iterations None), not the demo's 14 steps
    assert fresh_session_advice(session).endswith(f"start a fresh session: {shlex.join(argv)}")
    assert sweep.make_context("sweep", argv[2:]).params["session_dir"] == Path(f"{root.resolve()}-2")  # options sk-run sweep takes


def test_the_chinese_progress_lines_carry_no_english_words(tmp_path: Path) -> None:
    """Chinese by default: the trial steps, the record summaries (gate verdict, trial phase, stability) and the settled
    status are worded in Chinese; identifiers (rounds, entries, option=value, files, BASE) stay as they are."""
    lines: list[str] = []
    outcome = run_sweep(small_session(tmp_path / "s", ["auto-op-parallel-1", "split-mode-3", "early-start-1"]), say=lines.append)
    assert outcome is not None and outcome.outcome == "base"
    assert {line: words for line in lines if (words := stray_english(line))} == {}
    said = "\n".join(lines)
    for needle in ("O1 精确取值探测", "O1 完整推理 + 正确性校验", "O1 第 3/3 次干净运行", "O1（试验）完成", "O1（补足）完成",
                   "→ 接受：", "→ 被阻断：", "稳定性：极差", "统计判断 确有提升"):
        assert needle in said, needle


def test_eta_is_this_process_pace_times_the_entries_left() -> None:
    from sk_runner.sweep.driver import eta_seconds

    assert eta_seconds(2, 6, 100.0) == 300.0
    assert eta_seconds(0, 6, 100.0) is None  # a resumed session: nothing settled at this process's pace yet
    assert eta_seconds(3, 0, 100.0) is None  # nothing left


def test_english_report_and_resume_of_finished_session(tmp_path: Path) -> None:
    root = tmp_path / "s"
    run_sweep(small_session(root, ["split-mode-3"]), say=lambda _: None)
    records = len(read_records(root))
    from sk_runner.sweep.session import load_session

    outcome = run_sweep(load_session(root), say=lambda _: None, lang="en")
    assert outcome is not None and len(read_records(root)) == records  # nothing re-run, nothing appended
    assert load_json_file(root / "handoff.json")["fresh_session_argv"] is None  # BASE: no fresh session to start
    report = (root / "EXPERIMENT_REPORT.md").read_text(encoding="utf-8")
    assert "| Stage/candidate | Measure | Baseline ms |" in report


def test_demo_command_runs_a_complete_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sk_runner.cli import cli

    session = tmp_path / "demo"
    assert run_cli(cli, "sk-run", ["sweep", "--demo", "--session", str(session), "--ranks", "2", "--iterations", "30"]) == 0
    captured = capsys.readouterr()
    out, progress = captured.out, captured.err  # stdout: the result lines; stderr: the progress (docs/sweep.md, "Streams")
    assert f"报告：{session / 'EXPERIMENT_REPORT.md'}" in out and f"HTML：{session / 'report.html'}" in out
    assert "[O0-INCUMBENT] O0-INCUMBENT: O0 正确性 + 5 次干净运行" in progress and "第 3/5 次干净运行" in progress
    statuses = settled_statuses(session)
    assert len(statuses) == len(protocol_candidates()) and "pending" not in statuses.values()
    assert statuses["aggressive-task1-value0"] == "failed" and statuses["aggressive-task0-value3"] == "failed"
    assert statuses["aggressive-event1-task0-value0"] == "blocked" and statuses["early-start-1"] == "blocked"
    assert statuses["stream-fusion-0"] == "rejected"  # about 10 % slower in the ground truth
    eta = [(int(s), int(n)) for s, n in re.findall(r"进度：已定 (\d+)/(\d+) 个条目，按目前的速度约还需 \d+ 分钟", progress)]
    assert eta == [(k, len(statuses)) for k in range(1, len(statuses))]  # after each settled entry but the last
    report = (session / "EXPERIMENT_REPORT.md").read_text(encoding="utf-8")
    truth = json.loads((session / "handoff.json").read_text(encoding="utf-8"))["simulator_truth"]
    assert {t["class"] for t in truth.values()} >= {"gain", "loss"}  # keyed by gated round
    assert "## 协议门禁、统计策略与模拟器真值对照" in report and "与真值一致：协议门禁 " in report
    assert verify(session).ok
    assert first_disagreement(session) is None  # the report with the truth section is what the ledger re-renders


def test_stats_policy_decides_and_is_labelled_not_protocol(tmp_path: Path) -> None:
    from dataclasses import replace

    from sweep_helpers import FAST_POLICY

    root = tmp_path / "s"
    session = small_session(root, ["auto-op-parallel-1"], noise=1.0, policy=replace(FAST_POLICY, gate="stats"))
    outcome = run_sweep(session, say=lambda _: None)
    assert outcome is not None and outcome.outcome == "base"
    gate = next(r.data for r in read_records(root) if r.kind == "gate_result")
    assert gate["gate_mode"] == "stats" and gate["gate_is_protocol"] is False and "NOT the Stage O protocol" in gate["gate_label"]
    assert gate["accepted"] is gate["stats_accepted"] is True  # truth: about -3.7 %, far outside the simulator's noise
    summary = render(gate["summary"], "zh")
    assert summary.startswith("O1 对比 O0-INCUMBENT") and "统计策略（非协议）通过" in summary
    assert "statistics policy (not the protocol) passed" in render(gate["summary"], "en")
    report = (root / "EXPERIMENT_REPORT.md").read_text(encoding="utf-8")
    assert "判定依据: **sk-tune 统计策略，不是 Stage O 协议**" in report
    # the comparison with the simulator's truth (read for the report only)
    assert "## 协议门禁、统计策略与模拟器真值对照" in report
    # the sequential policy's column (replayed on the gate's 3 runs) sits beside the fixed policy's
    assert "| O1 | auto-op-parallel-1 | 接受 ✓ | 接受 ✓ | 接受 ✓ （3 次） | sk-tune 统计策略，不是 Stage O 协议 | +3." in report
    assert "| 提升 | 一致 |" in report and "与真值一致：协议门禁 1/1，统计策略 1/1" in report
    assert gate["advice"]["kind"] == "consistent"
    assert first_disagreement(root) is None
    # the truth is bound to the ledger through handoff.json's fingerprint: an edited truth is caught
    handoff = json.loads((root / "handoff.json").read_text(encoding="utf-8"))
    handoff["simulator_truth"]["O1"]["class"] = "neutral"
    (root / "handoff.json").write_text(json.dumps(handoff), encoding="utf-8")
    found = first_disagreement(root)
    assert found is not None and found.file == "handoff.json"



def test_a_gate_rejection_names_the_checks_the_gate_record_says_failed(tmp_path: Path) -> None:
    """The settle reason reads the sweep's own gate_result record (its ``checks``): the machine's unit tests script that
    record, and a key the sweep never wrote (``failed_checks``) once made every rejection read like a loss of the mean."""
    root = tmp_path / "s"
    run_sweep(small_session(root, ["aggressive-task0-value1", "aggressive-task0-value2"], noise=1.0), say=lambda _: None)
    records = read_records(root)
    rejected = [r.data for r in records if r.kind == "entry_settled" and r.data["status"] == "rejected"]
    assert [r["entry_id"] for r in rejected] == ["aggressive-task0-value2"]  # seed 7: the median-run check fails
    gate = next(r.data for r in records if r.kind == "gate_result" and r.data["entry_id"] == "aggressive-task0-value2")
    failed = [name for name, ok in gate["checks"].items() if not ok]
    assert failed == ["median_run_direction"] and rejected[0]["reason"]["code"] == "reason.gate_failed_checks"
    assert rejected[0]["reason"]["params"]["checks"] == [{"code": "check.median_run_direction", "params": {}}]  # codes, not words
    assert render(rejected[0]["reason"], "en").endswith("(mean improvement +0.186%; failed checks: median run); incumbent restored")
    zh = render(rejected[0]["reason"], "zh")
    assert zh.endswith("（均值改善 +0.186%；未通过的检查：中位运行），恢复原基线") and stray_english(zh) == []
