"""Environment faults never decide: ENOSPC/EIO at the sweep's write sites, or a real full disk, stop it as a
blocker, and ``--resume`` reaches the same Sbest-BASE, options and gate numbers as an uninterrupted sweep.

(A workload that died of a full disk: tests/test_runner_trial.py; every site with both errnos:
tests/test_sweep_resume.py, slow.)"""

from __future__ import annotations

import errno
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from sweep_helpers import FAST_POLICY, SMALL, session_processes, small_session, sweep_outcome, sweep_with_fault

from sk_analytics.files.io_seam import Fault, inject
from sk_analytics.ledger.chain import read_records, verify
from sk_analytics.session_view import load_environment_blockers
from sk_runner.sweep.demo import DEMO_SEED_CONFIG
from sk_runner.sweep.driver import run_sweep
from sk_runner.sweep.session import BackendSpec, create_session, load_session

ENTRIES = ["split-mode-3"]


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[tuple, dict[str, int], Path, list[str]]:
    """The uninterrupted sweep's outcome, how many writes it made at each site, its folder and the files it read in order."""
    root = tmp_path_factory.mktemp("ref") / "s"
    small_session(root, ENTRIES, noise=1.0)
    with inject(None) as plan:  # as sweep_with_fault runs it, so the n-th read is the same file there
        run_sweep(load_session(root), say=lambda _: None)
    counts: dict[str, int] = {}
    for site, _ in plan.writes:
        counts[site] = counts.get(site, 0) + 1
    return sweep_outcome(root), counts, root, plan.reads


def test_faults_at_seeded_write_sites_resume_to_the_same_base(tmp_path: Path, reference: tuple[tuple, dict[str, int], Path, list[str]]) -> None:
    expected, counts, _, _ = reference
    assert {"atomic", "parquet", "ledger"} <= set(counts)
    rng = random.Random(2026)
    root = tmp_path / "s"
    small_session(root, ENTRIES, noise=1.0)
    legs = [Fault(errno.ENOSPC, "parquet", rng.randint(1, counts["parquet"] // 4)),
            Fault(errno.EIO, "ledger", rng.randint(1, 2), torn=True),  # a record cut in the middle of its line
            Fault(errno.ENOSPC, "atomic", rng.randint(1, counts["atomic"] // 4)),
            Fault(errno.ENOSPC, None, rng.randint(1, 10))]  # the disk is full for every write: the blocker cannot be recorded
    stops = [sweep_with_fault(root, fault) for fault in legs]
    assert all(stop is not None for stop in stops)
    assert "(EIO)" in stops[1].one_line() and "(ENOSPC)" in stops[0].one_line()  # type: ignore[union-attr]
    assert "not recorded" in stops[3].one_line()  # type: ignore[union-attr]
    # recorded as environment blockers for the report (protocol §8), never as a decision in the ledger
    blockers = load_environment_blockers(root)
    assert len(blockers) == 3 and {b["errno"] for b in blockers} == {"ENOSPC", "EIO"}
    decided = [r for r in read_records(root) if "environment" in str(r.data.get("reason", "")).lower()]
    assert decided == []
    outcome = run_sweep(load_session(root), say=lambda _: None)
    assert outcome is not None and outcome.outcome == "base"
    assert sweep_outcome(root) == expected
    assert verify(root).ok and list(root.glob("ledger.jsonl.torn-*"))
    assert session_processes(root) == []


def test_read_fault_in_a_trials_analysis_decides_nothing(tmp_path: Path, reference: tuple[tuple, dict[str, int], Path, list[str]]) -> None:
    """EIO reading a rank log of the O1 trial: not a bad-logs failure of the option but a recorded blocker
    (exit 3) with nothing of O1 in the ledger; ``--resume`` then reaches the uninterrupted BASE."""
    expected, _, ref_root, reads = reference
    trial_logs = str(ref_root / "experiments" / "Sbest" / "O1" / "CLEAN")
    nth, log = next((n, path) for n, path in enumerate(reads, start=1) if path.startswith(trial_logs) and path.endswith("log_1.log"))
    root = tmp_path / "s"
    small_session(root, ENTRIES, noise=1.0)
    stop = sweep_with_fault(root, Fault(errno.EIO, "read", nth))
    assert stop is not None and stop.exit_code == 3
    line = stop.one_line()
    assert log.replace(str(ref_root), str(root)) in line and "(EIO)" in line and "nothing was decided" in line
    assert [(b["round"], b["errno"]) for b in load_environment_blockers(root)] == [("O1", "EIO")]
    assert [r.kind for r in read_records(root) if r.data.get("round") == "O1" or r.kind == "entry_settled"] == []
    outcome = run_sweep(load_session(root), say=lambda _: None)
    assert outcome is not None and outcome.outcome == "base"
    assert sweep_outcome(root) == expected and verify(root).ok
    assert session_processes(root) == []


def _used_kib(folder: Path) -> int:
    """Disk use of a folder in KiB, counted in blocks like a file system does."""
    return int(subprocess.run(["du", "-sk", str(folder)], capture_output=True, text=True, check=True).stdout.split()[0])


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Path]:
    """A small RAM file system of our own (needs root and a kernel that lets us mount one)."""
    mount = tmp_path / "mnt"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root; the injected ENOSPC tests cover the same paths without one")
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64m", "tmpfs", str(mount)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.strip()}); the injected ENOSPC tests cover the same paths")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


def _sk_run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from sk_runner.cli import main; main()", *args], capture_output=True, text=True,
                          timeout=600)


@pytest.mark.slow
def test_real_full_disk_then_resume(tmpfs: Path, reference: tuple[tuple, dict[str, int], Path, list[str]]) -> None:
    """A real full disk (a tmpfs smaller than the session): exit 3 with a blocker, then after more space the same BASE."""
    expected, _, ref_root, _ = reference
    root = tmpfs / "s"
    small_session(root, ENTRIES, noise=1.0)
    free_kib = (_used_kib(ref_root) - _used_kib(root)) // 2  # the disk fills up half-way through the sweep
    ballast = tmpfs / "ballast"
    with open(ballast, "wb") as fh:
        os.posix_fallocate(fh.fileno(), 0, (os.statvfs(tmpfs).f_bavail * os.statvfs(tmpfs).f_frsize) - free_kib * 1024)
    full = _sk_run("sweep", "--resume", str(root), "--quiet")
    assert full.returncode == 3, full.stderr
    lines = full.stderr.strip().splitlines()
    assert len(lines) == 1 and "ENOSPC" in lines[0] and "nothing was decided" in lines[0], lines
    assert lines[0].endswith(f"Free the cause, then: sk-run sweep --resume {root}")
    assert session_processes(root) == []
    ballast.unlink()  # the user frees space
    resumed = _sk_run("sweep", "--resume", str(root), "--quiet")
    assert resumed.returncode == 0, resumed.stderr
    assert sweep_outcome(root) == expected and verify(root).ok
    assert session_processes(root) == []


def _create(root: Path) -> None:
    create_session(root, dict(DEMO_SEED_CONFIG), seed=7, backend=BackendSpec("sim", None, 0.0), control=SMALL, policy=FAST_POLICY)


_KILL_AT_WRITE = """
import os, signal, sys
sys.path.insert(0, {tests!r})
from sk_analytics.files import io_seam
from test_sweep_faults import _create

class KillAt(io_seam.FaultPlan):
    def hit(self, site, path):
        if site == io_seam.READ:  # creation reads its SEED and ledger back: kill at writes only
            return None
        self.writes.append((site, path))
        if len(self.writes) == {n}:
            os.kill(os.getpid(), signal.SIGKILL)
        return None

io_seam._ACTIVE = KillAt(None)
_create(__import__("pathlib").Path({root!r}))
"""


def test_interrupted_session_creation_leaves_nothing_half_made(tmp_path: Path) -> None:
    """A fault or SIGKILL at every write of the creation: the folder is absent, and the same creation then works."""
    with inject(None) as plan:
        _create(tmp_path / "count")
    writes = len(plan.writes)
    assert [site for site, _ in plan.writes] == ["atomic", "atomic", "atomic", "ledger", "atomic"]  # SEED, session.json, evidence manifest, record, head
    for n in range(1, writes + 1):
        root = tmp_path / f"fault-{n}"
        with inject(Fault(errno.ENOSPC, None, n)), pytest.raises(OSError):
            _create(root)
        assert not root.exists() and not list(tmp_path.glob(f".creating-fault-{n}.*"))
        _create(root)
        assert load_session(root).seed == 7
    for n in (1, 2, 3):  # killed: a dead creator's folder is left, and dropped by the next creation
        root = tmp_path / f"kill-{n}"
        code = _KILL_AT_WRITE.format(tests=str(Path(__file__).parent), n=n, root=str(root))
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
        assert done.returncode == -9, done.stderr
        assert not root.exists() and len(list(tmp_path.glob(f".creating-kill-{n}.*"))) == 1
        _create(root)
        assert load_session(root).seed == 7 and not list(tmp_path.glob(f".creating-kill-{n}.*"))


def test_environment_stop_names_the_record_inside_a_session_given_by_a_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A trial records its blocker under an absolute path; the sweep of a session named relative to the current folder
    said 'internal error' (relative_to of an absolute path under a relative root) instead of the environment stop."""
    from sk_analytics.errors import EnvironmentBlocker
    from sk_runner.sweep.faults import environment_stop

    session = tmp_path / "work" / "session"
    recorded = session / "experiments" / "Sbest" / "O1" / "environment-blockers.jsonl"
    recorded.parent.mkdir(parents=True)
    recorded.write_text("{}\n")
    blocker = EnvironmentBlocker("the source revision differs from the recorded one")
    blocker.recorded_in = recorded  # absolute, as the trial writes it
    monkeypatch.chdir(tmp_path / "work")
    stop = environment_stop(Path("session"), None, blocker)
    assert stop is not None
    text = stop.one_line()
    assert "recorded in experiments/Sbest/O1/environment-blockers.jsonl" in text
    assert f"sk-run sweep --resume {session}" in text  # runs from any folder


def test_environment_stop_outside_any_action_says_session_once(tmp_path: Path) -> None:
    """A stop before any action (the lease of a sweep's first device command) read 'SESSION session: NPU 0 is …'."""
    from sk_analytics.errors import EnvironmentBlocker
    from sk_runner.sweep.faults import environment_stop

    stop = environment_stop(tmp_path, None, EnvironmentBlocker("NPU 0 is still leased by unknown holder after 3.0 s"))
    assert stop is not None
    assert stop.one_line().startswith("session: NPU 0 is still leased by unknown holder after 3.0 s; nothing was decided "
                                      "(recorded in experiments/Sbest/SESSION/environment-blockers.jsonl). Free the cause, then: "
                                      f"sk-run sweep --resume {tmp_path}")
