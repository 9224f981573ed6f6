"""The watchdog of one sk-run: outlives it only to kill what it started.

``python -m sk_runner.watchdog TOKEN`` reads its stdin (a pipe whose write end
only the owning sk-run holds) until end of file. EOF means the owner is gone,
whatever killed it (exit, Ctrl-C, SIGKILL, OOM killer): the watchdog then
SIGKILLs every process whose environment carries the owner's marker (also the
ones that called ``setsid()`` or ignore SIGTERM), repeating until none is left,
and exits. Without ``/proc`` (macOS, BSD) it kills the process groups the owner
announced on the pipe (``<pgid>`` when started, ``-<pgid>`` once reaped, one
per line) instead: best effort.

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


def marked_pids(tokens: list[str]) -> list[int]:
    """Live processes whose marker names one of ``tokens`` (an owner token, or one spawn ``token.n``)."""
    if not tokens or not _PROC.is_dir():
        return []
    me = os.getpid()
    found = []
    for entry in _PROC.iterdir():
        name = entry.name
        if not name.isdigit() or int(name) == me:
            continue
        words = _markers_of(name)
        if words and any(w == t or w.startswith(t + ".") for w in words for t in tokens) and _alive(name):
            found.append(int(name))
    return found


def kill_marked(tokens: list[str], timeout_s: float = 10.0) -> list[int]:
    """SIGKILL every live process marked with one of ``tokens`` until none is left (or ``timeout_s``).

    Repeats because a process may fork between a scan and its kill. Returns the pids killed.
    """
    killed: list[int] = []
    deadline = time.monotonic() + timeout_s
    while True:
        pids = marked_pids(tokens)
        if not pids or time.monotonic() > deadline:
            return killed
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
            except (ProcessLookupError, PermissionError):
                pass
        time.sleep(0.02)


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
        kill_marked([token])
    else:
        _kill_groups(pgids)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
