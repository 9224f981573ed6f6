"""Append-only, hash-chained session ledger (JSON Lines) with a head anchor.

Every Stage O decision is a ledger record; the sweep's state machine has no
other memory, so the ledger must be impossible to rewrite unnoticed:

* each line is one record ``{seq, prev, ts_ns, kind, data, hash, sig}``; ``seq``
  counts from 0, ``prev`` is the previous record's ``hash`` (64 zeros for the
  first), ``hash`` is the canonical-JSON SHA-256 of the record without ``hash``
  and ``sig``, and ``sig`` the Ed25519 signature of ``hash`` by the user's key
  (:mod:`sk_analytics.ledger.signing`): a chain has no secret, so without it anyone could
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

One key signs a ledger unless a ``signer_handover`` record authorises the next
(:func:`hand_over`, rule ``one-signer``), and each append notes the new head in
the witness outside the session (:mod:`sk_analytics.ledger.witness`). Modules: this one
appends and reads verified records; :mod:`sk_analytics.ledger.records` holds the
record and head formats and parsing, :mod:`sk_analytics.ledger.verify` the full check.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from sk_analytics.errors import InputError, IntegrityError
from sk_analytics.files.atomic import atomic_path, replace_locked
from sk_analytics.files.flock import FlockLock
from sk_analytics.files.io_seam import append_bytes
from sk_analytics.fingerprint import canonical_json, sha256_bytes
from sk_analytics.ledger import witness
from sk_analytics.ledger.records import (
    EARLIER_HEAD_SCHEMAS,
    GENESIS,
    HEAD_PURPOSE,
    HEAD_SCHEMA,
    LEDGER_NAME,
    RECORD_KEYS,
    RECORD_PURPOSE,
    UNSIGNED_RECORD_KEYS,
    LedgerRecord,
    Problem,
    byte_at,
    head_body,
    head_path,
    head_payload,
    is_json_object_prefix,
    line_before,
    parse_line,
    read_head,
    record_hash,
    resolve_ledger_path,
    scan,
)
from sk_analytics.ledger.verify import HANDOVER_KIND, ONE_SIGNER, VerifyReport, check, signer_chain, verify
from sk_analytics.messages import coded


def raw_records(path: str | os.PathLike[str]) -> list[LedgerRecord]:
    """Every parseable record, without refusing a ledger that fails verification (for display)."""
    ledger = resolve_ledger_path(path)
    return scan(ledger).records if ledger.exists() else []


def read_records(path: str | os.PathLike[str]) -> list[LedgerRecord]:
    """Verified records of a ledger; raise :class:`IntegrityError` on any problem."""
    ledger = resolve_ledger_path(path)
    if not ledger.exists():
        return []
    scanned, report = check(ledger)
    if not report.ok:
        first = report.problems[0]
        where = f"{ledger}:{first.line}" if first.line else str(ledger)
        raise IntegrityError(f"{where}: ledger failed verification ({len(report.problems)} problem(s)): {first.message}")
    return scanned.records


# --------------------------------------------------------------------------- writing


class Ledger:
    """A session ledger; :meth:`append` is safe against concurrent writers and crashes.

    An append costs well under a millisecond besides its fsyncs (benchmarks/README.md): the
    lock is a plain ``flock``, the signing key is looked up once per object (again only when
    the key file's identity changes), the head is replaced through a fixed temp name under the
    lock, and a ledger and head that are, by ``stat``, exactly as this object left them after
    its last append chain onto the record it wrote without being read again.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = resolve_ledger_path(path)
        self._head = head_path(self.path)
        self._lock = FlockLock(self.path.with_name(self.path.name + ".lock"))
        self._key: tuple[tuple[Any, ...], Any] | None = None
        self._wrote: tuple[tuple[int, int, int], tuple[int, int, int], LedgerRecord] | None = None

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
        key = self._signer()  # the key may never live in the session it vouches for
        if self._wrote is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        with self._lock:
            last = self._own_tail()
            recovered = None
            if last is None:
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
            self._wrote = None  # from here until the head is replaced, the files are not as this object left them
            size = append_bytes(self.path, line.encode("utf-8"), site="ledger")
            anchor = head_body(record.seq, record.hash, size)
            head = {**anchor, "sig": key.sign(HEAD_PURPOSE, canonical_json(anchor))}
            text = json.dumps(head, ensure_ascii=False, indent=2) + "\n"  # as write_json writes it
            replace_locked(self._head, text.encode("utf-8"), temp=f".{self._head.name}.append.tmp")
            _OWN_HEADS[str(self.path)] = canonical_json(head)
            try:
                self._wrote = (_stamp(os.stat(self.path)), _stamp(os.stat(self._head)), record)
            except OSError:  # the record and head are written; the next append just reads them again
                self._wrote = None
            witness.note(self.path, record.seq, record.hash)  # outside the session: a later rollback is seen
            return record

    def _signer(self) -> Any:
        """The signing key, looked up (path, outside-the-session check, load) once per key file identity."""
        from sk_analytics.ledger.signing import key_path, signer

        path = key_path()
        try:
            st = os.stat(path)
            stamp: tuple[Any, ...] = (str(path), *_stamp(st), st.st_mode)
        except OSError:
            stamp = (str(path),)  # missing or unreadable: signer() creates it or names the problem
        if self._key is None or self._key[0] != stamp:
            self._key = (stamp, signer(outside=self.path.parent))
        return self._key[1]

    def _own_tail(self) -> LedgerRecord | None:
        """The record this object appended last, when the ledger and the head are, by ``stat``, as it left them.

        Safe without reading them: the new record chains onto the hash this object itself
        signed, never onto bytes someone else put there; a same-size edit with a restored
        mtime is still carried by that chain into the next full check, as for any earlier record."""
        if self._wrote is None:
            return None
        ledger_stamp, head_stamp, record = self._wrote
        try:
            if _stamp(os.stat(self.path)) == ledger_stamp and _stamp(os.stat(self._head)) == head_stamp:
                return record
        except OSError:
            pass
        return None

    def _last_record(self) -> LedgerRecord | None:
        """The record to chain onto: confirmed against the head anchor, else by the full check.

        Raises :class:`IntegrityError` when the ledger fails verification.
        """
        head, head_problem = read_head(self.path)
        if head is not None and head_problem is None and self.path.exists() and _head_signed(self.path, head):
            last = _anchored_tail(self.path, head)
            if last is not None:
                return last
        scanned, report = check(self.path)  # slow path: also yields the precise problem to report
        if not report.ok:
            first = report.problems[0]
            raise IntegrityError(f"{self.path}: refusing to append to a ledger that fails verification: {first.message}")
        return scanned.records[-1] if scanned.records else None

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
            if size == 0 or byte_at(fh, size - 1) == b"\n":
                return None
            keep_len, torn = line_before(fh, size + 1)  # the unterminated tail as if it ended in a newline
        head, _ = read_head(self.path)
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


def hand_over(path: str | os.PathLike[str], next_key: str) -> LedgerRecord:
    """Authorise the key ``next_key`` (an OpenSSH ``SHA256:`` fingerprint) to sign the ledger from now on.

    Appended and signed by the key that signs it now: a session has one signer, and a
    second one (a colleague resuming it) only through this record (rule ``one-signer``).
    """
    from sk_analytics.ledger.signing import signer

    ledger = Ledger(path)
    current, problem = signer_chain(read_records(ledger.path))
    own = signer(outside=ledger.path.parent).fingerprint
    if problem is not None or (current is not None and own != current):
        raise IntegrityError(f"{ledger.path}: rule {ONE_SIGNER}: only the current signer {current} can hand the ledger over "
                             f"(this key is {own})")
    if not next_key.startswith("SHA256:"):
        raise InputError(None, f"next key {next_key!r} is not a key fingerprint", expected="SHA256:… as `ssh-keygen -lf` prints it")
    return ledger.append(HANDOVER_KIND, {"next_key": next_key, "previous_key": own,
                                         "summary": coded("summary.key_handover", previous=own, next=next_key)})


def drop_stale_temps(path: str | os.PathLike[str]) -> list[str]:
    """Under the ledger lock, remove the head temp files (``.ledger.jsonl.head.*.tmp``) a killed writer left behind."""
    ledger = resolve_ledger_path(path)
    if not ledger.parent.is_dir():
        return []
    with Ledger(ledger)._lock:
        stale = sorted(ledger.parent.glob(f".{head_path(ledger).name}.*.tmp"))
        for tmp in stale:
            tmp.unlink(missing_ok=True)
    return [t.name for t in stale]


def recover_torn_tail(path: str | os.PathLike[str]) -> dict[str, Any] | None:
    """Cut off a torn final record (the start of an append that never finished), keeping its bytes.

    Called when a session is resumed. Returns ``{file, bytes, sha256}`` of the
    side file beside the ledger, or None when there was nothing to recover
    (anything not recoverable is left for :func:`read_records` to refuse).
    """
    ledger = resolve_ledger_path(path)
    return Ledger(ledger).recover_torn_tail() if ledger.exists() else None


def _stamp(st: os.stat_result) -> tuple[int, int, int]:
    """What identifies a file's state for :meth:`Ledger._own_tail`: size, mtime and inode."""
    return st.st_size, st.st_mtime_ns, st.st_ino


_OWN_HEADS: dict[str, str] = {}
"""ledger path -> canonical JSON of the head this process last wrote there: a process that
appends record after record re-reads its own head and need not verify it again."""


def _head_signed(ledger: Path, head: Mapping[str, Any]) -> bool:
    """A trusted key signed this head: an append never re-anchors (and so launders) a head
    forged after records were cut off the end. Its hash covers the anchored record."""
    from sk_analytics.ledger.signing import SignatureError, trusted_keys

    if _OWN_HEADS.get(str(ledger)) == canonical_json(dict(head)):
        return True
    try:
        trusted_keys(outside=ledger.parent).verify(head.get("sig"), HEAD_PURPOSE, head_payload(head))
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
        if byte_at(fh, anchored_end - 1) != b"\n":
            return None
        _, line = line_before(fh, anchored_end)
        anchored, problem = parse_line(line, head["seq"] + 1)
        if not _intact(anchored, problem, head["seq"]) or anchored is None or anchored.hash != head["hash"]:
            return None
        if size == anchored_end:
            return anchored
        fh.seek(anchored_end)
        rest = fh.read(size - anchored_end)
    if rest.count(b"\n") != 1 or not rest.endswith(b"\n"):
        return None
    record, problem = parse_line(rest[:-1], head["seq"] + 2)
    return record if _intact(record, problem, head["seq"] + 1, anchored.hash) else None


__all__ = ["EARLIER_HEAD_SCHEMAS", "GENESIS", "HEAD_PURPOSE", "HEAD_SCHEMA", "LEDGER_NAME", "RECORD_KEYS", "RECORD_PURPOSE",
           "UNSIGNED_RECORD_KEYS", "Ledger", "drop_stale_temps", "hand_over", "LedgerRecord", "Problem", "VerifyReport", "head_body", "head_path",
           "is_json_object_prefix", "raw_records", "read_records", "record_hash", "recover_torn_tail", "resolve_ledger_path",
           "verify"]
