"""Protocol §5.1: a trial changes exactly one option relative to its baseline —
scope, source, workload, precision, TP, cache, warm-up, device and run controls
stay the same.

The config difference is proven by the trial's RFC 6902 diff; this module
compares the rest of the recorded identity (trial.json ``fingerprints``
records) of a trial and the round it is gated against.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

COMPARED_PARTS = ("source_revision", "workload", "control", "environment")

IGNORED_FIELDS: Mapping[str, frozenset[str]] = {
    # the workload's content is its folder's git tree + uncommitted diff; where
    # the checkout lies and which commit of the repository holds it are not
    "source_revision": frozenset({"root", "commit", "modified_files"}),
    # risky entries run with their own explicit timeout (protocol §5): the
    # timeout is a guard, not a measurement condition
    "control": frozenset({"timeout_s"}),
}


def identity_differences(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> list[str]:
    """Fields that differ between two recorded identities, as ``part.field``
    (empty when the trial may be compared with its baseline)."""
    differences: list[str] = []
    for part in COMPARED_PARTS:
        ignored = IGNORED_FIELDS.get(part, frozenset())
        base = _record(baseline, part)
        cand = _record(candidate, part)
        for key in sorted((base.keys() | cand.keys()) - ignored):
            if base.get(key, _MISSING) != cand.get(key, _MISSING):
                differences.append(f"{part}.{key}")
    return differences


_MISSING = object()


def _record(identity: Mapping[str, Any], part: str) -> Mapping[str, Any]:
    value = identity.get(part)
    if value is None:
        return {}
    return value if isinstance(value, Mapping) else {"": value}


def changed_files(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> list[str]:
    """The workload files whose content differs between two recorded identities (added, removed or
    edited): the files the command names when their hashes are the source revision (no git), and
    the workload's ``sources`` (every file of the workload, git or not); else empty."""
    changed: set[str] = set()
    for key in ("files", "sources"):
        base = _record(baseline, "source_revision").get(key) or {}
        cand = _record(candidate, "source_revision").get(key) or {}
        if isinstance(base, Mapping) and isinstance(cand, Mapping):
            changed |= {name for name in base.keys() | cand.keys() if base.get(name) != cand.get(name)}
    return sorted(changed)
