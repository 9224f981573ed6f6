"""A resumed sweep first removes the temp files that a killed sk-run left in its session.

An atomic write killed between filling its temp file and renaming it (SIGKILL, a power cut) leaves
``.<name>.<8 random>.tmp`` beside the target (:mod:`sk_analytics.files.stale_temps`); the step is redone
on resume and writes a new one, so the old one would stay for good. :func:`drop_leftover_temps` runs
once :func:`~sk_runner.sweep.driver.run_sweep` holds the session's ``.sweep.lock`` and has ended the
survivors of an earlier sk-run on the session (``lifetime.attach``): no other sweep can be writing
there. A temp inside a round folder whose ``.sk-run.lock`` another process holds (an ``sk-run trial``
started by hand on the same round) is kept: its writer may be alive.
"""

from __future__ import annotations

from pathlib import Path

from filelock import FileLock, Timeout

from sk_analytics.files import stale_temps
from sk_runner.trial import LOCK_NAME


def _busy(lock: Path) -> bool:
    """Whether another process holds the round lock ``lock`` (tried without waiting)."""
    held = FileLock(str(lock))
    try:
        held.acquire(timeout=0)
    except Timeout:
        return True
    held.release()
    return False


def drop_leftover_temps(root: Path) -> list[str]:
    """Remove the leftover temp files of ``root`` (the caller holds its sweep lock); the removed ones, session-relative."""
    busy: dict[Path, bool] = {}

    def kept(rel: str) -> bool:
        folder = (root / rel).parent
        while folder != root and root in folder.parents:
            if (folder / LOCK_NAME).is_file():
                if folder not in busy:
                    busy[folder] = _busy(folder / LOCK_NAME)
                return busy[folder]
            folder = folder.parent
        return False

    return stale_temps.remove(root, keep=kept)
