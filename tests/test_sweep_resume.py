"""Fault injection: SIGKILL, SIGINT or SIGTERM the sweep at chosen points, or ENOSPC/EIO at every write site,
resume, and get the same BASE, matrix and gate numbers."""

from __future__ import annotations

import errno
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sweep_helpers import session_processes, small_session, sweep_outcome, sweep_with_fault

from sk_analytics.cli import cli as analyze_cli
from sk_analytics.cli._base import run_cli
from sk_analytics.errors import IntegrityError
from sk_analytics.files.io_seam import Fault
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.ledger.chain import read_records, verify
from sk_runner.sweep.driver import run_sweep
from sk_runner.sweep.session import load_session

pytestmark = pytest.mark.slow

ENTRIES = ["auto-op-parallel-1", "aggressive-task1-value0", "split-mode-3"]
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[tuple, float]:
    root = tmp_path_factory.mktemp("ref") / "s"
    started = time.monotonic()
    run_sweep(small_session(root, ENTRIES, noise=1.0), say=lambda _: None)
    return sweep_outcome(root), time.monotonic() - started


# The sweep runs as ``sk-run sweep --resume`` in a child that signals itself at a chosen point, so every
# leg is interrupted exactly there (random delays made the interrupted window a matter of luck):
#   write:SITE:NAME:N  before the N-th write of a file named NAME at the write seam's SITE (ledger: the record's
#                      append, its manifest already written; atomic: the rename of a written temp file);
#   class:MODULE       inside class creation of MODULE, from a dataclasses.Field.__set_name__ hook (Python 3.11
#                      wraps an interrupt raised there in a RuntimeError: it was reported as a bug, exit 70).
SIGNALLING_CHILD = r"""
import os, signal, sys
point, sig = os.environ["SK_TEST_SIGNAL_AT"], signal.Signals[os.environ["SK_TEST_SIGNAL"]]
kind, _, where = point.partition(":")
if kind == "class":
    import dataclasses
    set_name = dataclasses.Field.__set_name__
    def hook(self, owner, name, fired=[]):
        if owner.__module__ == where and not fired:
            fired.append(name)
            open(os.environ["SK_TEST_SIGNAL_LOG"], "w").write(f"{owner.__name__}.{name}")
            signal.raise_signal(sig)
        return set_name(self, owner, name)
    dataclasses.Field.__set_name__ = hook
else:
    from sk_analytics.files import io_seam
    site, name, nth = where.split(":")
    due, seen = io_seam._due, []
    def hook(at, path):
        if at == site and os.path.basename(path) == name:
            seen.append(path)
            if len(seen) == int(nth):
                open(os.environ["SK_TEST_SIGNAL_LOG"], "w").write(os.fspath(path))
                signal.raise_signal(sig)
        return due(at, path)
    io_seam._due = hook
from sk_runner.cli import main
main()
"""


def _sweep_signalled_at(root: Path, point: str, sig: signal.Signals) -> str:
    """Run ``sk-run sweep --resume`` that gets ``sig`` at ``point``; check how it ended and that nothing of it is
    left running. Returns what the point was (the file written, or the class created)."""
    log = root.parent / "signal-point.txt"
    log.unlink(missing_ok=True)
    env = {**os.environ, "SK_TEST_SIGNAL_AT": point, "SK_TEST_SIGNAL": sig.name, "SK_TEST_SIGNAL_LOG": str(log)}
    done = subprocess.run([sys.executable, "-c", SIGNALLING_CHILD, "sweep", "--resume", str(root), "--quiet"], cwd=REPO, env=env,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=600, check=False)
    assert log.is_file(), f"the sweep never reached {point} (exit {done.returncode}): {done.stderr[-2000:]}"
    if sig == signal.SIGKILL:
        assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    else:  # promptly, with the usual lines, never "internal error" (exit 70)
        assert done.returncode == 128 + sig, f"{sig.name} at {point}: exit {done.returncode}: {done.stderr[-2000:]}"
        lines = [line for line in done.stderr.splitlines() if line]  # click writes an empty line for Ctrl-C's ^C
        assert lines[-2:] == [f"continue with: sk-run sweep --resume {root}", f"sk-run: {'terminated' if sig == signal.SIGTERM else 'interrupted'}"], lines
    deadline = time.monotonic() + 30  # a SIGKILLed sk-run's processes are ended by its keeper and watchdog
    while session_processes(root):
        assert time.monotonic() < deadline, f"alive after {sig.name} at {point}: {session_processes(root)}"
        time.sleep(0.05)
    return log.read_text()


SIGNAL_LEGS = {
    # id: the signal and the points of successive legs, each a fresh `sk-run sweep --resume`; then an uninterrupted resume.
    # SIGTERM meets a ledger append, a run's sealing and class creation in one session (a fourth leg would find this
    # small sweep already finished, so the other signals keep two sessions each).
    "SIGKILL-ledger-append": (signal.SIGKILL, ["write:ledger:ledger.jsonl:5", "write:ledger:ledger.jsonl:7"]),
    "SIGKILL-run-sealing": (signal.SIGKILL, ["write:atomic:meta.json:3", "write:atomic:meta.json:9"]),
    "SIGINT-run-sealing": (signal.SIGINT, ["write:atomic:meta.json:2", "write:ledger:ledger.jsonl:6"]),
    "SIGINT-class-creation": (signal.SIGINT, ["write:atomic:meta.json:6", "class:sk_analytics.session_view"]),
    "SIGTERM-ledger-append-run-sealing-class-creation": (
        signal.SIGTERM, ["write:ledger:ledger.jsonl:4", "write:atomic:meta.json:4", "class:sk_analytics.session_view"]),
}


@pytest.mark.parametrize("legs", list(SIGNAL_LEGS.values()), ids=list(SIGNAL_LEGS))
def test_signal_and_resume_reaches_same_result(legs: tuple[signal.Signals, list[str]], tmp_path: Path,
                                               reference: tuple[tuple, float]) -> None:
    expected, _ = reference
    sig, points = legs
    root = tmp_path / "s"
    small_session(root, ENTRIES, noise=1.0)
    for point in points:
        landed = _sweep_signalled_at(root, point, sig)
        if point.startswith("class:"):
            assert landed == "RoundInfo.trials"  # the class of the report: its first Field
        assert verify(root).ok  # a signalled sweep never leaves a broken ledger
    outcome = run_sweep(load_session(root), say=lambda _: None)
    assert outcome is not None and outcome.outcome == "base"
    assert sweep_outcome(root) == expected
    assert verify(root).ok
    kinds = [r.kind for r in read_records(root)]
    assert kinds.count("base_frozen") == 1 and kinds.count("matrix_frozen") == 1
    # every finished trial recorded exactly once per phase; scenes are kept, never overwritten
    trial_keys = [(r.data["round"], r.data["phase"]) for r in read_records(root) if r.kind == "trial_result"]
    assert len(trial_keys) == len(set(trial_keys))
    # the scenes the ledger cites are sealed (a kill during sealing leaves an unsealed attempt beside them, never a rewrite)
    cited = load_json_file(root / "handoff.json")["failure_scenes"]
    assert cited and all((root / s / "scene.json").is_file() for s in cited)
    # every evidence file is vouched for: the manifest of an append the signal cut short was dropped by the resume
    assert run_cli(analyze_cli, "sk-analyze", ["ledger", "verify", str(root)]) == 0
    assert session_processes(root) == []


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO], ids=["ENOSPC", "EIO"])
def test_fault_at_every_write_site_resumes_to_same_result(code: int, tmp_path: Path, reference: tuple[tuple, float]) -> None:
    """One leg per write site (seeded point), then a disk that fails every write; each leg stops the sweep
    as an environment blocker, and the final resume decides exactly what the uninterrupted sweep did."""
    expected, _ = reference
    root = tmp_path / "s"
    small_session(root, ENTRIES, noise=1.0)
    # each leg fails at the next write of its site, so every leg stops the sweep early and the
    # failure scene of the copy leg (last) is still ahead; the seeded points are in test_sweep_faults.py
    legs = {
        "parquet": Fault(code, "parquet", 1),  # a run's timings: the run stays incomplete
        "move": Fault(code, "move", 1),  # ... and moving that run aside on resume
        "ledger": Fault(code, "ledger", 1, torn=True),  # half a record on disk
        "atomic": Fault(code, "atomic", 1),
        "every write": Fault(code, None, 1),  # nothing can be written, the blocker neither
        "copy": Fault(code, "copy", 1),  # the first failure scene being sealed
    }
    stops = {name: sweep_with_fault(root, fault) for name, fault in legs.items()}
    assert [name for name, stop in stops.items() if stop is None] == []
    outcome = run_sweep(load_session(root), say=lambda _: None)
    assert outcome is not None and outcome.outcome == "base"
    assert sweep_outcome(root) == expected
    assert verify(root).ok and session_processes(root) == []
    trial_keys = [(r.data["round"], r.data["phase"]) for r in read_records(root) if r.kind == "trial_result"]
    assert len(trial_keys) == len(set(trial_keys))
    # the manifest of the record the ledger leg's fault cut off vouches for nothing: the next leg dropped it
    assert run_cli(analyze_cli, "sk-analyze", ["ledger", "verify", str(root)]) == 0


def test_tampered_ledger_or_matrix_refuses_resume(tmp_path: Path) -> None:
    root = tmp_path / "s"
    run_sweep(small_session(root, ["split-mode-3"]), say=lambda _: None)
    ledger = root / "ledger.jsonl"

    edited = tmp_path / "edited"
    shutil.copytree(root, edited)
    lines = (edited / "ledger.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    lines[5] = lines[5].replace('"ok": true', '"ok": false', 1) if '"ok": true' in lines[5] else lines[5].replace("O0", "O9", 1)
    (edited / "ledger.jsonl").write_text("".join(lines), encoding="utf-8")
    assert not verify(edited).ok
    with pytest.raises(IntegrityError):
        load_session(edited)

    matrix_edit = tmp_path / "matrix"
    shutil.copytree(root, matrix_edit)
    text = (matrix_edit / "matrix.json").read_text(encoding="utf-8").replace('"risk": "low"', '"risk": "medium"', 1)
    (matrix_edit / "matrix.json").write_text(text, encoding="utf-8")
    with pytest.raises(IntegrityError, match="edited after freezing"):
        run_sweep(load_session(matrix_edit), say=lambda _: None)

    truncated = tmp_path / "truncated"
    shutil.copytree(root, truncated)
    (truncated / "ledger.jsonl").write_text("".join(ledger.read_text(encoding="utf-8").splitlines(keepends=True)[:-1]), encoding="utf-8")
    assert [p.code for p in verify(truncated).problems] == ["head"]
    assert load_json_file(root / "handoff.json")["outcome"] == "base"


def test_resume_reverifies_the_incumbent(tmp_path: Path) -> None:
    root = tmp_path / "s"
    session = small_session(root, ["split-mode-3"])
    assert run_sweep(session, say=lambda _: None, max_actions=3) is None  # freeze, O0 runs, O0 stability
    assert [r.kind for r in read_records(root)][-1] == "stability_result"
    log = root / "experiments/Sbest/O0-INCUMBENT/CLEAN/run-2/log_1.log"
    log.write_text(log.read_text(encoding="utf-8").replace("Inference time (decode): 1", "Inference time (decode): 2", 1), encoding="utf-8")
    with pytest.raises(IntegrityError, match="run-2/log_1.log: rank log changed"):
        run_sweep(load_session(root), say=lambda _: None)
