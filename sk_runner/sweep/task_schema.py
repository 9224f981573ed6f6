"""The JSON Schemas of the phase entry's inputs: a dispatched Stage O task (``superkernel-stage-o-task-v1``), built
from the facts it names, and its phase manifest (``superkernel-phase-manifest-v1``).

Every object of the task refuses keys it does not declare (a typo such as
``warmpu`` is named with the closest valid key), and every number is bounded:
the bounds, backends, gate modes and risk levels come from the modules that
own them (:mod:`sk_runner.limits`, :mod:`sk_runner.backends`, the protocol
:class:`~sk_analytics.stage_o.state.Policy`), so the schema never drifts from
what the sweep accepts. ``sk-run sweep --task`` (also ``--plan-only``), a
campaign and ``sk-run task init`` check a task with it before the phase entry's
own checks (files, fingerprint, option values against the registry).

The policy's keys are the fields of ``Policy``: a field added there is a valid
key at once; :data:`POLICY_PROPERTIES` gives the known ones their type and bounds.

The phase manifest is as strict: its five keys and nothing else (``runtime_tool``
is named with ``runtime_tools``); :func:`sk_runner.sweep.phase.validate_phase_manifest`
then checks its values (the phase, the agent, every runtime tool resolves).
"""

from __future__ import annotations

import dataclasses
from functools import cache
from typing import Any

from sk_analytics.option_trial.modes import GATE_MODES
from sk_analytics.stage_o.machine import RISK_ORDER, Policy
from sk_runner.backends import BACKENDS
from sk_runner.limits import MAX_COLLECT_ATTEMPTS, MAX_ITERATIONS, MAX_NOISE, MAX_RANKS, MAX_RUNS, MAX_SEED, MAX_TIMEOUT_S
from sk_runner.trial.spec import MIN_TRIAL_RUNS

TASK_SCHEMA = "superkernel-stage-o-task-v1"
PHASE_SCHEMA = "superkernel-phase-manifest-v1"


def _integer(low: int, high: int, *, null: bool = False) -> dict[str, Any]:
    return {"type": ["integer", "null"] if null else "integer", "minimum": low, "maximum": high}


def _seconds() -> dict[str, Any]:
    return {"type": "number", "exclusiveMinimum": 0, "maximum": MAX_TIMEOUT_S}


def _strict(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    """An object of exactly these keys."""
    return {"type": "object", "additionalProperties": False, "required": list(required), "properties": properties}


POLICY_PROPERTIES: dict[str, Any] = {
    "authorisations": {"type": "array", "items": {"type": "string"}},
    "operator_adaptation": {"type": "boolean"},
    "max_risk": {"enum": list(RISK_ORDER)},
    "budget_runs": _integer(1, MAX_RUNS * 100, null=True),
    "min_trial_runs": _integer(MIN_TRIAL_RUNS, MAX_RUNS),
    "incumbent_runs": _integer(MIN_TRIAL_RUNS, MAX_RUNS),
    "timeout_s": _seconds(),
    "risky_timeout_s": _seconds(),
    "max_collect_attempts": _integer(1, MAX_COLLECT_ATTEMPTS),
    "gate": {"enum": list(GATE_MODES)},
    "allow_p90_regression_pct": {"type": "number", "minimum": 0, "maximum": 100},
    "allow_stddev_regression_pct": {"type": "number", "minimum": 0, "maximum": 100},
    "profile_iterations": _integer(1, MAX_ITERATIONS, null=True),
    "min_effect_pct": {"type": "number", "minimum": 0, "maximum": 100},
}
"""Type and bounds of each policy field; a ``Policy`` field without an entry is a valid key of any value
(its own check in :func:`sk_runner.sweep.phase.validate_task` types it)."""

WORKLOAD_PROPERTIES: dict[str, Any] = {
    "backend": {"enum": list(BACKENDS)},
    "command": {"type": "array", "items": {"type": "string"}},
    "cwd": {"type": ["string", "null"], "minLength": 1},
    "network": {"type": ["string", "null"], "minLength": 1},
    "noise": {"type": ["number", "null"], "minimum": 0, "maximum": MAX_NOISE},
    "ranks": _integer(1, MAX_RANKS),
    "iterations": _integer(1, MAX_ITERATIONS, null=True),
    "warmup": _integer(0, MAX_ITERATIONS),
    "seed": _integer(0, MAX_SEED),
    "sources": {"type": ["array", "null"], "minItems": 1, "items": {"type": "string", "minLength": 1}},
}


@cache
def task_schema() -> dict[str, Any]:
    """The task's JSON Schema (Draft 2020-12); built once per process (read it, never change it)."""
    policy = {f.name: POLICY_PROPERTIES.get(f.name, {}) for f in dataclasses.fields(Policy)}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": TASK_SCHEMA,
        **_strict({
            "schema_version": {"const": TASK_SCHEMA},
            "agent_id": {"type": "string"},
            "phase_manifest": {"type": "string", "minLength": 1},
            "seed": _strict({"name": {"type": "string"}, "frozen": {"type": "boolean"}, "config": {"type": "string", "minLength": 1},
                             "config_fingerprint": {"type": "string"}}, ("name", "frozen", "config", "config_fingerprint")),
            "accepted_option_values": {"type": "array", "items": _strict({"option": {"type": "string"}, "value": {}}, ("option", "value"))},
            "clean_artifacts": _strict({"bound_to": {"type": "string"}, "path": {"type": "string", "minLength": 1}}, ("bound_to", "path")),
            "workload": _strict(WORKLOAD_PROPERTIES),
            "policy": _strict(policy),
            "session": {"type": ["string", "null"], "minLength": 1},
        }, ("schema_version", "agent_id", "phase_manifest", "seed", "accepted_option_values", "clean_artifacts", "workload")),
    }


@cache
def phase_manifest_schema() -> dict[str, Any]:
    """The phase manifest's JSON Schema (protocol §2: the schema version and four fields, of their types); read it, never change it."""
    text = {"type": "string"}
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": PHASE_SCHEMA,
        **_strict({"schema_version": text, "phase": text, "agent_id": text, "skill": text,
                   "runtime_tools": {"type": "array", "items": text}},
                  ("schema_version", "phase", "agent_id", "skill", "runtime_tools")),
    }
