"""What ``ledger verify`` tells the user beside ``ok``: a session not finished yet, temp files to clean.

Neither is a finding: nothing was tampered with and the exit status stays 0. A Stage O session
whose ledger holds no ``handoff_written`` record (and was not superseded by its campaign) stopped
before its hand-off: a kill, a power cut or an environment fault cut it short, and ``sk-run sweep
--resume`` continues it. Temp files of writes a killed writer left (:mod:`sk_analytics.files.stale_temps`)
are machinery, never evidence; the next resume removes them.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sk_analytics.files import stale_temps
from sk_analytics.files.flock import flock_holders

SETTLED = frozenset({"handoff_written", "session_superseded"})
"""Record kinds after which a session is not to be resumed: its hand-off, or its campaign moved it aside."""


SWEEP_LOCK = ".sweep.lock"
"""The lock ``sk-run sweep`` holds on its session while it runs (one sweep at a time per session)."""


def sweep_running(session: Path) -> bool:
    """Whether a sweep holds ``session``'s lock now, as the kernel's lock table shows. Looking takes no lock, so it
    never keeps a starting sweep out; False where the table cannot be read (not Linux)."""
    return bool(flock_holders(session / SWEEP_LOCK))


def resume_command(session: Path) -> str:
    return f"sk-run sweep --resume {shlex.quote(str(session))}"


def is_sweep_session(records: Sequence[Any]) -> bool:
    return bool(records) and records[0].kind == "session_started"


def unfinished_note(records: Sequence[Any], session: Path, *, running: bool = False) -> str | None:
    """The note for a Stage O session that has not written its hand-off (None for any other ledger); ``running``:
    a sweep holds the session now (:func:`sweep_running`), so it goes on by itself."""
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
