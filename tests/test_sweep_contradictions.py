"""Decisions of the protocol gate the statistics contradict are named at the end of the default path (issue 43)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sweep_helpers import settled_statuses, small_session
from zh_words import stray_english

from sk_analytics.ledger.chain import read_records, verify
from sk_analytics.stage_o.contradictions import contradictions, lines, redecide_argv
from sk_runner.sweep.driver import run_sweep


def _gate(round_name: str, accepted: bool, ci: list[float] | None, mode: str = "protocol") -> tuple[str, dict[str, object]]:
    return "gate_result", {"round": round_name, "entry_id": f"e-{round_name}", "accepted": accepted, "gate_mode": mode,
                           "ci_pct": ci, "mean_improvement_pct": 0.4, "verdict": "inconclusive"}


def test_contradictions_name_both_kinds_and_only_protocol_decisions() -> None:
    records = [
        _gate("O1", True, [-0.6, 0.6]),           # accepted, CI includes 0: not supported
        _gate("O2", False, [0.5, 4.0]),            # rejected, CI above 0: likely a real gain
        _gate("O3", True, [0.5, 4.0]),             # consistent
        _gate("O4", False, [-1.0, 1.0]),           # consistent
        _gate("O5", True, None),                   # accepted without any interval: not supported
        _gate("O6", True, [-0.6, 0.6], "family"),  # another policy decided: not the protocol's contradiction
        ("trial_result", {"round": "O7"}),
    ]
    found = contradictions(records)
    assert [(c["round"], c["kind"]) for c in found] == [
        ("O1", "accepted_not_supported"), ("O2", "rejected_likely_gain"), ("O5", "accepted_not_supported")]
    assert found[0]["ci95_pct"] == [-0.6, 0.6] and found[0]["improvement_pct"] == 0.4 and found[0]["protocol_accepted"] is True
    said = lines(found, redecide_argv("/s/x"), "en")
    assert said[0].startswith("3 decision(s) of the protocol gate") and "e-O1 (O1)" in said[1] and "[-0.60%, +0.60%]" in said[1]
    assert said[-1].endswith("sk-run sweep --redecide /s/x --gate family --session /s/x-family")
    assert lines([], None) == []
    zh = lines(found, redecide_argv("/s/x"), "zh")  # the Chinese console and report: no English word but the identifiers
    assert zh[0] == "统计结果与协议门禁矛盾的决策 3 个：" and zh[2] == (
        "  e-O2（O2）：协议拒绝，而提升的95%置信区间高于0（很可能是真实提升）；提升 +0.40%，95% 置信区间 [+0.50%, +4.00%]")
    assert [stray_english(line) for line in zh] == [[]] * 5 and zh[-1].endswith("：sk-run sweep --redecide /s/x --gate family --session /s/x-family")


@pytest.mark.slow
def test_a_protocol_sweep_that_freezes_a_no_effect_value_names_it_last(tmp_path: Path) -> None:
    root = tmp_path / "s"
    # seed 1: the protocol accepts split-mode-3 (no effect: +0.1 % in the simulator's truth) on a CI of about [-0.6 %, +0.6 %]
    session = small_session(root, ["auto-op-parallel-1", "split-mode-3"], noise=1.0, seed=1)
    said: list[str] = []
    outcome = run_sweep(session, say=said.append)
    assert outcome is not None and outcome.outcome == "base"
    assert settled_statuses(root)["split-mode-3"] == "accepted"
    handoff = json.loads((root / "handoff.json").read_text(encoding="utf-8"))
    block = handoff["contradictions"]
    assert [(c["entry_id"], c["kind"]) for c in block["entries"]] == [("split-mode-3", "accepted_not_supported")]
    entry = block["entries"][0]
    assert entry["ci95_pct"][0] < 0 < entry["ci95_pct"][1] and entry["improvement_pct"] is not None
    argv = block["redecide_argv"]
    assert argv[:4] == ["sk-run", "sweep", "--redecide", str(root.resolve())] and argv[4:6] == ["--gate", "family"]
    # the last console lines: the entry and the one command
    assert "split-mode-3（O2）" in said[-2] and said[-1].endswith(" ".join(argv))  # in Chinese (the default language)
    report = (root / "EXPERIMENT_REPORT.md").read_text(encoding="utf-8")
    head = report.split("## ", 1)[0]
    assert "split-mode-3（O2）" in head and " ".join(argv) in head
    assert verify(root).ok
    assert [r.data["protocol_accepted"] for r in read_records(root) if r.kind == "gate_result"] == [True, True]

    # the printed command: a linked successor session under the family policy, from the runs already made
    from sk_analytics.cli._base import run_cli
    from sk_runner.cli import cli

    original = {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file() and not p.name.endswith(".lock")}
    assert run_cli(cli, "sk-run", argv[1:] + ["--quiet"]) == 0
    successor = Path(argv[-1])
    assert settled_statuses(successor) == {"auto-op-parallel-1": "accepted", "split-mode-3": "rejected"}  # the right BASE
    assert verify(successor).ok and verify(root).ok
    assert {p.relative_to(root): p.read_bytes() for p in root.rglob("*") if p.is_file() and not p.name.endswith(".lock")} == original
    link = json.loads((successor / "session.json").read_text(encoding="utf-8"))["task"]["redecides"]
    assert link["session"] == str(root.resolve()) and link["handoff_fingerprint"] == handoff["handoff_fingerprint"]
    trials = {r.data["round"]: r.data for r in read_records(successor) if r.kind == "trial_result" and r.data["phase"] != "top_up"}
    # O0 and O1 (same incumbent in both sessions) are adopted; only runs the family policy needs are added
    assert trials["O0-INCUMBENT"]["adopted_runs"] == 5 and trials["O1"]["adopted_runs"] >= 3
    assert trials["O1"]["runs_added"] == 0
    assert not json.loads((successor / "handoff.json").read_text(encoding="utf-8"))["contradictions"]["entries"]
