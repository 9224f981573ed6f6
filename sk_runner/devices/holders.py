"""Who holds a device's lock file: the kernel's lock table (``/proc/locks``) and this process's ancestry.

A lease's lock is an exclusive ``flock`` plus an open-file-description record lock
(:mod:`sk_runner.devices.lease`); the kernel lists every lock it holds in
``/proc/locks`` (``14: FLOCK  ADVISORY  WRITE 11349 fe:00:2146632 0 EOF``: kind,
mode, the pid that took it, ``major:minor:inode`` of the file). A holder of any
kind (``FLOCK``, ``POSIX``, ``OFDLCK``) is a holder of the device; an OFD lock, listed with pid -1, is named by the
process whose ``/proc/<pid>/fdinfo/<fd>`` lists it (:func:`~sk_analytics.files.flock.ofd_holders`). Inherited lease
markers are proven with it (:func:`sk_runner.devices.lease.prove_inherited`): the
holder of each marked lock must be this process's parent, grandparent, ... --
never a process outside our tree. Where the table is unreadable (not Linux) or
names no live pid (a holder in another pid namespace shows as 0 or a pid that is
not ours to see), the holder cannot be named and only the lock test stands.
"""

from __future__ import annotations

import os
from pathlib import Path

import psutil

from sk_analytics.files.flock import (
    PROC_LOCKS as PROC_LOCKS,  # the kernel's lock table, read where every floor can
    LockEntry as LockEntry,
    flock_holders as flock_holders,
    lock_holders as lock_holders,
    ofd_holders as ofd_holders,
    parse_proc_locks as parse_proc_locks,
)
from sk_runner.process import command_line, process_alive


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


HOLDER_COMMAND_CHARS = 200
"""How much of a holder's command line a lock record and a message name (a launcher's argv can run to pages)."""


def command_of(pid: int) -> str:
    """The command line of ``pid`` where visible (at most :data:`HOLDER_COMMAND_CHARS` characters), else ``""``."""
    return (command_line(pid) or "")[:HOLDER_COMMAND_CHARS]


def kernel_holder(path: Path, *, table: str | None = None) -> str | None:
    """``pid N (command)`` of the first visible process the kernel names as holding a lock of ``path`` (``flock``, a
    POSIX record lock, or an OFD lock named by its fdinfo; None: the table cannot be read, or names no holder this process can see). For a holder that
    writes nothing into the file."""
    pid = next((p for p in lock_holders(path, table=table) or () if visible(p)), None)
    if pid is None:
        return None
    command = command_of(pid)
    return f"pid {pid} ({command})" if command else f"pid {pid}"
