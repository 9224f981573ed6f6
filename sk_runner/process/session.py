"""The session folder every engine (trial, probe, profile) works in and attaches its processes to."""

from __future__ import annotations

from pathlib import Path

from sk_analytics.errors import InputError


def require_session(folder: Path) -> None:
    """Refuse a session folder that does not exist: ``trial``, ``probe --session`` and ``profile``
    alike, so a mistyped path is an error instead of a new, empty session beside the real one."""
    if not Path(folder).is_dir():
        raise InputError(folder, "session folder not found", expected="an existing session directory")
