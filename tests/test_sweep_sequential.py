"""The sequential statistics policy in a sweep on the simulator (``policy.gate = "sequential"``)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from sweep_helpers import (
    FAST_POLICY,
    assert_settled_failed_on_the_added_run,
    failing_run,
    finished_sweep,
    runs_per_round,
    settled_statuses,
    small_session,
)

from sk_analytics.errors import InputError
from sk_analytics.handoff.crosscheck import first_disagreement
from sk_analytics.ledger.chain import read_records
from sk_analytics.option_trial.executable import SessionNoise
from sk_runner.sweep.driver import run_sweep
from sk_runner.sweep.phase import _policy

ENTRIES, POLICY = ["auto-op-parallel-1", "split-mode-3"], replace(FAST_POLICY, gate="sequential")
"""truth: auto-op-parallel-1 about -3.7 % step time (a gain), split-mode-3 neutral (+0.1 %)"""


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One uninterrupted sequential-gate sweep: the tests only read it (the first checks it, the resume test's reference is it)."""
    return finished_sweep(tmp_path_factory, "sequential", ENTRIES, POLICY)


@pytest.mark.slow
def test_sequential_gate_adds_runs_while_undecided(finished: Path) -> None:
    root = finished
    gates = {r.data["round"]: r.data for r in read_records(root) if r.kind == "gate_result"}
    runs = runs_per_round(root)
    for name, gate in gates.items():
        seq = gate["sequential"]
        assert gate["gate_mode"] == "sequential" and gate["gate_is_protocol"] is False
        assert gate["accepted"] is seq["accepted"] and seq["state"] in ("accepted", "rejected") and seq["cap"] == 5
        assert 3 <= seq["runs_used"] <= 5 and seq["runs_added_by_gate"] == seq["candidate_runs_available"] - 3
        # an accepted round is topped up to five as always; a rejected one keeps exactly the runs the gate used
        assert len(runs[name]) == (5 if seq["accepted"] else seq["candidate_runs_available"])
        summary = json.loads((root / gate["summary_path"]).read_text(encoding="utf-8"))
        assert summary["candidates"][name]["sequential_policy_evaluation"]["state"] == seq["state"]
    statuses = settled_statuses(root)
    assert statuses["auto-op-parallel-1"] == "accepted" and statuses["split-mode-3"] == "rejected"
    report = (root / "EXPERIMENT_REPORT.md").read_text(encoding="utf-8")
    assert "序贯统计策略（非协议，候选运行数）" in report and "序贯统计策略 " in report
    # the truth table: the sequential decision and its candidate runs beside the protocol's and the fixed policy's
    assert f"| O1 | auto-op-parallel-1 | 接受 ✓ | 接受 ✓ | 接受 ✓ （{gates['O1']['sequential']['runs_used']} 次） |" in report
    assert f"| O2 | split-mode-3 | 拒绝 ✓ | 拒绝 ✓ | 拒绝 ✓ （{gates['O2']['sequential']['runs_used']} 次） |" in report
    assert first_disagreement(root) is None


@pytest.mark.slow
def test_runs_needed_figures_learn_the_noise_from_the_earlier_gates(finished: Path) -> None:
    """Each gate's runs-needed figures draw the candidate's noise toward the candidate trials the session's earlier
    gates decided (their recorded runs): O1 has none, O2 has O1's."""
    gates = [r.data for r in read_records(finished) if r.kind == "gate_result"]
    assert [g["round"] for g in gates] == ["O1", "O2"]
    for i, gate in enumerate(gates):
        summary = json.loads((finished / gate["summary_path"]).read_text(encoding="utf-8"))
        figure = summary["candidates"][gate["round"]]["statistics"]["runs_needed"]["executable"]
        expected = SessionNoise.of_trials(g["candidate_run_metrics"] for g in gates[:i])
        assert figure["session_noise"] == expected.to_json() and figure["session_noise"]["trials"] == i
        assert figure["session_noise"]["df"] == sum(len(g["candidate_run_metrics"]) - 1 for g in gates[:i])


def test_sequential_gate_refuses_a_run_budget(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="budget_runs cannot be combined with policy/gate sequential"):
        _policy({"gate": "sequential", "budget_runs": 40}, tmp_path / "task.json")
    assert _policy({"gate": "sequential"}, tmp_path / "task.json").gate == "sequential"


@pytest.mark.slow
def test_sequential_gate_interrupted_between_added_runs_resumes_to_the_same_result(tmp_path: Path, finished: Path,
                                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Ctrl-C while the gate adds runs: the resumed gate replays its looks from the runs on disk and ends as an
    uninterrupted sweep does (same decisions, same runs, same gate numbers)."""
    from sweep_helpers import sweep_outcome

    import sk_runner.sweep.executor as executor
    from sk_runner.sweep.session import load_session

    entries, policy, reference = ENTRIES, POLICY, finished
    added = [g["sequential"]["runs_added_by_gate"] for g in (r.data for r in read_records(reference) if r.kind == "gate_result")]
    assert max(added) >= 2  # split-mode-3 needs two added runs: the interruption below falls between them

    real = executor.run_trial
    interrupts: list[str] = []

    def interrupted(spec, progress=None):  # type: ignore[no-untyped-def]
        if spec.round == "O2" and spec.top_up_to == 5 and not interrupts:  # the gate's second added run
            interrupts.append(spec.round)
            raise KeyboardInterrupt
        return real(spec, progress)

    root = tmp_path / "s"
    monkeypatch.setattr(executor, "run_trial", interrupted)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(small_session(root, entries, noise=1.0, policy=policy), say=lambda _: None)
    assert not any(r.kind == "gate_result" and r.data["round"] == "O2" for r in read_records(root))
    assert len(runs_per_round(root)["O2"]) == 4
    run_sweep(load_session(root), say=lambda _: None)
    assert sweep_outcome(root) == sweep_outcome(reference)
    assert first_disagreement(root) is None


def test_gate_option_goes_with_the_demo_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sk_analytics.cli._base import run_cli
    from sk_runner.cli import cli

    assert run_cli(cli, "sk-run", ["sweep", "--resume", str(tmp_path), "--gate", "sequential"]) == 2
    assert "--gate goes with --demo" in capsys.readouterr().err


@pytest.mark.slow
def test_a_failed_run_the_gate_added_to_the_candidate_settles_the_entry_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The sequential gate, undecided at three runs of O1 (the simulator's seed 6), adds a fourth, which crashes: a
    failed trial (protocol §5.6), the entry settles failed naming it, never decided on the three runs before it."""
    root, lines = tmp_path / "s", []
    failing_run(monkeypatch, "O1", 4)
    outcome = run_sweep(small_session(root, ENTRIES, noise=1.0, policy=POLICY, seed=6), say=lines.append, lang="en")
    assert outcome is not None and outcome.outcome == "base"
    assert_settled_failed_on_the_added_run(root, lines, "sequential")
