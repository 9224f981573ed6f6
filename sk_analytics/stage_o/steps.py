"""Shared steps of the Stage O state machine: the trial of an entry and its acceptance path.

Protocol §5: a trial is correctness plus the minimum clean runs (risky values
isolated, with the shorter timeout); an accepted trial is topped up to five
runs and re-checked for stability before it settles ``accepted`` — failing
either withdraws the acceptance (``failed``). Also the Chinese number and
value formats every recorded reason uses.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sk_analytics.messages import coded, ids, is_coded
from sk_analytics.option_trial.modes import FAMILY_INCUMBENT_RUNS
from sk_analytics.stage_o.actions import (
    Action,
    Change,
    CheckStability,
    Phase,
    RunTrial,
    Settle,
    Stop,
)
from sk_analytics.stage_o.state import Policy, SessionState


def short_value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


INCUMBENT_EXTENSION = "incumbent_extension"
"""Phase of the ``trial_result`` a family gate records when a run of its incumbent's extension failed (the gate's
entry, the incumbent's round): the session stops on it (:func:`incumbent_extension_stop`)."""

GATE_EXTENSION = "gate_extension"
"""Phase of the ``trial_result`` a sequential or family gate records when a clean run it added to the candidate's
round (the policy undecided) failed: the entry settles ``failed`` on it (:func:`gate_extension_failure`)."""

FAILURE_KINDS = ("crash", "timeout", "wrong_output", "bad_logs", "invalid_value", "value_differs")
"""The kinds of a trial failure (``failure.stage``) the catalogs word; any other is said as it is."""


def failure_message(failure: Mapping[str, Any] | None) -> dict[str, Any]:
    """A trial failure as a message: its kind and the runner's own words (``message``); a recorded message or a
    zh/en pair, either one a parameter of a reason."""
    failure = failure or {}
    stage = str(failure.get("stage") or "unknown")
    message = str(failure.get("message") or "")
    if stage not in FAILURE_KINDS and failure.get("reason_zh"):  # an older record's own Chinese words for a kind no catalog knows
        return {"zh": str(failure["reason_zh"]), "en": f"{stage} ({message})" if message else stage}
    words = failure.get("words")  # the runner's words as a message (a Chinese reader gets Chinese), where recorded
    return coded(f"failure.{stage}" if stage in FAILURE_KINDS else "failure.other", stage=stage, message=words if is_coded(words) else message)


def failure_reason(trial: Mapping[str, Any], code: str, **params: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """The reason ``code`` of a failed trial (its failure as the ``failure`` parameter) and the evidence pointing at it."""
    failure = trial.get("failure") or {}
    return coded(code, **params, failure=failure_message(failure)), {"round": trial["round"], "scene": failure.get("scene"), "stage": failure.get("stage")}


def incumbent_extension_stop(state: SessionState, entry_id: str) -> Stop | None:
    """The stop of a session whose family gate (of ``entry_id``) could not extend the incumbent: a run of the
    extension failed (crash, timeout, wrong output). An incumbent that fails a clean run is no baseline, as a
    failed O0 (protocol §4) is not, and the family policy's boundaries assume the runs it planned: the session
    stops naming the round, the runs planned and made and the failure, never deciding on fewer runs."""
    found = state.last(entry_id, "trial_result", phase=INCUMBENT_EXTENSION)
    if found is None or found["ok"]:
        return None
    reason, evidence = failure_reason(found, "reason.incumbent_extension_failed", round=found["round"], gate_round=found.get("gate_round"),
                                      planned=found.get("runs_planned"), made=found.get("runs_total"))
    return Stop(reason, {**evidence, "gate_round": found.get("gate_round"), "runs_planned": found.get("runs_planned"),
                         "runs_made": found.get("runs_total")})


def gate_extension_failure(state: SessionState, entry_id: str, round_: str, code: str, subject: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The reason ``code`` and evidence of a candidate round (``round_``) whose gate failed a clean run it added while
    its policy was undecided (crash, timeout, wrong output); None when no such run failed. A candidate that fails a
    clean run is a failed trial (protocol §5.6): never decided on the runs before the failure, the entry settles
    ``failed`` naming the run, the runs made and the failure with its scene, and the incumbent stays."""
    found = state.last(entry_id, "trial_result", round=round_, phase=GATE_EXTENSION)
    if found is None or found["ok"]:
        return None
    reason, evidence = failure_reason(found, code, subject=subject, policy=coded(f"decider.{found.get('gate_mode')}"), run=found.get("failed_run"),
                                      before=found.get("runs_before"), made=found.get("runs_total"), cap=found.get("runs_cap"))
    return reason, {**evidence, "phase": GATE_EXTENSION, "failed_run": found.get("failed_run"), "runs_made": found.get("runs_total")}


def accept_path(
    entry: Mapping[str, Any], state: SessionState, policy: Policy, trial: RunTrial, changes: tuple[Change, ...], subject: Mapping[str, Any],
    **settle: Any,
) -> Action:
    """Top-up to five, stability re-check, then settle accepted (or failed); ``subject`` names what was tried (a message).

    The top-up repeats the trial's exact identity (base round and changes) so
    that the runner continues the same round, keeping its earlier runs.
    """
    eid = entry["id"]
    round_ = trial.round
    gate = state.last(eid, "gate_result", round=round_)
    family = policy.gate == "family"
    top_to = family_top_up(gate) if family else policy.incumbent_runs
    top = state.last(eid, "trial_result", round=round_, phase="top_up")
    if top is None:
        return replace(trial, phase="top_up", runs=top_to, correctness=False)
    if not top["ok"]:
        reason, ev = failure_reason(top, "reason.top_up_failed", subject=subject, runs=top_to)
        return Settle(eid, "failed", reason, ev, state.incumbent, **settle)
    if family:  # the family policy decided on all of the winner's runs; the five-run re-check is the protocol's
        return Settle(
            eid, "accepted",
            coded("reason.accepted_family_runs", subject=subject, mean_pct=gate["mean_improvement_pct"] if gate else None, runs=top_to,
                  **gate_runs(gate)),
            {"round": round_, "gate": gate.get("summary_path") if gate else None, "runs": top_to}, round_, accepted_changes=changes,
        )
    stab = state.last(eid, "stability_result", round=round_)
    if stab is None:
        return CheckStability(round_, eid)
    if not stab["stable"]:
        return Settle(
            eid,
            "failed",
            coded("reason.unstable_after_top_up", subject=subject, runs=policy.incumbent_runs, spread_pct=stab.get("spread_pct"),
                  max_spread_pct=stab.get("max_spread_pct", 5.0)),
            {"round": round_, "stability": dict(stab)},
            state.incumbent,
            **settle,
        )
    return Settle(
        eid,
        "accepted",
        coded("reason.accepted", subject=subject, mean_pct=gate["mean_improvement_pct"] if gate else None, runs=policy.incumbent_runs),
        {"round": round_, "gate": gate.get("summary_path") if gate else None, "stability": dict(stab)},
        round_,
        accepted_changes=changes,
    )


def gate_runs(gate: Mapping[str, Any] | None) -> dict[str, int]:
    """The runs a gate's mean improvement is over (``base``: the incumbent's, ``cand``: the candidate's), for a reason
    that quotes it where the gate read more runs than the protocol's five and three (the family policy)."""
    return {"base": len((gate or {}).get("baseline_run_metrics") or ()), "cand": len((gate or {}).get("candidate_run_metrics") or ())}


def gate_rejection(label: str, gate: Mapping[str, Any]) -> dict[str, Any]:
    """The reason of an option the gate ``gate`` did not accept: the family policy's answer, or the protocol's with
    the checks that failed."""
    mean = gate.get("mean_improvement_pct")
    if gate.get("family"):
        why = family_why(gate["family"])  # a new id: records of older sessions keep theirs, without the fact
        if why is None:
            return coded("reason.family_rejected", label=label, mean_pct=mean, **gate_runs(gate))
        return coded("reason.family_rejected_why", label=label, mean_pct=mean, **gate_runs(gate), why=why)
    failed = failed_checks(gate)  # the record's checks (name -> passed), the ones the gate's summary read
    if failed:
        return coded("reason.gate_failed_checks", label=label, mean_pct=mean, checks=failed)
    return coded("reason.gate_failed", label=label, mean_pct=mean)


def family_why(family: Mapping[str, Any]) -> dict[str, Any] | None:
    """Why the family policy rejected a candidate, from its record (``reason``: a gain unlikely to reach
    ``min_effect_pct``, a real gain below it, undecided at the cap); None for a record without one. A futile stop names
    no bound: the record's interval is the two-sided 95 % one, while futility is judged on a one-sided bound of 75 % to
    25 % confidence (option-trial.md), so "cannot reach 5 % (upper bound +6.1 %)" could be said."""
    design = family.get("design") or {}
    reason = family.get("reason")
    if reason == "futile":
        return coded("family.why.futile", min_pct=design.get("min_effect_pct"))
    if reason == "below_min_effect":
        return coded("family.why.below_min_effect", min_pct=design.get("min_effect_pct"))
    if reason == "cap_reached":
        return coded("family.why.cap_reached", runs=family.get("runs_used") or design.get("cap_candidate_runs"))
    return None


def failed_checks(gate: Mapping[str, Any]) -> list[dict[str, Any] | str] | None:
    """The protocol checks a gate record says failed, as codes (a reason's ``checks`` fact, worded where it is
    read: ``check.<name>``; a check the catalogs do not name, as it is); None when none failed, or when a policy
    that is not the protocol decided (its own checks are not these)."""
    if not gate.get("gate_is_protocol", True):
        return None
    failed = [name for name, ok in (gate.get("checks") or {}).items() if not ok]
    return [coded(f"check.{name}") if f"check.{name}" in ids("en") else name for name in failed] or None


def family_top_up(gate: Mapping[str, Any] | None) -> int:
    """Runs a family-policy winner is topped up to before it becomes the incumbent: the design's incumbent runs
    (stated in its gate record), or the runs it already has when more (its runs serve every later entry)."""
    runs = len((gate or {}).get("candidate_run_metrics") or ())
    design = ((gate or {}).get("family") or {}).get("design") or {}
    return max(runs, int(design.get("incumbent_runs") or FAMILY_INCUMBENT_RUNS[0]))


def run_action(entry: Mapping[str, Any], policy: Policy, round_: str, phase: Phase, base_round: str, changes: tuple[Change, ...]) -> RunTrial:
    """The trial (or repair) of an entry: correctness + the minimum clean runs."""
    return RunTrial(
        round_, phase, entry["id"], base_round, changes, policy.min_trial_runs, True,
        timeout_for(entry, policy), is_isolated(entry), joint_dcci=phase == "repair",
    )


def timeout_for(entry: Mapping[str, Any], policy: Policy) -> float:
    return policy.risky_timeout_s if entry["risk"] == "high" or entry["category"] == "aggressive" else policy.timeout_s


def is_isolated(entry: Mapping[str, Any]) -> bool:
    return bool(entry["category"] == "aggressive" or entry["risk"] == "high")
