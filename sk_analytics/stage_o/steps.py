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

from sk_analytics.option_trial.modes import FAMILY_INCUMBENT_RUNS
from sk_analytics.stage_o.actions import (
    Action,
    Change,
    CheckStability,
    Phase,
    RunTrial,
    Settle,
)
from sk_analytics.stage_o.state import Policy, SessionState


def pct_zh(value: Any, *, sign: bool = True) -> str:
    """A percentage for a Chinese reason: 3 decimals (the ledger keeps the exact number)."""
    if value is None:
        return "—"
    return f"{float(value):+.3f}%" if sign else f"{float(value):.3f}%"


def short_value(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def failure_reason(trial: Mapping[str, Any], prefix: str) -> tuple[str, dict[str, Any]]:
    failure = trial.get("failure") or {}
    reason = failure.get("reason_zh") or "试验失败"
    return f"{prefix}：{reason}", {"round": trial["round"], "scene": failure.get("scene"), "stage": failure.get("stage")}


def accept_path(
    entry: Mapping[str, Any], state: SessionState, policy: Policy, trial: RunTrial, changes: tuple[Change, ...], label_zh: str, **settle: Any
) -> Action:
    """Top-up to five, stability re-check, then settle accepted (or failed).

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
        reason, ev = failure_reason(top, f"{label_zh}通过门禁后补足至 {top_to} 次时失败，撤回接受")
        return Settle(eid, "failed", reason, ev, state.incumbent, **settle)
    if family:  # the family policy decided on all of the winner's runs; the five-run re-check is the protocol's
        return Settle(
            eid, "accepted",
            f"{label_zh}通过全矩阵统计策略（非协议；均值改善 {pct_zh(gate['mean_improvement_pct']) if gate else '?'}），补足至 {top_to} 次，成为新基线",
            {"round": round_, "gate": gate.get("summary_path") if gate else None, "runs": top_to}, round_, accepted_changes=changes,
        )
    stab = state.last(eid, "stability_result", round=round_)
    if stab is None:
        return CheckStability(round_, eid)
    if not stab["stable"]:
        return Settle(
            eid,
            "failed",
            f"{label_zh}补足至 {policy.incumbent_runs} 次后稳定性复核未通过（spread {pct_zh(stab.get('spread_pct'), sign=False)} > "
            f"{stab.get('max_spread_pct', 5.0)}%），撤回接受，恢复原基线",
            {"round": round_, "stability": dict(stab)},
            state.incumbent,
            **settle,
        )
    return Settle(
        eid,
        "accepted",
        f"{label_zh}通过门禁（均值改善 {pct_zh(gate['mean_improvement_pct']) if gate else '?'}），补足 {policy.incumbent_runs} 次且稳定，成为新基线",
        {"round": round_, "gate": gate.get("summary_path") if gate else None, "stability": dict(stab)},
        round_,
        accepted_changes=changes,
    )


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
