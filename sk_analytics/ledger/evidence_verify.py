"""Re-hash what the signed ledger vouches for (``sk-analyze ledger verify``): the first file that differs.

Rules (each finding names one session-relative file and what was expected):

* ``evidence-manifest`` — a manifest a record names is missing, edited or malformed;
* ``evidence-missing`` — a vouched file is gone;
* ``evidence-changed`` — a vouched file's size or BLAKE3 digest differs from its binding, or it is
  no longer a regular file (a FIFO, socket or device in its place is never opened);
* ``evidence-unvouched`` — a file present in a finished session that no record vouches for
  (planted, or written behind sk-tune's back); in ``EVIDENCE/``, a file no record names (a
  copy of a manifest under a new name vouches for nothing), finished session or not, except:
* ``interrupted`` — the same in a session whose hand-off is not recorded yet: the files of a
  step that a crash cut short before its ledger record, also its manifest (``bind-<ns>.json``);
  ``sk-run sweep --resume`` binds or redoes them (and drops that manifest). While a sweep runs on
  the session (``running``) they are its step in progress: counted as ``pending``, no finding.

``quick`` compares sizes only for files over :data:`QUICK_LIMIT` (and says so).
"""

from __future__ import annotations

import stat
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sk_analytics.ledger.evidence import EVIDENCE_DIR, FileState, fold, hash_file, unreferenced_manifests, walk

QUICK_LIMIT = 1 << 20
_KINDS = {stat.S_IFIFO: "FIFO", stat.S_IFSOCK: "socket", stat.S_IFCHR: "character device", stat.S_IFBLK: "block device"}
EVIDENCE_RULES: dict[str, str] = {
    "evidence-manifest": "every evidence manifest a record names exists and has the BLAKE3 digest the record signed",
    "evidence-missing": "every file a manifest vouches for is present",
    "evidence-changed": "every vouched file has the size and BLAKE3 digest it was bound with",
    "evidence-unvouched": "every file of a finished session is vouched for by a manifest; every file in EVIDENCE/ is a manifest "
                          "a record names",
    "interrupted": "an unfinished session holds no file written after its last record (a step cut short: run resume)",
}


@dataclass(frozen=True)
class EvidenceProblem:
    """A file that breaks an evidence rule; ``more`` counts the later files breaking any rule."""

    rule: str
    file: str
    message: str
    more: int = 0


@dataclass(frozen=True)
class EvidenceReport:
    """What :func:`verify_evidence` checked: files and bytes re-hashed, files compared by size only,
    and the vouched content it compared the folder with (what the later checks may rely on)."""

    files: int
    bytes_hashed: int
    size_only: int
    problem: EvidenceProblem | None
    vouched: Mapping[str, FileState] = field(default_factory=dict)
    pending: int = 0
    """Files a running sweep wrote after its last record (bound by its next one): not checked, no finding."""


def verify_evidence(root: Path, records: Sequence[Any], *, finished: bool, quick: bool = False,
                    running: bool = False) -> EvidenceReport:
    """Fold the bindings of ``records`` (verified) and compare them with the folder, file by file; ``running``: a
    sweep is writing the (unfinished) session now, so a file no record vouches for yet is pending, not interrupted."""
    vouched, manifest_problems = fold(root, records)
    problems: list[EvidenceProblem] = [
        EvidenceProblem("evidence-manifest", msg.split(":", 1)[0], msg) for _, msg in manifest_problems
    ]
    hashed = size_only = 0
    seen: set[str] = set()
    for rel, st in walk(root):
        seen.add(rel)
        expected = vouched.get(rel)
        if expected is None:
            rule = "evidence-unvouched" if finished else "interrupted"
            why = ("no ledger record vouches for it (planted or written behind sk-tune's back)" if finished else
                   "written after the last ledger record (a step interrupted before its record); run `sk-run sweep --resume`")
            problems.append(EvidenceProblem(rule, rel, f"{rel}: {why}"))
            continue
        problem = _compare(root, rel, st, expected, quick)
        if problem is not None:
            problems.append(problem)
        elif quick and st.st_size > QUICK_LIMIT:
            size_only += 1
        else:
            hashed += st.st_size
    for rel, manifest_named in unreferenced_manifests(root, records):
        seen.add(rel)
        if manifest_named and not finished:
            problems.append(EvidenceProblem("interrupted", rel, f"{rel}: a manifest no ledger record names, written before its "
                                                                 "record (an append cut short); run `sk-run sweep --resume`"))
        else:
            problems.append(EvidenceProblem("evidence-unvouched", rel, f"{rel}: no ledger record names it (a manifest vouches "
                                                                       "only as the record that names it; copied or planted)"))
    for rel in sorted(set(vouched) - seen):
        problems.append(EvidenceProblem("evidence-missing", rel, f"{rel}: missing; expected blake3 {vouched[rel].digest[:16]}… "
                                                                 f"({vouched[rel].size} bytes)"))
    pending = sum(1 for p in problems if p.rule == "interrupted") if running and not finished else 0
    if pending:
        problems = [p for p in problems if p.rule != "interrupted"]
    first = None
    if problems:
        order = {"evidence-manifest": 0, "evidence-changed": 1, "evidence-missing": 2, "evidence-unvouched": 3, "interrupted": 4}
        # deterministic: by rule, then path; a step's own files before the manifest it left (they say which step)
        ranked = sorted(problems, key=lambda p: (order[p.rule], p.file.startswith(f"{EVIDENCE_DIR}/"), p.file))
        first = EvidenceProblem(ranked[0].rule, ranked[0].file, ranked[0].message, len(problems) - 1)
    return EvidenceReport(len(seen), hashed, size_only, first, vouched, pending)


def _compare(root: Path, rel: str, st: Any, expected: FileState, quick: bool) -> EvidenceProblem | None:
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        # a FIFO, socket or device in place of a vouched file: never opened (a FIFO would block or feed
        # any content to a later reader); an empty one would otherwise pass as an empty file
        return EvidenceProblem("evidence-changed", rel, f"{rel}: a {_KINDS.get(stat.S_IFMT(st.st_mode), 'special file')}, "
                                                        f"expected the regular file bound ({expected.size} bytes)")
    if st.st_size != expected.size:
        return EvidenceProblem("evidence-changed", rel, f"{rel}: {st.st_size} bytes, expected {expected.size} as bound")
    if quick and st.st_size > QUICK_LIMIT:
        return None
    if hash_file(root / rel, st) != expected.digest:
        return EvidenceProblem("evidence-changed", rel, f"{rel}: content changed; expected blake3 {expected.digest[:16]}… as bound")
    return None
