"""A sweep killed between a failed step of one of its trials and the step's record settles it as it failed, never a retry.

Every trial a sweep makes (the O0 incumbent, a candidate, a DCCI repair, a top-up) seals a failure scene before
it returns the failure the sweep records. Killed in between, the resumed sweep finds the scene (same trial
fingerprint) and records what the uninterrupted sweep records, though the step would pass if made again: a value
that crashed once must never pass on a retry and be frozen into BASE.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from sweep_helpers import (
    SHORT_PROFILE_POLICY,
    failing_probe,
    failing_run,
    killed_after_the_result,
    killed_after_the_seal,
    killed_while_sealing,
    small_session,
)

from sk_analytics.handoff.crosscheck import first_disagreement
from sk_analytics.ledger.chain import read_records, verify
from sk_runner.sweep.driver import run_sweep
from sk_runner.sweep.session import SweepSession, load_session
from sk_runner.trial import round_dir_of


@dataclass(frozen=True)
class Step:
    """A step of one trial of a small sweep that fails once: ``round``, ``run`` (``PROBE``, ``CORRECTNESS``, ``run-<k>``),
    the entry, network and policy of the session, and what the session ends in."""

    round: str
    run: str
    entry: str = "auto-op-parallel-1"
    network: str | None = None
    dcci: bool = False
    outcome: str = "base"

    def session(self, root: Path) -> SweepSession:
        return small_session(root, [self.entry], network=self.network, **({"policy": SHORT_PROFILE_POLICY} if self.dcci else {}))

    def fail(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Make the step fail, whatever life of the sweep makes it."""
        if self.run == "PROBE":
            failing_probe(monkeypatch, self.round)
        else:
            failing_run(monkeypatch, self.round, int(self.run[4:]) if self.run.startswith("run-") else self.run)


STEPS = {
    "o0-clean-run": Step("O0-INCUMBENT", "run-2", outcome="stopped"),  # a failed O0 stops the session
    "candidate-probe": Step("O1", "PROBE"),
    "candidate-correctness": Step("O1", "CORRECTNESS"),
    "candidate-clean-run": Step("O1", "run-2"),
    "top-up-run": Step("O1", "run-4"),  # the gate accepted O1 on three runs; the top-up to five fails
    "dcci-repair-run": Step("O2", "run-2", entry="dcci-disable-all", network="moe-decode", dcci=True),
}

VOLATILE = {"bound", "base_fingerprint", "handoff_fingerprint", "reports", "settled_fingerprint", "head"}
"""Record fields that differ between two sessions of the same sweep whatever happened: the digests of files that
name their session's folder or time."""


def _normal(value: Any, root: Path) -> Any:
    """``value`` with the session folder and the set-aside folders' nanosecond suffixes taken out."""
    if isinstance(value, dict):
        return {k: _normal(v, root) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_normal(v, root) for v in value]
    if isinstance(value, str):
        return re.sub(r"(INCOMPLETE/[A-Za-z0-9-]+?)-\d{6,}", r"\1-*", value.replace(str(root.resolve()), "<root>"))
    return value


MEASURED = {"profile_result", "probe_result"}
"""Records of a DCCI diagnosis, compared by what they found only: they also hold their processes' own times."""


def decisions(root: Path) -> list[tuple[str, Any]]:
    """What the session recorded from its first trial on, comparable between sessions."""
    records = read_records(root)
    first = next(i for i, r in enumerate(records) if r.kind == "trial_result")
    return [(r.kind, {k: r.data.get(k) for k in ("entry_id", "ok", "ready", "side")} if r.kind in MEASURED else _normal(r.data, root))
            for r in records[first:]]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """The uninterrupted sweep in which ``step`` fails (made once per step, shared by its kills)."""
    made: dict[str, Path] = {}

    def of(name: str) -> Path:
        if name not in made:
            step, root = STEPS[name], tmp_path_factory.mktemp(name) / "s"
            with pytest.MonkeyPatch.context() as monkeypatch:
                step.fail(monkeypatch)
                outcome = run_sweep(step.session(root), say=lambda _: None)
            assert outcome is not None and outcome.outcome == step.outcome
            made[name] = root
        return made[name]

    return of


KILLS = [(name, kill) for name in STEPS for kill in ("after_the_seal", "after_the_result")
         if (name, kill) != ("dcci-repair-run", "after_the_result")]
"""Every step at both kill points, but the DCCI repair run only right after its seal: its trial returns as every
other trial's does (the five other steps cover that point), and its session is the slowest (a profiled DCCI pair)."""


@pytest.mark.slow
@pytest.mark.parametrize(("name", "kill"), KILLS)
def test_a_sweep_killed_between_a_failed_step_and_its_record_settles_it_as_the_uninterrupted_sweep(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, uninterrupted: Callable[[str], Path], name: str, kill: str) -> None:
    """Killed right after the step's scene was sealed (``after_the_seal``: its run folder not yet set aside) or after
    the trial returned the failure (``after_the_result``), before the sweep recorded it; the step would pass if made
    again. The resumed sweep makes no step again (one scene, the failed run never complete) and records, settles,
    reports and hands off exactly what the uninterrupted sweep in which the step failed does. Before, it retried the
    step, which passed: the value that failed was tried on, and could be frozen into BASE."""
    step = STEPS[name]
    reference = uninterrupted(name)
    step.fail(monkeypatch)
    returned = killed_after_the_result(monkeypatch, step.round) if kill == "after_the_result" else []
    if kill == "after_the_seal":
        killed_after_the_seal(monkeypatch, step.round, step.run)
    root = tmp_path / "s"
    with pytest.raises(KeyboardInterrupt):
        run_sweep(step.session(root), say=lambda _: None)
    assert not any(r.kind == "trial_result" and not r.data["ok"] for r in read_records(root))  # the failure unrecorded
    assert returned or kill == "after_the_seal"
    monkeypatch.undo()  # the step made again would pass now
    outcome = run_sweep(load_session(root), say=lambda _: None)
    assert outcome is not None and outcome.outcome == step.outcome
    rd = round_dir_of(root, step.round)
    [scene] = list((rd / "FAILURE_SCENES").iterdir())  # the step was not made again
    assert not (rd / "CLEAN" / step.run / "meta.json").exists() and not (step.run == "PROBE" and (rd / "probe.json").exists())
    assert decisions(root) == decisions(reference)
    h1, h2 = (_normal(json.loads((r / "handoff.json").read_text(encoding="utf-8")), r) for r in (root, reference))
    assert h1 == h2  # the hand-off: outcome, BASE, every entry's status, reason and evidence, the scenes
    failed = next(r.data for r in read_records(root) if r.kind == "trial_result" and not r.data["ok"])
    assert failed["failure"]["scene"] == scene.relative_to(root).as_posix()
    if returned:  # what the uninterrupted sweep records of the trial the first life returned
        assert (failed["failure"]["stage"], failed["failure"]["message"], failed["failure"].get("words")) == (
            returned[0].outcome, returned[0].message, returned[0].words)
    assert first_disagreement(root) is None and verify(root).ok  # the report and the hand-off say what the ledger holds


@pytest.mark.slow
def test_a_sweep_killed_while_sealing_a_failed_runs_scene_makes_the_run_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed while sealing the scene of O1's failed run 2 (``scene.json``, written last, missing): nothing says how
    the run ended, so the resumed sweep makes it again; it passes, and the session ends as one in which it never
    failed (the half-written scene stays, named by no record)."""
    step = STEPS["candidate-clean-run"]
    step.fail(monkeypatch)
    killed_while_sealing(monkeypatch, step.round, step.run)
    root = tmp_path / "s"
    with pytest.raises(KeyboardInterrupt):
        run_sweep(step.session(root), say=lambda _: None)
    monkeypatch.undo()
    outcome = run_sweep(load_session(root), say=lambda _: None)
    assert outcome is not None and outcome.outcome == "base"
    rd = round_dir_of(root, step.round)
    [half] = list((rd / "FAILURE_SCENES").iterdir())
    assert not (half / "scene.json").exists() and (rd / "CLEAN" / "run-2" / "meta.json").is_file()
    trials = [r.data for r in read_records(root) if r.kind == "trial_result"]
    assert all(t["ok"] for t in trials) and next(t for t in trials if t["round"] == "O1")["runs_total"] == 3
    assert next(r.data for r in read_records(root) if r.kind == "entry_settled")["status"] == "accepted"
