"""``validate-set``: prove that a set of collections may be compared.

A set is exactly {baseline_profile, candidate_profile} or all four roles.
Each manifest is re-verified against its root (:func:`load_manifest`); the
collections must come from distinct roots, sessions and producer processes,
and carry identical source revision, control and workload, and identical
configs except at the declared change set, where baseline and every
candidate must really differ (formats.md §6). The result is the set's
identity record with its own fingerprint.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from os import PathLike
from pathlib import Path
from typing import Any

from sk_analytics.contract.changeset import config_differences, parse_change_set
from sk_analytics.contract.manifest import load_manifest, manifest_location
from sk_analytics.contract.roles import BASELINE_PROFILE, CANDIDATE_PROFILE, CAPTURE_ROLES
from sk_analytics.contract.rules import ContractInputError
from sk_analytics.contract.schemas import check_schema
from sk_analytics.fingerprint import fingerprint
from sk_analytics.messages import text

SET_SCHEMA = "sk-tune-collection-set-v1"
VALID_ROLE_SETS: tuple[frozenset[str], ...] = (
    frozenset({BASELINE_PROFILE, CANDIDATE_PROFILE}),
    frozenset(CAPTURE_ROLES),
)


def _only_change_zh(pointers: Sequence[str]) -> str:
    """The change set's Chinese statement (formats.md: ``only_change_zh``)."""
    if not pointers:
        return text("change_set.collections_same", "zh")
    return text("change_set.collections_only", "zh", pointers=text("format.list_sep", "zh").join(pointers))


def _check_roles(manifests: Mapping[str, Any]) -> None:
    roles = frozenset(manifests)
    if roles not in VALID_ROLE_SETS:
        raise ContractInputError(
            "set-roles", None, f"the set has roles {sorted(roles)}",
            expected="exactly baseline_profile + candidate_profile, or all four roles",
        )


def _check_distinct(loaded: Mapping[str, tuple[Path, dict[str, Any]]]) -> None:
    checks = (
        ("distinct-roots", lambda root, m: str(root.resolve()), "root"),
        ("distinct-sessions", lambda root, m: m["capture"]["session_fingerprint"], "session"),
        ("distinct-producers", lambda root, m: (m["producer"]["native_pid"], m["producer"]["started_ns"]), "producer"),
    )
    for rule, key, what in checks:
        seen: dict[Any, str] = {}
        for role, (root, manifest) in loaded.items():
            value = key(root, manifest)
            if value in seen:
                raise ContractInputError(rule, root, f"{role} and {seen[value]} share one {what} ({value})")
            seen[value] = role


def _check_identity(loaded: Mapping[str, tuple[Path, dict[str, Any]]], base_role: str) -> None:
    base_root, base = loaded[base_role]
    for role, (root, manifest) in loaded.items():
        for part in ("source_revision", "control", "workload"):
            if fingerprint(manifest[part]) == fingerprint(base[part]):
                continue
            if isinstance(base[part], dict):
                a, b = base[part], manifest[part]
                keys = sorted(k for k in set(a) | set(b) if k not in a or k not in b or fingerprint(a[k]) != fingerprint(b[k]))
                detail = f"keys {', '.join(keys)} differ"
            else:
                detail = f"{base[part]!r} vs {manifest[part]!r}"
            raise ContractInputError(
                "identical-identity", root, f"{part} of {role} differs from {base_role}: {detail}", record=part
            )


def _check_configs(
    loaded: Mapping[str, tuple[Path, dict[str, Any]]], base_role: str, allowed_changes: Sequence[str]
) -> None:
    pointers = parse_change_set(allowed_changes)
    base = loaded[base_role][1]["config"]
    candidates = [r for r in CAPTURE_ROLES if r in loaded and r != base_role]
    for role in candidates:
        root, manifest = loaded[role]
        diff = config_differences(base, manifest["config"], pointers)
        if diff.undeclared:
            declared = ", ".join(allowed_changes) or "none"
            raise ContractInputError(
                "declared-change-only", root,
                f"config of {role} differs from {base_role} at {', '.join(diff.undeclared)} (declared: {declared})",
            )
        if diff.unchanged:
            raise ContractInputError(
                "declared-change-differs", root,
                f"declared change {', '.join(diff.unchanged)} has the same value in {role} and {base_role}",
            )
    first = candidates[0]
    for role in candidates[1:]:
        if fingerprint(loaded[role][1]["config"]) != fingerprint(loaded[first][1]["config"]):
            diff = config_differences(loaded[first][1]["config"], loaded[role][1]["config"], [])
            raise ContractInputError(
                "declared-change-only", loaded[role][0],
                f"config of {role} differs from {first} at {', '.join(diff.undeclared)} (candidates must be identical)",
            )


def validate_set(
    manifests: Mapping[str, str | PathLike[str]],
    allowed_changes: Sequence[str] = (),
    *,
    require_sk_prof: bool = False,
    archive: bool = False,
) -> dict[str, Any]:
    """Validate a set of collections (role -> root folder or manifest path).

    The members are checked live (in place) unless ``archive`` (see
    :func:`~sk_analytics.contract.manifest.load_manifest`).

    Raises :class:`~sk_analytics.contract.rules.ContractInputError` or
    :class:`~sk_analytics.contract.rules.ContractIntegrityError` naming the
    broken rule; returns the set record (schema ``set.schema.json``).
    """
    _check_roles(manifests)
    loaded: dict[str, tuple[Path, dict[str, Any]]] = {}
    for role in CAPTURE_ROLES:
        if role not in manifests:
            continue
        root, target = manifest_location(manifests[role])
        manifest = load_manifest(target, require_sk_prof=require_sk_prof, archive=archive)
        if manifest["capture_role"] != role:
            raise ContractInputError(
                "set-roles", target, f"given as {role} but the manifest's capture_role is {manifest['capture_role']}"
            )
        loaded[role] = (root, manifest)
    _check_distinct(loaded)
    _check_identity(loaded, BASELINE_PROFILE)
    _check_configs(loaded, BASELINE_PROFILE, list(allowed_changes))
    base = loaded[BASELINE_PROFILE][1]
    body: dict[str, Any] = {
        "schema_version": SET_SCHEMA,
        "source_revision": base["source_revision"],
        "workload_fingerprint": base["workload_fingerprint"],
        "config_fingerprint": base["config_fingerprint"],
        "control_fingerprint": base["control_fingerprint"],
        "roles": {
            role: {
                "manifest_fingerprint": m["manifest_fingerprint"],
                "session_fingerprint": m["capture"]["session_fingerprint"],
                "config_fingerprint": m["config_fingerprint"],
            }
            for role, (_, m) in loaded.items()
        },
        "change_set": {"allowed_json_pointers": list(allowed_changes), "only_change_zh": _only_change_zh(allowed_changes)},
    }
    record = {**body, "set_fingerprint": fingerprint(body)}
    check_schema("set", record, None)
    return record
