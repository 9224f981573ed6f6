"""Field count of every record of a CSV file, checked against its header (cold path).

A reader that assigns cells by position (Polars, told to read only some
columns) silently shifts every later column of a row with one cell too few
and ignores a cell too many. The fast path of :mod:`.kernel_details` reads
with Arrow's CSV parser, which refuses any row whose width is not the
header's; when it refuses, :func:`first_width_mismatch` finds the row with
Python's ``csv`` reader (quoted line breaks counted) so that the error names
the line and both counts.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass
from pathlib import Path


def line_feed_line(text: str, universal_line: int) -> int:
    """The 1-based line, counted by line feeds only, of universal line ``universal_line`` of
    ``text`` (Python's csv reader counts a lone CR as a line break too; a file's lines are
    its line feeds)."""
    lines = io.StringIO(text, newline="").readlines()
    return 1 + sum(line.count("\n") for line in lines[: universal_line - 1])


@dataclass(frozen=True)
class WidthMismatch:
    """The first record whose field count is not the header's."""

    line: int
    """1-based physical line where the record starts."""
    found: int
    expected: int
    last: bool
    """The record is the file's last and has no line break (a cut file)."""


def first_width_mismatch(path: Path, width: int) -> WidthMismatch | None:
    """The first record (header excluded, blank lines skipped) with other than
    ``width`` fields; None when every record has ``width`` or the quoting is
    malformed (the caller's reader reports that with its line)."""
    text = path.read_bytes().decode("utf-8-sig", errors="replace")
    reader = csv.reader(io.StringIO(text, newline=""))
    start = 1
    try:
        for number, record in enumerate(reader):
            if number and record and len(record) != width:
                last = not text.endswith(("\n", "\r")) and next(reader, None) is None
                return WidthMismatch(line_feed_line(text, start), len(record), width, last)
            start = reader.line_num + 1
    except csv.Error:
        return None
    return None



def cut_reason(last_line: bytes, width: int, kept: frozenset[int]) -> str | None:
    """Why the file's last line, which has no line break, cannot be trusted as data (a crash
    during the export cuts it anywhere): fewer fields than the header (cut between cells, or
    inside one with the later cells lost), an open quote or a stray CR/NUL, or all the fields but
    the last one is a column that is read (``kept`` positions) and may be cut. None for a complete
    row whose last cell is not read (the real advisor sample ends so) and for more fields than
    the header (the width check refuses that, naming the line)."""
    if not last_line.strip():
        return None
    try:
        fields = len(next(csv.reader([last_line.decode("utf-8", errors="replace")], strict=True), []))
    except csv.Error as exc:
        return f"it is not a complete CSV record ({exc})"
    if fields < width:
        return f"it has {fields} of the header's {width} fields"
    if fields == width and width - 1 in kept:
        return "its last cell is a column that is read and may be cut"
    return None
