"""Shared set-up of the sweep tests: small sessions on the simulator with a chosen sub-matrix."""

from __future__ import annotations

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
