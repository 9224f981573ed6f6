"""Who holds a device's lock file: the kernel's lock table (``/proc/locks``) and this process's ancestry.

A lease's lock is an exclusive ``flock``; the kernel lists every lock it holds in
``/proc/locks`` (``14: FLOCK  ADVISORY  WRITE 11349 fe:00:2146632 0 EOF``: kind,
mode, the pid that took it, ``major:minor:inode`` of the file). Inherited lease
markers are proven with it (:func:`sk_runner.devices.lease.prove_inherited`): the
holder of each marked lock must be this process's parent, grandparent, ... --
never a process outside our tree. Where the table is unreadable (not Linux) or
names no live pid (a holder in another pid namespace shows as 0 or a pid that is
not ours to see), the holder cannot be named and only the lock test stands.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import psutil

from sk_runner.process import command_line, process_alive

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


def flock_holders(path: Path, *, table: str | None = None) -> list[int] | None:
    """The pids the kernel names as holding a ``flock`` on the file at ``path`` (None: the table cannot be read,
    or the file is gone). ``table``: the text of ``/proc/locks`` (read when not given)."""
    try:
        st = os.stat(path)
        text = PROC_LOCKS.read_text(encoding="ascii", errors="replace") if table is None else table
    except OSError:
        return None
    major, minor = os.major(st.st_dev), os.minor(st.st_dev)
    return [e.pid for e in parse_proc_locks(text)
            if e.kind == "FLOCK" and e.inode == st.st_ino and (e.major, e.minor) == (major, minor)]


def ancestors(pid: int | None = None) -> list[int]:
    """``pid`` (default: this process) and its parent, grandparent, ... (just ``[pid]`` where they cannot be read)."""
    own = os.getpid() if pid is None else pid
    try:
        return [own, *(p.pid for p in psutil.Process(own).parents())]
    except psutil.Error:
        return [own]


def visible(pid: int) -> bool:
    """Whether ``pid`` is a live process this one can see (a holder in another pid namespace is not; 0 never is)."""
    return pid > 0 and process_alive(pid)


def command_of(pid: int) -> str:
    """The command line of ``pid`` where visible (at most 200 characters), else ``""``."""
    return (command_line(pid) or "")[:200]


def kernel_holder(path: Path, *, table: str | None = None) -> str | None:
    """``pid N (command)`` of the first visible process the kernel names as holding ``path``'s flock (None: the table
    cannot be read, or names no holder this process can see). For a holder that writes nothing into the file."""
    pid = next((p for p in flock_holders(path, table=table) or () if visible(p)), None)
    if pid is None:
        return None
    command = command_of(pid)
    return f"pid {pid} ({command})" if command else f"pid {pid}"
