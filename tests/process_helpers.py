"""Finding the processes a lifetime test started: by a marker in their argv, or as keepers below a pid."""

from __future__ import annotations

import os
from pathlib import Path

from sk_runner.process import keeper, process_alive


def with_marker(marker: str) -> list[int]:
    """Live (non-zombie) processes whose argv holds ``marker`` as one word."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if marker.encode() in argv and process_alive(int(entry.name)):
                found.append(int(entry.name))
    return found


def keepers_below(pid: int) -> list[int]:
    """The keepers (sk_runner/process/keeper.py) among the live descendants of ``pid``."""
    found = []
    for child in keeper.descendants(pid):
        try:
            if b"keeper.py" in Path(f"/proc/{child}/cmdline").read_bytes():
                found.append(child)
        except OSError:  # gone meanwhile
            pass
    return found
