"""Markdown table rendering shared by the Chinese/English reports."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

_NUMBER = re.compile(r"^[+\-−]?\d+(?:\.\d+)?%?$")


def cell(text: Any) -> str:
    """One table cell: pipes escaped, line breaks flattened (a cell is one line)."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def is_number(text: Any) -> bool:
    """A cell that is one number (``12.2970``, ``+2.36%``, ``5``)."""
    return bool(_NUMBER.match(str(text).strip()))


def numeric_columns(rows: Sequence[Sequence[Any]], width: int) -> list[bool]:
    """Columns whose every filled cell (not ``—``) is a number: those are right-aligned."""
    filled = [[str(r[i]).strip() for r in rows if i < len(r) and str(r[i]).strip() not in {"—", ""}] for i in range(width)]
    return [bool(cells) and all(is_number(c) for c in cells) for cells in filled]


def table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    """A GitHub-flavoured Markdown table plus its trailing blank line; numeric columns right-aligned (``---:``)."""
    align = numeric_columns(rows, len(header))
    lines = ["| " + " | ".join(cell(h) for h in header) + " |", "|" + "".join("---:|" if a else "---|" for a in align)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines + [""]
