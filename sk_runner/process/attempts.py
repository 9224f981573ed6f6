"""Never-reused ``attempt-<n>`` folders: failure scenes, probe runs, profile roots.

Evidence is never overwritten, so every new attempt gets a folder created
exclusively (``mkdir`` fails when it exists): a concurrent creator that took
number n makes this one try n+1.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

ATTEMPT = re.compile(r"^attempt-(\d+)(\..*)?$")
"""``attempt-<n>`` and its companions (``attempt-<n>.json``, ``attempt-<n>.stdout.log``, …)."""


def next_attempt(parent: Path) -> int:
    """1 + the highest attempt number that left anything (folder or companion file) in ``parent``."""
    if not parent.is_dir():
        return 1
    return max((int(m.group(1)) for name in os.listdir(parent) if (m := ATTEMPT.match(name))), default=0) + 1


def new_attempt_dir(parent: Path) -> tuple[int, Path]:
    """Create a brand-new ``parent/attempt-<n>`` exclusively; return (n, folder)."""
    parent.mkdir(parents=True, exist_ok=True)
    while True:
        n = next_attempt(parent)
        folder = parent / f"attempt-{n}"
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return n, folder


__all__ = ["ATTEMPT", "new_attempt_dir", "next_attempt"]
