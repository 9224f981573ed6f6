"""Declared change sets: the only config pointers allowed to differ within a set.

A diagnostic pair legitimately differs in one DCCI option (and the joint
repair in two); everything else must be identical. A change set is a list of
RFC 6901 pointers into the execution config. :func:`config_differences`
returns the pointers (RFC 6902 paths) at which two configs differ outside
the change set, and the declared pointers whose values do *not* differ.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jsonpatch
from jsonpointer import JsonPointer, JsonPointerException

from sk_analytics.contract.rules import ContractInputError
from sk_analytics.fingerprint import canonical_json

_ABSENT = object()


def parse_change_set(pointers: Sequence[str]) -> list[JsonPointer]:
    """Validate declared pointers: RFC 6901 syntax, not the whole config, distinct, not nested."""
    parsed: list[JsonPointer] = []
    for text in pointers:
        try:
            ptr = JsonPointer(text)
        except JsonPointerException as exc:
            raise ContractInputError("change-set", None, f"{text!r} is not an RFC 6901 pointer: {exc}") from exc
        if not ptr.parts:
            raise ContractInputError("change-set", None, "the whole config cannot be a declared change")
        for other in parsed:
            shorter, longer = sorted((other.parts, ptr.parts), key=len)
            if longer[: len(shorter)] == shorter:
                raise ContractInputError(
                    "change-set", None, f"declared changes {other.path!r} and {text!r} overlap", expected="distinct pointers"
                )
        parsed.append(ptr)
    return parsed


def _value_at(doc: Any, ptr: JsonPointer) -> Any:
    try:
        return ptr.resolve(doc)
    except JsonPointerException:
        return _ABSENT


def _without(doc: Any, pointers: Sequence[JsonPointer]) -> Any:
    """Copy of ``doc`` with the object members at ``pointers`` removed."""
    result = copy.deepcopy(doc)
    for ptr in pointers:
        try:
            parent = JsonPointer.from_parts(ptr.parts[:-1]).resolve(result)
        except JsonPointerException:
            continue
        if isinstance(parent, list):
            raise ContractInputError(
                "change-set", None, f"{ptr.path!r} points into a list element", expected="a pointer to an object member"
            )
        if isinstance(parent, dict):
            parent.pop(ptr.parts[-1], None)
    return result


@dataclass(frozen=True)
class ConfigDifference:
    """How two configs differ relative to a change set."""

    undeclared: list[str]
    """JSON Patch paths that differ outside the change set (must be empty)."""

    unchanged: list[str]
    """Declared pointers whose value is the same on both sides (must be empty)."""


def config_differences(base: Any, other: Any, pointers: Sequence[JsonPointer]) -> ConfigDifference:
    """Compare two configs under a change set (pure)."""
    patch = jsonpatch.make_patch(_without(base, pointers), _without(other, pointers))
    undeclared = sorted({op["path"] or "/" for op in patch.patch})
    unchanged = []
    for ptr in pointers:
        a, b = _value_at(base, ptr), _value_at(other, ptr)
        same = (a is _ABSENT and b is _ABSENT) or (
            a is not _ABSENT and b is not _ABSENT and canonical_json(a) == canonical_json(b)
        )
        if same:
            unchanged.append(ptr.path)
    return ConfigDifference(undeclared, unchanged)
