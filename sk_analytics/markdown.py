"""Markdown table rendering shared by the Chinese/English reports."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def cell(text: Any) -> str:
    """One table cell: pipes escaped, line breaks flattened (a cell is one line)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A GitHub-flavoured Markdown table plus its trailing blank line."""
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines + [""]
