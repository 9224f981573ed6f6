"""Ledger record I/O: the record and head formats, parsing every line, reading the head.

Pure reading primitives shared by the writer (:mod:`sk_analytics.ledger.chain`) and the
verifier (:mod:`sk_analytics.ledger.verify`); the format is described in
:mod:`sk_analytics.ledger.chain`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from sk_analytics.errors import InputError
from sk_analytics.files.io_seam import reading
from sk_analytics.files.strict_json import loads_strict
from sk_analytics.fingerprint import canonical_json, fingerprint

HEAD_SCHEMA = "sk-tune-ledger-head-v2"
EARLIER_HEAD_SCHEMAS = ("sk-tune-ledger-head-v1",)  # unsigned heads of sk-tune before signing
GENESIS = "0" * 64
RECORD_KEYS = frozenset({"seq", "prev", "ts_ns", "kind", "data", "hash", "sig"})
UNSIGNED_RECORD_KEYS = RECORD_KEYS - {"sig"}  # records of sk-tune before signing: parsed, then refused (rule signed)
RECORD_PURPOSE = "ledger-record"
HEAD_PURPOSE = "ledger-head"
LEDGER_NAME = "ledger.jsonl"


@dataclass(frozen=True)
class LedgerRecord:
    """One ledger entry. ``data`` is the event's JSON payload."""

    seq: int
    prev: str
    ts_ns: int
    kind: str
    data: dict[str, Any]
    hash: str
    sig: dict[str, Any] | None = None  # {key, sig}: Ed25519 over the hash (sk_analytics.ledger.signing)

    def body(self) -> dict[str, Any]:
        """The hashed part of the record (everything but ``hash``)."""
        return {"seq": self.seq, "prev": self.prev, "ts_ns": self.ts_ns, "kind": self.kind, "data": self.data}


@dataclass(frozen=True)
class Problem:
    """A verification finding: the 1-based line, a machine code and a message."""

    line: int | None
    code: str
    message: str


def resolve_ledger_path(session_or_file: str | os.PathLike[str]) -> Path:
    """A session folder means its ``ledger.jsonl``; anything else is the ledger file."""
    path = Path(session_or_file)
    return path / LEDGER_NAME if path.is_dir() else path


def head_path(ledger: Path) -> Path:
    """Where the head anchor of ``ledger`` lives."""
    return ledger.with_name(ledger.name + ".head")


def record_hash(body: Mapping[str, Any]) -> str:
    """Chain hash of a record body."""
    return fingerprint(dict(body))


# --------------------------------------------------------------------------- reading


@dataclass
class Scan:
    records: list[LedgerRecord]
    problems: list[Problem]
    torn_tail: bytes  # bytes after the last newline (an unterminated final line)
    line_ends: list[int]  # byte offset just past each complete line's newline


def scan(path: Path) -> Scan:
    """Parse and check every line of the ledger file (chain and sequence)."""
    with reading(path, "ledger", expected="a readable ledger.jsonl file"):
        raw = _read_regular(path, "ledger") if path.exists() else b""
    body, sep, tail = raw.rpartition(b"\n")
    lines = body.split(b"\n") if sep else []
    if not sep:
        tail = raw
    records: list[LedgerRecord] = []
    problems: list[Problem] = []
    line_ends: list[int] = []
    prev = GENESIS
    end = 0
    for number, line in enumerate(lines, start=1):
        end += len(line) + 1
        line_ends.append(end)
        record, problem = parse_line(line, number)
        if problem is not None:
            problems.append(problem)
            prev = ""  # chain broken: do not cascade the same problem to every later line
            continue
        assert record is not None
        if record.seq != number - 1:
            problems.append(Problem(number, "sequence", f"record has seq {record.seq}, expected {number - 1} (reordered, inserted or deleted record)"))
        elif prev and record.prev != prev:
            problems.append(Problem(number, "chain", "prev hash does not match the previous record (record deleted, inserted or edited before it)"))
        if record_hash(record.body()) != record.hash:
            problems.append(Problem(number, "hash", "record content does not match its hash (record edited)"))
        records.append(record)
        prev = record.hash
    if tail:
        problems.append(Problem(len(lines) + 1, "truncated", "final line is not terminated (truncated or torn record)"))
    return Scan(records, problems, tail, line_ends)


def _read_regular(path: Path, what: str) -> bytes:
    """The bytes of ``path``, which must be a regular file: a FIFO in its place is refused, never waited on."""
    from sk_analytics.files.io_seam import open_regular

    with os.fdopen(open_regular(path, what), "rb") as fh:
        return fh.read()


def parse_line(line: bytes, number: int) -> tuple[LedgerRecord | None, Problem | None]:
    try:
        obj = loads_strict(line.decode("utf-8"), f"line {number}")  # duplicate keys would hide an edit from the hash
    except UnicodeDecodeError as exc:
        return None, Problem(number, "not_json", f"not UTF-8 ({exc.reason}); line truncated or edited")
    except InputError as exc:
        return None, Problem(number, "not_json", f"not a strict JSON record ({exc.message}); line truncated or edited")
    if not isinstance(obj, dict) or set(obj) not in (RECORD_KEYS, UNSIGNED_RECORD_KEYS):
        keys = sorted(obj) if isinstance(obj, dict) else type(obj).__name__
        return None, Problem(number, "bad_record", f"record keys {keys}, expected {sorted(RECORD_KEYS)}")
    if not (
        isinstance(obj["seq"], int)
        and isinstance(obj["ts_ns"], int)
        and isinstance(obj["kind"], str)
        and isinstance(obj["data"], dict)
        and isinstance(obj["prev"], str)
        and isinstance(obj["hash"], str)
    ):
        return None, Problem(number, "bad_record", "record field types wrong (seq/ts_ns int, kind/prev/hash str, data object)")
    return LedgerRecord(obj["seq"], obj["prev"], obj["ts_ns"], obj["kind"], obj["data"], obj["hash"], obj.get("sig")), None


def read_head(path: Path) -> tuple[dict[str, Any] | None, Problem | None]:
    hp = head_path(path)
    if not hp.exists():
        return None, None
    try:
        head = loads_strict(_read_regular(hp, "ledger head").decode("utf-8"), hp)
    except (OSError, UnicodeDecodeError, InputError) as exc:
        return None, Problem(None, "head", f"head file {hp.name} unreadable: {exc}")
    if not (
        isinstance(head, dict)
        and head.get("schema_version") in (HEAD_SCHEMA, *EARLIER_HEAD_SCHEMAS)
        and isinstance(head.get("seq"), int)
        and isinstance(head.get("hash"), str)
        and (isinstance(head.get("bytes"), int) or "bytes" not in head)
    ):
        return None, Problem(None, "head", f"head file {hp.name} malformed (expected schema_version {HEAD_SCHEMA}, seq, hash, bytes, sig)")
    return head, None


def head_body(seq: int, hash_: str, size: int) -> dict[str, Any]:
    """The signed part of a head anchor."""
    return {"schema_version": HEAD_SCHEMA, "seq": seq, "hash": hash_, "bytes": size}


def head_payload(head: Mapping[str, Any]) -> str:
    """What a head's signature covers (a head without ``bytes`` was never signed)."""
    return canonical_json(head_body(head["seq"], head["hash"], head.get("bytes", -1)))


_JSON_SCALAR_CHARS = frozenset("0123456789+-.eEtruefalsn \t\r")


def is_json_object_prefix(data: bytes) -> bool:
    """Whether ``data`` can be the beginning of one JSON object (what a write cut short leaves).

    Checks UTF-8 (a character cut at the very end is allowed), that it opens
    with ``{``, that brackets nest and close in order outside strings, that
    strings hold no raw control characters, and that nothing follows the
    object once it closed. Not a full parser: a prefix that passes may still
    not complete to a record, but arbitrary or foreign bytes do not pass.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if exc.reason != "unexpected end of data":
            return False
        text = data[: exc.start].decode("utf-8", errors="strict")
    if not text.startswith("{"):
        return False
    stack = ["}"]
    in_string = escaped = False
    for char in text[1:]:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
            elif char < " ":
                return False
        elif not stack and char not in " \t\r":
            return False  # something after the object closed
        elif char == '"':
            in_string = True
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
        elif char in "}]":
            if stack.pop() != char:
                return False
        elif char not in ":," and char not in _JSON_SCALAR_CHARS:
            return False
    return True


def byte_at(fh: BinaryIO, offset: int) -> bytes:
    fh.seek(offset)
    return fh.read(1)


def line_before(fh: BinaryIO, end: int, chunk: int = 1 << 16) -> tuple[int, bytes]:
    """The line whose newline is the byte at ``end - 1``: (its start offset, its bytes without the newline).

    Reads backwards in chunks, so finding the last record costs its own length, not the file's.
    """
    start = end - 1
    parts: list[bytes] = []
    while start > 0:
        low = max(0, start - chunk)
        fh.seek(low)
        buf = fh.read(start - low)
        cut = buf.rfind(b"\n")
        if cut >= 0:
            parts.append(buf[cut + 1 :])
            start = low + cut + 1
            break
        parts.append(buf)
        start = low
    return start, b"".join(reversed(parts))


