"""A witness outside every session: which head each ledger reached, so a rollback is seen.

A signed ledger cut back to an older, genuinely signed head (with the matching
prefix) is internally perfect. The witness is a small append-only JSON Lines
file kept beside the signing key (``$SK_TUNE_WITNESS`` overrides it): at each
append :meth:`sk_analytics.ledger.chain.Ledger.append` adds ``{ledger, seq, hash}``
where ``ledger`` is the hash of the ledger's first record (its identity, the
same in every copy of the session). ``ledger verify`` (with ``--witness FILE``,
or the default witness when present) refuses a ledger whose head is older than
the newest record the witness saw, or whose record at a witnessed seq differs.

Writing the witness is best effort and unsynced (one short ``O_APPEND`` write,
microseconds): a witness that cannot be written never stops a sweep, and a
record written just before a crash may be missing from it. A witness shared by
a team (a campaign's nodes forwarding the same key folder) sees every node's
appends.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sk_analytics.errors import InputError
from sk_analytics.files.strict_json import loads_strict

WITNESS_ENV = "SK_TUNE_WITNESS"
WITNESS_RULE = "witness"
_FIRST: dict[str, str] = {}


def witness_path() -> Path:
    """``$SK_TUNE_WITNESS`` or ``witness.jsonl`` beside the signing key."""
    env = os.environ.get(WITNESS_ENV)
    if env:
        return Path(env).expanduser()
    from sk_analytics.ledger.signing import key_path

    return key_path().with_name("witness.jsonl")


def _first_hash(ledger: Path) -> str | None:
    """Hash of the ledger's first record (read once per process: the first line never changes)."""
    key = str(ledger)
    if key not in _FIRST:
        try:
            with open(ledger, "rb") as fh:
                first = json.loads(fh.readline())
        except (OSError, ValueError):
            return None
        if isinstance(first, dict) and isinstance(first.get("hash"), str):
            _FIRST[key] = first["hash"]
    return _FIRST.get(key)


def note(ledger: Path, seq: int, hash_: str) -> None:
    """Record that ``ledger`` reached ``seq``/``hash_`` (best effort; never raises)."""
    identity = hash_ if seq == 0 else _first_hash(ledger)
    if seq == 0:
        _FIRST[str(ledger)] = hash_
    if identity is None:
        return
    line = json.dumps({"ledger": identity, "seq": seq, "hash": hash_}, sort_keys=True) + "\n"
    try:
        path = witness_path()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line.encode("ascii"))
        finally:
            os.close(fd)
    except OSError:
        return


def witnessed(path: Path, identity: str) -> dict[int, str]:
    """seq -> hash of every record of the ledger ``identity`` the witness at ``path`` saw."""
    seen: dict[int, str] = {}
    try:
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):  # a FIFO would block the read forever
            from sk_analytics.files.io_seam import kind_of_mode

            raise InputError(path, f"cannot read the witness: {kind_of_mode(mode)}, not a regular file",
                             expected="a readable witness.jsonl")
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(path, f"cannot read the witness: {exc.strerror or exc}", expected="a readable witness.jsonl") from None
    for number, line in enumerate(text.splitlines(), start=1):
        if identity not in line:
            continue
        try:
            entry = loads_strict(line, f"line {number}")
        except InputError:
            continue  # a torn last line of a killed writer: the rest still counts
        if isinstance(entry, dict) and entry.get("ledger") == identity and isinstance(entry.get("seq"), int):
            seen[entry["seq"]] = str(entry.get("hash"))
    return seen


def rollback(records: Sequence[Any], path: Path) -> str | None:
    """Why the (verified) ``records`` are older than, or diverge from, what the witness saw; None when they agree."""
    if not records:
        return None
    seen = witnessed(path, records[0].hash)
    if not seen:
        return None
    newest = max(seen)
    if newest >= len(records):
        return (f"the witness {path} saw this ledger reach seq {newest} (hash {seen[newest][:12]}…) but it ends at seq "
                f"{len(records) - 1}: an older head and ledger prefix were restored (rollback), or this is a copy taken "
                "before the session went on (the session that went on is another folder)")
    for seq in sorted(seen):
        if records[seq].hash != seen[seq]:
            return (f"record seq {seq} differs from the one the witness {path} saw (hash {seen[seq][:12]}…): "
                    "the ledger diverged after the witness saw it")
    return None


def witnessed_rollback(records: Sequence[Any]) -> str | None:
    """:func:`rollback` against this user's witness (:func:`witness_path`), None when there is none: what a sweep checks
    before it appends to a session again, so that a copy left behind by its session never forks the signed ledger."""
    path = witness_path()
    return rollback(records, path) if path.is_file() else None
