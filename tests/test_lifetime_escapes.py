"""Issue 36: descendants that hide die with the workload's keeper (sk_runner/process/keeper.py), a child subreaper.

Two escapers, each started by a workload that then hangs:

* ``reexec``: a child that calls ``setsid()`` and re-executes itself with an EMPTY environment (no marker,
  out of the workload's process group and session);
* ``hopper``: a child (empty environment too) that forks, lets its parent exit and calls ``setsid()`` at
  every hop, so that it never has the same pid, group or parent for long.

Each must be gone after SIGKILL of sk-run, after the ``--timeout`` kill, and after SIGKILL of both sk-run
and its watchdog, with no next sk-run on the session. The escapers carry the test's marker in their argv
and hold a FIFO open that tells the test when the last of them died; every test ends whatever is left in
a ``finally`` (a stop file, and SIGKILL of every process with the marker), so none is left even when it fails.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from process_helpers import with_marker
from runner_fake import BASE_CONFIG

from sk_analytics.files.strict_json import load_json_file
from sk_runner.process import keeper, lifetime, process_alive

pytestmark = pytest.mark.skipif(not keeper.available(), reason="child subreapers are Linux's (prctl PR_SET_CHILD_SUBREAPER)")

PY = sys.executable
SK_RUN = [PY, "-c", "from sk_runner.cli import main; main()"]

# argv: marker, mode, the FIFO, the stop file. The escaper runs with an empty environment in a session of its
# own and ignores SIGTERM; every process of it holds the FIFO open for writing (inherited across forks) and
# writes its pid there, so the test's read end sees end of file exactly when none of them is left (a /proc scan
# can miss a process that changes its pid every 10 ms). The stop file ends it cooperatively (the clean-up of
# a failed test). The workload writes its pid and hangs.
WORKLOAD = r'''
import os, sys, time
marker, mode, fifo, stop = sys.argv[1:5]
escaper = r"""
import os, signal, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
marker, mode, fifo, stop = sys.argv[1:5]
alive = os.open(fifo, os.O_WRONLY)
os.setsid()
while not os.path.exists(stop):
    os.write(alive, f"{os.getpid()}\n".encode())
    if mode == "reexec":
        while not os.path.exists(stop):
            time.sleep(0.1)
        break
    if os.fork():
        os._exit(0)  # the parent leaves: the child is an orphan, re-parented
    os.setsid()
    time.sleep(0.01)
"""
if os.fork() == 0:
    os.execve(sys.executable, [sys.executable, "-c", escaper, marker, mode, fifo, stop], {})
open(os.path.join(os.path.dirname(fifo), "workload.pid"), "w").write(str(os.getpid()))
time.sleep(300)
'''


class Escaper:
    """The test's side of the escaper: its marker, the FIFO's read end, the pids it reported, the stop file."""

    def __init__(self, folder: Path) -> None:
        self.marker = f"sk-tune-escaper-{uuid.uuid4().hex}"
        self.fifo = folder / "alive.fifo"
        os.mkfifo(self.fifo)
        self.fd = os.open(self.fifo, os.O_RDONLY | os.O_NONBLOCK)  # opened first: the escaper's open does not block
        self.stop = folder / "stop"
        self.pids: list[int] = []
        self.opened = False
        self._rest = b""

    def _read(self) -> bool:
        """Take what the escapers wrote; True at end of file (every one of them is gone)."""
        while True:
            try:
                chunk = os.read(self.fd, 4096)
            except BlockingIOError:
                return False
            if not chunk:
                return self.opened  # no writer: before the first one opened it, that means nothing yet
            self.opened = True
            *lines, self._rest = (self._rest + chunk).split(b"\n")
            self.pids += [int(x) for x in lines if x]

    def wait_for(self, hops: int, proc: subprocess.Popen[bytes], timeout_s: float = 120) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.pids) < hops:
            assert not self._read(), f"the escaper ended by itself ({self.pids})"
            assert proc.poll() is None, f"sk-run ended first (exit {proc.returncode}): {proc.communicate()[1].decode()[-2000:]}"
            assert time.monotonic() < deadline, f"the escaper never started ({self.pids})"
            select.select([self.fd], [], [], 0.1)

    def gone(self, timeout_s: float) -> bool:
        """Whether every process of the escaper has died within ``timeout_s`` (end of file on the FIFO)."""
        deadline = time.monotonic() + timeout_s
        while not self._read():
            if time.monotonic() > deadline:
                return False
            select.select([self.fd], [], [], 0.1)
        return True


@pytest.fixture
def escaper(tmp_path: Path) -> Iterator[Escaper]:
    """An escaper's test side; afterwards it is ended whatever the test did (stop file, and SIGKILL of
    every process with its marker) until the FIFO says none is left."""
    side = Escaper(tmp_path)
    try:
        yield side
    finally:
        side.stop.touch()
        deadline = time.monotonic() + 60
        while not side.gone(0.05) and time.monotonic() < deadline:
            for pid in with_marker(side.marker):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        os.close(side.fd)


@contextmanager
def _sk_run(tmp_path: Path, escaper: Escaper, mode: str, timeout_s: float = 300) -> Iterator[subprocess.Popen[bytes]]:
    """``sk-run trial`` whose workload starts the escaper; out of the block sk-run is gone (SIGKILL if need be)
    and the escaper has started and escaped."""
    proc = _start(tmp_path, escaper, mode, timeout_s)
    try:
        _escaped(proc, escaper, mode)
        yield proc
    finally:
        proc.kill()
        proc.wait()


def _start(tmp_path: Path, escaper: Escaper, mode: str, timeout_s: float) -> subprocess.Popen[bytes]:
    """``sk-run trial`` whose workload starts the escaper."""
    (tmp_path / "workload.py").write_text(WORKLOAD)
    (tmp_path / "base.json").write_text(json.dumps(BASE_CONFIG))
    (tmp_path / "session").mkdir()
    argv = [*SK_RUN, "trial", "--session", str(tmp_path / "session"), "--round", "O0", "--incumbent", "--runs", "1",
            "--base-config", str(tmp_path / "base.json"), "--backend", "command", "--ranks", "1", "--warmup", "1",
            "--timeout", str(timeout_s), "--", PY, str(tmp_path / "workload.py"), escaper.marker, mode, str(escaper.fifo),
            str(escaper.stop)]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASCEND_PROF", "SK_RUN", "ASCEND_OP_COMPILE", lifetime.MARKER_ENV))}
    return subprocess.Popen(argv, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


def _escaped(proc: subprocess.Popen[bytes], escaper: Escaper, mode: str) -> None:
    """Wait until the escaper is out of reach of everything but the keeper."""
    escaper.wait_for(1 if mode == "reexec" else 5, proc)
    if mode == "reexec":
        pid = escaper.pids[0]
        assert Path(f"/proc/{pid}/environ").read_bytes() == b""  # no marker
        assert os.getsid(pid) == pid  # out of the workload's group and session
        assert pid in with_marker(escaper.marker)  # (with sk-run and the workload, whose argv hold it too)


@pytest.mark.parametrize("mode", ["reexec", "hopper"])
def test_escapers_die_with_a_sigkilled_sk_run(tmp_path: Path, escaper: Escaper, mode: str) -> None:
    with _sk_run(tmp_path, escaper, mode) as proc:
        proc.kill()
        proc.wait()
        assert escaper.gone(15), f"alive after SIGKILL of sk-run: {with_marker(escaper.marker)}"


@pytest.mark.parametrize("mode", ["reexec", "hopper"])
def test_escapers_die_with_a_timed_out_workload(tmp_path: Path, escaper: Escaper, mode: str) -> None:
    """The timeout (generous: the escaper must have started before it, two Python starts that a loaded machine can
    stretch to seconds each) kills the workload; by the time sk-run has recorded the run and exited, nothing of it is left."""
    with _sk_run(tmp_path, escaper, mode, timeout_s=20) as proc:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode in (0, 1), err.decode()
        scene = load_json_file(next((tmp_path / "session").rglob("FAILURE_SCENES/attempt-1/scene.json")))
        assert scene["observable_failure"]["outcome"] == "timeout" and scene["observable_failure"]["timed_out"] is True
        assert escaper.gone(0), f"alive after the timeout: {with_marker(escaper.marker)}"


@pytest.mark.parametrize("mode", ["reexec", "hopper"])
def test_escapers_die_when_sk_run_and_its_watchdog_are_sigkilled(tmp_path: Path, escaper: Escaper, mode: str) -> None:
    """No next sk-run needed: the keeper survives both (it carries no marker and leads no announced group)."""
    with _sk_run(tmp_path, escaper, mode) as proc:
        (record,) = [load_json_file(p) for p in (tmp_path / "session" / lifetime.TABLE_DIR).glob("*.json")]
        assert record["pid"] == proc.pid and record["watchdog_pid"]
        os.kill(record["watchdog_pid"], signal.SIGKILL)
        proc.kill()
        proc.wait()
        assert escaper.gone(15), f"alive after SIGKILL of sk-run and its watchdog: {with_marker(escaper.marker)}"
        assert not process_alive(record["watchdog_pid"])
