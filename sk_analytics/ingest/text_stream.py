"""Read a text log as a stream of whole-line pieces, refusing what is not a text log.

The rank-log reader (:mod:`sk_analytics.ingest.timings`) must hold the work in
memory, never the file: a log is read in blocks of :data:`READ_BYTES`, decoded
strictly as UTF-8 by an incremental decoder and cut after its last newline, so
at most one block plus one unfinished line is in memory at a time. What cannot
be a text log is bad input naming the file and line, seen in the block where
it starts (so a 2 GB file of NUL bytes is refused after its first megabyte):

* a path that is not a regular file (a folder, a FIFO, a device, a symlink
  loop or dangling link: the OS error of opening it);
* a NUL byte (binary content);
* bytes that are not UTF-8;
* a line longer than :data:`MAX_LINE_CHARS` (no newline in sight).
"""

from __future__ import annotations

import codecs
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sk_analytics.errors import InputError
from sk_analytics.io_seam import open_regular, reading

READ_BYTES = 1 << 20
"""Bytes read (and checked) at a time."""

MAX_LINE_CHARS = 1 << 20
"""Longest line of a text log; a longer run of text without a newline is not a log."""


@dataclass(frozen=True)
class Piece:
    """Whole lines of one file: ``text`` starts at 1-based line ``first_line``."""

    file_id: int
    first_line: int
    text: str


def _refuse(path: Path, what: str, line: int, message: str, expected: str) -> InputError:
    return InputError(path, f"{what}: {message}", line=line, expected=expected)


def _decoded(decoder: codecs.IncrementalDecoder, block: bytes, final: bool, path: Path, what: str, line: int, pending: str) -> str:
    """``block`` decoded strictly; a bad byte is refused naming its line (``pending``: the text
    before it since the last whole line)."""
    try:
        return decoder.decode(block, final)
    except UnicodeDecodeError as exc:
        at = line + pending.count("\n") + block.count(b"\n", 0, exc.start)
        raise _refuse(path, what, at, f"byte 0x{block[exc.start]:02x} is not UTF-8 text" if exc.start < len(block) else "ends inside a UTF-8 character",
                      "UTF-8 text") from None


def pieces(path: Path, file_id: int, what: str) -> Iterator[Piece]:
    """Whole-line pieces of ``path`` (module docstring), in order; the last may lack its newline."""
    path = Path(path)
    with reading(path, what, expected=f"a readable regular file ({what})"):
        fd = open_regular(path, what)
        with os.fdopen(fd, "rb", buffering=0) as fh:
            decoder = codecs.getincrementaldecoder("utf-8")("strict")
            pending, line = "", 1
            while True:
                block = fh.read(READ_BYTES)
                text = pending + _decoded(decoder, block, not block, path, what, line, pending)
                nul = text.find("\0")
                if nul >= 0:
                    raise _refuse(path, what, line + text.count("\n", 0, nul), "NUL byte: binary content, not a text log", "UTF-8 text lines")
                cut = text.rfind("\n") + 1 if block else len(text)
                if cut:
                    yield Piece(file_id, line, text[:cut])
                    line += text.count("\n", 0, cut)
                pending = text[cut:]
                if len(pending) > MAX_LINE_CHARS:
                    raise _refuse(path, what, line, f"line longer than {MAX_LINE_CHARS} characters: not a text log",
                                  f"text lines of at most {MAX_LINE_CHARS} characters")
                if not block:
                    return
