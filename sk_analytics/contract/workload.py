"""Workload identity: the eight required fields, their common aliases, conflicts.

A manifest's workload must name model, input, batch, rank, mode, warmup,
iterations and runtime (formats.md §6). Tools spell these differently
(``batch_size``, ``world_size``, ``iters`` …); aliases are folded into the
canonical name, and two spellings of one field with different values are
refused rather than silently picking one. Further keys (seed, network spec,
precision …) are kept verbatim: they are part of the workload's identity and
of its fingerprint.
"""

from __future__ import annotations

from collections.abc import Mapping
from os import PathLike
from typing import Any

from sk_analytics.contract.rules import ContractInputError
from sk_analytics.fingerprint import canonical_json

WORKLOAD_FIELDS: tuple[str, ...] = ("model", "input", "batch", "rank", "mode", "warmup", "iterations", "runtime")

ALIASES: Mapping[str, str] = {
    "model_name": "model",
    "model_id": "model",
    "network": "model",
    "input_path": "input",
    "input_file": "input",
    "inputs": "input",
    "dataset": "input",
    "prompt": "input",
    "batch_size": "batch",
    "bs": "batch",
    "ranks": "rank",
    "world_size": "rank",
    "num_ranks": "rank",
    "nranks": "rank",
    "tp": "rank",
    "tp_size": "rank",
    "tensor_parallel_size": "rank",
    "run_mode": "mode",
    "phase": "mode",
    "warmup_iterations": "warmup",
    "warmup_steps": "warmup",
    "warm_up": "warmup",
    "num_warmup": "warmup",
    "iters": "iterations",
    "num_iterations": "iterations",
    "steps": "iterations",
    "runtime_version": "runtime",
}

_POSITIVE_INT = ("batch", "rank", "iterations")


def _check_value(field: str, value: Any, source: str | PathLike[str] | None) -> None:
    if field in _POSITIVE_INT:
        ok = isinstance(value, int) and not isinstance(value, bool) and value > 0
        expected = "a positive integer"
    elif field == "warmup":
        ok = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        expected = "a non-negative integer"
    elif field in ("input", "runtime"):
        ok = (isinstance(value, str) and value.strip() != "") or (isinstance(value, dict) and bool(value))
        expected = "a non-empty string or object"
    else:
        ok = isinstance(value, str) and value.strip() != ""
        expected = "a non-empty string"
    if not ok:
        raise ContractInputError(
            "workload-fields", source, f"workload field {field!r} is {value!r}", record=field, expected=expected
        )


def fold_aliases(raw: Any, source: str | PathLike[str] | None = None) -> dict[str, Any]:
    """Rename aliases to canonical field names; two spellings with different values raise.

    Unlike :func:`normalize_workload` it does not require the eight fields, so
    partial workload descriptions (a backend's defaults, a user's overrides)
    can be folded before they are merged.
    """
    if not isinstance(raw, dict):
        raise ContractInputError("workload-fields", source, f"workload is {type(raw).__name__}", expected="a JSON object")
    result: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    for key, value in raw.items():
        name = ALIASES.get(key, key)
        if name in result and canonical_json(result[name]) != canonical_json(value):
            raise ContractInputError(
                "workload-alias-conflict",
                source,
                f"{spelled[name]!r}={result[name]!r} and {key!r}={value!r} both give workload field {name!r}",
                record=name,
                expected="one value per field",
            )
        spelled.setdefault(name, key)
        result[name] = value
    return result


def normalize_workload(raw: Any, source: str | PathLike[str] | None = None) -> dict[str, Any]:
    """Fold aliases into canonical names; refuse conflicts and missing fields.

    Returns a new dict with the eight canonical fields plus any other keys.
    Applying it to its own output returns the same dict (idempotent), which is
    how a stored manifest's workload is checked.
    """
    result = fold_aliases(raw, source)
    missing = [f for f in WORKLOAD_FIELDS if f not in result]
    if missing:
        raise ContractInputError(
            "workload-fields",
            source,
            f"workload lacks {', '.join(missing)}",
            expected=f"all of {', '.join(WORKLOAD_FIELDS)} (aliases such as batch_size accepted)",
        )
    for field in WORKLOAD_FIELDS:
        _check_value(field, result[field], source)
    return dict(sorted(result.items()))
