"""The rules of the artifact collection contract (formats.md §6) and their errors.

Every violation names its rule id in the message (``rule created-in-window:
…``) and carries it as ``.rule``, so users, tests and the sweep's blocker
records all speak of the same rule. Bad or incomplete input is an
:class:`ContractInputError`; evidence that changed after it was sealed is a
:class:`ContractIntegrityError`. Both exit 2.
"""

from __future__ import annotations

from os import PathLike

from sk_analytics.errors import InputError, IntegrityError
from sk_analytics.ledger.signing import SIGNING_RULES

#: rule id -> what the rule demands (shown in docs/contract.md and messages).
RULES: dict[str, str] = {
    "empty-root": "begin needs an empty root (only the marker .collection-session.json may be there)",
    "session-outside-root": "the session record is stored outside the capture root",
    "session-record": "the session record is the one begin wrote for this root (fingerprint and marker agree)",
    "manifest-once": "finalize writes the manifest once; an existing manifest is never replaced",
    "schema": "every record has exactly the keys and types of its JSON Schema",
    "unknown-key": "unknown keys are rejected",
    "duplicate-key": "duplicate JSON keys are rejected",
    "fingerprint": "fingerprints are SHA-256 of canonical JSON and match their content",
    "required-files": "each capture role has its required artifact files",
    "path-form": "file paths are relative, POSIX, without '..' or '.' segments",
    "sorted-unique": "file records are sorted by path and unique",
    "one-role-per-file": "no file is listed under two roles",
    "created-in-window": "every artifact was created and last modified inside [started_ns, finalized_ns]",
    "no-symlinks": "no symbolic or hard links (or other special files) inside the capture root",
    "producer-in-window": "the producer ran inside the session window",
    "workload-fields": "the workload names model, input, batch, rank, mode, warmup, iterations, runtime",
    "workload-alias-conflict": "two aliases of one workload field carry different values",
    "file-unchanged": "every listed file still exists with the sha256 and size recorded at finalize",
    "no-files-after-finalize": "no file was added to the root after finalize",
    "live-stat": "live check: every listed file keeps the ctime, mtime, size, inode and device recorded at finalize",
    "session-binding": "live check: the session fingerprint recomputed from role, absolute root and started_ns matches"
    " (root not moved or copied, start not shifted)",
    "manifest-version": "the manifest is of the current schema (earlier manifests lack inode/device or a signature)",
    **SIGNING_RULES,
    "set-roles": "a set is exactly {baseline_profile, candidate_profile} or all four roles",
    "distinct-roots": "every collection of a set has its own root",
    "distinct-sessions": "every collection of a set has its own session",
    "distinct-producers": "every collection of a set has its own producer process",
    "identical-identity": "source_revision, control and workload are identical across the set",
    "declared-change-only": "configs differ only at the declared change set",
    "declared-change-differs": "every declared change really differs between baseline and candidate",
    "change-set": "declared changes are distinct RFC 6901 pointers to object members of the config",
    "ledger-pair": "inside a sweep, each collection of a DCCI pair is the one the session's ledger recorded at finalize",
}


def _text(rule: str, message: str) -> str:
    if rule not in RULES:
        raise KeyError(f"unknown contract rule {rule!r}")
    return f"rule {rule}: {message}"


class ContractInputError(InputError):
    """A collection or set violates a contract rule (bad or incomplete input)."""

    def __init__(
        self,
        rule: str,
        path: str | PathLike[str] | None,
        message: str,
        *,
        record: int | str | None = None,
        expected: str | None = None,
    ) -> None:
        self.rule = rule
        super().__init__(path, _text(rule, message), record=record, expected=expected)


class ContractIntegrityError(IntegrityError):
    """Sealed evidence changed after finalize (file, manifest, marker)."""

    def __init__(self, rule: str, path: str | PathLike[str], message: str) -> None:
        self.rule = rule
        self.path = str(path)
        super().__init__(f"{path}: {_text(rule, message)}")
