"""The artifact collection contract (formats.md §6, protocol §6).

A diagnostic profile may only be analysed when a manifest made at collection
time proves who produced it: :func:`begin` opens a session on a new empty
root, :func:`finalize` seals the root after the producer ran, and
:func:`validate_set` proves that a baseline/candidate set may be compared.
Every violation raises an error whose message and ``.rule`` name the rule
(:data:`RULES`). See ``docs/contract.md``.
"""

from sk_analytics.contract.manifest import (
    ProducerInfo,
    build_manifest,
    check_manifest,
    command_fingerprint,
    finalize,
    load_manifest,
)
from sk_analytics.contract.roles import (
    ARTIFACT_KINDS,
    BASELINE_PROFILE,
    CANDIDATE_COMPAT,
    CANDIDATE_PROFILE,
    CANDIDATE_VERIFY,
    CAPTURE_ROLES,
    classify,
    required_kinds,
)
from sk_analytics.contract.rules import RULES, ContractInputError, ContractIntegrityError
from sk_analytics.contract.scan import MANIFEST_NAME, MARKER_NAME, FileRecord
from sk_analytics.contract.session import SessionRecord, begin, load_session
from sk_analytics.contract.validate_set import validate_set
from sk_analytics.contract.workload import WORKLOAD_FIELDS, fold_aliases, normalize_workload

__all__ = [
    "ARTIFACT_KINDS",
    "BASELINE_PROFILE",
    "CANDIDATE_COMPAT",
    "CANDIDATE_PROFILE",
    "CANDIDATE_VERIFY",
    "CAPTURE_ROLES",
    "MANIFEST_NAME",
    "MARKER_NAME",
    "RULES",
    "WORKLOAD_FIELDS",
    "ContractInputError",
    "ContractIntegrityError",
    "FileRecord",
    "ProducerInfo",
    "SessionRecord",
    "begin",
    "build_manifest",
    "check_manifest",
    "classify",
    "command_fingerprint",
    "finalize",
    "load_manifest",
    "load_session",
    "fold_aliases",
    "normalize_workload",
    "required_kinds",
    "validate_set",
]
