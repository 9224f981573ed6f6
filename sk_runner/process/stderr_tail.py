"""The last lines a failed workload wrote on stderr, for the one-line messages that name a failure.

A crash reported as ``exit status 2`` alone sends the user to look for the
stderr file; the workload's own last words (``python: can't open file
'infer.py'``, ``EZ9999 …``) usually say what went wrong, so messages end
with them (issue 37).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sk_analytics.messages import coded, text
from sk_runner.process.faults import tail_text

LINES = 3
"""Lines quoted from the end of stderr."""
LINE_CHARS = 240
"""Characters kept of each quoted line (a traceback line can be very long)."""


def last_lines(path: Path | None, lines: int = LINES) -> list[str]:
    """The last ``lines`` non-blank lines of a stderr file, whitespace folded, each cut to :data:`LINE_CHARS`."""
    text = tail_text(path, 4 * lines * LINE_CHARS)
    kept = [" ".join(line.split()) for line in text.splitlines() if line.strip()][-lines:]
    return [line if len(line) <= LINE_CHARS else line[: LINE_CHARS - 1] + "…" for line in kept]


def stderr_words(path: Path | None) -> dict[str, Any]:
    """:func:`stderr_note` as a recorded message (worded in the reader's language)."""
    tail = last_lines(path)
    return coded("probe_cause.stderr_tail", lines=" | ".join(tail)) if tail else coded("probe_cause.stderr_empty")


def stderr_note(path: Path | None) -> str:
    """``; last stderr: a | b | c`` (``; stderr empty`` when there is none), to end a failure message with."""
    words = stderr_words(path)
    return text(words["code"], "en", **words["params"])
