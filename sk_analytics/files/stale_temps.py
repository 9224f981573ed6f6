"""Temp files that a killed writer left in a session: named by ``ledger verify``, removed by the next sweep.

An atomic write (:mod:`sk_analytics.files.atomic`) fills ``.<name>.<8 random>.tmp`` beside its target and
renames it over the target; a SIGKILL between the two leaves the temp behind (20-65 KB for a hand-off
file), and so does one during the ledger head's update (``.ledger.jsonl.head.*.tmp``). Such a file
is machinery, never evidence (:func:`sk_analytics.ledger.evidence.is_machinery`): ``ledger verify`` names
what it finds as machinery to clean, and ``sk-run sweep`` removes it once it holds the session's
lock (``sk_runner.sweep.driver``), so a live writer's temp is never touched. Only names of
sk-tune's own patterns are looked at; any other file is left to the evidence rules.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from sk_analytics.files.atomic import TEMP_NAME

HEAD_TEMP_PREFIX = ".ledger.jsonl.head."
"""The ledger head's temp files (:func:`sk_analytics.ledger.chain.drop_stale_temps`): ``.ledger.jsonl.head.<…>.tmp``."""


def is_leftover(name: str) -> bool:
    """Whether a file name is one of sk-tune's own temp names (an atomic write's, or the ledger head's)."""
    return TEMP_NAME.fullmatch(name) is not None or (name.startswith(HEAD_TEMP_PREFIX) and name.endswith(".tmp"))


def find(root: Path) -> list[str]:
    """Session-relative POSIX paths of the temp files under ``root`` (sorted; links are not followed)."""
    found = []
    for folder, dirs, files in os.walk(root):
        dirs.sort()
        prefix = Path(folder).relative_to(root).as_posix()
        found += [name if prefix == "." else f"{prefix}/{name}" for name in files if is_leftover(name)]
    return sorted(found)


def remove(root: Path, *, keep: Callable[[str], bool] = lambda rel: False) -> list[str]:
    """Remove the temp files :func:`find` lists, except those ``keep`` says a live writer may own;
    the removed ones, session-relative. Call it only while holding the lock that excludes their writers."""
    removed = []
    for rel in find(root):
        if not keep(rel):
            (root / rel).unlink(missing_ok=True)
            removed.append(rel)
    return removed


def describe(rels: list[str], *, shown: int = 3) -> str:
    """``N temp file(s) of interrupted writes (a, b, c, …)`` for a message."""
    names = ", ".join(rels[:shown]) + (", …" if len(rels) > shown else "")
    return f"{len(rels)} temp file(s) of interrupted writes ({names})"
