"""An exclusive lock on a lock file (``flock``), cheap enough to take around every ledger append.

``filelock.FileLock`` costs about 0.2 ms per acquire and release (polling, fork tracking,
per-thread state); the ledger takes its lock once per record. This lock is the same
``flock(LOCK_EX)`` on the same file, so it excludes ``FileLock`` holders of that file in
other processes and they exclude it. Re-entrant within a thread; other threads of the
process wait. Where ``fcntl`` is missing (not POSIX) it falls back to ``FileLock``.
"""

from __future__ import annotations

import os
import threading
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
open-file-description locks (``F_OFD_SETLK``; the kernel lists them with pid -1, so their holder cannot be named)."""


def lock_holders(path: Path, *, table: str | None = None, kinds: tuple[str, ...] = LOCK_KINDS) -> list[int] | None:
    """The pids the kernel names as holding a lock of one of ``kinds`` on the file at ``path`` (None: the table cannot
    be read, or the file is gone). ``table``: the text of ``/proc/locks`` (read when not given)."""
    try:
        st = os.stat(path)
        text = PROC_LOCKS.read_text(encoding="ascii", errors="replace") if table is None else table
    except OSError:
        return None
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    return [e.pid for e in parse_proc_locks(text)
            if e.kind in kinds and e.inode == st.st_ino and (e.major, e.minor) == (major, minor)]


def flock_holders(path: Path, *, table: str | None = None) -> list[int] | None:
    """The pids the kernel names as holding a ``flock`` on the file at ``path`` (:func:`lock_holders` of that kind)."""
    return lock_holders(path, table=table, kinds=("FLOCK",))
