"""Full verification of a ledger: every line, the chain, the sequence, the head anchor, the signatures.

:func:`verify` (``sk-analyze ledger verify``) and :func:`check` (used by
:func:`sk_analytics.ledger.chain.read_records` on every load and resume) re-check every
record; the rules are described in :mod:`sk_analytics.ledger.chain`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sk_analytics.errors import InputError
from sk_analytics.ledger.records import (
    HEAD_PURPOSE,
    RECORD_PURPOSE,
    LedgerRecord,
    Problem,
    Scan,
    head_path,
    head_payload,
    read_head,
    resolve_ledger_path,
    scan,
)


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


def _signature_problems(records: list[LedgerRecord], head: Mapping[str, Any] | None, ledger: Path) -> tuple[list[Problem], dict[str, int]]:
    """Check every record's and the head's signature against the trusted keys.

    Returns the problems (the first record failing each rule, with a count of the
    later ones, so a re-chained ledger reads as one finding) and, per signing key,
    how many records it signed. Unsigned, unknown-key and invalid signatures are
    problems, never warnings. The trusted-keys file must lie outside the session.
    """
    from sk_analytics.ledger.signing import SignatureError, trusted_keys

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
    current, handover_problem = signer_chain(records)
    problems = [
        p if not more.get(rule) else Problem(p.line, p.code, f"{p.message}; {more[rule]} later record(s) fail this rule too")
        for rule, p in first.items()
    ]
    if head is not None:
        try:
            keys.verify(head.get("sig"), HEAD_PURPOSE, head_payload(head))
        except SignatureError as exc:
            problems.append(Problem(None, exc.rule, f"head file {head_path(ledger).name}: {exc.detail}"))
        else:
            key = (head.get("sig") or {}).get("key")
            if handover_problem is None and current is not None and key != current:
                handover_problem = Problem(None, ONE_SIGNER, f"head file {head_path(ledger).name} is signed by {key}, "
                                                             f"but the ledger's records by {current}")
    if handover_problem is not None:
        problems.append(handover_problem)
    return problems, signers


HANDOVER_KIND = "signer_handover"
ONE_SIGNER = "one-signer"


def signer_chain(records: list[LedgerRecord]) -> tuple[str | None, Problem | None]:
    """The key that signs the ledger now, and the first record signed by a key nobody handed over to.

    One key signs a session; another may continue only after a ``signer_handover``
    record signed by the current key names it (``data.next_key``). A second trusted
    key taking over without one (an insider re-signing the tail) is rule ``one-signer``.
    Unsigned records are skipped here (rule ``signed`` reports them).
    """
    current: str | None = None
    authorised: set[str] = set()
    for record in records:
        key = (record.sig or {}).get("key") if isinstance(record.sig, dict) else None
        if not isinstance(key, str):
            continue
        if current is None:
            current = key
        elif key != current:
            if key not in authorised:
                return current, Problem(record.seq + 1, ONE_SIGNER,
                                        f"record seq {record.seq} is signed by {key}, but the session is signed by {current} "
                                        f"and no {HANDOVER_KIND} record signed by {current} authorises {key}")
            current, authorised = key, set()
        if record.kind == HANDOVER_KIND and isinstance(record.data.get("next_key"), str):
            authorised.add(record.data["next_key"])
    return current, None


def verify(path: str | os.PathLike[str]) -> VerifyReport:
    """Check the whole ledger: every line, the chain, the sequence and the head anchor."""
    return verify_read(path)[0]


def verify_read(path: str | os.PathLike[str]) -> tuple[VerifyReport, list[LedgerRecord]]:
    """:func:`verify` and, when it passes, the verified records (empty otherwise): one read for a whole command."""
    ledger = resolve_ledger_path(path)
    if not ledger.exists():
        raise InputError(ledger, "ledger file not found", expected="a session folder or its ledger.jsonl")
    scanned, report = check(ledger)
    return report, scanned.records if report.ok else []


def check(ledger: Path) -> tuple[Scan, VerifyReport]:
    """One read of the ledger: its records and the verification report (problems in line order)."""
    scanned = scan(ledger)
    head, head_problem = read_head(ledger)
    report = VerifyReport(
        str(ledger),
        len(scanned.records),
        None if head is None else head["seq"],
        None if head is None else head["hash"],
        list(scanned.problems),
    )
    report.warnings.extend(f"torn final record of an interrupted append kept in {side.name} (cut off on resume)"
                           for side in sorted(ledger.parent.glob(f"{ledger.name}.torn-*")))
    if head_problem is not None:
        report.problems.append(head_problem)
    else:
        _check_head(scanned, head, ledger, report)
    sig_problems, report.signers = _signature_problems(scanned.records, head, ledger)
    report.problems.extend(sig_problems)
    report.problems.sort(key=lambda p: (p.line is None, p.line or 0))  # the first bad record comes first
    return scanned, report


def _check_head(scanned: Scan, head: dict[str, Any] | None, ledger: Path, report: VerifyReport) -> None:
    """The head anchor names the last record (or the one before it, an interrupted append)."""
    last = scanned.records[-1] if scanned.records else None
    if head is None:
        if last is not None:
            report.problems.append(Problem(None, "head", f"head file {head_path(ledger).name} missing for a non-empty ledger"))
        return
    if last is None:
        report.problems.append(Problem(None, "head", f"head anchors seq {head['seq']} but the ledger has no records (records deleted)"))
    elif last.seq == head["seq"]:
        if last.hash != head["hash"]:
            report.problems.append(Problem(last.seq + 1, "head", "last record's hash differs from the head anchor (last record edited or replaced)"))
    elif last.seq == head["seq"] + 1 and len(scanned.records) > head["seq"] + 1 and scanned.records[head["seq"]].hash == head["hash"]:
        report.warnings.append("head is one record behind (append interrupted before anchoring); the next append re-anchors it")
    else:
        report.problems.append(
            Problem(None, "head", f"head anchors seq {head['seq']} but the last record has seq {last.seq} (records deleted or truncated)")
        )
    anchored_end = head.get("bytes")
    if report.ok and anchored_end is not None and scanned.line_ends[head["seq"]] != anchored_end:
        # The chain itself is intact (hashes cover record content, not its spelling): the file was
        # re-serialized or the head's offset edited. Appends fall back to the full check and re-anchor.
        report.warnings.append(
            f"head anchors byte offset {anchored_end} but record seq {head['seq']} ends at byte {scanned.line_ends[head['seq']]};"
            " the next append re-anchors it"
        )


