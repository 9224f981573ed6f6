"""The keeper: a child subreaper between sk-run and each workload, so no descendant outlives them.

Linux re-parents an orphan to its nearest living ancestor that called
``prctl(PR_SET_CHILD_SUBREAPER)``, not to init. The keeper is that ancestor: sk-run
starts ``python -I -S keeper.py FD`` (this file, standard library only, in a session
of its own), the keeper becomes a subreaper and forks the workload (in a new session,
with ``PR_SET_PDEATHSIG(SIGKILL)``: it dies with the keeper). Whatever a descendant
does — ``setsid()``, an empty environment, fork-hopping so that every parent has
exited — it stays a descendant of the keeper and is found through
``/proc/<pid>/task/*/children``. The keeper ends them all and reaps them until it
has no child left (then no descendant is left):

* when the workload exits: TERM every remaining descendant, KILL it after the grace
  period (what ``_reap_group`` does to a process group, for processes outside it too);
* when its socket to sk-run reaches end of file — sk-run exited, or died by any
  signal, SIGKILL and the OOM killer included, or closed it to end the workload now —
  and on SIGTERM/SIGINT/SIGHUP of the keeper itself: KILL every descendant at once.

Why not sk-run or the watchdog as the subreaper: a subreaper's orphans go to *its*
reaper when it dies, so sk-run's would escape to init exactly when sk-run is
SIGKILLed; and the watchdog is no ancestor of the workloads, so it inherits none of
them. The keeper outlives sk-run because it carries neither sk-run's marker nor a
group sk-run announces, so neither the watchdog nor a later sk-run kills it; it only
ends itself once its subtree is gone (docs/faults.md, "Processes and signals").

Protocol on the socket (one JSON line from sk-run, then lines from the keeper):
``{"argv", "env", "grace_s"}`` -> ``pid <workload>`` or ``error <errno>``, then
``exit <returncode>`` (as Popen's: negative for a signal) and ``done`` once no
descendant is left. The workload's environment travels on the socket, not in the
keeper's own, which Python changes at start-up (locale coercion adds ``LC_CTYPE``).
"""

from __future__ import annotations

import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PR_GET_CHILD_SUBREAPER = 37
KILL_LIMIT_S = 60.0
"""How long the keeper keeps killing a subtree that keeps forking before it gives up and exits."""
KEEPER_SIGNALS = (signal.SIGCHLD, signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
"""What the keeper handles (a child's end, or someone ending the keeper); its workload gets their defaults."""

_available: bool | None = None


# ============================================================================ sk-run's side


def available() -> bool:
    """Whether workloads can run under a keeper here: Linux with ``/proc`` children lists and child subreapers (3.4+)."""
    global _available
    if _available is None:
        children = Path(f"/proc/self/task/{os.getpid()}/children")  # the kernel lists children (CONFIG_PROC_CHILDREN)
        _available = sys.platform.startswith("linux") and children.is_file() and _prctl_get_subreaper()
    return _available


def _prctl_get_subreaper() -> bool:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        value = ctypes.c_int(0)
        return int(libc.prctl(PR_GET_CHILD_SUBREAPER, ctypes.byref(value), 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


class Kept:
    """A workload started under a keeper, with the part of ``Popen``'s interface :mod:`sk_runner.process` uses:
    ``pid`` and ``args`` are the workload's, ``poll``/``wait`` its exit status (as Popen's returncode)."""

    def __init__(self, keeper: subprocess.Popen[bytes], sock: socket.socket, pid: int, args: Sequence[str], grace_s: float,
                 said: bytes = b"") -> None:
        """``said``: what the keeper sent after its ``pid`` line, read with it (a quick workload's exit, say)."""
        self.keeper = keeper
        self.sock = sock
        self.pid = pid
        self.args = list(args)
        self.grace_s = grace_s
        self.returncode: int | None = None
        self.done = False
        self._buffer = b""
        self._take(said)

    def _read(self, timeout_s: float | None) -> bool:
        """Take the keeper's next lines (waiting up to ``timeout_s``); False when nothing came in time."""
        if self.sock.fileno() < 0:  # we hung up: nothing more will be said
            return self._silent()
        if not select.select([self.sock], [], [], timeout_s)[0]:
            return False
        try:
            chunk = self.sock.recv(4096)
        except OSError:
            chunk = b""
        if not chunk:
            return self._silent()
        self._take(chunk)
        return True

    def _take(self, chunk: bytes) -> None:
        """Act on every complete line the keeper sent (``exit <code>``, ``done``); keep a partial one."""
        self._buffer += chunk
        *lines, self._buffer = self._buffer.split(b"\n")
        for line in lines:
            word, _, value = line.decode(errors="replace").partition(" ")
            if word == "exit":
                self.returncode = int(value)
            elif word == "done":
                self.done = True

    def _silent(self) -> bool:
        """The keeper says no more: a workload it did not report on died with it (parent-death signal)."""
        self.done = True
        if self.returncode is None:
            self.returncode = -signal.SIGKILL
        return True

    def poll(self) -> int | None:
        while self.returncode is None and not self.done and self._read(0):
            pass
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.returncode is None:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not self._read(left) and left is not None and left <= 0:
                raise subprocess.TimeoutExpired(self.args, timeout or 0)
        return self.returncode

    def close(self, *, kill: bool) -> None:
        """Let the keeper end the workload's subtree and exit; ``kill``: at once (SIGKILL), else after the
        workload ended (TERM, then KILL after the grace period). Returns when the keeper has exited."""
        deadline = time.monotonic() + self.grace_s + 30.0
        try:
            while not (kill or self.done) and time.monotonic() < deadline:
                self._read(max(0.0, deadline - time.monotonic()))
        finally:  # also when an interrupt cuts the wait short
            self._hang_up()  # end of file: the keeper kills what is left at once
        try:
            self.keeper.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:  # a keeper that does not finish: its subtree is left to the watchdog's scan
            self.keeper.kill()
            self.keeper.wait()

    def _hang_up(self) -> None:
        if self.sock.fileno() >= 0:
            self.sock.close()


def start(argv: Sequence[str], cwd: Path, env: Mapping[str, str], stdout: IO[bytes], stderr: IO[bytes],
          grace_s: float) -> Kept:
    """Start ``argv`` under a keeper; returns once it runs. Raises ``OSError`` (its errno) when it cannot be started."""
    ours, theirs = socket.socketpair()  # both close-on-exec: only the keeper gets its end (pass_fds)
    try:
        keeper = subprocess.Popen(  # noqa: S603 - fixed argv
            [sys.executable, "-I", "-S", __file__, str(theirs.fileno())], cwd=str(cwd), env={}, stdin=subprocess.DEVNULL,
            stdout=stdout, stderr=stderr, start_new_session=True, close_fds=True, pass_fds=(theirs.fileno(),))
    except BaseException:
        ours.close()
        raise
    finally:
        theirs.close()
    try:
        ours.settimeout(60.0)  # the keeper answers in milliseconds; a minute means it is stuck
        ours.sendall(json.dumps({"argv": list(argv), "env": dict(env), "grace_s": grace_s}).encode() + b"\n")
        reply, said = _first_line(ours)
        ours.settimeout(None)
    except OSError:
        reply, said = "", b""
    word, _, value = reply.partition(" ")
    if word == "pid" and value.isdigit():
        return Kept(keeper, ours, int(value), argv, grace_s, said)
    ours.close()  # the keeper kills whatever it started and exits
    try:
        keeper.wait(timeout=30.0)
    except subprocess.TimeoutExpired:
        keeper.kill()
        keeper.wait()
    code = int(value) if word == "error" and value.isdigit() else None
    if code is not None:
        raise OSError(code, os.strerror(code), argv[0] if argv else None)
    raise OSError(f"the keeper did not start (exit {keeper.returncode})")


def _first_line(sock: socket.socket) -> tuple[str, bytes]:
    """The keeper's first line, and whatever it sent after it in the same reads: a workload that ends at once
    has its ``exit`` and ``done`` lines sent before sk-run reads (under load), and they belong to :class:`Kept`."""
    data = b""
    while b"\n" not in data:
        chunk = sock.recv(256)
        if not chunk:
            break
        data += chunk
    line, _, rest = data.partition(b"\n")
    return line.decode(errors="replace").strip(), rest


# ============================================================================ the keeper process


def _libc() -> Any:
    import ctypes

    return ctypes.CDLL(None, use_errno=True)


def descendants(root: int) -> list[int]:
    """Every live descendant of ``root`` (through ``/proc/<pid>/task/*/children``), parents before children."""
    found: list[int] = []
    todo = [root]
    while todo:
        pid = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as fh:
                    kids = [int(x) for x in fh.read().split()]
            except OSError:
                continue
            found += kids
            todo += kids
    return found


def _reap() -> tuple[list[tuple[int, int]], bool]:
    """Reap every exited child: ([(pid, wait status)], whether a child is left)."""
    reaped: list[tuple[int, int]] = []
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return reaped, False
        if pid == 0:
            return reaped, True
        reaped.append((pid, status))


def _signal_all(sig: int) -> tuple[int, int]:
    """Send ``sig`` to every descendant: (how many were found, how many could be signalled)."""
    pids = descendants(os.getpid())
    sent = 0
    for pid in pids:
        try:
            os.kill(pid, sig)
            sent += 1
        except ProcessLookupError:
            sent += 1  # gone already
        except OSError:  # another user's process (setuid): not ours to signal
            pass
    return len(pids), sent


class _Keeper:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.hung_up = False
        self.stop = False
        wake_r, wake_w = os.pipe()
        os.set_blocking(wake_w, False)
        self.wake = wake_r
        signal.set_wakeup_fd(wake_w)
        for sig in KEEPER_SIGNALS:
            signal.signal(sig, self._on_signal)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, KEEPER_SIGNALS)  # blocked by whoever started sk-run, they would never come

    def _on_signal(self, signum: int, frame: Any) -> None:
        if signum != signal.SIGCHLD:
            self.stop = True  # someone ends the keeper: it ends its subtree first

    def send(self, line: str) -> None:
        try:
            self.sock.sendall(line.encode() + b"\n")
        except OSError:
            self.hung_up = True

    def wait_event(self, timeout_s: float | None) -> None:
        """Sleep until a signal, data or end of file on the socket, or ``timeout_s``."""
        waited: list[socket.socket | int] = [self.sock, self.wake]
        ready = select.select(waited, [], [], timeout_s)[0]
        if self.wake in ready:
            os.read(self.wake, 512)
        if self.sock in ready:
            try:
                if not self.sock.recv(4096):
                    self.hung_up = True
            except OSError:
                self.hung_up = True

    def kill_all(self) -> None:
        """SIGKILL every descendant and reap until no child is left (none is then left below us), or only
        processes we may not signal are (another user's: a documented limit), or :data:`KILL_LIMIT_S` passed."""
        deadline = time.monotonic() + KILL_LIMIT_S
        refused_since: float | None = None
        while time.monotonic() < deadline:
            found, sent = _signal_all(signal.SIGKILL)
            _, left = _reap()
            if not left:
                return
            if found and not sent:
                refused_since = refused_since or time.monotonic()
                if time.monotonic() - refused_since > 1.0:
                    return
            else:
                refused_since = None
            if not sent:
                time.sleep(0.005)  # only dying children (zombies to be), or processes not ours, are left

    def finish(self, grace_s: float) -> None:
        """The workload ended: TERM what it left behind, KILL it after ``grace_s``."""
        deadline = time.monotonic() + grace_s
        if _signal_all(signal.SIGTERM)[0]:
            while time.monotonic() < deadline and not (self.hung_up or self.stop):
                _, left = _reap()
                if not left:
                    return
                self.wait_event(0.02)
        self.kill_all()

    def run(self, request: Mapping[str, Any]) -> int:
        argv, env = [str(a) for a in request["argv"]], {str(k): str(v) for k, v in request["env"].items()}
        libc = _libc()
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)  # fails only before Linux 3.4, which sk-run ruled out
        err_r, err_w = os.pipe()
        me = os.getpid()
        workload = os.fork()
        if workload == 0:
            _exec(argv, env, libc, me, err_w)
        os.close(err_w)
        with os.fdopen(err_r, "rb") as fh:
            failed = fh.read()
        if failed:
            os.waitpid(workload, 0)
            self.send(f"error {failed.decode()}")
            return 0
        self.send(f"pid {workload}")
        while True:
            for pid, status in _reap()[0]:
                if pid == workload:
                    self.send(f"exit {_returncode(status)}")
                    self.finish(float(request.get("grace_s", 5.0)))
                    self.send("done")
                    return 0
            if self.hung_up or self.stop:
                self.kill_all()
                return 0
            self.wait_event(None)


def _exec(argv: list[str], env: dict[str, str], libc: Any, keeper: int, err_w: int) -> None:
    """In the forked child: a session of its own, die with the keeper, default signal dispositions, exec."""
    try:
        os.setsid()
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != keeper:
            os._exit(137)
        signal.set_wakeup_fd(-1)
        _default_dispositions()
        signal.pthread_sigmask(signal.SIG_SETMASK, ())  # nor a blocked signal of sk-run's parent (a TERM would not end it)
        os.execvpe(argv[0], argv, env)
    except OSError as exc:
        os.write(err_w, str(exc.errno or 0).encode())
    finally:
        os._exit(127)


def _default_dispositions() -> None:
    """Every signal back to its default action. Ours are handled here, Python ignores SIGPIPE and SIGXFSZ, and
    a launcher may have ignored more (a shell ignores SIGINT and SIGQUIT for ``cmd &``, ``nohup`` SIGHUP): an
    exec keeps an ignored signal ignored, and the workload must behave the same however sk-run was started."""
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):  # the C library's own real-time signals (32, 33) are out of Python's reach
            pass


def _returncode(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def main(argv: list[str]) -> int:
    sock = socket.socket(fileno=int(argv[0]))
    os.set_inheritable(sock.fileno(), False)
    line = b""
    while not line.endswith(b"\n"):
        chunk = sock.recv(1 << 16)
        if not chunk:
            return 0  # sk-run is gone before it said what to run
        line += chunk
    return _Keeper(sock).run(json.loads(line))


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
