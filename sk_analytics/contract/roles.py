"""Capture roles, artifact kinds ("file roles") and which kinds each role needs.

A capture role says what a collection is for (formats.md §6); an artifact
kind says what one file of it is. Files are classified by their base name
(the names the profiler and the SK runtime write, formats.md §2-§4); every
other file of the root is kept and fingerprinted as ``other`` so that nothing
inside a sealed root is unaccounted for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

BASELINE_PROFILE = "baseline_profile"
CANDIDATE_PROFILE = "candidate_profile"
CANDIDATE_COMPAT = "candidate_compat"
CANDIDATE_VERIFY = "candidate_verify"

CAPTURE_ROLES: tuple[str, ...] = (BASELINE_PROFILE, CANDIDATE_PROFILE, CANDIDATE_COMPAT, CANDIDATE_VERIFY)

PROFILER_KINDS: tuple[str, ...] = ("kernel_details", "task_time", "trace_view")
PROFILER_DB = "profiler_db"
"""The torch_npu DB export (``export_type=Db``): one SQLite file per rank that holds
what the three text kinds hold, so it stands in for all of them."""
SK_METADATA_KINDS: tuple[str, ...] = (
    "sk_graph_origin",
    "sk_graph_updated",
    "sk_fused_nodes",
    "sk_scope_split",
    "super_kernel",
)
SK_PROF = "sk_prof"
OTHER = "other"
ARTIFACT_KINDS: tuple[str, ...] = (*PROFILER_KINDS, PROFILER_DB, *SK_METADATA_KINDS, SK_PROF, OTHER)

REQUIRED_KINDS: Mapping[str, tuple[str, ...]] = {
    BASELINE_PROFILE: PROFILER_KINDS,
    CANDIDATE_PROFILE: (*PROFILER_KINDS, *SK_METADATA_KINDS),
    CANDIDATE_COMPAT: SK_METADATA_KINDS,
    CANDIDATE_VERIFY: SK_METADATA_KINDS,
}

# Base-name patterns of each kind (first match wins; no name matches two).
_KIND_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("kernel_details", re.compile(r"kernel_details(_\d+)?\.csv")),
    ("task_time", re.compile(r"task_time(_[A-Za-z0-9.-]+)?\.(csv|json)")),
    ("trace_view", re.compile(r"trace_view\.json")),
    (PROFILER_DB, re.compile(r"(ascend_pytorch_profiler(_\d+)?|msprof_\d+)\.db")),
    ("sk_graph_origin", re.compile(r"sk_graph_origin\.json")),
    ("sk_graph_updated", re.compile(r"sk_graph_updated\.json")),
    ("sk_fused_nodes", re.compile(r"sk_fused_nodes\.log")),
    ("sk_scope_split", re.compile(r"sk_scope_split\.log")),
    ("super_kernel", re.compile(r"super_kernel\.log")),
    # current name, and the legacy name used before 2026-05 (formats.md §3)
    (SK_PROF, re.compile(r"(sk_prof_device|sk_event_dev_device)_\d+\.json")),
)


def classify(rel_path: str) -> str:
    """Artifact kind of a root-relative POSIX path, by its base name."""
    name = rel_path.rsplit("/", 1)[-1]
    for kind, pattern in _KIND_PATTERNS:
        if pattern.fullmatch(name):
            return kind
    return OTHER


def required_kinds(role: str, *, require_sk_prof: bool = False) -> tuple[str, ...]:
    """Kinds a ``role`` collection must contain; ``sk_prof`` too for child attribution."""
    kinds = REQUIRED_KINDS[role]
    return (*kinds, SK_PROF) if require_sk_prof else kinds


def missing_kinds(role: str, present: Iterable[str], *, require_sk_prof: bool = False) -> list[str]:
    """Required kinds of ``role`` that ``present`` lacks, in the documented order."""
    have = set(present)
    if PROFILER_DB in have:  # a DB-exported profile: the database holds the text kinds' content
        have |= set(PROFILER_KINDS)
    return [k for k in required_kinds(role, require_sk_prof=require_sk_prof) if k not in have]
