"""run_process: exit codes, signals, captured output, timeout kills the whole group."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from process_helpers import keepers_below

from sk_analytics.errors import EnvironmentBlocker
from sk_runner.devices.holders import command_of
from sk_runner.process import command_line, group_alive, keeper, process_alive, run_process

PY = sys.executable


def _run(tmp_path: Path, code: str, timeout_s: float | None = 20.0, grace_s: float = 1.0,
         on_start: Callable[[int], None] | None = None):
    return run_process(
        [PY, "-c", code],
        cwd=tmp_path,
        env={"PATH": os.environ.get("PATH", ""), "MARK": "m1"},
        stdout_path=tmp_path / "out" / "stdout.txt",
        stderr_path=tmp_path / "out" / "stderr.txt",
        timeout_s=timeout_s,
        grace_s=grace_s,
        on_start=on_start,
    )


def test_success_captures_output_and_uses_only_given_env(tmp_path: Path) -> None:
    code = "import os,sys; print(os.environ.get('MARK'), os.environ.get('HOME')); print('e', file=sys.stderr)"
    res = _run(tmp_path, code)
    assert res.ok and res.exit_code == 0 and res.signal is None and not res.timed_out
    assert (tmp_path / "out" / "stdout.txt").read_text() == "m1 None\n"
    assert (tmp_path / "out" / "stderr.txt").read_text() == "e\n"
    assert res.ended_ns >= res.started_ns and res.duration_s >= 0


def test_command_line_names_a_live_process_and_none_once_it_is_gone() -> None:
    """The one public reader of a pid's command line (the lock holder's and the NPU tenant's name both come from it)."""
    tail = "x" * 300
    code = "import sys; print('up', flush=True); sys.stdin.read()"
    child = subprocess.Popen([PY, "-c", code, tail], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert child.stdout is not None
    # Read only once the child speaks: between fork and exec its command line is empty (CI caught that race).
    assert child.stdout.readline() == b"up\n"
    try:
        assert command_line(child.pid) == f"{PY} -c {code} {tail}"
        assert command_of(child.pid) == (command_line(child.pid) or "")[:200]  # the holder's name: at most 200 characters
    finally:
        child.communicate(b"")
    assert command_line(child.pid) is None and command_of(child.pid) == ""


def test_nonzero_exit_and_crash_signal(tmp_path: Path) -> None:
    assert _run(tmp_path, "raise SystemExit(7)").exit_code == 7
    res = _run(tmp_path, "import os,signal; os.kill(os.getpid(), signal.SIGSEGV)")
    assert res.exit_code is None and res.signal == signal.SIGSEGV and res.signal_name == "SIGSEGV"
    assert not res.ok and not res.timed_out


def _wait_for_pid_file(path: Path) -> int:
    """The pid a workload's process wrote to ``path`` (atomically: a temp file renamed), waited for (the bound only
    matters when the process never starts)."""
    deadline = time.monotonic() + 60
    while not path.is_file():
        assert time.monotonic() < deadline, f"{path.name} never appeared"
        time.sleep(0.02)
    return int(path.read_text())


#: Python code for a workload's process: write its pid to the file named ``{name}`` atomically (``{name}.tmp``, renamed).
_WRITE_PID = "import os;open(\"{name}.tmp\",\"w\").write(str(os.getpid()));os.replace(\"{name}.tmp\",\"{name}\")"


def test_timeout_kills_whole_group_including_term_ignoring_child(tmp_path: Path) -> None:
    # The leader spawns a child that ignores SIGTERM, then hangs itself. The timeout starts once on_start returned: it
    # waits for the child's pid, so a loaded machine's slow Python start cannot let the timeout end the group first.
    code = (
        "import subprocess,sys,time;"
        "c=subprocess.Popen([sys.executable,'-c','import signal,time;"
        f"signal.signal(signal.SIGTERM,signal.SIG_IGN);{_WRITE_PID.format(name='child.pid')};time.sleep(300)']);"
        "time.sleep(300)"
    )
    started: list[float] = []

    def child_up(pid: int) -> None:
        _wait_for_pid_file(tmp_path / "child.pid")
        started.append(time.monotonic())

    res = _run(tmp_path, code, timeout_s=1.5, grace_s=0.5, on_start=child_up)
    assert res.timed_out and not res.ok
    assert time.monotonic() - started[0] < 60  # killed at the timeout, not waited out (the sleeps last 300 s)
    assert not group_alive(res.pid)
    child = int((tmp_path / "child.pid").read_text())
    assert not process_alive(child)


def test_background_child_left_after_normal_exit_is_reaped(tmp_path: Path) -> None:
    # The leader exits once its child has written its pid (the child says so on a pipe), never on a guess of how
    # long a Python start takes.
    code = (
        "import subprocess,sys;"
        f"c=subprocess.Popen([sys.executable,'-c','import time;{_WRITE_PID.format(name='bg.pid')};print(1,flush=True);time.sleep(300)'],"
        "stdout=subprocess.PIPE);"
        "c.stdout.readline()"
    )
    res = _run(tmp_path, code, grace_s=0.5)
    assert res.exit_code == 0
    assert not group_alive(res.pid)
    bg = int((tmp_path / "bg.pid").read_text())
    assert not process_alive(bg)


def test_missing_executable_is_environment_blocker(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentBlocker, match="cannot start workload"):
        run_process(
            [str(tmp_path / "nope")], cwd=tmp_path, env={}, stdout_path=tmp_path / "o",
            stderr_path=tmp_path / "e", timeout_s=1,
        )


def test_missing_working_directory_is_named_not_the_executable(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentBlocker, match=r"working directory .*gone does not exist"):
        run_process([sys.executable, "-c", "pass"], cwd=tmp_path / "gone", env={}, stdout_path=tmp_path / "o",
                    stderr_path=tmp_path / "e", timeout_s=1)


def test_workload_gets_exactly_its_environment_and_default_signal_dispositions(tmp_path: Path) -> None:
    """Started under a keeper (a Python process), the workload still sees only the environment given plus
    its marker (no LC_CTYPE from Python's locale coercion), ignores no signal (Python ignores SIGPIPE) and
    blocks none, even when sk-run's process had SIGINT/SIGTERM/SIGHUP blocked. Signals the C library
    reserves for itself (32, 33) cannot be set from Python: what a parent ignored there stays so. The masks
    are read by the shell's own process once it exec'd grep (a shell waiting for a child blocks everything).
    Also when sk-run's process was started ignoring SIGINT/SIGQUIT (a shell's ``cmd &``) and SIGHUP (``nohup``):
    the keeper inherits those ignores through exec, the workload gets the defaults."""
    blocked = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}
    ignored = (signal.SIGINT, signal.SIGQUIT, signal.SIGHUP)
    handlers = {sig: signal.getsignal(sig) for sig in ignored}
    before = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)
    try:
        for sig in ignored:
            signal.signal(sig, signal.SIG_IGN)
        res = run_process(["/bin/sh", "-c", "tr '\\0' '\\n' < /proc/$$/environ; exec grep -E 'Sig(Ign|Blk)' /proc/self/status"],
                          cwd=tmp_path, env={"PATH": os.environ.get("PATH", ""), "MARK": "m1"}, stdout_path=tmp_path / "o",
                          stderr_path=tmp_path / "e", timeout_s=30)
    finally:
        for sig, handler in handlers.items():
            signal.signal(sig, handler)
        signal.pthread_sigmask(signal.SIG_SETMASK, before)
    assert res.ok, (tmp_path / "e").read_text()
    lines = (tmp_path / "o").read_text().splitlines()
    assert sorted(line.split("=", 1)[0] for line in lines[:-2]) == ["MARK", "PATH", "SK_TUNE_LIFETIME"]
    masks = {line.split()[0]: int(line.split()[1], 16) for line in lines[-2:]}
    settable = sum(1 << (int(sig) - 1) for sig in signal.valid_signals() if int(sig) < 65)
    assert masks["SigIgn:"] & settable == 0, lines[-2:]
    assert masks["SigBlk:"] == 0, lines[-2:]


@pytest.mark.skipif(not keeper.available(), reason="child subreapers are Linux's")
def test_a_workload_that_ended_before_sk_run_read_the_keepers_reply(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under load the keeper may send ``pid``, ``exit`` and ``done`` before sk-run reads its first line: the
    later lines are the workload's exit status, not a keeper that failed to start. sk-run's read is held here
    until the keeper's ``done`` is on the socket (the window a loaded machine opens by chance)."""
    first_line = keeper._first_line

    def read_late(sock: socket.socket) -> tuple[str, bytes]:
        deadline = time.monotonic() + 60
        while b"done\n" not in sock.recv(4096, socket.MSG_PEEK):
            assert time.monotonic() < deadline, "the keeper never said done"
            time.sleep(0.01)
        return first_line(sock)

    monkeypatch.setattr(keeper, "_first_line", read_late)
    res = _run(tmp_path, "raise SystemExit(7)")
    assert res.exit_code == 7 and res.signal is None and not res.timed_out


@pytest.mark.skipif(not keeper.available(), reason="child subreapers are Linux's")
def test_the_keeper_is_the_workloads_parent_and_is_gone_with_it(tmp_path: Path) -> None:
    res = run_process([PY, "-c", "import os; print(os.getppid())"], cwd=tmp_path, env={}, stdout_path=tmp_path / "o",
                      stderr_path=tmp_path / "e", timeout_s=30)
    parent = int((tmp_path / "o").read_text())
    assert res.ok and parent != os.getpid()  # the keeper
    assert not process_alive(parent)
    assert keepers_below(os.getpid()) == []



@pytest.mark.skipif(not keeper.available(), reason="child subreapers are Linux's")
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_a_keeper_killed_under_a_running_workload(tmp_path: Path, sig: signal.Signals) -> None:
    """Someone signals the keeper mid-run. SIGTERM: it first kills its whole subtree, the setsid escapee too;
    SIGKILL: the workload dies with it (parent-death signal), and the escapee, which kept its marker, is ended
    by run_process when the workload is. Either way the run ends as killed and nothing is left."""
    code = ("import os, signal, sys, time\n"
            "if os.fork() == 0:\n"
            "    os.setsid(); signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
            "    open('escapee.pid', 'w').write(str(os.getpid())); time.sleep(300)\n"
            "time.sleep(300)\n")
    workload: list[int] = []

    def signal_keeper(pid: int) -> None:
        workload.append(pid)
        deadline = time.monotonic() + 60
        while not (tmp_path / "escapee.pid").is_file() or not (tmp_path / "escapee.pid").read_text():
            assert time.monotonic() < deadline, "the escapee never started"
            time.sleep(0.02)
        ppid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        assert ppid != os.getpid() and ppid in keepers_below(os.getpid())
        os.kill(ppid, sig)

    res = run_process([PY, "-c", code], cwd=tmp_path, env={}, stdout_path=tmp_path / "o", stderr_path=tmp_path / "e",
                      timeout_s=120, on_start=signal_keeper)
    escapee = int((tmp_path / "escapee.pid").read_text())
    try:
        assert res.signal == signal.SIGKILL and not res.timed_out
        assert not process_alive(workload[0]) and not process_alive(escapee)
        assert keepers_below(os.getpid()) == []
    finally:
        for pid in (workload[0], escapee):
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
