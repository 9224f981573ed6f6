"""Run one workload process cleanly: own process group, captured output, hard timeout.

Every Stage O measurement is one fresh process (protocol §5). The process is
started in a new session (so it leads its own process group); its stdout and
stderr go straight to files; on timeout the whole group gets SIGTERM, then
SIGKILL after a grace period, and we wait until no member of the group is left,
so a hung workload never leaves a process behind. On Linux the process runs
under a keeper (:mod:`sk_runner.process.keeper`), a child subreaper that ends every
descendant, in the group or not. Who owns the process after that (markers, the
watchdog, the session's process table, deferred signals) is
:mod:`sk_runner.process.lifetime`.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any

import psutil

from sk_analytics.errors import EnvironmentBlocker
from sk_analytics.files.flock import (
    command_line as command_line,  # read where sk_analytics names a lock's holder too
    one_line as one_line,
)
from sk_runner.process import keeper, lifetime
from sk_runner.process.faults import EnvironmentFault, process_fault

#: Seconds between SIGTERM and SIGKILL of a timed-out process group.
DEFAULT_GRACE_S = 5.0


@dataclass(frozen=True)
class ProcessResult:
    """What one finished process did (times are ``time.time_ns`` wall clock)."""

    pid: int
    exit_code: int | None
    signal: int | None
    timed_out: bool
    started_ns: int
    ended_ns: int
    duration_s: float

    @property
    def ok(self) -> bool:
        """Exited by itself with status 0."""
        return self.exit_code == 0 and self.signal is None and not self.timed_out

    @property
    def signal_name(self) -> str | None:
        if self.signal is None:
            return None
        try:
            return signal.Signals(self.signal).name
        except ValueError:
            return f"SIG{self.signal}"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["signal_name"] = self.signal_name
        return data


def run_process(
    argv: list[str],
    *,
    cwd: Path,
    env: Mapping[str, str],
    stdout_path: Path,
    stderr_path: Path,
    timeout_s: float | None,
    grace_s: float = DEFAULT_GRACE_S,
    on_start: Callable[[int], None] | None = None,
    environment_faults: bool = True,
) -> ProcessResult:
    """Start ``argv`` in its own process group and wait for it (and its group).

    ``env`` is the *complete* child environment (nothing is inherited) except
    the lifetime marker (:mod:`sk_runner.process.lifetime`) that lets the process tree,
    also parts of it that left the group, be killed as a whole.
    ``on_start`` gets the child's pid (= its process group) once it runs, so a
    supervisor (a campaign) can record it and reap the group later.
    Raises :class:`EnvironmentBlocker` when the process cannot be started at
    all (missing executable, bad cwd): that is a failure before the command
    started, not a workload failure. With ``environment_faults`` a process that
    failed because of the machine (disk full, I/O error, read-only file system,
    no file descriptors: :mod:`sk_runner.process.faults`) raises
    :class:`~sk_runner.process.faults.EnvironmentFault` instead of returning.
    """
    if not argv:
        raise EnvironmentBlocker("empty workload command")
    if not Path(cwd).is_dir():  # Popen would blame the executable
        raise EnvironmentBlocker(f"cannot start workload {argv[0]!r}: working directory {cwd} does not exist")
    stdout_path.parent.mkdir(parents=True, exist_ok=True)
    stderr_path.parent.mkdir(parents=True, exist_ok=True)
    child_env, spawn = lifetime.child_env(env)
    proc: subprocess.Popen[bytes] | keeper.Kept | None = None
    with open(stdout_path, "wb") as out, open(stderr_path, "wb") as err:
        timed_out = False
        try:
            with lifetime.deferred_signals():  # an interrupt waits until the child is owned, then raises
                started_ns = time.time_ns()
                t0 = time.monotonic()
                proc = _spawn(argv, cwd, child_env, out, err, grace_s)
                lifetime.spawned(proc.pid, spawn)
                if on_start is not None:
                    on_start(proc.pid)
            returncode = _wait(proc, timeout_s)
        except subprocess.TimeoutExpired:
            assert proc is not None
            timed_out = True
            returncode = _kill_group(proc, grace_s)
        except BaseException:
            # Our own interruption (Ctrl-C, SIGTERM of sk-run): never orphan the group or its escapees.
            if proc is not None:
                with lifetime.deferred_signals():  # a second Ctrl-C does not cut the clean-up short
                    _kill_group(proc, grace_s=1.0)
                    _release(proc, kill=True)
                    lifetime.ended(proc.pid)
            raise
        duration_s = time.monotonic() - t0
        ended_ns = time.time_ns()
    _release(proc, kill=timed_out)
    _reap_group(proc.pid, grace_s)
    lifetime.ended(proc.pid)
    exit_code = returncode if returncode >= 0 else None
    sig = -returncode if returncode < 0 else None
    if environment_faults and not timed_out and returncode != 0:
        evidence = process_fault(stderr_path)
        if evidence is not None:
            raise EnvironmentFault(argv, evidence, stderr_path)
    return ProcessResult(
        pid=proc.pid,
        exit_code=exit_code,
        signal=sig,
        timed_out=timed_out,
        started_ns=started_ns,
        ended_ns=ended_ns,
        duration_s=duration_s,
    )


def _spawn(argv: list[str], cwd: Path, env: Mapping[str, str], out: IO[bytes], err: IO[bytes],
           grace_s: float) -> subprocess.Popen[bytes] | keeper.Kept:
    """Start in a new session under a keeper (:mod:`sk_runner.process.keeper`: every descendant dies with the
    workload or with us), or where there is none dying with us on Linux; a start failure is an environment blocker."""
    linux = sys.platform.startswith("linux")
    try:
        if keeper.available():
            return keeper.start(argv, cwd, env, out, err, grace_s)
        return subprocess.Popen(  # noqa: S603 - argv list, no shell
            list(argv),
            cwd=str(cwd),
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            start_new_session=True,
            close_fds=True,
            preexec_fn=_die_with_parent(os.getpid()) if linux else None,
        )
    except OSError as exc:
        raise EnvironmentBlocker(f"cannot start workload {argv[0]!r}: {exc.strerror or exc}") from exc


def _release(proc: subprocess.Popen[bytes] | keeper.Kept, *, kill: bool) -> None:
    """The workload ended (or is being ended): its keeper ends what it left anywhere below it, then exits."""
    if isinstance(proc, keeper.Kept):
        proc.close(kill=kill)


def _wait(proc: subprocess.Popen[bytes] | keeper.Kept, timeout_s: float | None) -> int:
    """Wait for the leader; with a timeout, sleep on a pidfd (a keeper's socket) instead of polling
    (``Popen.wait(timeout)`` polls every few ms up to 50 ms, adding latency)."""
    if isinstance(proc, keeper.Kept):
        return proc.wait(timeout_s)
    if timeout_s is None:
        return proc.wait()
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        return proc.wait(timeout=timeout_s)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(min(max(0, int(timeout_s * 1000)), 2**31 - 1)):
            raise subprocess.TimeoutExpired(proc.args, timeout_s)
    finally:
        os.close(fd)
    return proc.wait()


def _die_with_parent(parent: int) -> Callable[[], None]:
    """In the child: get SIGKILL when the thread of sk-run that started it ends (even by
    SIGKILL), so a killed trial never leaves its workload running (Linux prctl). A parent
    that died before the prctl took effect is caught by the ppid check."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)

    def arm() -> None:
        PR_SET_PDEATHSIG = 1
        try:
            libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            return
        if os.getppid() != parent:
            os._exit(137)

    return arm


def _signal_group(pgid: int, sig: int) -> bool:
    """Send ``sig`` to the group; False when no member is left."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_GONE = frozenset({psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD})
"""States of a process that has ended: a zombie waits only for its parent to reap it."""


def group_alive(pgid: int) -> bool:
    """True while a live (non-zombie) process of group ``pgid`` exists.

    Zombies are dead already; in containers whose PID 1 does not reap, an
    orphan's zombie would otherwise look alive forever.
    """
    if not _signal_group(pgid, 0):
        return False
    for process in psutil.process_iter(["status"]):
        try:
            if process.info["status"] not in _GONE and os.getpgid(process.pid) == pgid:
                return True
        except OSError:  # ended between the listing and the question
            continue
    return False


def process_alive(pid: int) -> bool:
    """True while process ``pid`` exists and is not a zombie."""
    try:
        return psutil.Process(pid).status() not in _GONE
    except psutil.NoSuchProcess:
        return False
    except psutil.AccessDenied:  # it exists; whose it is does not matter here
        return True


def _kill_group(proc: subprocess.Popen[bytes] | keeper.Kept, grace_s: float) -> int:
    """TERM the whole group, KILL it after ``grace_s``; return the leader's status."""
    pgid = proc.pid
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline:
        if proc.poll() is not None and not group_alive(pgid):
            break
        time.sleep(0.05)
    _signal_group(pgid, signal.SIGKILL)
    return proc.wait()


def kill_group(pgid: int, grace_s: float = DEFAULT_GRACE_S) -> None:
    """TERM, then KILL, every live member of process group ``pgid`` and wait until none is left."""
    _reap_group(pgid, grace_s)


def _reap_group(pgid: int, grace_s: float) -> None:
    """Kill stragglers the leader left in its group (daemonised children)."""
    if not group_alive(pgid):
        return
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.05)
    _signal_group(pgid, signal.SIGKILL)
    deadline = time.monotonic() + 5.0
    while group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.02)
