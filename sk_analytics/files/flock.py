"""An exclusive lock on a lock file (``flock``), cheap enough to take around every ledger append.

``filelock.FileLock`` costs about 0.2 ms per acquire and release (polling, fork tracking,
per-thread state); the ledger takes its lock once per record. This lock is the same
``flock(LOCK_EX)`` on the same file, so it excludes ``FileLock`` holders of that file in
other processes and they exclude it. Re-entrant within a thread; other threads of the
process wait. Where ``fcntl`` is missing (not POSIX) it falls back to ``FileLock``.

Who holds a lock of a file is read here too: the kernel's lock table (``/proc/locks``) and, for an OFD lock that
table lists with pid -1, the holders' ``/proc/<pid>/fdinfo`` (:func:`lock_holders`); and what a holder is, by its
command line (:func:`command_args`, :func:`command_line`), for ``sk-analyze`` and ``sk-run`` alike.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]  # no such module here: FlockLock falls back to FileLock


class FlockLock:
    """``with FlockLock(path):`` holds an exclusive ``flock`` on ``path`` (created 0o644 less the umask)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = os.fspath(path)
        self._thread = threading.RLock()
        self._depth = 0
        self._fd: int | None = None
        self._fallback = None
        if fcntl is None:  # pragma: no cover - not POSIX
            from filelock import FileLock

            self._fallback = FileLock(self.path)

    def __enter__(self) -> FlockLock:
        if self._fallback is not None:  # pragma: no cover - not POSIX
            self._fallback.acquire()
            return self
        self._thread.acquire()
        if self._depth == 0:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
            except BaseException:
                os.close(fd)
                self._thread.release()
                raise
            self._fd = fd
        self._depth += 1
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        if self._fallback is not None:  # pragma: no cover - not POSIX
            self._fallback.release()
            return
        self._depth -= 1
        if self._depth == 0 and self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)  # closing the only descriptor releases the flock
        self._thread.release()

    @property
    def is_locked(self) -> bool:
        """Whether this process holds the lock through this object."""
        return self._depth > 0


PROC_LOCKS = Path("/proc/locks")


@dataclass(frozen=True)
class LockEntry:
    """One granted lock of the kernel's table: its kind (FLOCK, POSIX, OFDLCK), the pid that took it, the file."""

    kind: str
    pid: int
    major: int
    minor: int
    inode: int


def parse_proc_locks(text: str) -> list[LockEntry]:
    """The granted locks of ``/proc/locks`` text (waiters, ``->`` lines, and malformed lines are skipped)."""
    found: list[LockEntry] = []
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 6 or "->" in parts[:2]:
            continue
        kind, pid, where = parts[1], parts[4], parts[5].split(":")
        if not pid.lstrip("-").isdigit() or len(where) != 3:
            continue
        try:
            found.append(LockEntry(kind, int(pid), int(where[0], 16), int(where[1], 16), int(where[2])))
        except ValueError:
            continue
    return found


LOCK_KINDS = ("FLOCK", "POSIX", "OFDLCK")
"""The kinds of ``/proc/locks`` that exclude a writer: ``flock``, POSIX record locks (``lockf``, ``F_SETLK``) and
open-file-description locks (``F_OFD_SETLK``; the kernel lists them with pid -1, :func:`ofd_holders` finds their
holders)."""
OFD = "OFDLCK"
PROC = Path("/proc")
OFD_HINTS_LIMIT = 64
_ofd_hints: dict[tuple[int, int, int], list[int]] = {}
"""The pids :func:`ofd_holders` last found holding an OFD lock of a file (major, minor, inode), looked at first the next
time: a waiter asks who holds the file every 50 ms, and then reads one process's fdinfo, not the whole host's."""


def lock_holders(path: Path, *, table: str | None = None, kinds: tuple[str, ...] = LOCK_KINDS,
                 proc: Path | None = PROC) -> list[int] | None:
    """The pids the kernel names as holding a lock of one of ``kinds`` on the file at ``path`` (None: the table cannot
    be read, or the file is gone). ``table``: the text of ``/proc/locks`` (read when not given). An OFD lock, listed with
    pid -1, is named by the process whose open file holds it (:func:`ofd_holders` under ``proc``; None: not looked for),
    and stays -1 where none can be seen (another pid namespace, another user's process)."""
    try:
        st = os.stat(path)
        text = PROC_LOCKS.read_text(encoding="ascii", errors="replace") if table is None else table
    except OSError:
        return None
    where = (os.major(st.st_dev), os.minor(st.st_dev), st.st_ino)
    entries = [e for e in parse_proc_locks(text) if e.kind in kinds and (e.major, e.minor, e.inode) == where]
    hidden = sum(1 for e in entries if e.kind == OFD and e.pid == -1)
    if not hidden or proc is None:
        return [e.pid for e in entries]
    named = [e.pid for e in entries if e.pid > 0]  # an OFD lock of a lease is held by the process that took its flock
    found = iter(ofd_holders(where, hidden, first=named, proc=proc))
    return [next(found, -1) if e.kind == OFD and e.pid == -1 else e.pid for e in entries]


def ofd_holders(where: tuple[int, int, int], count: int, *, first: Iterable[int] = (), proc: Path = PROC) -> list[int]:
    """Up to ``count`` pids with an open file that holds an OFD lock on the file ``where`` (major, minor, inode as
    ``/proc/locks`` gives them), which that table lists with pid -1: Linux lists each open file's locks in
    ``/proc/<pid>/fdinfo/<fd>`` too, in the same format (``lock:\t1: OFDLCK ADVISORY  WRITE -1 fe:00:2146947 0 EOF``).
    Looks at ``first`` first, then at the last holders found, then at every process in pid order, and stops at ``count``:
    the lock's owner before a child that shares its open file for a moment (a fork before its exec)."""
    found: list[int] = []
    seen: set[int] = set()
    for pid in _candidates(first, where, proc):
        if pid in seen:
            continue
        seen.add(pid)
        if _holds_ofd(proc / str(pid) / "fdinfo", where):
            found.append(pid)
            if len(found) >= count:
                break
    if found:
        if len(_ofd_hints) >= OFD_HINTS_LIMIT:
            _ofd_hints.clear()
        _ofd_hints[where] = found
    return found


def _candidates(first: Iterable[int], where: tuple[int, int, int], proc: Path) -> Iterator[int]:
    """The pids :func:`ofd_holders` looks at, in its order (a process listed may be gone by the time it is read)."""
    yield from (pid for pid in first if pid > 0)
    yield from _ofd_hints.get(where, ())
    try:
        names = os.listdir(proc)
    except OSError:
        return
    yield from sorted(int(name) for name in names if name.isdigit())


def _holds_ofd(fdinfo: Path, where: tuple[int, int, int]) -> bool:
    """Whether an open file whose fdinfo is under ``fdinfo`` holds an OFD lock on ``where``. A process or descriptor
    that vanishes while it is read (or is not this process's to read) holds none."""
    try:
        fds = os.listdir(fdinfo)
    except OSError:
        return False
    for fd in fds:
        try:
            raw = (fdinfo / fd).read_bytes()
        except OSError:
            continue
        if b"OFDLCK" not in raw:
            continue
        lines = (line[len("lock:"):] for line in raw.decode("ascii", errors="replace").splitlines() if line.startswith("lock:"))
        if any(e.kind == OFD and (e.major, e.minor, e.inode) == where for e in parse_proc_locks("\n".join(lines))):
            return True
    return False


def flock_holders(path: Path, *, table: str | None = None) -> list[int] | None:
    """The pids the kernel names as holding a ``flock`` on the file at ``path`` (:func:`lock_holders` of that kind)."""
    return lock_holders(path, table=table, kinds=("FLOCK",))


def command_args(pid: int) -> list[str] | None:
    """The arguments process ``pid`` was started with, where this process can read them; None when it is gone, not
    ours to read, or has none (a kernel thread)."""
    import psutil  # only where a holder is named: the ledger takes its lock without it

    try:
        return psutil.Process(pid).cmdline() or None
    except psutil.Error:  # gone, or not ours to read
        return None


_CONTROLS = str.maketrans({**{chr(c): f"\\x{c:02x}" for c in (*range(0x20), 0x7F)}, "\n": "\\n", "\r": "\\r", "\t": "\\t"})


def one_line(command: str) -> str:
    """A command line as one line of text: control characters escaped (a ``python -c`` script's line breaks as
    ``\\n``), so a progress or error line that names a process stays one line."""
    return command.translate(_CONTROLS)


def command_line(pid: int) -> str | None:
    """The full command line of process ``pid`` (its arguments joined by spaces, on one line: :func:`one_line`) where
    this process can read it; None when it is gone, not ours to read, or has none (a kernel thread). Names a process
    to a person: who holds a device's lock (:mod:`sk_runner.devices.holders`), who runs on an NPU
    (:mod:`sk_runner.devices.occupancy`), who holds a session's sweep lock (:mod:`sk_analytics.stage_o.session_notes`)."""
    args = command_args(pid)
    return None if args is None else one_line(" ".join(args)) or None
