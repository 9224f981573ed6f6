"""The shared-NPU lease against holders in other processes written in plain Python (as another program of the
controller holds it): contention, inheritance under exact markers, refusal of partial or foreign markers, SIGKILL.

Every holder and waiter says when it is ready through its stdout pipe; no sleep decides an outcome, and the
bounded waits only matter when something is broken.
"""

from __future__ import annotations

import fcntl
import json
import os
import select
import shlex
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from runner_fake import write_fake

from sk_runner.devices.holders import HOLDER_COMMAND_CHARS
from sk_runner.devices.lease import HOLDER_LIMIT, Holder, LeaseBlocked, acquire, lock_path, read_holder
from sk_runner.devices.markers import HELD, IDS, ROOT, Need
from sk_runner.process import group_alive, process_alive

#: Takes the locks as another program would: flock on the protocol's files in ascending order, optionally a line of its
#: own in each file (arguments: root, ids, text).
LOCKS = r"""
root, ids, text = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
fds = []
for i in sorted(ids, key=int):
    fd = os.open(os.path.join(root, "npu-device-%s.lock" % i), os.O_RDWR | os.O_CREAT, 0o666)
    fcntl.flock(fd, fcntl.LOCK_EX)
    if text:
        os.ftruncate(fd, 0)
        os.write(fd, text.encode())
    fds.append(fd)
"""

#: A holder as another program writes it: plain Python taking the LOCKS; it holds until its stdin closes.
HOLDER = r"""
import fcntl, os, sys
""" + LOCKS + r"""
print("held", flush=True)
sys.stdin.read()
"""

#: The controller's acquire-then-launch: holds the locks (as HOLDER), then runs its child (argv after the first three
#: arguments) under the three markers, and exits with the child's exit code.
PARENT = r"""
import fcntl, os, subprocess, sys
""" + LOCKS + r"""
env = dict(os.environ, SUPERKERNEL_DEVICE_LEASE_HELD="1", SUPERKERNEL_DEVICE_IDS=",".join(sorted(ids, key=int)),
           SUPERKERNEL_DEVICE_LEASE_ROOT=root)
sys.exit(subprocess.run(sys.argv[4:], env=env).returncode)
"""

#: A waiter: says whether the lock is busy now, then blocks on it and says when it got it.
WAITER = r"""
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)
try:
    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("free", flush=True)
except BlockingIOError:
    print("busy", flush=True)
    fcntl.flock(fd, fcntl.LOCK_EX)
    print("got", flush=True)
sys.stdin.read()
"""


def _line(proc: subprocess.Popen[str], timeout: float = 60.0) -> str:
    """The next stdout line of ``proc`` (bounded: only a broken test waits this long)."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], timeout)
    assert ready, "no line from the helper process within the bound"
    return proc.stdout.readline().strip()


@contextmanager
def holding(root: Path, ids: str, text: str = "") -> Iterator[subprocess.Popen[str]]:
    root.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(root), ids, text], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert _line(proc) == "held"
        yield proc
    finally:
        _end(proc)


def _end(proc: subprocess.Popen[str]) -> None:
    if proc.stdin is not None and not proc.stdin.closed:
        proc.stdin.close()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _busy(path: Path) -> bool:
    """Whether someone holds the flock of ``path`` (tried from this process, released at once)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False


def sk_run(*args: str, env: dict[str, str] | None = None, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", "from sk_runner.cli import main; main()", *args], capture_output=True, text=True,
                          env=env, timeout=timeout, check=False)


def under_parent(root: Path, ids: str, text: str, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    """``sk-run *args`` as the child of a parent that holds the lease on ``ids`` and exports the markers."""
    return subprocess.run([sys.executable, "-c", PARENT, str(root), ids, text, sys.executable, "-c",
                           "from sk_runner.cli import main; main()", *args], capture_output=True, text=True, timeout=timeout, check=False)


def _trial_args(tmp_path: Path, round_name: str = "O0", *extra: str, change: str | None = None) -> list[str]:
    """An incumbent copy (one run) of the fake workload, or a trial of ``change`` (three runs, probe first)."""
    argv = write_fake(tmp_path)
    what = ["--incumbent", "--runs", "1"] if change is None else ["--set", change, "--runs", "3"]
    return ["trial", "--session", str(tmp_path / "session"), "--round", round_name, "--base-config", str(tmp_path / "base.json"),
            *what, "--ranks", "2", "--warmup", "2", "--backend", "command", "--cwd", str(tmp_path), *extra, "--", *argv]


def test_acquire_writes_its_holder_and_release_clears_it(tmp_path: Path) -> None:
    root = tmp_path / "locks"
    with acquire(Need(str(root), (2, 0)), holder=Holder.current(tmp_path / "S", command="sk-run sweep --resume S")) as lease:
        assert lease.mode == "acquired" and lease.device_ids == (0, 2) and lease.held
        record = json.loads(lock_path(root, 2).read_text())
        assert (record["pid"], record["host"], record["command"], record["session"]) == (
            os.getpid(), socket.gethostname(), "sk-run sweep --resume S", str(tmp_path / "S"))
        assert read_holder(lock_path(root, 0)).startswith(f"pid {os.getpid()} on {socket.gethostname()} (sk-run sweep --resume S, session ")
        assert _busy(lock_path(root, 0)) and _busy(lock_path(root, 2)) and not (root / "npu-device-1.lock").exists()
    assert lock_path(root, 2).read_text() == "" and not _busy(lock_path(root, 2)) and not lease.held


def test_a_holder_with_pages_of_argv_writes_a_record_every_reader_takes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A launcher's argv can run to pages: the record names its first characters (it wrote the whole argv, past the
    bytes a reader takes, and every waiter saw an unknown holder); a session path of PATH_MAX characters still fits."""
    monkeypatch.setattr(sys, "argv", ["sk-run", "sweep", *(f"--arg-{i}=" + "x" * 50 for i in range(200))])
    session = "/" + "/".join(["é" * 250] * 16)  # about PATH_MAX, every character escaped in the JSON record
    root = tmp_path / "locks"
    with acquire(Need(str(root), (0,)), holder=Holder.current(session)):
        raw = lock_path(root, 0).read_bytes()
        record = json.loads(raw)
        assert record["command"] == shlex.join(sys.argv)[:HOLDER_COMMAND_CHARS] and record["session"] == session
        assert 4096 < len(raw) <= HOLDER_LIMIT
        named = read_holder(lock_path(root, 0))
        assert named.startswith(f"pid {os.getpid()} on {socket.gethostname()} (sk-run sweep --arg-0=xx") and f"session {session})" in named


def test_contention_names_the_device_and_holder_then_gives_up(tmp_path: Path) -> None:
    root = tmp_path / "locks"
    told: list[str] = []
    with holding(root, "1") as holder:
        with pytest.raises(LeaseBlocked) as info:
            acquire(Need(str(root), (0, 1)), timeout_s=0.3, on_wait=lambda busy, limit: told.append(f"{busy.device}: {busy.holder}"))
        assert not _busy(lock_path(root, 0))  # the device it had got is dropped again
    # one progress line, naming the device and its holder: the file says nothing, /proc/locks names the pid
    named = f"pid {holder.pid} ({sys.executable} -c "
    assert len(told) == 1 and told[0].startswith(f"1: {named}"), told
    assert info.value.exit_code == 3 and info.value.busy.device == 1
    assert info.value.one_line().startswith(f"NPU 1 is still leased by {named}")
    assert info.value.record()["reason"] == "contention" and info.value.record()["lease_mode"] is None


def test_a_holder_started_with_a_multi_line_command_is_named_on_one_line(tmp_path: Path) -> None:
    """HOLDER is a multi-line ``python -c`` script, as a user's own holder often is: the waiting line and the error
    name it on one line, its line breaks escaped (they printed the raw script, one line of it per output line)."""
    root = tmp_path / "locks"
    told: list[str] = []
    with holding(root, "1") as holder:
        with pytest.raises(LeaseBlocked) as info:
            acquire(Need(str(root), (1,)), timeout_s=0.3, on_wait=lambda busy, limit: told.append(busy.holder))
        assert "\n" not in read_holder(lock_path(root, 1))
    assert len(told) == 1 and "\n" not in told[0], told
    assert told[0].startswith(f"pid {holder.pid} (") and "\\nimport fcntl, os, sys\\n" in told[0]
    assert "\n" not in str(info.value) and "\\nimport fcntl, os, sys\\n" in str(info.value)


def test_a_waiting_trial_exits_3_naming_the_device_and_holder_and_runs_nothing(tmp_path: Path) -> None:
    root = tmp_path / "locks"
    record = json.dumps({"pid": 4242, "host": "other-host", "command": "controller multistream phase", "session": None,
                         "since_ns": 1_700_000_000_000_000_000})
    with holding(root, "1", record):
        done = sk_run(*_trial_args(tmp_path, "O0", "--lease-root", str(root), "--device-id", "0-1", "--lease-timeout", "0.5"))
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("sk-run: NPU 1 is leased by pid 4242 on other-host (controller multistream phase) since 2023-11-14 ")
    assert "waiting up to 0.5 s (--lease-timeout)" in lines[0]
    assert lines[-1].startswith("sk-run: error: NPU 1 is still leased by pid 4242 on other-host") and len(lines) == 2
    round_dir = tmp_path / "session/experiments/Sbest/O0"
    blocker = json.loads((round_dir / "environment-blockers.jsonl").read_text())
    assert blocker["stage"] == "lease" and blocker["lease_blocked"]["busy"]["device"] == 1
    assert blocker["lease_blocked"]["device_ids"] == [0, 1] and blocker["lease_blocked"]["lease_mode"] is None
    assert not (round_dir / "CORRECTNESS").exists() and not (round_dir / "PROBE").exists()


def test_exact_markers_inherit_and_the_child_never_touches_the_locks(tmp_path: Path) -> None:
    root = tmp_path / "locks"
    markers = {HELD: "1", IDS: "0,1", ROOT: str(root)}
    root.mkdir()
    done = under_parent(root, "0,1", "controller", *_trial_args(tmp_path, "O1", change="/super_kernel_optimize_options/auto_op_parallel=1"))
    assert done.returncode == 0, done.stderr
    assert {p.name: p.read_text() for p in root.iterdir()} == {"npu-device-0.lock": "controller", "npu-device-1.lock": "controller"}
    run = tmp_path / "session/experiments/Sbest/O1/CLEAN/run-1"
    for env_file in (run / "env.json", run.parents[1] / "CORRECTNESS/env.json",
                     *(run.parents[1] / "PROBE").rglob("env.json")):  # every process of the trial: probe, correctness, clean
        seen = json.loads(env_file.read_text())
        assert {k: seen.get(k) for k in (*markers, "ASCEND_RT_VISIBLE_DEVICES")} == {**markers, "ASCEND_RT_VISIBLE_DEVICES": "0,1"}
    assert len(list((run.parents[1] / "PROBE").rglob("env.json"))) == 1
    meta = json.loads((run / "meta.json").read_text())
    assert meta["lease"] == {"mode": "inherited", "root": str(root), "device_ids": [0, 1], "proof": "sim-registry"}
    assert [meta["device_proof"][side]["processes"] for side in ("before", "after")] == [[], []]
    child = json.loads((run / "env.json").read_text())
    assert {k: child[k] for k in (*markers, "ASCEND_RT_VISIBLE_DEVICES")} == {**markers, "ASCEND_RT_VISIBLE_DEVICES": "0,1"}
    trial = json.loads((run.parents[1] / "trial.json").read_text())
    assert trial["fingerprints"]["environment"]["device_ids"] == [0, 1]


@pytest.mark.parametrize(("markers", "options", "needle"), [
    ({HELD: "1"}, (), "partial lease markers"),
    ({HELD: "1", IDS: "0,1"}, ("--device-id", "0-1"), f"partial lease markers ({HELD}='1', {IDS}='0,1'; missing {ROOT})"),
    ({HELD: "1", IDS: "0,1", ROOT: "/elsewhere"}, ("--device-id", "0-1"), f"{ROOT} differ(s)"),
    ({HELD: "1", IDS: "0", ROOT: "<root>"}, ("--device-id", "0-1"), f"{IDS} differ(s)"),
])
def test_partial_or_foreign_markers_are_refused_in_one_line(tmp_path: Path, markers: dict[str, str], options: tuple[str, ...],
                                                            needle: str) -> None:
    root = tmp_path / "locks"
    env = {**os.environ, **{k: v.replace("<root>", str(root)) for k, v in markers.items()}}
    lease = ("--lease-root", str(root), *options) if options else ()
    done = sk_run(*_trial_args(tmp_path, "O0", *lease), env=env)
    assert done.returncode == 3
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("sk-run: error: ") and needle in done.stderr
    assert "refusing to run (protocol §9: a marker conflict fails closed)" in done.stderr
    assert not root.exists()  # no lock taken, no lock file made
    assert not (tmp_path / "session/experiments/Sbest/O0/CORRECTNESS").exists()


def test_sigkill_of_sk_run_frees_its_devices_for_the_next_waiter_at_once(tmp_path: Path) -> None:
    root = tmp_path / "locks"
    run_dir = tmp_path / "session/experiments/Sbest/O0/CORRECTNESS"
    proc = subprocess.Popen([sys.executable, "-c", "from sk_runner.cli import main; main()",
                             *_trial_args(tmp_path, "O0", "--lease-root", str(root), "--device-id", "3-4")],
                            env={**os.environ, "FAKE_SLEEP": "120"}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    waiter = None
    try:
        deadline = time.monotonic() + 120
        while not (run_dir / "pid.txt").is_file():  # the workload runs: the lease was taken before it started
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.stderr else ""
            time.sleep(0.05)
        workload = int((run_dir / "pid.txt").read_text())
        assert read_holder(lock_path(root, 3)).startswith(f"pid {proc.pid} on ")
        waiter = subprocess.Popen([sys.executable, "-c", WAITER, str(lock_path(root, 3))], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  text=True)
        assert _line(waiter) == "busy"
        killed = time.monotonic()
        proc.send_signal(signal.SIGKILL)
        assert _line(waiter, timeout=30) == "got"
        assert time.monotonic() - killed < 10  # at once: the kernel dropped the lock with the process (no timeout, no poll)
        deadline = time.monotonic() + 30
        while group_alive(workload) and time.monotonic() < deadline:  # and its workload died with it
            time.sleep(0.05)
        assert not process_alive(workload)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait()
        if waiter is not None:
            _end(waiter)


def test_a_record_naming_an_exited_holder_on_this_host_is_an_unknown_holder(tmp_path: Path) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True)
    path = tmp_path / "npu-device-0.lock"
    path.write_text(json.dumps({"pid": int(gone.stdout), "host": socket.gethostname(), "command": "sk-run trial", "session": None,
                                "since_ns": 0}))
    assert read_holder(path) == f"unknown holder (the file still names pid {int(gone.stdout)}, which has exited)"
    path.write_text("not json")
    assert read_holder(path) == "unknown holder" and read_holder(tmp_path / "missing.lock") == "unknown holder"


#: A holder that takes a record lock, not a flock (on Linux the two never conflict): ``lockf`` (POSIX, listed with its
#: pid in /proc/locks) or an OFD lock (listed with pid -1 there, with the file in its fdinfo) on one lock file; it holds
#: until its stdin closes
#: (arguments: the file, the style).
RECORD_HOLDER = r"""
import fcntl, os, struct, sys
f = open(sys.argv[1], "a")
if sys.argv[2] == "lockf":
    fcntl.lockf(f, fcntl.LOCK_EX)
else:
    fcntl.fcntl(f, fcntl.F_OFD_SETLK, struct.pack("hhqqi4x", fcntl.F_WRLCK, 0, 0, 0, 0))
print("locked", flush=True)
sys.stdin.read()
"""

#: Tries a non-blocking POSIX lock as a foreign ``lockf`` user would, says whether it got it, and exits.
LOCKF_TRY = r"""
import fcntl, sys
f = open(sys.argv[1], "a")
try:
    fcntl.lockf(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("free")
except OSError:
    print("busy")
"""


@contextmanager
def record_holding(path: Path, style: str = "lockf") -> Iterator[subprocess.Popen[str]]:
    """A foreign process holding ``path`` with a record lock of ``style`` until the block ends."""
    path.parent.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-c", RECORD_HOLDER, str(path), style], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True)
    try:
        assert _line(proc) == "locked"
        yield proc
    finally:
        _end(proc)


def _lockf_sees(path: Path) -> str:
    """``busy`` or ``free``: what a foreign ``lockf`` user finds on ``path`` now."""
    return subprocess.run([sys.executable, "-c", LOCKF_TRY, str(path)], capture_output=True, text=True, check=True,
                          timeout=60).stdout.strip()


@pytest.mark.parametrize("style", ["lockf", "ofd"])
def test_a_record_lock_holder_is_waited_for_and_named_then_its_device_is_leased(tmp_path: Path, style: str) -> None:
    """A foreign POSIX (or OFD) lock on a lock file keeps the lease waiting as a foreign flock does (issue: flock and
    record locks never conflict on Linux, so device 1 was leased under it); once the holder exits the lease is taken,
    and while sk-run holds it a foreign ``lockf`` user finds the device busy."""
    root = tmp_path / "locks"
    told: list[str] = []
    with record_holding(lock_path(root, 1), style) as holder:
        with pytest.raises(LeaseBlocked) as info:
            acquire(Need(str(root), (0, 1)), timeout_s=0.3, on_wait=lambda busy, limit: told.append(f"{busy.device}: {busy.holder}"))
        assert not _busy(lock_path(root, 0)) and not _busy(lock_path(root, 1))  # nothing kept, no flock left behind
    # lockf: /proc/locks names the pid; an OFD lock, listed with pid -1 there, is named by the holder's fdinfo
    named = f"pid {holder.pid} ({sys.executable} -c "
    assert len(told) == 1 and told[0].startswith(f"1: {named}"), told
    assert info.value.exit_code == 3 and info.value.busy.device == 1
    assert info.value.one_line().startswith(f"NPU 1 is still leased by {named}")
    # a command of its own: pytest's argv (the caller's) can be longer than a holder's record may be
    with acquire(Need(str(root), (0, 1)), timeout_s=0, on_wait=None, holder=Holder.current(command="sk-run trial (test)")) as lease:
        assert lease.held and _lockf_sees(lock_path(root, 0)) == "busy" and _lockf_sees(lock_path(root, 1)) == "busy"
        assert read_holder(lock_path(root, 1)).startswith(f"pid {os.getpid()} on ")  # reading a lock file keeps our locks
        assert _lockf_sees(lock_path(root, 1)) == "busy"
    assert _lockf_sees(lock_path(root, 1)) == "free"


def test_a_trial_under_a_posix_holder_exits_3_naming_its_pid_then_runs_once_it_exits(tmp_path: Path) -> None:
    root = tmp_path / "locks"
    args = _trial_args(tmp_path, "O0", "--lease-root", str(root), "--device-id", "0-1", "--lease-timeout", "0.5")
    with record_holding(lock_path(root, 1)) as holder:
        done = sk_run(*args)
    assert done.returncode == 3, done.stderr
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith(f"sk-run: NPU 1 is leased by pid {holder.pid} ({sys.executable} -c ") and len(lines) == 2
    assert "waiting up to 0.5 s (--lease-timeout)" in lines[0]
    assert lines[-1].startswith(f"sk-run: error: NPU 1 is still leased by pid {holder.pid} (")
    done = sk_run(*args)  # the holder has exited: the lease is taken at once and the trial runs
    assert done.returncode == 0, done.stderr
    assert "is leased by" not in done.stderr
