"""Read a text log as a stream of whole-line pieces, refusing what is not a text log.

The rank-log reader (:mod:`sk_analytics.ingest.timings`) must hold the work in
memory, never the file: a log is read in blocks of :data:`READ_BYTES`, cut
after the last newline of the bytes at hand and decoded strictly as UTF-8 (a
newline byte never occurs inside a UTF-8 character, so whole lines decode on
their own), so at most one block plus one unfinished line is in memory at a
time. What cannot be a text log is bad input naming the file and line, seen
in the block where it starts (so a 2 GB file of NUL bytes is refused after
its first megabyte):

* a path that is not a regular file (a folder, a FIFO, a device, a symlink
  loop or dangling link: the OS error of opening it);
* a NUL byte (binary content);
* bytes that are not UTF-8;
* a line longer than :data:`MAX_LINE_BYTES` bytes, its ``\n`` not counted
  (a line of exactly that many bytes is read like any other).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sk_analytics.errors import InputError
from sk_analytics.files.io_seam import open_regular, reading

READ_BYTES = 1 << 20
"""Bytes read (and checked) at a time."""

MAX_LINE_BYTES = 1 << 20
"""Longest line of a text log in bytes (1 MiB), its terminating ``\n`` not counted (a ``\r``
before it is counted); a longer line is refused wherever it lies, whether it ends in a
newline, at the end of the file, or not within sight."""


@dataclass(frozen=True)
class Piece:
    """Whole lines of one file: ``text`` starts at 1-based line ``first_line``."""

    file_id: int
    first_line: int
    text: str


def _refuse(path: Path, what: str, line: int, message: str, expected: str) -> InputError:
    return InputError(path, f"{what}: {message}", line=line, expected=expected)


def _decoded(data: bytes, path: Path, what: str, line: int) -> str:
    """``data`` (whole lines, or the file's last unfinished one) decoded strictly; a bad byte
    is refused naming its line."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        at = line + data.count(b"\n", 0, exc.start)
        message = "ends inside a UTF-8 character" if exc.reason == "unexpected end of data" else f"byte 0x{data[exc.start]:02x} is not UTF-8 text"
        raise _refuse(path, what, at, message, "UTF-8 text") from None


def _long_line(data: bytes) -> int | None:
    """Offset of the first line of ``data`` longer than :data:`MAX_LINE_BYTES` (its newline not
    counted; the last line may be unfinished), or None.

    Only a stretch of more than the limit can hold one, so the scan jumps from newline to
    newline while such a stretch is left: once per block when a block is no larger than
    the limit (the lines after the first lie inside the block just read)."""
    start = 0
    while len(data) - start > MAX_LINE_BYTES:
        newline = data.find(b"\n", start, start + MAX_LINE_BYTES + 1)
        if newline < 0:
            return start
        start = newline + 1
    return None


def pieces(path: Path, file_id: int, what: str) -> Iterator[Piece]:
    """Whole-line pieces of ``path`` (module docstring), in order; the last may lack its newline."""
    path = Path(path)
    with reading(path, what, expected=f"a readable regular file ({what})"):
        fd = open_regular(path, what)
        with os.fdopen(fd, "rb", buffering=0) as fh:
            pending, line = b"", 1
            while True:
                block = fh.read(READ_BYTES)
                data = pending + block if pending else block
                nul = data.find(b"\0")
                if nul >= 0:
                    raise _refuse(path, what, line + data.count(b"\n", 0, nul), "NUL byte: binary content, not a text log", "UTF-8 text lines")
                long = _long_line(data)
                if long is not None:
                    raise _refuse(path, what, line + data.count(b"\n", 0, long),
                                  f"line longer than {MAX_LINE_BYTES} bytes: not a text log",
                                  f"text lines of at most {MAX_LINE_BYTES} bytes, the newline not counted")
                cut = data.rfind(b"\n") + 1 if block else len(data)
                if cut:
                    text = _decoded(data[:cut] if cut < len(data) else data, path, what, line)
                    yield Piece(file_id, line, text)
                    line += data.count(b"\n", 0, cut)
                pending = data[cut:]
                if not block:
                    return
