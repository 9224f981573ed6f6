"""What ``ledger verify`` tells the user beside ``ok``: a session not finished yet, temp files to clean.

Neither is a finding: nothing was tampered with and the exit status stays 0. A Stage O session
whose ledger holds no ``handoff_written`` record (and was not superseded by its campaign) stopped
before its hand-off: a kill, a power cut or an environment fault cut it short, and ``sk-run sweep
--resume`` continues it. Temp files of writes a killed writer left (:mod:`sk_analytics.files.stale_temps`)
are machinery, never evidence; the next resume removes them.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sk_analytics.files import stale_temps
from sk_analytics.files.flock import command_args, flock_holders, one_line

SETTLED = frozenset({"handoff_written", "session_superseded"})
"""Record kinds after which a session is not to be resumed: its hand-off, or its campaign moved it aside."""


SWEEP_LOCK = ".sweep.lock"
"""The lock ``sk-run sweep`` holds on its session while it runs (one sweep at a time per session)."""


SWEEP_PROGRAM = "sk-run"
SWEEP_PACKAGE = "sk_runner"
"""What the command line of a process that runs sweeps names: the ``sk-run`` program, or ``python -m sk_runner...``."""


def is_sk_run(args: Sequence[str]) -> bool:
    """Whether a command line (``argv``) runs sk-run: its program, or after the interpreter and its options the
    ``sk-run`` script or ``-m sk_runner...``. Told by the name only: it keeps a process that holds the lock by
    mistake (an editor, a backup, a stray ``flock``) from passing for a sweep, not a process that imitates one."""
    if not args:
        return False
    if Path(args[0]).name == SWEEP_PROGRAM:
        return True
    rest = iter(args[1:])
    for arg in rest:
        if arg == "-m":
            return next(rest, "").partition(".")[0] == SWEEP_PACKAGE
        if arg in ("-X", "-W"):  # an interpreter option with a value
            next(rest, None)
        elif not arg.startswith("-"):
            return Path(arg).name == SWEEP_PROGRAM
    return False


@dataclass(frozen=True)
class SweepLock:
    """Who holds a session's sweep lock: whether an sk-run process does (a sweep writes the session now), and the
    other holders, each named (``pid N (command)``) for the note that says they are not taken as a sweep."""

    running: bool
    foreign: tuple[str, ...] = ()


def _named(pid: int, args: Sequence[str] | None) -> str:
    if pid <= 0:
        return "a process this one cannot see"
    return f"pid {pid} ({one_line(' '.join(args))[:200]})" if args else f"pid {pid}"


def sweep_lock(session: Path) -> SweepLock:
    """Who holds ``session``'s sweep lock now, as the kernel's lock table shows, each holder told by its command line
    (:func:`is_sk_run`); a holder whose command line cannot be read is not taken as a sweep. Looking takes no lock, so
    it never keeps a starting sweep out; nobody where the table cannot be read (not Linux)."""
    running, foreign = False, []
    for pid in flock_holders(session / SWEEP_LOCK) or ():
        args = command_args(pid) if pid > 0 else None
        if pid == os.getpid() or args is not None and is_sk_run(args):  # this process: a sweep it runs in-process
            running = True
        else:
            foreign.append(_named(pid, args))
    return SweepLock(running, tuple(foreign))


def foreign_note(lock: SweepLock, session: Path) -> str | None:
    """The note naming the holders of the sweep lock that are not sk-run (None when there are none)."""
    if not lock.foreign:
        return None
    return (f"{SWEEP_LOCK} is held by {', '.join(lock.foreign)}, which is not sk-run: no sweep is taken to be writing this "
            f"session, and `{resume_command(session)}` is refused until that process lets go of the lock")


def lock_refusal(session: Path) -> str:
    """Why a sweep could not take ``session``'s sweep lock: another sweep runs there, or the holders named
    (:func:`sweep_lock`) are no sweep and keep every sweep out until they let go."""
    lock = sweep_lock(session)
    if lock.running or not lock.foreign:
        return f"{session}: another sweep is running on this session"
    return (f"{session}: {SWEEP_LOCK} is held by {', '.join(lock.foreign)}, which is not sk-run: no sweep is running on "
            "this session, and none can start until that process lets go of the lock")


def resume_command(session: Path) -> str:
    return f"sk-run sweep --resume {shlex.quote(str(session))}"


def is_sweep_session(records: Sequence[Any]) -> bool:
    return bool(records) and records[0].kind == "session_started"


def unfinished_note(records: Sequence[Any], session: Path, *, running: bool = False) -> str | None:
    """The note for a Stage O session that has not written its hand-off (None for any other ledger); ``running``:
    an sk-run sweep holds the session now (:func:`sweep_lock`), so it goes on by itself."""
    if not is_sweep_session(records) or any(r.kind in SETTLED for r in records):
        return None
    last = records[-1]
    if running:
        return (f"unfinished session: a sweep is running on this session (last record seq {last.seq}: {last.kind}); "
                "verify it again once the sweep has ended")
    return (f"unfinished session: no hand-off yet (last record seq {last.seq}: {last.kind}); "
            f"continue it with `{resume_command(session)}`")


def temp_note(folder: Path, records: Sequence[Any], session: Path) -> str | None:
    """The note naming the temp files of interrupted writes under ``folder`` (None when there are none)."""
    found = stale_temps.find(folder)
    if not found:
        return None
    cleaner = (f"the next `{resume_command(session)}` removes them" if is_sweep_session(records)
               else "delete them once no sk-tune command runs on this folder")
    return f"machinery to clean: {stale_temps.describe(found)}; not evidence, nothing was tampered with; {cleaner}"
