"""What ``sk-analyze ledger verify`` proves beyond the chain: identity, rollback, every evidence byte, collections, outputs.

Archive mode throughout: only content and signatures are checked, never the
path a session was created at, so a session verifies the same from any path,
any working directory, after ``cp -a`` or ``mv``. Each check returns the first
:class:`Finding` (rule, session-relative file, message), in this order:

1. ``identity`` — a ledger with no records, a session ledger (first record
   ``session_started``) without ``session.json``, or a non-empty ledger without its head;
2. ``witness`` — the head is older than, or diverges from, what the witness saw
   (:mod:`sk_analytics.ledger.witness`);
3. the evidence rules of :mod:`sk_analytics.ledger.evidence_verify` (every file re-hashed);
4. the collection rules of :mod:`sk_analytics.contract` for each DCCI collection the
   ledger recorded (manifest fingerprint = the recorded one, signature, files; archive mode);
5. ``ledger-agreement`` — :mod:`sk_analytics.handoff.crosscheck` (handoff, BASE, matrix, reports).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from sk_analytics.handoff.crosscheck import RULE as AGREEMENT, SESSION_FILE, first_disagreement
from sk_analytics.ledger.chain import LedgerRecord, head_path
from sk_analytics.ledger.evidence import BOUND_KEY, FileState
from sk_analytics.ledger.evidence_verify import QUICK_LIMIT, verify_evidence
from sk_analytics.ledger.witness import WITNESS_RULE, rollback
from sk_analytics.stage_o.leases import unleased_note
from sk_analytics.stage_o.session_notes import foreign_note, sweep_lock

IDENTITY = "identity"


@dataclass(frozen=True)
class Finding:
    """A session file (relative to the session) breaking ``rule``."""

    rule: str
    file: str
    message: str


@dataclass
class Proof:
    """The outcome of :func:`prove`: the first finding (None: all proven) and notes for the user."""

    finding: Finding | None = None
    notes: list[str] = field(default_factory=list)
    running: bool = False
    """A sweep held the (unfinished) session while it was proven: what it wrote since its last record was not checked."""


def identity_finding(ledger: Path, records: Sequence[LedgerRecord]) -> Finding | None:
    """A folder or ledger that cannot prove whose it is (item 3 of issue 24)."""
    if not records:
        return Finding(IDENTITY, ledger.name, "the ledger holds no records: nothing to verify (emptied, or not a session)")
    if not head_path(ledger).is_file():
        return Finding(IDENTITY, head_path(ledger).name, "the ledger's head file is missing")
    identity = ledger.parent / SESSION_FILE
    if records[0].kind == "session_started" and not identity.is_file():
        what = "is not a regular file" if os.path.lexists(identity) else "is missing"
        return Finding(IDENTITY, SESSION_FILE, f"session.json {what}: the session's identity cannot be checked")
    return None


def witness_finding(ledger: Path, records: Sequence[LedgerRecord], witness: Path | None) -> Finding | None:
    """Rule witness for ``witness`` (None: no witness to check)."""
    if witness is None:
        return None
    why = rollback(records, witness)
    return None if why is None else Finding(WITNESS_RULE, ledger.name, why)


def collection_finding(root: Path, records: Sequence[LedgerRecord], vouched: Mapping[str, FileState] | None = None,
                       hashed: Collection[str] = ()) -> Finding | None:
    """Every completed DCCI collection the ledger recorded is that collection, intact (archive mode).

    ``vouched``: the evidence just compared (:func:`prove`; by size only for large files with
    ``--quick``, which says so); the collection's files and
    manifest were bound right after finalize, so their content is proven and only the manifest's
    rules, its signature, its recorded fingerprint and its file list are checked, without reading
    the files a second time; a manifest in ``hashed`` (re-hashed just now, not compared by size only)
    skips the JSON Schema pass that :func:`~sk_analytics.contract.manifest.finalize` made before
    writing those very bytes. Without it (a session without bindings) the collection
    contract re-hashes every file."""
    from sk_analytics.contract.manifest import check_manifest, check_signature, load_manifest, manifest_location
    from sk_analytics.contract.rules import ContractInputError, ContractIntegrityError
    from sk_analytics.contract.scan import MARKER_NAME, list_files
    from sk_analytics.files.strict_json import load_json_file

    for record in records:
        rel = record.data.get("root")
        if record.kind != "profile_result" or not record.data.get("ok") or not isinstance(rel, str):
            continue
        try:
            if vouched is None:
                manifest = load_manifest(root / rel, archive=True)
            else:
                folder, target = manifest_location(root / rel)
                manifest = load_json_file(target)
                check_manifest(manifest, target, schema=_relative(target, root) not in hashed)
                check_signature(manifest, folder, target)
                listed = {f"{rel}/{rec['path']}": rec["size"] for recs in manifest["files"].values() for rec in recs}
                top = {f"{rel}/{target.name}", f"{rel}/{MARKER_NAME}"}  # left out of the listing, as list_files does
                under = {name: st.size for name, st in vouched.items() if name.startswith(f"{rel}/") and name not in top}
                if under != listed:
                    differ = sorted(name for name in set(under) | set(listed) if under.get(name) != listed.get(name))
                    raise ContractIntegrityError("file-unchanged", folder, f"files or sizes differ from the manifest: {differ[:3]}")
                # the folder itself as the contract lists it (no content read): a file the evidence walk leaves out
                # (``*.lock``, ``.*.tmp``), a link or a hard link that dcci-diff --session would refuse, refused here too
                added = sorted(set(list_files(folder)) - {rec["path"] for recs in manifest["files"].values() for rec in recs})
                if added:
                    raise ContractIntegrityError("no-files-after-finalize", folder,
                                                 f"{len(added)} file(s) not in the manifest: {', '.join(added[:5])}")
        except (ContractIntegrityError, ContractInputError) as exc:
            return Finding(exc.rule, rel, f"collection recorded at seq {record.seq}: {exc}")
        if manifest["manifest_fingerprint"] != record.data.get("manifest_fingerprint"):
            return Finding("ledger-pair", rel, f"the manifest of {rel} ({manifest['manifest_fingerprint'][:12]}) is not the one "
                                               f"the ledger recorded at seq {record.seq} ({str(record.data.get('manifest_fingerprint'))[:12]})")
    return None


def prove(root: Path, records: Sequence[LedgerRecord], *, quick: bool = False) -> Proof:
    """Evidence, collections and output files of the session folder ``root`` (its ledger already verified). A session
    whose sweep lock an sk-run process holds is being written (its unbound files are that sweep's work in progress);
    a holder that is not sk-run is named, beside the verdict and inside a finding (a resume it refuses cannot follow)."""
    finished = any(r.kind == "handoff_written" for r in records)
    lock = None if finished else sweep_lock(root)  # a finished session is written no more: who holds the lock is moot
    proof = _prove(root, records, finished=finished, running=lock is not None and lock.running, quick=quick)
    held = None if lock is None else foreign_note(lock, root)
    if held is not None:
        proof.notes.insert(0, held)
        if proof.finding is not None:
            proof.finding = replace(proof.finding, message=f"{proof.finding.message}; {held}")
    return proof


def _prove(root: Path, records: Sequence[LedgerRecord], *, finished: bool, running: bool, quick: bool) -> Proof:
    proof = Proof()
    proof.running = running
    if any(isinstance(r.data.get(BOUND_KEY), dict) for r in records):
        report = verify_evidence(root, records, finished=finished, quick=quick, running=proof.running)
        more = "" if report.problem is None or not report.problem.more else f" ({report.problem.more} more file finding(s))"
        if report.problem is not None:
            proof.finding = Finding(report.problem.rule, report.problem.file, report.problem.message + more)
            return proof
        proof.notes.append(f"evidence: {report.files - report.pending} file(s) vouched for, {report.bytes_hashed} bytes re-hashed"
                           + (f", {report.size_only} large file(s) compared by size only (--quick)" if report.size_only else ""))
        if report.pending:
            proof.notes.append(f"a sweep is running on this session: {report.pending} file(s) it wrote since its last record "
                               "are not bound yet and were not checked")
        vouched = report.vouched  # its files were just compared: the collections need not be read again
        hashed = frozenset(name for name, st in vouched.items() if not quick or st.size <= QUICK_LIMIT)
    else:
        proof.notes.append("evidence: this session predates evidence binding; only the ledger and its outputs are checked")
        vouched, hashed = None, frozenset()
    proof.finding = collection_finding(root, records, vouched, hashed)
    if proof.finding is None:
        disagreement = first_disagreement(root, records, hashed, proof.running)
        if disagreement is not None:
            proof.finding = Finding(AGREEMENT, disagreement.file, disagreement.message)
    note = unleased_note(records)
    if note is not None:
        proof.notes.append(note)
    created = _created_at(root)
    if created is not None and created != os.path.realpath(root):
        proof.notes.append(f"archive mode: created at {created}, verified at {os.path.realpath(root)}; "
                           "content and signatures checked, no path-dependent check applies")
    return proof


def _relative(path: Path, root: Path) -> str | None:
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return None


def _created_at(root: Path) -> str | None:
    from sk_analytics.files.strict_json import load_json_file
    from sk_analytics.stage_o.layout import HANDOFF_FILE

    handoff = root / HANDOFF_FILE
    if not handoff.is_file():
        return None
    path = load_json_file(handoff).get("session_path")
    return path if isinstance(path, str) else None
