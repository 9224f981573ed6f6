"""Append-only, hash-chained session ledger (JSON Lines) with a head anchor.

Every Stage O decision is a ledger record; the sweep's state machine has no
other memory, so the ledger must be impossible to rewrite unnoticed:

* each line is one record ``{seq, prev, ts_ns, kind, data, hash, sig}``; ``seq``
  counts from 0, ``prev`` is the previous record's ``hash`` (64 zeros for the
  first), ``hash`` is the canonical-JSON SHA-256 of the record without ``hash``
  and ``sig``, and ``sig`` the Ed25519 signature of ``hash`` by the user's key
  (:mod:`sk_analytics.signing`): a chain has no secret, so without it anyone could
  re-chain a rewritten history; one valid signature binds every record before it;
* appends happen under a file lock, are written in one ``write`` and fsynced;
* after each append the *head* file (``<ledger>.head``) is replaced atomically
  with the last ``seq``/``hash`` and the file's byte length, signed too, so
  deleting the last record(s) — which leaves a perfectly valid shorter chain —
  is still detected, and an append never re-anchors a head no trusted key signed.

Unsigned records (sk-tune before signing), keys missing from the trusted-keys
file and invalid signatures are verification problems named by their rule
(``signed``, ``trusted-key``, ``signature-valid``), never warnings.

Where the full check runs: :func:`verify`, :func:`read_records` (used when a
session is loaded or resumed and by the sweep before each decision) and
``sk-analyze ledger`` re-check every record. :meth:`Ledger.append` checks only
the anchored end of the file — the head's record must sit exactly at the
head's byte offset with its own hash intact (plus at most one complete,
correctly chained record after it, the interrupted-append state) — which keeps
an append O(1) instead of O(records). Anything the fast path cannot confirm
falls back to the full check, so an append still refuses a truncated or
shortened ledger, a missing head or a mismatched one. An earlier record edited
in place without changing its length is not seen by the append itself; the
chain built on top of it still carries the edit, so the next full check (at
the latest on resume or ``ledger verify``) reports it.

:func:`verify` reports truncated, edited, reordered, inserted or deleted
records. A crash between the append and the head update leaves the head one
record behind with an intact chain; that state is reported as a warning and
the next append re-anchors it. A torn final line (power loss or a full disk
mid-write) is never silently dropped: when its bytes can be the start of a
record (a JSON-object prefix) and begin exactly where the anchored chain
ends, :func:`recover_torn_tail` (called when a session is resumed) and
:meth:`Ledger.append` move them to a side file ``ledger.jsonl.torn-<ns>``,
which :func:`verify` then names in a warning (a recovery made by the append
itself is also cited in the record it appends). Any other unterminated line
is still refused.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from filelock import FileLock

from sk_analytics.atomic import atomic_path, write_json
from sk_analytics.errors import InputError, IntegrityError
from sk_analytics.fingerprint import canonical_json, fingerprint, sha256_bytes
from sk_analytics.io_seam import append_bytes, reading
from sk_analytics.strict_json import loads_strict

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
    sig: dict[str, Any] | None = None  # {key, sig}: Ed25519 over the hash (sk_analytics.signing)

    def body(self) -> dict[str, Any]:
        """The hashed part of the record (everything but ``hash``)."""
        return {"seq": self.seq, "prev": self.prev, "ts_ns": self.ts_ns, "kind": self.kind, "data": self.data}


@dataclass(frozen=True)
class Problem:
    """A verification finding: the 1-based line, a machine code and a message."""

    line: int | None
    code: str
    message: str


@dataclass
class VerifyReport:
    """Result of :func:`verify`; ``ok`` is False when any problem was found."""

    path: str
    records: int
    head_seq: int | None
    head_hash: str | None
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: "NAME (SHA256:…)" of each trusted key -> how many records it signed
    signers: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "ok": self.ok,
            "records": self.records,
            "head_seq": self.head_seq,
            "head_hash": self.head_hash,
            "problems": [asdict(p) for p in self.problems],
            "warnings": list(self.warnings),
            "signers": dict(self.signers),
        }


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
class _Scan:
    records: list[LedgerRecord]
    problems: list[Problem]
    torn_tail: bytes  # bytes after the last newline (an unterminated final line)
    line_ends: list[int]  # byte offset just past each complete line's newline


def _scan(path: Path) -> _Scan:
    """Parse and check every line of the ledger file (chain and sequence)."""
    with reading(path, "ledger", expected="a readable ledger.jsonl file"):
        raw = path.read_bytes() if path.exists() else b""
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
        record, problem = _parse_line(line, number)
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
    return _Scan(records, problems, tail, line_ends)


def _parse_line(line: bytes, number: int) -> tuple[LedgerRecord | None, Problem | None]:
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


def _read_head(path: Path) -> tuple[dict[str, Any] | None, Problem | None]:
    hp = head_path(path)
    if not hp.exists():
        return None, None
    try:
        head = loads_strict(hp.read_text(encoding="utf-8"), hp)
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


def _head_payload(head: Mapping[str, Any]) -> str:
    """What a head's signature covers (a head without ``bytes`` was never signed)."""
    return canonical_json(head_body(head["seq"], head["hash"], head.get("bytes", -1)))


def _signature_problems(records: list[LedgerRecord], head: Mapping[str, Any] | None, ledger: Path) -> tuple[list[Problem], dict[str, int]]:
    """Check every record's and the head's signature against the trusted keys.

    Returns the problems (the first record failing each rule, with a count of the
    later ones, so a re-chained ledger reads as one finding) and, per signing key,
    how many records it signed. Unsigned, unknown-key and invalid signatures are
    problems, never warnings. The trusted-keys file must lie outside the session.
    """
    from sk_analytics.signing import SignatureError, trusted_keys

    keys = trusted_keys(outside=ledger.parent)
    first: dict[str, Problem] = {}
    more: dict[str, int] = {}
    signers: dict[str, int] = {}
    for record in records:
        try:
            signer = keys.verify(record.sig, RECORD_PURPOSE, record.hash)
        except SignatureError as exc:
            if exc.rule in first:
                more[exc.rule] = more.get(exc.rule, 0) + 1
            else:
                first[exc.rule] = Problem(record.seq + 1, exc.rule, exc.detail)
            continue
        signers[signer.label()] = signers.get(signer.label(), 0) + 1
    problems = [
        p if not more.get(rule) else Problem(p.line, p.code, f"{p.message}; {more[rule]} later record(s) fail this rule too")
        for rule, p in first.items()
    ]
    if head is not None:
        try:
            keys.verify(head.get("sig"), HEAD_PURPOSE, _head_payload(head))
        except SignatureError as exc:
            problems.append(Problem(None, exc.rule, f"head file {head_path(ledger).name}: {exc.detail}"))
    return problems, signers


def verify(path: str | os.PathLike[str]) -> VerifyReport:
    """Check the whole ledger: every line, the chain, the sequence and the head anchor."""
    ledger = resolve_ledger_path(path)
    if not ledger.exists():
        raise InputError(ledger, "ledger file not found", expected="a session folder or its ledger.jsonl")
    return _check(ledger)[1]


def _check(ledger: Path) -> tuple[_Scan, VerifyReport]:
    """One read of the ledger: its records and the verification report (problems in line order)."""
    scan = _scan(ledger)
    head, head_problem = _read_head(ledger)
    report = VerifyReport(
        str(ledger),
        len(scan.records),
        None if head is None else head["seq"],
        None if head is None else head["hash"],
        list(scan.problems),
    )
    report.warnings.extend(f"torn final record of an interrupted append kept in {side.name} (cut off on resume)"
                           for side in sorted(ledger.parent.glob(f"{ledger.name}.torn-*")))
    if head_problem is not None:
        report.problems.append(head_problem)
    else:
        _check_head(scan, head, ledger, report)
    sig_problems, report.signers = _signature_problems(scan.records, head, ledger)
    report.problems.extend(sig_problems)
    report.problems.sort(key=lambda p: (p.line is None, p.line or 0))  # the first bad record comes first
    return scan, report


def _check_head(scan: _Scan, head: dict[str, Any] | None, ledger: Path, report: VerifyReport) -> None:
    """The head anchor names the last record (or the one before it, an interrupted append)."""
    last = scan.records[-1] if scan.records else None
    if head is None:
        if last is not None:
            report.problems.append(Problem(None, "head", f"head file {head_path(ledger).name} missing for a non-empty ledger"))
        return
    if last is None:
        report.problems.append(Problem(None, "head", f"head anchors seq {head['seq']} but the ledger has no records (records deleted)"))
    elif last.seq == head["seq"]:
        if last.hash != head["hash"]:
            report.problems.append(Problem(last.seq + 1, "head", "last record's hash differs from the head anchor (last record edited or replaced)"))
    elif last.seq == head["seq"] + 1 and len(scan.records) > head["seq"] + 1 and scan.records[head["seq"]].hash == head["hash"]:
        report.warnings.append("head is one record behind (append interrupted before anchoring); the next append re-anchors it")
    else:
        report.problems.append(
            Problem(None, "head", f"head anchors seq {head['seq']} but the last record has seq {last.seq} (records deleted or truncated)")
        )
    anchored_end = head.get("bytes")
    if report.ok and anchored_end is not None and scan.line_ends[head["seq"]] != anchored_end:
        # The chain itself is intact (hashes cover record content, not its spelling): the file was
        # re-serialized or the head's offset edited. Appends fall back to the full check and re-anchor.
        report.warnings.append(
            f"head anchors byte offset {anchored_end} but record seq {head['seq']} ends at byte {scan.line_ends[head['seq']]};"
            " the next append re-anchors it"
        )


def raw_records(path: str | os.PathLike[str]) -> list[LedgerRecord]:
    """Every parseable record, without refusing a ledger that fails verification (for display)."""
    ledger = resolve_ledger_path(path)
    return _scan(ledger).records if ledger.exists() else []


def read_records(path: str | os.PathLike[str]) -> list[LedgerRecord]:
    """Verified records of a ledger; raise :class:`IntegrityError` on any problem."""
    ledger = resolve_ledger_path(path)
    if not ledger.exists():
        return []
    scan, report = _check(ledger)
    if not report.ok:
        first = report.problems[0]
        where = f"{ledger}:{first.line}" if first.line else str(ledger)
        raise IntegrityError(f"{where}: ledger failed verification ({len(report.problems)} problem(s)): {first.message}")
    return scan.records


# --------------------------------------------------------------------------- writing


class Ledger:
    """A session ledger; :meth:`append` is safe against concurrent writers and crashes."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = resolve_ledger_path(path)
        self._lock = FileLock(str(self.path.with_name(self.path.name + ".lock")))

    def records(self) -> list[LedgerRecord]:
        """All records, verified."""
        return read_records(self.path)

    def __iter__(self) -> Iterator[LedgerRecord]:
        return iter(self.records())

    def append(self, kind: str, data: Mapping[str, Any]) -> LedgerRecord:
        """Append one record under the lock, fsync it, then re-anchor the head."""
        if not kind:
            raise InputError(self.path, "ledger record kind must be non-empty")
        canonical_json(dict(data))  # refuse NaN / non-JSON before touching the file
        from sk_analytics.signing import signer

        key = signer(outside=self.path.parent)  # the key may never live in the session it vouches for
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            recovered = self._recover_torn_tail()
            last = self._last_record()
            payload = dict(data)
            if recovered is not None:
                payload = {**payload, "_recovered_torn_tail": recovered}
            body = {
                "seq": 0 if last is None else last.seq + 1,
                "prev": GENESIS if last is None else last.hash,
                "ts_ns": time.time_ns(),
                "kind": kind,
                "data": json.loads(canonical_json(payload)),
            }
            digest = record_hash(body)
            record = LedgerRecord(**body, hash=digest, sig=key.sign(RECORD_PURPOSE, digest))
            line = json.dumps({**body, "hash": record.hash, "sig": record.sig}, ensure_ascii=False, sort_keys=True, allow_nan=False) + "\n"
            size = append_bytes(self.path, line.encode("utf-8"), site="ledger")
            anchor = head_body(record.seq, record.hash, size)
            head = {**anchor, "sig": key.sign(HEAD_PURPOSE, canonical_json(anchor))}
            write_json(head_path(self.path), head)
            _OWN_HEADS[str(self.path)] = canonical_json(head)
            return record

    def _last_record(self) -> LedgerRecord | None:
        """The record to chain onto: confirmed against the head anchor, else by the full check.

        Raises :class:`IntegrityError` when the ledger fails verification.
        """
        head, head_problem = _read_head(self.path)
        if head is not None and head_problem is None and self.path.exists() and _head_signed(self.path, head):
            last = _anchored_tail(self.path, head)
            if last is not None:
                return last
        scan, report = _check(self.path)  # slow path: also yields the precise problem to report
        if not report.ok:
            first = report.problems[0]
            raise IntegrityError(f"{self.path}: refusing to append to a ledger that fails verification: {first.message}")
        return scan.records[-1] if scan.records else None

    def recover_torn_tail(self) -> dict[str, Any] | None:
        """Under the lock: move a torn final line aside (see :func:`recover_torn_tail`)."""
        with self._lock:
            return self._recover_torn_tail()

    def _recover_torn_tail(self) -> dict[str, Any] | None:
        """Move an unterminated final line aside, keeping its bytes; what was moved, or None.

        Only the start of a record that was never anchored by the head (a
        crash or a full disk mid-write) is recovered: its bytes must begin
        where the anchored chain ends (the head's record, or the one complete
        record an interrupted head update leaves after it) and be a prefix of
        a JSON object. A cut through an anchored record, or bytes that cannot
        be the start of a record, stay a verification failure.
        """
        if not self.path.exists():
            return None
        size = self.path.stat().st_size
        with open(self.path, "rb") as fh:
            if size == 0 or _byte_at(fh, size - 1) == b"\n":
                return None
            keep_len, torn = _line_before(fh, size + 1)  # the unterminated tail as if it ended in a newline
        head, _ = _read_head(self.path)
        if head is None:
            fresh = keep_len == 0
        elif "bytes" in head:
            fresh = head["bytes"] == keep_len or _anchored_tail(self.path, head, size=keep_len) is not None
        else:  # head written before byte offsets were anchored
            with open(self.path, "rb") as fh:
                fresh = head["seq"] == fh.read(keep_len).count(b"\n") - 1
        if not fresh or not is_json_object_prefix(torn):
            return None  # not a fresh torn append: leave it for verify to report
        side = self.path.with_name(f"{self.path.name}.torn-{time.time_ns()}")
        with atomic_path(side) as tmp:
            tmp.write_bytes(torn)
        with open(self.path, "r+b") as fh:
            fh.truncate(keep_len)
            fh.flush()
            os.fsync(fh.fileno())
        return {"file": side.name, "bytes": len(torn), "sha256": sha256_bytes(torn)}


def recover_torn_tail(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Cut off a torn final record (the start of an append that never finished), keeping its bytes.

    Called when a session is resumed. Returns ``{file, bytes, sha256}`` of the
    side file beside the ledger, or None when there was nothing to recover
    (anything not recoverable is left for :func:`read_records` to refuse).
    """
    ledger = resolve_ledger_path(path)
    return Ledger(ledger).recover_torn_tail() if ledger.exists() else None


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


def _byte_at(fh: BinaryIO, offset: int) -> bytes:
    fh.seek(offset)
    return fh.read(1)


def _line_before(fh: BinaryIO, end: int, chunk: int = 1 << 16) -> tuple[int, bytes]:
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


_OWN_HEADS: dict[str, str] = {}
"""ledger path -> canonical JSON of the head this process last wrote there: a process that
appends record after record re-reads its own head and need not verify it again."""


def _head_signed(ledger: Path, head: Mapping[str, Any]) -> bool:
    """A trusted key signed this head: an append never re-anchors (and so launders) a head
    forged after records were cut off the end. Its hash covers the anchored record."""
    from sk_analytics.signing import SignatureError, trusted_keys

    if _OWN_HEADS.get(str(ledger)) == canonical_json(dict(head)):
        return True
    try:
        trusted_keys(outside=ledger.parent).verify(head.get("sig"), HEAD_PURPOSE, _head_payload(head))
    except SignatureError:
        return False
    return True


def _intact(record: LedgerRecord | None, problem: Problem | None, seq: int, prev: str | None = None) -> bool:
    """A parsed record with the expected seq (and prev), whose content matches its own hash."""
    return (
        problem is None
        and record is not None
        and record.seq == seq
        and (prev is None or record.prev == prev)
        and record_hash(record.body()) == record.hash
    )


def _anchored_tail(path: Path, head: Mapping[str, Any], *, size: int | None = None) -> LedgerRecord | None:
    """The last record, confirmed against the head anchor alone (O(record), not O(ledger)).

    ``size``: look only at the file's first ``size`` bytes (what is left when a torn tail is cut off).

    The head's record must end exactly at the head's ``bytes`` offset, carry the
    head's seq and hash and hash to itself; after it the file may hold at most
    one complete record chained onto it (an append interrupted before the head
    update). ``None`` when any of that does not hold — the caller then runs the
    full check, which also names the problem.
    """
    anchored_end = head.get("bytes")
    size = path.stat().st_size if size is None else size
    if not isinstance(anchored_end, int) or isinstance(anchored_end, bool) or not 0 < anchored_end <= size:
        return None
    with open(path, "rb") as fh:
        if _byte_at(fh, anchored_end - 1) != b"\n":
            return None
        _, line = _line_before(fh, anchored_end)
        anchored, problem = _parse_line(line, head["seq"] + 1)
        if not _intact(anchored, problem, head["seq"]) or anchored is None or anchored.hash != head["hash"]:
            return None
        if size == anchored_end:
            return anchored
        fh.seek(anchored_end)
        rest = fh.read(size - anchored_end)
    if rest.count(b"\n") != 1 or not rest.endswith(b"\n"):
        return None
    record, problem = _parse_line(rest[:-1], head["seq"] + 2)
    return record if _intact(record, problem, head["seq"] + 1, anchored.hash) else None
