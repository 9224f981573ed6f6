"""Process lifetimes: every process sk-run starts dies with it, whatever kills it (sk_runner.process.lifetime)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from process_helpers import keepers_below, with_marker
from runner_fake import BASE_CONFIG

from sk_analytics.files.strict_json import load_json_file
from sk_runner.process import lifetime, process_alive, run_process

pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").is_file(), reason="the guarantees tested here are Linux's (/proc)")

PY = sys.executable
SK_RUN = [PY, "-c", "from sk_runner.cli import main; main()"]

# The workload forks a grandchild that leaves the group (setsid), ignores SIGTERM and
# carries the test's marker in its argv; the workload itself hangs, unless TREE_CHECK is
# set: then it records whether an earlier grandchild is still alive and exits 3.
TREE = r'''
import os, signal, sys, time
run, marker = os.environ["SK_RUN_DIR"], sys.argv[1]
check = os.environ.get("TREE_CHECK")
if check:
    pid = int(open(check).read())
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        state = "gone"
    open(os.path.join(run, "survivor-at-start.txt"), "w").write(state)
    sys.exit(3)
wipe = len(sys.argv) > 2 and sys.argv[2] == "wipe"
child = os.fork()
if child == 0:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    code = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"
    if wipe:  # stays in the workload's group but re-executes itself with no environment: no marker
        os.execve(sys.executable, [sys.executable, "-c", code, marker], {})
    os.setsid()
    os.execv(sys.executable, [sys.executable, "-c", code, marker])
open(os.path.join(run, "workload.pid"), "w").write(str(os.getpid()))
open(os.path.join(run, "grandchild.pid"), "w").write(str(child))
time.sleep(300)
'''


_with_marker = with_marker

_TREES: list[tuple[subprocess.Popen[bytes], str]] = []
"""The sk-run trees :func:`_start_tree` started, with their markers."""


@pytest.fixture(autouse=True)
def _end_started_trees() -> Iterator[None]:
    """After each test, end what its sk-run tree left (nothing, when the test passed): a test that failed halfway
    must not leave its workload and keeper to fail the next tests of this worker (``keepers_below``)."""
    yield
    while _TREES:
        proc, marker = _TREES.pop()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in _with_marker(marker):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:  # gone meanwhile
                pass
        _none_left(marker)


def _executed(pid: int) -> bool:
    """Whether the grandchild ``pid`` runs its own program (``-c`` code): its ``setsid``, or its environment wiped, done.
    Until its ``exec`` it is a fork of the workload, with the workload's argv (and marker) and environment."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")[1:2] == [b"-c"]
    except OSError:
        return False


def _none_left(marker: str, timeout_s: float = 15.0) -> bool:
    deadline = time.monotonic() + timeout_s
    while _with_marker(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _trial(tmp_path: Path, marker: str, grandchild: str = "setsid") -> list[str]:
    (tmp_path / "tree.py").write_text(TREE)
    (tmp_path / "base.json").write_text(json.dumps(BASE_CONFIG))
    (tmp_path / "session").mkdir(exist_ok=True)
    return [*SK_RUN, "trial", "--session", str(tmp_path / "session"), "--round", "O0", "--incumbent", "--runs", "1",
            "--base-config", str(tmp_path / "base.json"), "--backend", "command", "--ranks", "1", "--warmup", "1",
            "--timeout", "120", "--", PY, str(tmp_path / "tree.py"), marker, grandchild]


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("ASCEND_PROF", "SK_RUN", "ASCEND_OP_COMPILE", "SK_TUNE_LIFETIME"))}


def _block_interrupts() -> None:
    """In a child before exec: SIGINT and SIGTERM blocked, as a supervisor or a harness may hand them on."""
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})


def _ignore_like_a_background_job() -> None:
    """In a child before exec: what a shell without job control does to ``cmd &`` (and ``nohup`` to SIGHUP)."""
    for sig in (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)


def _sig_mask(pid: int, name: str) -> int:
    """A signal mask of ``pid`` (/proc/PID/status ``SigBlk``, ``SigIgn``)."""
    line = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith(f"{name}:"))
    return int(line.split()[1], 16)


def _start_tree(tmp_path: Path, marker: str, grandchild: str = "setsid", *,
                blocked: bool = False, ignoring: bool = False) -> tuple[subprocess.Popen[bytes], int]:
    """sk-run trial whose workload has started its grandchild (``setsid``: leaves the group;
    ``wipe``: stays in it with an empty environment); returns (sk-run, grandchild pid). ``blocked``:
    sk-run starts with SIGINT/SIGTERM blocked; ``ignoring``: with SIGINT/SIGQUIT/SIGHUP ignored."""
    start = _block_interrupts if blocked else _ignore_like_a_background_job if ignoring else None
    proc = subprocess.Popen(_trial(tmp_path, marker, grandchild), env=_env(), cwd=tmp_path, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, preexec_fn=start)
    _TREES.append((proc, marker))
    pid_file = tmp_path / "session/experiments/Sbest/O0/CORRECTNESS/grandchild.pid"
    deadline = time.monotonic() + 60
    while not (pid_file.is_file() and pid_file.read_text()):
        assert time.monotonic() < deadline and proc.poll() is None, "the workload never started its grandchild"
        time.sleep(0.05)
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 30
    while not _executed(pid) and time.monotonic() < deadline:  # the pid file is written at the fork, before the exec
        time.sleep(0.05)
    assert _executed(pid) and process_alive(pid)
    assert len(_with_marker(marker)) == 3  # sk-run (the marker is in its argv), workload, grandchild
    if grandchild == "wipe":
        assert b"SK_TUNE_LIFETIME" not in Path(f"/proc/{pid}/environ").read_bytes()
        assert os.getpgid(pid) == os.getpgid(int((pid_file.parent / "workload.pid").read_text()))
    return proc, pid


def _sig_blocked(pid: int) -> int:
    """The blocked-signal mask of ``pid``."""
    return _sig_mask(pid, "SigBlk")


def _kill_every_supervisor(proc: subprocess.Popen[bytes], record: dict) -> None:
    """SIGKILL sk-run, its watchdog and its keepers before any of them can act (``kill -9`` of every sk-tune
    process): the path the process table is for. sk-run is stopped first, so that it does not end the
    workload itself when its keeper dies; the workload dies with its keeper (parent-death signal)."""
    os.kill(proc.pid, signal.SIGSTOP)
    keepers = keepers_below(proc.pid)
    assert keepers, "no keeper under sk-run"
    for pid in [*keepers, record["watchdog_pid"]]:
        os.kill(pid, signal.SIGKILL)
    proc.send_signal(signal.SIGKILL)
    proc.wait()


def test_sigkill_of_sk_run_kills_the_setsid_term_ignoring_grandchild(tmp_path: Path) -> None:
    marker = f"sk-tune-tree-{uuid.uuid4().hex}"
    proc, _ = _start_tree(tmp_path, marker)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _none_left(marker), f"still alive after sk-run was SIGKILLed: {_with_marker(marker)}"


def test_next_sk_run_on_the_session_ends_survivors_before_it_starts_anything(tmp_path: Path) -> None:
    marker = f"sk-tune-tree-{uuid.uuid4().hex}"
    proc, grandchild = _start_tree(tmp_path, marker)
    records = list((tmp_path / "session" / lifetime.TABLE_DIR).glob("*.json"))
    assert len(records) == 1
    record = load_json_file(records[0])
    assert record["pid"] == proc.pid and record["watchdog_pid"]
    _kill_every_supervisor(proc, record)  # the keeper and the watchdog die with their owner: only the table is left
    time.sleep(0.5)
    assert process_alive(grandchild), "the survivor this test needs was killed by something else"
    (tmp_path / "check").write_text(str(grandchild))
    env = {**_env(), "TREE_CHECK": str(tmp_path / "check")}
    done = subprocess.run(_trial(tmp_path, marker), env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stderr  # the checking workload exits 3: a crash scene
    scene = tmp_path / "session/experiments/Sbest/O0/FAILURE_SCENES/attempt-1"
    state = next(scene.rglob("survivor-at-start.txt")).read_text()
    assert state in ("gone", "Z", "X")  # dead before the next workload started
    assert _none_left(marker)
    assert list((tmp_path / "session" / lifetime.TABLE_DIR).glob("*.json")) == []  # both owners' records are gone


def test_a_setsid_escapee_of_a_finished_process_is_killed(tmp_path: Path) -> None:
    marker = f"sk-tune-escapee-{uuid.uuid4().hex}"
    code = ("import os,sys,time\n"
            "if os.fork() == 0:\n"
            "    os.setsid(); os.execv(sys.executable, [sys.executable, '-c', 'import time; time.sleep(300)', sys.argv[1]])\n"
            "time.sleep(0.3)\n")
    res = run_process([PY, "-c", code, marker], cwd=tmp_path, env={"PATH": os.environ.get("PATH", "")},
                      stdout_path=tmp_path / "o", stderr_path=tmp_path / "e", timeout_s=30, grace_s=0.5)
    assert res.exit_code == 0
    assert _none_left(marker)


def test_interrupt_while_a_process_starts_is_raised_once_it_is_owned_and_kills_it(tmp_path: Path) -> None:
    """The interrupt lands inside the start (here: in the on_start hook) and is neither lost nor leaves the child."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    lifetime.install_signal_handlers()
    pids: list[int] = []

    def interrupt(pid: int) -> None:
        pids.append(pid)
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler runs here: deferred, not raised

    try:
        with pytest.raises(lifetime.Interrupted) as caught:
            run_process([PY, "-c", "import time; time.sleep(300)"], cwd=tmp_path, env={}, stdout_path=tmp_path / "o",
                        stderr_path=tmp_path / "e", timeout_s=60, on_start=interrupt)
        assert caught.value.exit_code == 130 and caught.value.reason == "interrupted"
        assert pids and not process_alive(pids[0])
        with pytest.raises(lifetime.Interrupted) as caught:
            with lifetime.deferred_signals():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)
        assert caught.value.exit_code == 143 and caught.value.reason == "terminated"
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@pytest.mark.parametrize("started", ["default", "blocked", "ignoring"], ids=["default-mask", "started-blocked", "started-ignoring"])
def test_sigint_and_sigterm_of_sk_run_exit_130_and_143_and_kill_the_tree(tmp_path: Path, started: str) -> None:
    """Also when sk-run's parent started it with both signals blocked: sk-run unblocks what it handles
    (else the signal would wait for ever and the trial end 0), and its workload gets an empty mask. And when
    the parent ignored SIGINT/SIGQUIT (a shell's ``cmd &``) and SIGHUP (``nohup``): sk-run handles SIGINT all
    the same (docs/faults.md), and its workload starts with every signal at its default action."""
    launcher_ignores = (1 << (signal.SIGINT - 1)) | (1 << (signal.SIGQUIT - 1)) | (1 << (signal.SIGHUP - 1))
    for sig, code in ((signal.SIGINT, 130), (signal.SIGTERM, 143)):
        marker = f"sk-tune-tree-{uuid.uuid4().hex}"
        root = tmp_path / sig.name
        root.mkdir()
        proc, pid = _start_tree(root, marker, blocked=started == "blocked", ignoring=started == "ignoring")
        if started == "ignoring":  # what sk-run was started with; an exec keeps an ignored signal ignored
            assert _sig_mask(proc.pid, "SigIgn") & launcher_ignores == launcher_ignores & ~(1 << (signal.SIGINT - 1))
        assert _sig_blocked(pid) == 0  # the grandchild inherited the workload's mask
        assert _sig_mask(pid, "SigIgn") & launcher_ignores == 0  # and its dispositions
        started = time.monotonic()
        proc.send_signal(sig)
        assert proc.wait(timeout=30) == code
        assert time.monotonic() - started < 15  # promptly
        assert _none_left(marker)


def test_reaping_spares_live_owners_and_other_hosts_and_drops_torn_records(tmp_path: Path) -> None:
    import socket

    table = tmp_path / lifetime.TABLE_DIR
    table.mkdir()
    dead = subprocess.Popen([PY, "-c", "pass"])
    dead.wait()
    # Each says it runs before the reaping looks: until the exec is complete, /proc/PID/environ (the marker) is empty.
    survivor, spared = (subprocess.Popen([PY, "-c", "import time; print('up', flush=True); time.sleep(300)"], stdout=subprocess.PIPE,
                                         env={lifetime.MARKER_ENV: marker}) for marker in ("upper.3 deadowner.2", "liveowner.1 otherhost.1"))
    assert survivor.stdout is not None and spared.stdout is not None
    assert survivor.stdout.readline() == spared.stdout.readline() == b"up\n"
    host = socket.gethostname()
    records = {
        "deadowner": {"token": "deadowner", "pid": dead.pid, "start_ticks": "1", "host": host},
        "liveowner": {"token": "liveowner", "pid": os.getpid(), "start_ticks": lifetime.start_ticks(os.getpid()), "host": host},
        "otherhost": {"token": "otherhost", "pid": dead.pid, "start_ticks": "1", "host": host + "-elsewhere"},
    }
    for name, rec in records.items():
        (table / f"{name}.json").write_text(json.dumps(rec))
    (table / "torn.json").write_text('{"token": "to')
    try:
        killed = lifetime.reap_survivors(tmp_path)
        assert set(killed) == {survivor.pid}
        assert survivor.wait(timeout=5) == -signal.SIGKILL
        assert spared.poll() is None
        assert sorted(p.stem for p in table.glob("*.json")) == ["liveowner", "otherhost"]
    finally:
        for proc in (spared, survivor):
            proc.kill()
            proc.communicate()


@pytest.mark.parametrize("held", [True, False])
def test_a_signal_after_the_command_returned_does_not_kill_the_exit(held: bool) -> None:
    """sk-run blocks SIGINT/SIGTERM once it has its exit code (cli.main): a Ctrl-C that lands while the
    interpreter exits leaves the decided code; without the hold Python dies by the signal (-2, no message)."""
    code = ("import os, signal, sys\n"
            "from sk_runner.process.lifetime import hold_signals_at_exit\n"
            "signal.signal(signal.SIGINT, signal.SIG_DFL)  # what the interpreter's shutdown restores\n"
            f"{'hold_signals_at_exit()' if held else 'pass'}\n"
            "os.kill(os.getpid(), signal.SIGINT)\n"
            "sys.exit(0)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == (0 if held else -signal.SIGINT), result.stderr


def test_sigkill_of_sk_run_kills_the_env_wiping_grandchild_in_the_group(tmp_path: Path) -> None:
    """Issue 29: a grandchild that stays in the workload's process group but re-executes itself with an
    empty environment (no marker) dies with sk-run: the watchdog kills the announced group too."""
    marker = f"sk-tune-wipe-{uuid.uuid4().hex}"
    proc, grandchild = _start_tree(tmp_path, marker, "wipe")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert _none_left(marker), f"still alive after sk-run was SIGKILLed: {_with_marker(marker)}"
    assert not process_alive(grandchild)


def test_next_sk_run_kills_the_env_wiping_grandchild_of_a_dead_owner_and_watchdog(tmp_path: Path) -> None:
    """The owner, its keeper and its watchdog SIGKILLed together: the process table records the live groups,
    so the next sk-run on the session kills the unmarked group member before it starts anything."""
    marker = f"sk-tune-wipe-{uuid.uuid4().hex}"
    proc, grandchild = _start_tree(tmp_path, marker, "wipe")
    (record_path,) = (tmp_path / "session" / lifetime.TABLE_DIR).glob("*.json")
    record = load_json_file(record_path)
    workload = int(next((tmp_path / "session").rglob("workload.pid")).read_text())
    assert [g["pgid"] for g in record["groups"]] == [workload]
    _kill_every_supervisor(proc, record)
    time.sleep(0.5)
    assert process_alive(grandchild), "the survivor this test needs was killed by something else"
    assert lifetime.reap_survivors(tmp_path / "session")
    assert _none_left(marker)
    assert list((tmp_path / "session" / lifetime.TABLE_DIR).glob("*.json")) == []


def test_reaping_spares_a_recorded_group_whose_leader_id_was_reused(tmp_path: Path) -> None:
    """A recorded group id whose leader pid now belongs to another process (other start ticks) is not killed."""
    other = subprocess.Popen([PY, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        record = {"groups": [{"pgid": other.pid, "start_ticks": "1"}, {"pgid": 1, "start_ticks": None}, {"pgid": "x"}]}
        assert lifetime.recorded_groups(record) == set()
        mine = {"groups": [{"pgid": other.pid, "start_ticks": lifetime.start_ticks(other.pid)}]}
        assert lifetime.recorded_groups(mine) == {other.pid}
    finally:
        other.kill()
        other.wait()


def test_attach_keeps_the_session_absolute_so_a_later_rewrite_never_lands_in_a_new_cwd(tmp_path: Path, monkeypatch) -> None:
    """The owner is process-wide: a session attached by a relative path, then a chdir, then a record
    rewrite (a spawn's group recorded) must write into the session, not plant one in the new cwd."""
    from sk_runner.process import lifetime

    (tmp_path / "session").mkdir()
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path)
    own = lifetime.owner()
    before = list(own.tables)
    try:
        lifetime.attach(Path("session"))
        monkeypatch.chdir(tmp_path / "elsewhere")
        own.rewrite_records()
        assert list((tmp_path / "elsewhere").iterdir()) == []
        assert (tmp_path / "session" / lifetime.TABLE_DIR / f"{own.token}.json").is_file()
    finally:
        own.tables[:] = before
