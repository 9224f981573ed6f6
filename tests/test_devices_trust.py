"""Leases you can trust (issue 45): inherited markers are proven, a lost lock is seen between runs, error lines stay
short, simulated sessions have their own registry, real NPUs are leased unless the user opts out, finite timeouts.

Lock holders are plain-Python processes (tests/test_devices_lease.py); readiness comes through their stdout pipes."""

from __future__ import annotations

import fcntl
import json
import os
import re
import socket
import sys
from pathlib import Path

import pytest
from test_devices_lease import _busy, _trial_args, holding, record_holding, sk_run, under_parent
from zh_words import stray_english

from sk_analytics.errors import EnvironmentBlocker, UsageError
from sk_analytics.messages import coded, render
from sk_runner.devices.holders import ancestors, command_of, flock_holders, kernel_holder, lock_holders, ofd_holders, parse_proc_locks
from sk_runner.devices.lease import (
    INHERITED,
    HeldLease,
    Holder,
    LeaseRequest,
    LeaseStale,
    acquire,
    lock_path,
    prove_inherited,
    read_holder,
    take,
)
from sk_runner.devices.markers import HELD, IDS, ROOT, Need
from sk_runner.devices.occupancy import LOCK_SOURCE, DeviceProcess
from sk_runner.devices.options import lease_request, require_lease, rerun_options, resume_request
from sk_runner.devices.proof import WHO_LIMIT, CleanDeviceProof, Sighting, _who
from sk_runner.devices.registry import REGISTRY_ENV, private_registry, session_registry
from sk_runner.process import command_line


class _Nothing:
    """An occupancy source that sees no process (the lock checks are what is tested)."""

    name = "sim-registry"

    def snapshot(self, devices: tuple[int, ...]) -> list[DeviceProcess]:
        return []


# -- inherited markers are proven ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("files", [False, True])
def test_stale_markers_exit_3_naming_the_device_and_the_markers_and_nothing_runs(tmp_path: Path, files: bool) -> None:
    root = tmp_path / "locks"
    if files:  # the lock files a holder left behind, held by nobody now
        root.mkdir()
        for i in (0, 1):
            lock_path(root, i).write_text("")
    markers = {HELD: "1", IDS: "0,1", ROOT: str(root)}
    done = sk_run(*_trial_args(tmp_path, "O0"), env={**os.environ, **markers})
    assert done.returncode == 3, done.stderr
    line = done.stderr.strip()
    assert line.count("\n") == 0 and line.startswith("sk-run: error: NPU 0 of the inherited lease: ")
    assert ("nobody holds its lock" if files else "its lock file does not exist") in line
    assert "(and 1 more of the 2 marked devices)" in line
    assert f"{HELD}=1, {IDS}=0,1, {ROOT}={root} are stale" in line
    round_dir = tmp_path / "session/experiments/Sbest/O0"
    assert not (round_dir / "CORRECTNESS").exists() and not (round_dir / "PROBE").exists()  # nothing ran
    blocker = json.loads((round_dir / "environment-blockers.jsonl").read_text())
    assert blocker["stage"] == "lease" and blocker["lease_blocked"]["reason"] == "stale_markers"
    assert blocker["lease_blocked"]["device"] == 0
    if files:
        assert not _busy(lock_path(root, 0)) and lock_path(root, 0).read_text() == ""  # no lock taken, nothing written
    else:
        assert not root.exists()


def test_markers_whose_locks_a_stranger_holds_are_refused(tmp_path: Path) -> None:
    """A process outside this one's tree holds both locks (not the parent that exported the markers): refused."""
    root = tmp_path / "locks"
    with holding(root, "0,1") as stranger:
        done = sk_run(*_trial_args(tmp_path, "O0"), env={**os.environ, HELD: "1", IDS: "0,1", ROOT: str(root)})
        assert _busy(lock_path(root, 0))
    assert done.returncode == 3, done.stderr
    assert f"its lock is held by pid {stranger.pid} (" in done.stderr and "a process outside this one's tree" in done.stderr
    assert not (tmp_path / "session/experiments/Sbest/O0/CORRECTNESS").exists()


def test_markers_under_a_holding_parent_are_inherited_and_two_tenants_never_overlap(tmp_path: Path) -> None:
    """The controller's acquire-or-inherit entry: the parent holds the locks, so the child's non-blocking attempt fails
    and it inherits; a second tenant asking for the same devices meanwhile waits and gives up (it never overlaps)."""
    root = tmp_path / "locks"
    root.mkdir()
    done = under_parent(root, "0,1", "", *_trial_args(tmp_path, "O0"))
    assert done.returncode == 0, done.stderr
    meta = json.loads((tmp_path / "session/experiments/Sbest/O0/CLEAN/run-1/meta.json").read_text())
    assert meta["lease"]["mode"] == "inherited"
    with holding(root, "0,1"):
        with pytest.raises(Exception, match="still leased"):
            take(LeaseRequest(Need(str(root), (0, 1)), timeout_s=0.2), env={}, on_wait=None)


def test_prove_inherited_accepts_this_processes_own_holding_and_names_a_stranger(tmp_path: Path) -> None:
    root = tmp_path / "locks"
    need = Need(str(root), (0, 1))
    with acquire(need, timeout_s=1, on_wait=None):
        prove_inherited(need)  # held by this process (our own tree): fine
        assert flock_holders(lock_path(root, 0)) == [os.getpid()]
    with pytest.raises(LeaseStale, match="nobody holds its lock"):
        prove_inherited(need)
    with holding(root, "1") as stranger:
        with pytest.raises(LeaseStale) as info:
            prove_inherited(Need(str(root), (1,)))
    assert info.value.device == 1 and f"pid {stranger.pid}" in info.value.problem and info.value.exit_code == 3


@pytest.mark.parametrize("style", ["lockf", "ofd"])
def test_a_strangers_posix_lock_on_an_inherited_lease_is_named_before_and_between_runs(tmp_path: Path, style: str) -> None:
    """The parent (this process) holds the flock as the protocol asks; a stranger holds a POSIX (or OFD) lock on the
    same file, which the flock does not exclude: the inherited lease is refused, and a held one reports it between runs."""
    root = tmp_path / "locks"
    need = Need(str(root), (0,))
    root.mkdir()
    path = lock_path(root, 0)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        prove_inherited(need)  # only our own flock: fine
        with record_holding(path, style) as stranger:
            assert flock_holders(path) == [os.getpid()] and sorted(lock_holders(path) or ()) == sorted([os.getpid(), stranger.pid])
            with pytest.raises(LeaseStale) as info:
                prove_inherited(need)
            problems = HeldLease(INHERITED, str(root), (0,)).lock_problems()
        assert f"its lock is held by pid {stranger.pid} (" in info.value.problem and "outside this one's tree" in info.value.problem
        assert [(d, f"pid {stranger.pid} (" in render(why, "en")) for d, why in problems] == [(0, True)]
        # the Chinese line of that sighting is Chinese throughout: only the stranger's command line stays as it is
        line = DeviceProcess.lock_lost(0, problems[0][1]).describe("zh")
        command = problems[0][1]["params"]["command"]
        assert line.startswith(f"NPU 0：租约的锁已丢失（其锁由 pid {stranger.pid}（{command}）持有") and command.startswith(sys.executable)
        assert stray_english(line.replace(command, " ")) == [], line
    finally:
        os.close(fd)


def test_a_silent_holder_is_named_by_proc_locks_and_unknown_only_where_unseen(tmp_path: Path) -> None:
    root = tmp_path / "locks"
    with holding(root, "0") as holder:
        path = lock_path(root, 0)
        assert read_holder(path).startswith(f"pid {holder.pid} ({sys.executable} -c ")
        st = os.stat(path)
        where = f"{os.major(st.st_dev):02x}:{os.minor(st.st_dev):02x}:{st.st_ino}"
        hidden = f"1: FLOCK  ADVISORY  WRITE 0 {where} 0 EOF\n"  # a holder in another pid namespace shows as pid 0
        assert kernel_holder(path, table=hidden) is None
        assert kernel_holder(path, table="") is None and kernel_holder(tmp_path / "gone.lock") is None
    # a holder that writes its record is named by it (a command of its own: pytest's argv, which a long list of test ids
    # makes longer than a record may be, is the caller's)
    with acquire(Need(str(root), (0,)), timeout_s=1, on_wait=None, holder=Holder.current(command="sk-run trial (test)")):
        assert read_holder(lock_path(root, 0)).startswith(f"pid {os.getpid()} on {socket.gethostname()} (sk-run trial (test)) since ")
    assert read_holder(lock_path(root, 0)) == "unknown holder"  # nobody holds it, the file says nothing


def test_a_foreign_ofd_holder_is_named_by_its_fdinfo_with_its_command_line(tmp_path: Path) -> None:
    """/proc/locks lists an OFD lock with pid -1; the holder's /proc/<pid>/fdinfo/<fd> lists it too, which names it."""
    path = lock_path(tmp_path / "locks", 0)
    with record_holding(path, "ofd") as holder:
        assert lock_holders(path) == [holder.pid]
        command, full = command_of(holder.pid), command_line(holder.pid) or ""
        assert full.startswith(f"{sys.executable} -c ") and full.endswith(f" {path} ofd") and command == full[:200]
        assert read_holder(path) == kernel_holder(path) == f"pid {holder.pid} ({command})"
        assert lock_holders(path, proc=None) == [-1]  # not looked for: the table's pid as it is
        assert lock_holders(path, proc=tmp_path / "no-proc") == [-1]  # no process seen holds it: unknown as before
    assert lock_holders(path) == [] and read_holder(path) == "unknown holder"


def test_ofd_holders_skip_what_vanishes_and_name_the_locks_owner_before_a_fork_sharing_its_file(tmp_path: Path) -> None:
    """A /proc where processes and descriptors vanish while read: they hold nothing. A lease's open file, shared for a
    moment by a fork of its holder (pid 9, before its exec), is named by the holder that took its flock (pid 20), so
    an inherited lease never takes the fork for a stranger; then by the holder found last; otherwise in pid order."""
    path = tmp_path / "npu-device-0.lock"
    path.write_text("")
    st = os.stat(path)
    where = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    at = f"{where[0]:02x}:{where[1]:02x}:{where[2]}"
    lease = f"pos:\t0\nflags:\t02100002\nlock:\t1: FLOCK  ADVISORY  WRITE 20 {at} 0 EOF\nlock:\t2: OFDLCK ADVISORY  WRITE -1 {at} 0 EOF\n"
    proc = tmp_path / "proc"
    (proc / "7").mkdir(parents=True)  # a process gone before its fdinfo was listed
    (proc / "8" / "fdinfo").mkdir(parents=True)
    (proc / "8" / "fdinfo" / "3").symlink_to(tmp_path / "closed")  # a descriptor closed before it was read
    (proc / "8" / "fdinfo" / "4").write_text(f"lock:\t1: OFDLCK ADVISORY  WRITE -1 {where[0]:02x}:{where[1]:02x}:{where[2] + 1} 0 EOF\n")
    for pid in (9, 20):
        (proc / str(pid) / "fdinfo").mkdir(parents=True)
        (proc / str(pid) / "fdinfo" / "5").write_text(lease)
    (proc / "self").mkdir()
    table = f"1: FLOCK  ADVISORY  WRITE 20 {at} 0 EOF\n2: OFDLCK ADVISORY  WRITE -1 {at} 0 EOF\n"
    assert lock_holders(path, table=table, proc=proc) == [20, 20]
    assert ofd_holders(where, 2, proc=proc) == [20, 9]  # the holder found last first, then pid order
    assert ofd_holders(where, 1, first=[9], proc=proc) == [9]  # stops at the count asked for
    assert ofd_holders((where[0], where[1], where[2] + 2), 1, proc=proc) == []  # nobody holds that file


def test_proc_locks_lines_and_the_ancestry() -> None:
    text = ("1: FLOCK  ADVISORY  WRITE 11349 fe:00:2146632 0 EOF\n"
            "2: POSIX  ADVISORY  WRITE 12 08:01:77 0 EOF\n"
            "2: -> FLOCK  ADVISORY  WRITE 13 fe:00:2146632 0 EOF\n"
            "garbage\n")
    entries = parse_proc_locks(text)
    assert [(e.kind, e.pid, e.major, e.minor, e.inode) for e in entries] == [("FLOCK", 11349, 254, 0, 2146632), ("POSIX", 12, 8, 1, 77)]
    chain = ancestors()
    assert chain[0] == os.getpid() and chain[1] == os.getppid()


# -- a lost lock between runs ------------------------------------------------------------------------------------------------
def test_a_replaced_lock_file_is_seen_and_the_run_would_not_count(tmp_path: Path) -> None:
    root = tmp_path / "locks"
    with acquire(Need(str(root), (0, 1)), timeout_s=1, on_wait=None) as lease:
        proof = CleanDeviceProof(lease, _Nothing(), tmp_path / "round", "O1", wait_s=0.0)
        assert proof.look("after").clean and lease.lock_problems() == []
        fresh = tmp_path / "fresh.lock"
        fresh.write_text("")
        os.replace(fresh, lock_path(root, 1))  # someone replaced the file: a foreign process can lock the new one
        with holding(root, "1") as stranger:
            problems = lease.lock_problems()
            seen = proof.look("after")
        assert [d for d, _ in problems] == [1] and f"pid {stranger.pid}" in render(problems[0][1], "en")
        assert not seen.clean and seen.processes[0].source == LOCK_SOURCE and seen.processes[0].device == 1
        lost = seen.processes[0]
        command = lost.to_json()["problem"]["params"]["command"]  # the record holds the why as a code and its facts
        assert lost.to_json()["problem"] == coded("lease.lock_replaced_held", pid=stranger.pid, command=command)
        assert lost.describe() == lost.describe("en") == (
            "NPU 1: the lease's lock is lost: its lock file was replaced while the lease held it (another file at that path); "
            f"pid {stranger.pid} ({command}) holds the new one")
        assert lost.to_json()["command"] == "the lease's lock is lost: " + lost.describe()[len("NPU 1: the lease's lock is lost: "):]
        zh = lost.describe("zh")
        assert zh == f"NPU 1：租约的锁已丢失（其锁文件在租约持有期间被替换（该路径上已是另一个文件）；新文件由 pid {stranger.pid}（{command}）持有）"
        assert command.startswith(sys.executable) and stray_english(zh.replace(command, " ")) == [], zh
        lock_path(root, 0).unlink()
        assert [d for d, _ in lease.lock_problems()] == [0, 1]


def test_a_lost_lock_stops_the_run_at_once_instead_of_waiting_for_it(tmp_path: Path) -> None:
    """A lease's lock once lost (its file removed or replaced) never comes back to that lease: the look before a run
    stops at once, saying so, rather than waiting the whole lease timeout for it (60 s in the outsider's sweep,
    600 by default) before the same stop."""
    import time

    from sk_runner.devices.proof import ForeignProcessBlocker

    root = tmp_path / "locks"
    told: list[str] = []
    with acquire(Need(str(root), (0,)), timeout_s=1, on_wait=None) as lease:
        proof = CleanDeviceProof(lease, _Nothing(), tmp_path / "round", "O1", wait_s=120.0, say=told.append)
        lock_path(root, 0).unlink()
        started = time.monotonic()
        with pytest.raises(ForeignProcessBlocker) as info:
            proof.before("run-1")
        assert time.monotonic() - started < 60 and told == [], told  # far below the 120 s it would wait for a lock to come back
    assert "the lease's lock is lost: its lock file was removed" in str(info.value)
    assert "never comes back" in str(info.value) and "nothing was measured" in str(info.value)
    actions = [json.loads(line)["action"] for line in (tmp_path / "round" / "foreign-processes.jsonl").read_text().splitlines()]
    assert actions == ["blocked"]


def test_an_inherited_lock_its_holder_released_is_seen(tmp_path: Path) -> None:
    root = tmp_path / "locks"
    parent = acquire(Need(str(root), (3,)), timeout_s=1, on_wait=None)
    child = HeldLease(INHERITED, str(root), (3,))
    assert child.lock_problems() == []
    parent.release()
    assert [d for d, _ in child.lock_problems()] == [3]
    assert not _busy(lock_path(root, 3))  # the check dropped its own attempt at once


def test_a_lock_file_that_cannot_be_looked_at_is_a_lost_lock_named_by_its_errno(tmp_path: Path) -> None:
    """The lock folder replaced by a file: the lease cannot look at its lock file (ENOTDIR); the English line gives the
    system's words and the errno, the Chinese one the errno alone (no English words in it)."""
    root = tmp_path / "locks"
    with acquire(Need(str(root), (2,)), timeout_s=1, on_wait=None) as lease:
        root.rename(tmp_path / "moved")
        root.write_text("")
        problems = lease.lock_problems()
        assert problems == [(2, coded("lease.lock_unreadable", error="ENOTDIR", strerror="Not a directory"))]
        lost = DeviceProcess.lock_lost(2, problems[0][1])
        assert lost.describe("en") == "NPU 2: the lease's lock is lost: its lock file cannot be looked at (Not a directory, ENOTDIR)"
        assert lost.describe("zh") == "NPU 2：租约的锁已丢失（无法查看其锁文件（ENOTDIR））"


def test_an_error_line_names_the_first_process_and_the_count() -> None:
    procs = tuple(DeviceProcess(i, 1000 + i, "python -m sk_runner.sim " + "x" * 2000, "sim-registry") for i in range(8))
    text = _who(Sighting("after", 0, "sim-registry", procs))
    assert text.startswith("pid 1000 (python -m sk_runner.sim xxx") and text.endswith("(and 7 more sighting(s) on NPU 1,2,3,4,5,6,7)")
    assert len(text) < WHO_LIMIT + 80 and text.count("pid ") == 1


# -- private simulated hosts ---------------------------------------------------------------------------------------------------
def test_a_simulated_session_that_names_no_registry_gets_its_own(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(REGISTRY_ENV)
    with session_registry(tmp_path / "a", True) as a:
        assert a == private_registry(tmp_path / "a") and os.environ[REGISTRY_ENV] == str(a)
        assert a == tmp_path / "a/.device-leases/sim-registry"
    assert REGISTRY_ENV not in os.environ
    with session_registry(tmp_path / "b", True) as b:
        assert b is not None and b != a
    with session_registry(tmp_path / "c", False) as none:  # real devices: npu-smi, no registry
        assert none is None and REGISTRY_ENV not in os.environ
    monkeypatch.setenv(REGISTRY_ENV, str(tmp_path / "named"))
    with session_registry(tmp_path / "d", True) as named:  # a named registry is kept (the tests', a shared simulated host)
        assert named is None and os.environ[REGISTRY_ENV] == str(tmp_path / "named")


# -- real NPUs leased by default, explicit opt-out, finite timeouts -----------------------------------------------------------
def test_real_npus_are_leased_unless_the_user_opts_out() -> None:
    none = LeaseRequest(None)
    with pytest.raises(UsageError, match="--lease-root DIR and --device-id") as info:
        require_lease(none, "npu")
    assert "SK_RUN_LEASE_ROOT" in str(info.value) and "--unleased" in str(info.value) and info.value.exit_code == 2
    with pytest.raises(UsageError, match="npu-smi shows NPUs"):
        require_lease(none, "command", has_npus=lambda: True)
    require_lease(none, "command", has_npus=lambda: False)  # no NPU here: nothing to lease
    require_lease(none, "sim", has_npus=lambda: pytest.fail("the simulator never asks npu-smi"))
    opted = lease_request(None, (), 600.0, env={}, unleased=True)
    assert opted.unleased and opted.need is None and rerun_options(opted) == ["--unleased"]
    require_lease(opted, "npu")
    with pytest.raises(UsageError, match="--unleased runs without a device lease"):
        lease_request(Path("/locks"), ("0",), 600.0, env={}, unleased=True)


def test_a_trial_on_the_npu_backend_without_a_lease_is_refused_before_anything(tmp_path: Path) -> None:
    (tmp_path / "base.json").write_text("{}")
    args = ["trial", "--session", str(tmp_path / "s"), "--round", "O0", "--base-config", str(tmp_path / "base.json"), "--incumbent",
            "--backend", "npu", "--", "python", "train.py"]
    done = sk_run(*args)
    assert done.returncode == 2 and "--lease-root" in done.stderr and "SK_RUN_LEASE_ROOT" in done.stderr, done.stderr
    assert done.stderr.count("\n") == 1
    assert not (tmp_path / "s").exists()


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "-1", "soon"])
def test_the_lease_timeout_is_a_finite_number_of_seconds(tmp_path: Path, value: str) -> None:
    done = sk_run("sweep", "--demo", "--session", str(tmp_path / "d"), "--lease-timeout", value)
    assert done.returncode == 2 and "--lease-timeout" in done.stderr, done.stderr
    assert not (tmp_path / "d").exists()


# -- a resume takes the recorded lease ---------------------------------------------------------------------------------------
def test_a_resume_takes_the_recorded_lease_and_refuses_another() -> None:
    recorded = Need("/locks", (0, 1))
    assert resume_request(None, (), 5.0, recorded=recorded, env={}).need == recorded
    assert resume_request(Path("/locks"), ("0-1",), 5.0, recorded=recorded, env={}).need == recorded  # the same, repeated
    with pytest.raises(UsageError) as info:
        resume_request(Path("/locks"), ("2",), 5.0, recorded=recorded, env={}, what="S", again="resume with: sk-run sweep --resume S")
    assert "S recorded devices 0,1 under /locks" in str(info.value) and str(info.value).endswith("sk-run sweep --resume S")
    opted = resume_request(None, (), 5.0, recorded=None, recorded_unleased=True, env={})
    assert opted.unleased and opted.need is None
    markers = {HELD: "1", IDS: "4", ROOT: "/other"}
    assert resume_request(None, (), 5.0, recorded=recorded, env=markers).need == recorded  # take() refuses the foreign markers
    assert resume_request(None, (), 5.0, recorded=None, env=markers).need == Need("/other", (4,))  # nothing recorded: inherit


# -- say what was proven -------------------------------------------------------------------------------------------------------
def _leased(round_name: str, proof: str | None) -> tuple[str, dict[str, object]]:
    lease = {"mode": "acquired", "root": "/locks", "device_ids": [0, 1], **({} if proof is None else {"proof": proof})}
    return "trial_result", {"round": round_name, "lease": lease, "foreign_processes": []}


@pytest.mark.parametrize(("proof", "says", "free"), [
    ("npu-smi", "the devices proven free by npu-smi before and after each run", True),
    ("sim-registry", "checked in the simulated device registry (sim-registry), which sees a simulated host's processes only "
                     "and proves nothing about a real NPU", False),
    (None, "the device checks before and after each run: none", False),  # a record from before the source was named
])
def test_the_report_and_hand_off_name_the_proofs_source(proof: str | None, says: str, free: bool) -> None:
    from types import SimpleNamespace

    from sk_analytics.report.devices import devices_section
    from sk_analytics.stage_o.leases import summarize

    records = [("session_started", {}), ("lease_requested", {"root": "/locks", "device_ids": [0, 1], "unleased": False,
                                                             "source": "options", "summary_zh": "…"}),
               _leased("O0-INCUMBENT", proof), _leased("O1", proof)]
    handoff = summarize(records).to_json()
    assert handoff["proof_sources"] == [proof or "none"] and handoff["proven_free"] is free
    assert handoff["requested"] == {"root": "/locks", "device_ids": [0, 1], "unleased": False, "source": "options"}
    en = "\n".join(devices_section(SimpleNamespace(records=records), "en"))  # type: ignore[arg-type]
    assert says in en
    assert ("proven free" in en) is free


def test_an_explicit_opt_out_is_recorded_and_reported() -> None:
    from types import SimpleNamespace

    from sk_analytics.report.devices import devices_section
    from sk_runner.sweep.leasing import request_record

    opted = request_record(LeaseRequest(None, unleased=True), "unleased")
    assert (opted["root"], opted["device_ids"], opted["unleased"]) == (None, None, True)
    records = [("session_started", {}), ("lease_requested", opted), ("trial_result", {"round": "O1", "lease": {"mode": None}})]
    en = "\n".join(devices_section(SimpleNamespace(records=records), "en"))  # type: ignore[arg-type]
    assert "The user opted out of a device lease explicitly (--unleased, recorded)." in en
    assert "Rounds that held no device lease: O1." in en


# -- a trial round records its lease request before any run ------------------------------------------------------------------
def test_a_trial_blocked_at_the_lease_prints_the_command_that_takes_its_lease_again(tmp_path: Path) -> None:
    """Issue 45 for ``sk-run trial`` rounds: blocked at the lease (exit 3), the round still records the lease it asked for;
    the printed command (no lease options) takes that lease, and a rerun naming another lease is refused (exit 2)."""
    import shlex

    from sk_runner.devices.recorded import ROUND_REQUEST

    root = tmp_path / "locks"
    leased = _trial_args(tmp_path, "O0", "--lease-root", str(root), "--device-id", "0-1", "--lease-timeout", "0.2")
    with holding(root, "1"):
        blocked = sk_run(*leased)
    assert blocked.returncode == 3, blocked.stderr
    line = blocked.stderr.strip().splitlines()[-1]  # after the one waiting line
    assert line.startswith("sk-run: error: NPU 1 is still leased by ") and "Free the cause, then: sk-run trial " in line, line
    command = shlex.split(line.split("Free the cause, then: ", 1)[1])
    assert "--lease-root" not in command and "--device-id" not in command
    round_dir = tmp_path / "session/experiments/Sbest/O0"
    request = json.loads((round_dir / ROUND_REQUEST).read_text())
    assert (request["root"], request["device_ids"], request["unleased"]) == (str(root), [0, 1], False)
    assert not (round_dir / "CORRECTNESS").exists()  # nothing ran

    other = sk_run(*_trial_args(tmp_path, "O0", "--lease-root", str(root), "--device-id", "2-3"))
    assert other.returncode == 2 and f"recorded devices 0,1 under {root}" in other.stderr, other.stderr
    assert "run it again with no lease options: sk-run trial " in other.stderr
    assert not (round_dir / "CORRECTNESS").exists()

    done = sk_run(*command[1:])  # the printed command, as the user runs it
    assert done.returncode == 0, done.stderr
    for meta in (round_dir / "CORRECTNESS/meta.json", round_dir / "CLEAN/run-1/meta.json"):
        lease = json.loads(meta.read_text())["lease"]
        assert (lease["mode"], lease["root"], lease["device_ids"]) == ("acquired", str(root), [0, 1]), meta


class _Stranger:
    """An occupancy source that always sees one foreign process on the first leased device."""

    name = "npu-smi"

    def snapshot(self, devices: tuple[int, ...]) -> list[DeviceProcess]:
        return [DeviceProcess(devices[0], 73215, "", "npu-smi")]


@pytest.mark.parametrize(("lang", "waiting", "discarded"), [
    ("zh", "租约外有 NPU 0 上的进程 pid 73215（命令未知）；run-1 开始前最多等待 0 秒（--lease-timeout）",
     "run-1 运行期间租约外有 NPU 0 上的进程 pid 73215（命令未知）：本次不计（已移至 "),
    ("en", "pid 73215 (unknown command) on NPU 0 outside the lease; waiting up to 0 s (--lease-timeout) before run-1",
     "run-1 saw pid 73215 (unknown command) on NPU 0 outside the lease: discarded (moved to "),
])
def test_the_proofs_progress_lines_speak_the_sessions_language(tmp_path: Path, lang: str, waiting: str, discarded: str) -> None:
    """A zh sweep's wait and re-run lines are Chinese (the process named in them too), an en one's English; the
    blocker that ends the wait stays an English error line, whatever the language."""
    said: list[str] = []
    with acquire(Need(str(tmp_path / "locks"), (0,)), timeout_s=1, on_wait=None) as lease:
        proof = CleanDeviceProof(lease, _Stranger(), tmp_path / "round", "O1", wait_s=0.0, say=said.append, lang=lang)
        with pytest.raises(EnvironmentBlocker, match=r"^pid 73215 \(unknown command\) on NPU 0 outside the lease"):
            proof.before("run-1")
        seen = proof.after()
        proof.discard("run-1", seen, seen, tmp_path / "aside")
    assert said[0] == waiting and said[1].startswith(discarded)
    if lang == "zh":
        assert [stray_english(line) for line in said] == [[], []]
    else:
        assert not any(re.search("[\u4e00-\u9fff]", line) for line in said)
    lost = DeviceProcess.lock_lost(1, coded("lease.lock_removed"))
    assert lost.describe(lang) == {"zh": "NPU 1：租约的锁已丢失（其锁文件在租约持有期间被删除：任何人都能在该路径上锁住一个新文件）",
                                   "en": "NPU 1: the lease's lock is lost: its lock file was removed while the lease held it: "
                                         "anyone can lock a new one at that path"}[lang]
