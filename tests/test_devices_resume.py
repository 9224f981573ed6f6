"""The lease request is part of the session (issue 45): recorded at creation, taken again by every ``--resume`` --
after a lease that blocked, after a SIGKILL in the incumbent's runs, a trial's probe or its clean runs -- and
simulated sessions that name no registry never see each other.

Sweeps are small simulator sessions (two ranks, one matrix entry, no noise); every wait is on a file or a lock the
sweep writes, never a sleep that decides an outcome."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from campaign_helpers import write_task
from sweep_helpers import SHORT_PROFILE_POLICY, session_processes, small_session, sweep_outcome
from test_devices_lease import _busy, _trial_args, holding, sk_run

from sk_analytics.ledger.chain import read_records
from sk_runner.devices.lease import LeaseRequest, lock_path
from sk_runner.devices.markers import Need
from sk_runner.devices.registry import REGISTRY_ENV, private_registry
from sk_runner.sweep.leasing import request_record

pytestmark = pytest.mark.slow

ENTRIES = ["auto-op-parallel-1"]
SK_RUN = [sys.executable, "-c", "from sk_runner.cli import main; main()"]


@pytest.fixture(autouse=True)
def _stable_source_revision(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in test_devices_sweep: the collections record this checkout's git state; pin it against edits elsewhere."""
    import sk_runner.profile.engine as profile

    monkeypatch.setattr(profile, "source_revision", lambda path, files=(): {"revision": "pinned-for-test"})


def _leased_session(root: Path, locks: Path, ids: tuple[int, ...] = (0, 1)) -> None:
    """A small session created, as `sk-run sweep` creates one, with its lease request recorded."""
    small_session(root, ENTRIES, lease=request_record(LeaseRequest(Need(str(locks), ids)), "options"))


def _printed_command(stderr: str) -> list[str]:
    """The command an exit-3 line ends with (``... then: sk-run sweep --resume S``), as argv for this interpreter."""
    last = stderr.strip().splitlines()[-1]
    words = last.rsplit(": ", 1)[1].split()
    assert words[:3] == ["sk-run", "sweep", "--resume"], last
    return [*SK_RUN, *words[1:]]


def _verify(root: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from sk_analytics.cli import main; main()", "ledger", "verify", str(root)],
                          capture_output=True, text=True, check=False)


def _trial_leases(root: Path) -> list[dict[str, object]]:
    return [r.data["lease"] for r in read_records(root) if r.kind == "trial_result"]


def _wait_for(what: Callable[[], bool], proc: subprocess.Popen[str], bound_s: float = 600) -> None:
    """Until ``what()`` holds (``proc`` still running); the bound only matters when something is broken."""
    deadline = time.monotonic() + bound_s
    while not what():
        assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
        assert time.monotonic() < deadline, "the sweep never got there"
        time.sleep(0.02)


def _foreign_flock_fails(path: Path) -> bool:
    """A foreign tenant's non-blocking flock on ``path``: True when it fails (someone holds the lease)."""
    done = subprocess.run([sys.executable, "-c", "import fcntl, os, sys\n"
                           "fd = os.open(sys.argv[1], os.O_RDWR)\n"
                           "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept BlockingIOError:\n    sys.exit(7)\n",
                           str(path)], check=False)
    return done.returncode == 7


def test_a_demo_started_with_a_lease_records_it_and_every_resume_takes_it(tmp_path: Path) -> None:
    """Blocked at its first device command (the probes), the demo's printed resume takes the same lease again:
    with the holder still there it is blocked again (never runs unleased); naming other devices is exit 2."""
    root, locks = tmp_path / "demo", tmp_path / "locks"
    with holding(locks, "1"):
        first = sk_run("sweep", "--demo", "--quiet", "--session", str(root), "--ranks", "2", "--iterations", "10",
                       "--lease-root", str(locks), "--device-id", "0", "--device-id", "1", "--lease-timeout", "0.3")
        assert first.returncode == 3, first.stderr
        assert first.stderr.strip().splitlines()[-1].endswith(f"then: sk-run sweep --resume {root}")
        requested = [r.data for r in read_records(root) if r.kind == "lease_requested"]
        assert [(d["root"], d["device_ids"], d["unleased"], d["source"]) for d in requested] == [(str(locks), [0, 1], False, "options")]
        again = subprocess.run([*_printed_command(first.stderr), "--quiet", "--lease-timeout", "0.3"], capture_output=True, text=True,
                               check=False, timeout=300)
    assert again.returncode == 3 and "NPU 1 is still leased by" in again.stderr, again.stderr
    assert [r.kind for r in read_records(root)].count("lease_blocked") == 2
    assert not [r for r in read_records(root) if r.kind == "trial_result"]
    other = sk_run("sweep", "--resume", str(root), "--lease-root", str(locks), "--device-id", "2")
    assert other.returncode == 2 and f"recorded devices 0,1 under {locks}" in other.stderr
    assert other.stderr.strip().endswith(f"resume with no lease options: sk-run sweep --resume {root}")


def test_blocked_at_the_lease_then_resumed_with_the_printed_command_runs_every_trial_leased(tmp_path: Path) -> None:
    root, locks = tmp_path / "s", tmp_path / "locks"
    _leased_session(root, locks)
    with holding(locks, "1"):
        blocked = sk_run("sweep", "--quiet", "--resume", str(root), "--lease-timeout", "0.3")
    assert blocked.returncode == 3, blocked.stderr
    resumed = subprocess.Popen([*_printed_command(blocked.stderr), "--quiet"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        first_run = root / "experiments/Sbest/O0-INCUMBENT/CLEAN/run-1/meta.json"
        _wait_for(first_run.is_file, resumed)  # the incumbent's first clean run is sealed: four more and a trial to come
        assert _foreign_flock_fails(lock_path(locks, 0)) and _foreign_flock_fails(lock_path(locks, 1))
        assert resumed.wait(timeout=900) == 0, resumed.stderr.read() if resumed.stderr else ""
    finally:
        if resumed.poll() is None:
            resumed.kill()
            resumed.wait()
    leases = _trial_leases(root)
    assert len(leases) >= 2 and all(lease == {"mode": "acquired", "root": str(locks), "device_ids": [0, 1], "proof": "sim-registry"}
                                    for lease in leases)
    verified = _verify(root)
    assert verified.returncode == 0 and "unleased" not in verified.stdout, verified.stdout + verified.stderr
    assert not _busy(lock_path(locks, 0))


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, ...]:
    """The decisions of the same leased session, uninterrupted."""
    base = tmp_path_factory.mktemp("ref")
    root = base / "s"
    _leased_session(root, base / "locks")
    done = sk_run("sweep", "--quiet", "--resume", str(root), timeout=900)
    assert done.returncode == 0, done.stderr
    return sweep_outcome(root)


def _sigkill_inside_the_lease(root: Path, locks: Path, reached: Path) -> None:
    """Resume the session, SIGKILL its sk-run once ``reached`` exists (under the lease), and wait until nothing of it is left."""
    proc = subprocess.Popen([*SK_RUN, "sweep", "--quiet", "--resume", str(root)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        _wait_for(reached.exists, proc)
        assert _busy(lock_path(locks, 0))  # killed inside its lease
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    _nothing_left(root, locks)


def _nothing_left(root: Path, locks: Path, bound_s: float = 60) -> None:
    """Wait until no process of the session is left and the kernel dropped its locks (an exiting process's command line
    reads empty before its files are closed: the locks, not only the process list, say when it is gone)."""
    deadline = time.monotonic() + bound_s  # the kernel drops the locks with sk-run; its keeper and watchdog end the rest
    while session_processes(root) or _busy(lock_path(locks, 0)) or _busy(lock_path(locks, 1)):
        assert time.monotonic() < deadline, f"left running: {session_processes(root)}"
        time.sleep(0.05)


KILL_POINTS = {
    "O0-correctness": "experiments/Sbest/O0-INCUMBENT/CORRECTNESS",
    "O0-clean-run": "experiments/Sbest/O0-INCUMBENT/CLEAN/run-2",
    "trial-probe": "experiments/Sbest/O1/PROBE",
    "trial-clean-run": "experiments/Sbest/O1/CLEAN/run-2",
}


@pytest.mark.parametrize("point", sorted(KILL_POINTS))
def test_a_leased_sweep_killed_at_any_point_resumes_with_the_printed_command_to_the_reference(
        tmp_path: Path, point: str, reference: tuple[object, ...]) -> None:
    root, locks = tmp_path / "s", tmp_path / "locks"
    _leased_session(root, locks)
    _sigkill_inside_the_lease(root, locks, root / KILL_POINTS[point])
    resumed = sk_run("sweep", "--quiet", "--resume", str(root), timeout=900)  # the command the docs and every stop print
    assert resumed.returncode == 0, resumed.stderr
    assert sweep_outcome(root) == reference
    assert all(lease["mode"] == "acquired" and lease["device_ids"] == [0, 1] for lease in _trial_leases(root))
    verified = _verify(root)
    assert verified.returncode == 0 and "unleased" not in verified.stdout, verified.stdout + verified.stderr


DCCI_ENTRIES = ["dcci-disable-all"]


@pytest.fixture(scope="module")
def dcci_reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, ...]:
    """The decisions of a leased session whose DCCI family collects a profile pair, uninterrupted."""
    base = tmp_path_factory.mktemp("dcci-ref")
    small_session(base / "s", DCCI_ENTRIES, network="moe-decode", policy=SHORT_PROFILE_POLICY,
                  lease=request_record(LeaseRequest(Need(str(base / "locks"), (0, 1))), "options"))
    done = sk_run("sweep", "--quiet", "--resume", str(base / "s"), timeout=900)
    assert done.returncode == 0, done.stderr
    return sweep_outcome(base / "s")


def test_a_leased_sweep_killed_in_a_dcci_collection_resumes_under_the_same_lease(tmp_path: Path,
                                                                                 dcci_reference: tuple[object, ...]) -> None:
    root, locks = tmp_path / "s", tmp_path / "locks"
    small_session(root, DCCI_ENTRIES, network="moe-decode", policy=SHORT_PROFILE_POLICY,
                  lease=request_record(LeaseRequest(Need(str(locks), (0, 1))), "options"))
    _sigkill_inside_the_lease(root, locks, root / "experiments/Sbest/DCCI/diag/baseline_profile")  # the incumbent's collection runs
    resumed = sk_run("sweep", "--quiet", "--resume", str(root), timeout=900)
    assert resumed.returncode == 0, resumed.stderr
    assert sweep_outcome(root) == dcci_reference
    leases = [r.data["lease"] for r in read_records(root) if r.kind in ("trial_result", "profile_result")]
    assert [r.data["side"] for r in read_records(root) if r.kind == "profile_result"] == ["o0", "disable_all"]
    assert leases and all(lease["mode"] == "acquired" and lease["root"] == str(locks) for lease in leases)  # both sides leased
    verified = _verify(root)
    assert verified.returncode == 0 and "unleased" not in verified.stdout, verified.stdout + verified.stderr


def test_two_simulated_sweeps_at_once_each_on_its_own_simulated_host(tmp_path: Path) -> None:
    """Neither names a registry: each gets its own under its session, so the clean-device proof of one never sees the
    other's simulated processes on the same NPU numbers (as two `make demo` on one machine)."""
    env = {k: v for k, v in os.environ.items() if k != REGISTRY_ENV}
    roots = [tmp_path / "a", tmp_path / "b"]
    for root in roots:
        _leased_session(root, root / ".device-leases")  # each leases NPUs 0-1 under its own session, as the demo does
    procs = [subprocess.Popen([*SK_RUN, "sweep", "--quiet", "--resume", str(root), "--lease-timeout", "5"], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for root in roots]
    try:
        codes = [p.wait(timeout=900) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    assert codes == [0, 0], [p.stderr.read() if p.stderr else "" for p in procs]
    for root in roots:
        assert (private_registry(root) / "npu-0").is_dir()  # its simulated processes registered on its own host
        assert not list(root.glob("experiments/Sbest/*/foreign-processes.jsonl"))
        assert _verify(root).returncode == 0


def test_a_foreign_load_on_the_users_registry_no_longer_stalls_a_private_session(tmp_path: Path) -> None:
    """`sk-run sim --foreign-load` on the per-user registry used to make every demo wait to its timeout."""
    env = {k: v for k, v in os.environ.items() if k != REGISTRY_ENV}
    env["TMPDIR"] = str(tmp_path)  # the per-user registry of this test: <tmp>/sk-tune-sim-devices-<uid>
    stop = tmp_path / "stop"
    load = subprocess.Popen([*SK_RUN, "sim", "--foreign-load", "0", "--slowdown", "1.5", "--until-file", str(stop)], env=env,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert load.stdout is not None and load.stdout.readline().startswith("foreign load on NPU 0")
        root = tmp_path / "s"
        _leased_session(root, root / ".device-leases")
        done = subprocess.run([*SK_RUN, "sweep", "--quiet", "--resume", str(root), "--lease-timeout", "2"], env=env, capture_output=True,
                              text=True, timeout=900, check=False)
    finally:
        stop.write_text("")
        load.wait(timeout=60)
    assert done.returncode == 0, done.stderr
    assert not list(root.glob("experiments/Sbest/*/foreign-processes.jsonl"))


# -- killed at a write of its own: in the matrix probes, in the hand-off, in a `sk-run trial` round --------------------------
_HOLD_AT_WRITE = """
import os, re, signal, sys
from pathlib import Path
from sk_analytics.files import io_seam

pattern, reached = re.compile(sys.argv[1]), Path(sys.argv[2])

class HoldAt(io_seam.FaultPlan):
    def hit(self, site, path):
        if site != io_seam.READ and pattern.search(os.path.abspath(path)):
            reached.write_text(site + " " + os.path.abspath(path))
            while True:
                signal.pause()  # held before this write until the test's SIGKILL
        return None

io_seam._ACTIVE = HoldAt(None)
sys.argv = ["sk-run", *sys.argv[3:]]
from sk_runner.cli import main
main()
"""


def _killed_at_write(root: Path, locks: Path, pattern: str, *args: str) -> str:
    """Run ``sk-run args``, hold it before its first write whose absolute path matches ``pattern`` (so the point is the
    test's choice, never a delay's), check that it holds its lease there, SIGKILL it and wait until nothing of it is
    left; the write it was killed before (``site path``)."""
    reached, err = root.parent / f"{root.name}.reached", root.parent / f"{root.name}.stderr"
    with err.open("w") as stderr:
        proc = subprocess.Popen([sys.executable, "-c", _HOLD_AT_WRITE, pattern, str(reached), *args], stdout=subprocess.DEVNULL,
                                stderr=stderr, text=True)
        try:
            deadline = time.monotonic() + 600  # the bound only matters when something is broken
            while not reached.exists():
                assert proc.poll() is None, f"sk-run ended ({proc.returncode}) before the write: {err.read_text()[-3000:]}"
                assert time.monotonic() < deadline, "sk-run never got to the write"
                time.sleep(0.02)
            assert _busy(lock_path(locks, 0)) and _busy(lock_path(locks, 1))  # killed inside its lease
            proc.send_signal(signal.SIGKILL)
            assert proc.wait(timeout=60) == -signal.SIGKILL
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    _nothing_left(root, locks)
    return reached.read_text()


def _all_leased(root: Path, locks: Path) -> None:
    """Every trial record of the session ran under its recorded lease, and ``ledger verify`` passes with no unleased note."""
    leases = _trial_leases(root)
    assert leases and all((lease["mode"], lease["root"], lease["device_ids"]) == ("acquired", str(locks), [0, 1]) for lease in leases), leases
    verified = _verify(root)
    assert verified.returncode == 0 and "unleased" not in verified.stdout, verified.stdout + verified.stderr


def _leased_task_session(base: Path, locks: Path) -> Path:
    """A task's session entered with a lease and not run yet (``--plan-only``): its matrix is built from probes when it runs."""
    task = write_task(base / "task", seed=3)  # one listed value: one probe process
    root = base / "s"
    made = sk_run("sweep", "--task", str(task), "--session", str(root), "--plan-only", "--lease-root", str(locks), "--device-id", "0-1")
    assert made.returncode == 0, made.stderr
    assert not (root / "matrix.json").exists()
    return root


@pytest.fixture(scope="module")
def task_reference(tmp_path_factory: pytest.TempPathFactory) -> tuple[object, ...]:
    """The decisions of the same leased task session, uninterrupted (its probes included)."""
    base = tmp_path_factory.mktemp("task-ref")
    root = _leased_task_session(base, base / "locks")
    done = sk_run("sweep", "--quiet", "--resume", str(root), timeout=900)
    assert done.returncode == 0, done.stderr
    return sweep_outcome(root)


def test_a_leased_sweep_killed_in_its_matrix_probes_resumes_with_the_printed_command_to_the_reference(
        tmp_path: Path, task_reference: tuple[object, ...]) -> None:
    """Killed after the value's probe process ran, before its evidence was written: the resume probes again under the
    same lease, builds the same matrix and decides as the uninterrupted session."""
    locks = tmp_path / "locks"
    root = _leased_task_session(tmp_path, locks)
    held = _killed_at_write(root, locks, r"/PROBES/.*/probe\.json$", "sweep", "--quiet", "--resume", str(root))
    assert "/PROBES/" in held and not (root / "matrix.json").exists()  # killed inside the probe phase
    resumed = sk_run("sweep", "--quiet", "--resume", str(root), timeout=900)  # the command every stop prints
    assert resumed.returncode == 0, resumed.stderr
    assert sweep_outcome(root) == task_reference
    _all_leased(root, locks)


HANDOFF_WRITES = {"handoff-file": "handoff.json", "handoff-report": "EXPERIMENT_REPORT.md"}
"""The hand-off's own file, and the first report written after it (before the ``handoff_written`` record)."""


@pytest.mark.parametrize("point", sorted(HANDOFF_WRITES))
def test_a_leased_sweep_killed_in_its_hand_off_resumes_with_the_printed_command_to_the_reference(
        tmp_path: Path, point: str, reference: tuple[object, ...]) -> None:
    root, locks = tmp_path / "s", tmp_path / "locks"
    _leased_session(root, locks)
    name = HANDOFF_WRITES[point]
    held = _killed_at_write(root, locks, f"^{re.escape(str(root.absolute()))}/{re.escape(name)}$", "sweep", "--quiet", "--resume", str(root))
    assert held.endswith(f"/{name}")
    kinds = [r.kind for r in read_records(root)]
    assert "base_frozen" in kinds and "handoff_written" not in kinds  # after the last decision, inside the hand-off
    resumed = sk_run("sweep", "--quiet", "--resume", str(root), timeout=900)
    assert resumed.returncode == 0, resumed.stderr
    assert sweep_outcome(root) == reference
    assert [r.kind for r in read_records(root)].count("handoff_written") == 1
    _all_leased(root, locks)


def test_a_leased_trial_killed_in_a_clean_run_run_again_without_lease_options_takes_its_lease(tmp_path: Path) -> None:
    """`sk-run trial` rounds: the round's lease-request.json is the lease a rerun takes, also after a SIGKILL inside it."""
    locks = tmp_path / "locks"
    args = _trial_args(tmp_path, "O1", change="/super_kernel_optimize_options/auto_op_parallel=1")
    held = _killed_at_write(tmp_path / "session", locks, r"/O1/CLEAN/run-2/", *args[: args.index("--")],
                            "--lease-root", str(locks), "--device-id", "0-1", *args[args.index("--"):])
    assert "/O1/CLEAN/run-2/" in held
    round_dir = tmp_path / "session/experiments/Sbest/O1"
    assert not (round_dir / "CLEAN/run-3").exists()
    again = sk_run(*args)  # the same command, no lease options: the round's recorded lease
    assert again.returncode == 0, again.stderr
    metas = sorted(round_dir.glob("CLEAN/run-*/meta.json"))
    assert [m.parent.name for m in metas] == ["run-1", "run-2", "run-3"]
    for meta in (round_dir / "CORRECTNESS/meta.json", *metas):
        lease = json.loads(meta.read_text())["lease"]
        assert (lease["mode"], lease["root"], lease["device_ids"]) == ("acquired", str(locks), [0, 1]), meta
