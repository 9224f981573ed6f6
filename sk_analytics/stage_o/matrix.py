"""The winner option matrix (``superkernel-winner-option-matrix-v1``, protocol §3).

Pure functions: :func:`build_matrix` turns the option registry, the SEED config
and the exact-value probe results into the ordered candidate list;
:func:`freeze_matrix` seals it with its canonical-JSON fingerprint and
:func:`check_frozen` refuses any later edit. The matrix's statuses stay
``pending`` in the frozen file; final statuses live in the ledger and in the
*settled* copy written at hand-off (:func:`settle_matrix`).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from os import PathLike
from typing import Any, TypedDict

from sk_analytics.errors import InputError, IntegrityError
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.fingerprint import canonical_json, fingerprint
from sk_analytics.messages import coded, render, render_problem
from sk_analytics.stage_o import options
from sk_analytics.stage_o.options import OptionSpec, current_value, option_pointer, options_root

MATRIX_SCHEMA = "superkernel-winner-option-matrix-v1"
Category = options.Category
Risk = options.Risk


class ProbeRecord(TypedDict, total=False):
    """One exact-value probe result (as written by ``sk-run probe``)."""

    option: str
    value: Any
    ready: bool
    evidence: Any


@dataclass(frozen=True)
class Candidate:
    """A protocol candidate before probing: what to try and how risky it is."""

    id: str
    category: Category
    option: str
    value: Any
    risk: Risk
    prerequisites: tuple[str, ...] = ()
    authorisation: str | None = None


def protocol_candidates(registry: Sequence[OptionSpec] | None = None) -> list[Candidate]:
    """The fixed Stage O candidate list in frozen trial order, read from the option registry
    (:data:`~sk_analytics.stage_o.options.REGISTRY`: each option's trials, ordered by its ``trial_order``).

    A registry with an option that is neither tried nor excluded (it would drop out of the matrix
    unseen) is a bug of sk-tune: :class:`RuntimeError` naming it.
    """
    problems = options.registry_problems(registry)
    if problems:
        raise RuntimeError("option registry: " + "; ".join(problems))
    return [
        Candidate(str(t.id), str(spec.category), spec.name, copy.deepcopy(t.value), t.risk, t.prerequisites, t.authorisation)
        for spec in options.trial_ordered(registry)
        for t in spec.trial_values()
    ]


_DEBUG_EXCLUDED = "excluded.debug"


def _probe_key(option: str, value: Any) -> tuple[str, str]:
    return option, canonical_json(value)


def _index_probes(probes: Iterable[Mapping[str, Any]], source: str) -> dict[tuple[str, str], Mapping[str, Any]]:
    index: dict[tuple[str, str], Mapping[str, Any]] = {}
    for number, probe in enumerate(probes):
        if not isinstance(probe, Mapping) or not isinstance(probe.get("option"), str) or "value" not in probe:
            raise InputError(source, "probe record malformed", record=number, expected="{option, value, ready, evidence}")
        if not isinstance(probe.get("ready"), bool):
            raise InputError(source, "probe record has no boolean 'ready'", record=number)
        index[_probe_key(probe["option"], probe["value"])] = probe
    return index


def build_matrix(
    seed_config: Mapping[str, Any],
    probes: Iterable[Mapping[str, Any]],
    *,
    root: str | None = None,
    probes_source: str = "probes",
    registry: Sequence[OptionSpec] | None = None,
) -> dict[str, Any]:
    """Build the (unfrozen) option matrix from the SEED config and probe results.

    Candidates whose value the SEED already carries are excluded with a reason;
    debug options never enter; a candidate without a probe keeps
    ``probe_evidence.probed = false`` and is settled ``blocked`` by the state
    machine before any run. ``registry``: the option registry (default: the one of
    :mod:`~sk_analytics.stage_o.options`); every option is either a candidate or excluded.
    """
    specs = options.current_registry() if registry is None else tuple(registry)
    defaults = {spec.name: spec.default for spec in specs}
    config = dict(seed_config)
    debug = config.get("super_kernel_debug_options")
    if debug:
        raise InputError(None, "SEED config carries super_kernel_debug_options; debug options never enter clean samples")
    root = root or options_root(config)
    index = _index_probes(probes, probes_source)
    entries: list[dict[str, Any]] = []
    excluded: list[dict[str, Any]] = []
    for cand in protocol_candidates(specs):
        pointer = option_pointer(root, cand.option)
        original = current_value(config, pointer)
        if original is not None and canonical_json(original) == canonical_json(cand.value):
            excluded.append({"option": cand.option, "value": cand.value, "reason": coded("excluded.seed_value")})
            continue
        probe = index.get(_probe_key(cand.option, cand.value))
        evidence = (
            {"probed": True, "ready": bool(probe["ready"]), "evidence": probe.get("evidence")}
            if probe is not None
            else {"probed": False, "ready": False, "evidence": None}
        )
        entries.append(
            {
                "id": cand.id,
                "category": cand.category,
                "option": cand.option,
                "value": copy.deepcopy(cand.value),
                "pointer": pointer,
                "original": original,
                "default": copy.deepcopy(defaults[cand.option]),
                "probe_evidence": evidence,
                "risk": cand.risk,
                "prerequisites": list(cand.prerequisites),
                "authorisation": cand.authorisation,
                "status": "pending",
            }
        )
    for spec in specs:
        if spec.debug or spec.name.startswith("debug_"):
            excluded.append({"option": spec.name, "reason": coded(_DEBUG_EXCLUDED)})
        elif spec.excluded is not None:
            excluded.append({"option": spec.name, "reason": coded(spec.excluded)})
    matrix = {
        "schema_version": MATRIX_SCHEMA,
        "seed": {"config_fingerprint": fingerprint(config)},
        "options_root": root,
        "entries": entries,
        "excluded": excluded,
    }
    validate_matrix(matrix, categories=options.categories(specs))
    return matrix


def matrix_schema(categories: Sequence[str] | None = None) -> dict[str, Any]:
    """The JSON Schema shipped with the package, its entry ``category`` enum filled from the option
    registry (:func:`~sk_analytics.stage_o.options.categories`, or the ``categories`` given)."""
    return _schema(tuple(options.categories() if categories is None else categories))


@lru_cache(maxsize=4)
def _schema(categories: tuple[str, ...]) -> dict[str, Any]:
    text = resources.files("sk_analytics.stage_o").joinpath("schemas/option-matrix.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    schema["$defs"]["entry"]["properties"]["category"] = {"enum": list(categories)}
    return schema


def validate_matrix(matrix: Any, source: str | PathLike[str] | None = None, *, categories: Sequence[str] | None = None) -> None:
    """Raise :class:`InputError` naming the first schema violation, or the first recorded reason (an excluded
    value's, a settlement's) this sk-tune cannot word (:func:`~sk_analytics.messages.render_problem`)."""
    import jsonschema  # ~50 ms: only where a matrix is validated

    validator = jsonschema.Draft202012Validator(matrix_schema(categories))
    errors = sorted(validator.iter_errors(matrix), key=lambda e: list(e.absolute_path))
    if errors:
        err = errors[0]
        where = "/" + "/".join(str(p) for p in err.absolute_path)
        raise InputError(source, f"option matrix invalid at {where}: {err.message}", expected=MATRIX_SCHEMA)
    ids = [e["id"] for e in matrix["entries"]]
    if len(set(ids)) != len(ids):
        raise InputError(source, "option matrix has duplicate entry ids", expected="unique ids")
    reasons = [(f"/excluded/{i}/reason", item["reason"]) for i, item in enumerate(matrix["excluded"]) if "reason" in item]
    reasons += [(f"/entries/{i}/settlement/reason", e["settlement"]["reason"]) for i, e in enumerate(matrix["entries"])
                if "reason" in (e.get("settlement") or {})]
    for where, reason in reasons:  # the schema checks their shape; each is worded in every language when read
        problem = render_problem(reason)
        if problem is not None:
            raise InputError(source, f"option matrix invalid at {where}: {problem}",
                             expected="a reason {code, params} whose code and facts this sk-tune's catalogs word")


def excluded_reason(excluded: Mapping[str, Any], lang: str) -> str:
    """Why an ``excluded`` item of a matrix is never tried, in ``lang``: its recorded ``reason`` message, or the
    Chinese ``reason_zh`` of a matrix built before reasons were codes (what its fingerprint covers is unchanged)."""
    return render(excluded["reason"], lang) if "reason" in excluded else str(excluded["reason_zh"])


def matrix_fingerprint(matrix: Mapping[str, Any]) -> str:
    """Fingerprint of the matrix content (everything but the ``freeze`` block)."""
    return fingerprint({k: v for k, v in matrix.items() if k != "freeze"})


def freeze_matrix(matrix: Mapping[str, Any], *, frozen_ns: int) -> dict[str, Any]:
    """A frozen copy: validated, every entry pending, sealed by its fingerprint."""
    if "freeze" in matrix:
        raise IntegrityError("option matrix is already frozen; a frozen matrix is immutable")
    validate_matrix(matrix)
    if matrix.get("settled") or any(e["status"] != "pending" for e in matrix["entries"]):
        raise InputError(None, "only a matrix whose entries are all pending can be frozen")
    return {**copy.deepcopy(dict(matrix)), "freeze": {"fingerprint": matrix_fingerprint(matrix), "frozen_ns": frozen_ns}}


def check_frozen(matrix: Mapping[str, Any], source: str | PathLike[str] | None = None, *, expected: str | None = None) -> str:
    """Verify a frozen matrix has not been edited; return its fingerprint.

    ``expected`` is the fingerprint recorded elsewhere (the ledger), so that an
    edit that also rewrote the freeze block is still caught.
    """
    where = f"{source}: " if source is not None else ""
    if "freeze" not in matrix:
        raise IntegrityError(f"{where}option matrix is not frozen (run `sk-run matrix freeze` first)")
    validate_matrix(matrix, source)
    actual = matrix_fingerprint(matrix)
    if actual != matrix["freeze"]["fingerprint"]:
        raise IntegrityError(f"{where}frozen option matrix was edited after freezing (fingerprint {actual[:12]} != {matrix['freeze']['fingerprint'][:12]})")
    if expected is not None and actual != expected:
        raise IntegrityError(f"{where}frozen option matrix differs from the one recorded in the ledger ({actual[:12]} != {expected[:12]})")
    return actual


def load_matrix(path: str | PathLike[str], *, validate: bool = True) -> dict[str, Any]:
    """Read (strict JSON: duplicate keys and NaN refused) and schema-validate a matrix file.

    ``validate=False`` only for a file whose bytes the signed ledger was just proven to vouch
    for (``ledger verify``): the sweep validated it before every action it bound it with."""
    matrix: dict[str, Any] = load_json_file(path)
    if validate:
        validate_matrix(matrix, path)
    return matrix


def settle_matrix(matrix: Mapping[str, Any], settlements: Mapping[str, Mapping[str, Any]], *, validate: bool = True
                  ) -> dict[str, Any]:
    """The settled copy for hand-off: each entry gets its final status and settlement.

    ``settlements`` maps entry id -> ``{status, reason, evidence, ...}`` (``reason``: a message id and its facts; a
    session recorded before reasons were codes: ``reason_zh``).
    Every entry must be settled; the result validates against the same schema (``validate=False``:
    a copy that is only compared with the written one, which was validated when it was written).
    """
    out = copy.deepcopy(dict(matrix))
    for entry in out["entries"]:
        settled = settlements.get(entry["id"])
        if settled is None:
            raise InputError(None, f"matrix entry {entry['id']} is not settled")
        entry["status"] = settled["status"]
        entry["settlement"] = {k: v for k, v in settled.items() if k != "status"}
    out["settled"] = True
    if validate:
        validate_matrix(out)
    return out
