"""Fault injection: SIGKILL or SIGINT the sweep at random points, or ENOSPC/EIO at every write site,
resume, and get the same BASE, matrix and gate numbers."""

from __future__ import annotations

import errno
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sk_analytics.errors import IntegrityError
from sk_analytics.io_seam import Fault
from sk_analytics.ledger import read_records, verify
from sk_analytics.strict_json import load_json_file
from sk_runner.sweep.driver import run_sweep
from sk_runner.sweep.session import load_session
from sweep_helpers import session_processes, small_session, sweep_outcome, sweep_with_fault

pytestmark = pytest.mark.slow

ENTRIES = ["auto-op-parallel-1", "aggressive-task1-value0", "split-mode-3"]
REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[tuple, float]:
    root = tmp_path_factory.mktemp("ref") / "s"
    started = time.monotonic()
    run_sweep(small_session(root, ENTRIES, noise=1.0), say=lambda _: None)
    return sweep_outcome(root), time.monotonic() - started


def _signal_sweep_after(root: Path, delay_s: float, sig: signal.Signals = signal.SIGKILL) -> bool:
    """Start ``sk-run sweep --resume`` in its own process group and signal the group after ``delay_s``.

    SIGINT is what a terminal's Ctrl-C sends to the foreground group: sk-run stops
    promptly with exit 130 and leaves nothing running. True when the signal landed.
    """
    code = "from sk_runner.cli import main; main()"
    proc = subprocess.Popen([sys.executable, "-c", code, "sweep", "--resume", str(root), "--quiet"], cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        proc.communicate(timeout=delay_s)
        return False  # finished before the signal
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, sig)
        _, err = proc.communicate(timeout=30)  # promptly
        if proc.returncode == 0 and sig != signal.SIGKILL:
            return False  # the sweep had finished and was exiting: the late signal changes nothing
        if sig != signal.SIGKILL:
            assert proc.returncode == 130, f"{sig.name}: exit {proc.returncode}: {err.decode()}"
            lines = err.decode().strip().splitlines()
            assert lines[-1] == "sk-run: interrupted"
            # once the sweep runs (not while Python still imports), the resume command is printed
            assert [x for x in lines if x.startswith("continue with")] in ([], [f"continue with: sk-run sweep --resume {root}"])
        deadline = time.monotonic() + 10
        while session_processes(root):
            assert time.monotonic() < deadline, f"alive after {sig.name}: {session_processes(root)}"
            time.sleep(0.05)
        return True


def _first_signal_lands(root: Path, delay_s: float, sig: signal.Signals) -> int:
    """Signal a fresh sweep after ``delay_s``; when the sweep finished first (the reference run that
    sized the delays was slower than this one), start again from a fresh session with half the delay,
    so the test always exercises a real interruption. Returns the number of signals that landed (1)."""
    for _ in range(5):
        shutil.rmtree(root, ignore_errors=True)
        small_session(root, ENTRIES, noise=1.0)
        if _signal_sweep_after(root, delay_s, sig):
            return 1
        delay_s = max(0.5, delay_s / 2)
    raise AssertionError(f"the sweep always finished before {sig.name} (last delay {delay_s:.1f} s)")


@pytest.mark.parametrize(("seed", "sig"), [(11, signal.SIGKILL), (23, signal.SIGKILL), (37, signal.SIGKILL),
                                           (5, signal.SIGINT), (19, signal.SIGINT)],
                         ids=["SIGKILL-11", "SIGKILL-23", "SIGKILL-37", "SIGINT-5", "SIGINT-19"])
def test_signal_and_resume_reaches_same_result(seed: int, sig: signal.Signals, tmp_path: Path, reference: tuple[tuple, float]) -> None:
    expected, duration = reference
    rng = random.Random(seed)
    root = tmp_path / "s"
    kills = _first_signal_lands(root, rng.uniform(1.0, max(2.0, duration * 0.8)), sig)
    # a second signal at a random point (it may land after the sweep finished), then an uninterrupted resume
    kills += _signal_sweep_after(root, rng.uniform(1.0, max(2.0, duration * 0.8)), sig)
    assert verify(root).ok  # a killed sweep never leaves a broken ledger
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
    assert kills >= 1
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
