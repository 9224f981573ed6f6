"""The watchdog of one sk-run: outlives it only to kill what it started.

``python -m sk_runner.process.watchdog TOKEN`` reads its stdin (a pipe whose write end
only the owning sk-run holds) until end of file. EOF means the owner is gone,
whatever killed it (exit, Ctrl-C, SIGKILL, OOM killer): the watchdog then
SIGKILLs every process tied to the owner, repeating until none is left, and
exits. Tied (:func:`tied_pids`): its environment carries the owner's marker
(also one that called ``setsid()`` or ignores SIGTERM), or it is in one of the
process groups (sessions) the owner announced on the pipe (``<pgid>`` when
started, ``-<pgid>`` once reaped, one per line: also one that re-executed
itself with an empty environment), or it descends from such a process.
Without ``/proc`` (macOS, BSD) only the announced groups are killed: best effort.

Standard library only: the watchdog starts in milliseconds and never imports
anything that could fail after its owner died.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

#: Environment variable carrying the lifetime markers of a process: space-separated
#: ``<token>.<n>`` words, one per sk-run (owner) above it; inherited by every descendant.
MARKER_ENV = "SK_TUNE_LIFETIME"
_PROC = Path("/proc")


def has_proc() -> bool:
    """Whether this system lists processes with their environment under /proc (Linux)."""
    return (_PROC / "self" / "environ").is_file()


def _markers_of(pid: str) -> list[str]:
    try:
        raw = (_PROC / pid / "environ").read_bytes()
    except OSError:  # gone, or not ours to read
        return []
    prefix = MARKER_ENV.encode() + b"="
    for item in raw.split(b"\0"):
        if item.startswith(prefix):
            return item[len(prefix):].decode(errors="replace").split()
    return []


def _alive(pid: str) -> bool:
    try:
        state = (_PROC / pid / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _stat(pid: str) -> tuple[int, int, int] | None:
    """(ppid, process group, session) of a live process; None when gone or a zombie."""
    try:
        fields = (_PROC / pid / "stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[1]), int(fields[2]), int(fields[3])


def _marked(words: list[str], tokens: list[str]) -> bool:
    return any(w == t or w.startswith(t + ".") for w in words for t in tokens)


def tied_pids(tokens: list[str], groups: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """Live processes tied to the owner: marked with one of ``tokens`` (an owner token, or one
    spawn ``token.n``), in one of the recorded process ``groups`` or a session of that id (a
    workload's group is its own session), or descended from any of those (one that wiped its
    environment and left the group while its parent still lives). One snapshot of /proc."""
    if not (tokens or groups) or not _PROC.is_dir():
        return []
    me = os.getpid()
    parent_of: dict[int, int] = {}
    roots: set[int] = set()
    for entry in _PROC.iterdir():
        name = entry.name
        if not name.isdigit() or int(name) == me:
            continue
        stat = _stat(name)
        if stat is None:
            continue
        pid = int(name)
        ppid, pgrp, session = stat
        parent_of[pid] = ppid
        if pgrp in groups or session in groups or (tokens and _marked(_markers_of(name), tokens)):
            roots.add(pid)
    children: dict[int, list[int]] = {}
    for pid, ppid in parent_of.items():
        children.setdefault(ppid, []).append(pid)
    tied, todo = set(roots), list(roots)
    while todo:
        for child in children.get(todo.pop(), ()):
            if child not in tied:
                tied.add(child)
                todo.append(child)
    return sorted(tied)


def marked_pids(tokens: list[str]) -> list[int]:
    """Live processes whose marker names one of ``tokens``, and their descendants."""
    return tied_pids(tokens)


def kill_tied(tokens: list[str], groups: set[int] | frozenset[int] = frozenset(), timeout_s: float = 10.0) -> list[int]:
    """SIGKILL every live process :func:`tied_pids` finds until none is left (or ``timeout_s``).

    Repeats because a process may fork between a scan and its kill; the
    groups are also killed as groups (a member the scan could not read).
    Returns the pids killed.
    """
    killed: list[int] = []
    deadline = time.monotonic() + timeout_s
    while True:
        pids = tied_pids(tokens, groups)
        if not pids or time.monotonic() > deadline:
            return killed
        _kill_groups(set(groups))
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.02)


def kill_marked(tokens: list[str], timeout_s: float = 10.0) -> list[int]:
    """:func:`kill_tied` of the processes marked with ``tokens`` (and their descendants)."""
    return kill_tied(tokens, timeout_s=timeout_s)


def _kill_groups(pgids: set[int]) -> None:
    for pgid in pgids:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def main(argv: list[str]) -> int:
    """Wait for EOF on stdin, then kill the owner's processes."""
    token = argv[0]
    for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, signal.SIG_IGN)  # only the owner's death ends us
    pgids: set[int] = set()
    buffer = b""
    while True:
        try:
            chunk = os.read(0, 4096)
        except InterruptedError:
            continue
        except OSError:
            break
        if not chunk:
            break
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in (x.strip().decode(errors="replace") for x in lines):
            if line.isdigit():
                pgids.add(int(line))
            elif line.startswith("-") and line[1:].isdigit():
                pgids.discard(int(line[1:]))  # that group was reaped: its id may be reused
    if has_proc():
        kill_tied([token], pgids)
    else:
        _kill_groups(pgids)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
