"""Shared set-up of the sweep tests: small sessions on the simulator with a chosen sub-matrix."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from sk_analytics.errors import EnvironmentBlocker
from sk_analytics.files.atomic import write_json
from sk_analytics.files.io_seam import Fault, inject
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.ledger.chain import read_records
from sk_analytics.stage_o.machine import Policy
from sk_analytics.stage_o.matrix import build_matrix, protocol_candidates
from sk_runner.backends.base import Control
from sk_runner.process import process_alive
from sk_runner.sweep.demo import DEMO_PROFILE_ITERATIONS, DEMO_SEED_CONFIG
from sk_runner.sweep.session import BackendSpec, SweepSession, create_session

SMALL = Control(ranks=2, iterations=30, warmup=8)
FAST_POLICY = Policy(timeout_s=60.0, risky_timeout_s=4.0)
SHORT_PROFILE_POLICY = replace(FAST_POLICY, profile_iterations=DEMO_PROFILE_ITERATIONS)
"""FAST_POLICY whose DCCI collections profile the demo's 14 steps instead of the profiler's 40 (a third of the
profile data): every rank is still profiled, and the diagnosis is the same (the same repair patterns from the same
regressed children). For tests of what a diagnosis or a collection proves, not of the window's length."""


def small_session(
    root: Path,
    entries: list[str],
    *,
    network: str | None = None,
    noise: float = 0.0,
    policy: Policy = FAST_POLICY,
    seed: int = 7,
    control: Control = SMALL,
    backend: BackendSpec | None = None,
    lease: dict[str, Any] | None = None,
) -> SweepSession:
    """A session whose matrix holds only ``entries`` (probe evidence: every value ready); ``lease``: the
    ``lease_requested`` record it is created with (sk_runner.sweep.leasing.request_record)."""
    session = create_session(root, dict(DEMO_SEED_CONFIG), seed=seed, backend=backend or BackendSpec("sim", network, noise),
                             control=control, policy=policy, lease=lease)
    probes = [{"option": c.option, "value": c.value, "ready": True, "evidence": {"test": "exact value accepted"}}
              for c in protocol_candidates()]
    matrix = build_matrix(DEMO_SEED_CONFIG, probes)
    matrix["entries"] = [e for e in matrix["entries"] if e["id"] in entries]
    write_json(root / "matrix.json", matrix)
    return session


def settled_statuses(root: Path) -> dict[str, str]:
    return {e["id"]: e["status"] for e in load_json_file(root / "matrix.settled.json")["entries"]}


def base_identity(root: Path) -> dict[str, Any]:
    base = load_json_file(root / "BASE" / "sbest-base.json")
    return {"round": base["round"], "options": base["options"], "option_changes": base["option_changes"]}


def runs_per_round(root: Path) -> dict[str, list[str]]:
    """The complete clean runs of every round."""
    rounds = root / "experiments" / "Sbest"
    return {
        d.name: sorted(p.name for p in (d / "CLEAN").glob("run-*") if (p / "meta.json").is_file())
        for d in sorted(rounds.iterdir()) if (d / "CLEAN").is_dir()
    }


def gate_numbers(root: Path) -> list[tuple[str, Any, Any, bool]]:
    """Every recorded gate: round, worst-rank means of both sides, accepted."""
    return [(r.data["round"], r.data["baseline_mean_ms"], r.data["candidate_mean_ms"], r.data["accepted"])
            for r in read_records(root) if r.kind == "gate_result"]


def sweep_outcome(root: Path) -> tuple[dict[str, str], dict[str, Any], dict[str, list[str]], list[tuple[str, Any, Any, bool]]]:
    """What a finished sweep decided: settled statuses, Sbest-BASE, clean runs per round, gate numbers."""
    return settled_statuses(root), base_identity(root), runs_per_round(root), gate_numbers(root)


def session_processes(root: Path) -> list[int]:
    """Live processes whose argv names the session folder (sk-run, the simulator)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                argv = (entry / "cmdline").read_bytes().decode(errors="replace")
            except OSError:
                continue
            if str(root) in argv and process_alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def sweep_with_fault(root: Path, fault: Fault | None) -> EnvironmentBlocker | None:
    """Resume the sweep in this process with ``fault`` injected at its write seam (None: no fault of sk-run's own).

    Returns the environment blocker it stopped with (None: it finished before
    the fault was due). Whatever it stopped with, nothing of the session is
    left running and its error says how to resume.
    """
    from sk_runner.sweep.driver import run_sweep
    from sk_runner.sweep.session import load_session

    with inject(fault) as plan:
        try:
            run_sweep(load_session(root), say=lambda _: None)
        except EnvironmentBlocker as exc:
            assert fault is None or plan.fired >= 1, f"stopped without the injected fault: {exc.one_line()}"
            assert exc.one_line().endswith(f"Free the cause, then: sk-run sweep --resume {root}")
            assert session_processes(root) == []
            return exc
    assert plan.fired == 0
    return None


def finished_sweep(factory: pytest.TempPathFactory, name: str, entries: list[str], policy: Policy, seed: int = 7) -> Path:
    """One uninterrupted sweep of a small session (noise 1.0, the simulator's ``seed``) that ends at a BASE: a module's
    tests that only read it share it (one is the resume tests' reference)."""
    from sk_runner.sweep.driver import run_sweep

    root = factory.mktemp(name) / "s"
    outcome = run_sweep(small_session(root, entries, noise=1.0, policy=policy, seed=seed), say=lambda _: None)
    assert outcome is not None and outcome.outcome == "base"
    return root


def failing_run(monkeypatch: pytest.MonkeyPatch, round_name: str, run: int | str) -> None:
    """A rank log of clean run ``run`` (or the run folder named ``run``: ``CORRECTNESS``) of ``round_name`` ends early
    (a crash), whatever life of the sweep makes it."""
    from sk_runner.trial.state import TrialState

    classify, folder = TrialState.classify, f"run-{run}" if isinstance(run, int) else run

    def failing(self, result, run_dir, *, need_correctness):  # type: ignore[no-untyped-def]
        if self.spec.round == round_name and run_dir.name == folder:
            (run_dir / "log_1.log").write_text("", encoding="utf-8")
        return classify(self, result, run_dir, need_correctness=need_correctness)

    monkeypatch.setattr(TrialState, "classify", failing)


def failing_probe(monkeypatch: pytest.MonkeyPatch, round_name: str) -> None:
    """The exact-value probe of ``round_name`` finds the runtime reporting the value invalid (it used its default)."""
    import sk_runner.trial.round as trial_round

    check = trial_round.runtime_check

    def invalid(options, *args, **kw):  # type: ignore[no-untyped-def]
        found = check(options, *args, **kw)
        if f"{os.sep}{round_name}{os.sep}" in str(kw["out_dir"]):
            found.status, found.reason = "invalid_default", f"runtime reports the value as invalid and uses the default: {options}"
        return found

    monkeypatch.setattr(trial_round, "runtime_check", invalid)


def killed_after_the_result(monkeypatch: pytest.MonkeyPatch, round_name: str) -> list[Any]:
    """The sweep is killed as soon as a trial of ``round_name`` returned a failure (its scene sealed, its folder set
    aside), before the sweep recorded it (a KeyboardInterrupt stands for the SIGKILL: nothing of sk-run records or
    tidies up after it); the failed results, to compare with what the resumed sweep records."""
    import sk_runner.sweep.executor as executor

    run_trial, returned = executor.run_trial, []

    def result_then_killed(spec, progress=None):  # type: ignore[no-untyped-def]
        result = run_trial(spec, progress)
        if spec.round == round_name and result.status != "ok":
            returned.append(result)
            raise KeyboardInterrupt
        return result

    monkeypatch.setattr(executor, "run_trial", result_then_killed)
    return returned


def killed_after_the_seal(monkeypatch: pytest.MonkeyPatch, round_name: str, run: str) -> None:
    """The sweep is killed right after the failure scene of ``run`` (``PROBE``, ``CORRECTNESS``, ``run-<k>``) of
    ``round_name`` was sealed, before the trial set the run's folder aside and returned."""
    import sk_runner.trial.round as trial_round

    seal_scene = trial_round.seal_scene

    def sealed_then_killed(round_dir, record):  # type: ignore[no-untyped-def]
        folder = seal_scene(round_dir, record)
        if (record.round, record.run) == (round_name, run):
            raise KeyboardInterrupt
        return folder

    monkeypatch.setattr(trial_round, "seal_scene", sealed_then_killed)


def killed_while_sealing(monkeypatch: pytest.MonkeyPatch, round_name: str, run: str) -> None:
    """The sweep is killed while it seals the failure scene of ``run`` of ``round_name``: after its artifacts and
    ``scene.md``, before ``scene.json`` (written last: its presence means sealed)."""
    import sk_runner.trial.scene as scene

    write_json = scene.write_json

    def killed(path, doc, *args, **kw):  # type: ignore[no-untyped-def]
        if Path(path).name == "scene.json" and (doc["identity"]["round"], doc["identity"]["run"]) == (round_name, run):
            raise KeyboardInterrupt
        return write_json(path, doc, *args, **kw)

    monkeypatch.setattr(scene, "write_json", killed)


def assert_settled_failed_on_the_added_run(root: Path, lines: list[str], gate: str) -> None:
    """A sweep of ``auto-op-parallel-1`` then ``split-mode-3`` whose O1, undecided at three runs under ``gate``
    (``sequential`` or ``family``), crashed in the fourth run the gate added: the entry settled failed on it, the
    incumbent stayed, BASE, report and hand-off say so, and the ledger verifies."""
    from sk_analytics.ledger.chain import verify
    from sk_analytics.messages import render
    from sk_runner.trial import round_dir_of

    records = read_records(root)
    assert not any(r.kind == "gate_result" and r.data["round"] == "O1" for r in records)  # never decided on three runs
    ext = next(r.data for r in records if r.kind == "trial_result" and r.data["phase"] == "gate_extension")
    assert (ext["round"], ext["entry_id"], ext["ok"], ext["gate_mode"], ext["base_round"]) == ("O1", "auto-op-parallel-1", False, gate, "O0-INCUMBENT")
    assert (ext["runs_before"], ext["runs_added"], ext["runs_total"], ext["failed_run"]) == (3, 0, 3, 4)
    assert ext["failure"]["stage"] == "crash" and ext["failure"]["scene"] and ext["runs_cap"] >= 4
    assert not (round_dir_of(root, "O1") / "option-trial-summary.json").exists()
    settled = next(r.data for r in records if r.kind == "entry_settled" and r.data["entry_id"] == "auto-op-parallel-1")
    assert settled["status"] == "failed" and settled["reason"]["code"] == "reason.gate_extension_failed"
    assert settled["incumbent_round"] == "O0-INCUMBENT"
    assert (settled["evidence"]["scene"], settled["evidence"]["failed_run"], settled["evidence"]["runs_made"]) == (ext["failure"]["scene"], 4, 3)
    reason = render(settled["reason"], "en")
    policy = "family policy" if gate == "family" else "sequential statistics policy"
    assert reason.startswith(f"auto_op_parallel=1 failed clean run 4, which the {policy} (not the protocol) added while undecided "
                             "(3 clean runs before it, 3 made, at most ") and "process crash or device error" in reason
    statuses = settled_statuses(root)
    assert statuses == {"auto-op-parallel-1": "failed", "split-mode-3": statuses["split-mode-3"]} and statuses["split-mode-3"] != "failed"
    o2 = next(r.data for r in records if r.kind == "trial_result" and r.data["round"] == "O2")
    assert o2["entry_id"] == "split-mode-3" and o2["base_round"] == "O0-INCUMBENT"  # the incumbent stayed
    base = json.loads((root / "BASE" / "sbest-base.json").read_text(encoding="utf-8"))
    assert "auto-op-parallel-1" not in json.dumps(base) and base["round"] in ("O0-INCUMBENT", "O2")
    assert not any(c["pointer"].endswith("/auto_op_parallel") for c in base["option_changes"])
    said = "\n".join(lines)
    assert "→ O1 (gate extension) failed: 3 clean runs; process crash" in said
    report = (root / "EXPERIMENT_REPORT.md").read_text(encoding="utf-8")
    assert reason in report and ext["failure"]["scene"] in report
    handoff = json.loads((root / "handoff.json").read_text(encoding="utf-8"))
    assert handoff["outcome"] == "base"
    said_entry = next(e for e in handoff["entries"] if e["id"] == "auto-op-parallel-1")
    assert (said_entry["status"], said_entry["reason"], said_entry["evidence"]["scene"]) == ("failed", settled["reason"], ext["failure"]["scene"])
    assert ext["failure"]["scene"] in handoff["failure_scenes"]
    assert verify(root).ok

