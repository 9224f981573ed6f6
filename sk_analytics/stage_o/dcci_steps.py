"""The DCCI family's steps in the Stage O state machine (protocol §6).

"Repeatable regression" (operational definition, see :func:`classify_disable_all`):
the disable-all gate is not passed, its mean improvement is negative, and
either the option-trial statistics call it a ``loss`` (the 95 % interval of
the improvement excludes zero on the losing side) or every candidate run is
slower than the slowest incumbent run (the regression repeats in each process,
outside the incumbent's run-to-run band). Anything else that fails the gate is
"no gain within the noise band".

A repeatable regression opens the diagnosis: paired diagnostic collections →
``dcci-diff`` → probe of the exact lists → one joint-repair trial compared with
O0 (the incumbent when the family started, not disable-all) → accepted only as
the indivisible three-option combination.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from sk_analytics.messages import coded
from sk_analytics.stage_o.actions import (
    Action,
    Change,
    CollectProfile,
    DcciDiff,
    Gate,
    ProbeRepair,
    Settle,
)
from sk_analytics.stage_o.options import option_pointer
from sk_analytics.stage_o.state import Policy, SessionState
from sk_analytics.stage_o.steps import accept_path, failure_reason, gate_extension_failure, run_action

DcciOutcome = Literal["gain", "noise", "regression"]


def classify_disable_all(gate: Mapping[str, Any]) -> DcciOutcome:
    """gain / noise / regression of the disable-all trial (see module docstring)."""
    if gate["accepted"]:
        return "gain"
    base = list(gate.get("baseline_run_metrics") or [])
    cand = list(gate.get("candidate_run_metrics") or [])
    improvement = gate.get("mean_improvement_pct")
    if improvement is not None and improvement < 0:
        every_run_slower = bool(base and cand) and min(cand) > max(base)
        if gate.get("verdict") == "loss" or every_run_slower:
            return "regression"
    return "noise"

def dcci_diagnosis(
    entry: Mapping[str, Any], matrix: Mapping[str, Any], state: SessionState, policy: Policy,
    trial: Mapping[str, Any], gate: Mapping[str, Any],
) -> Action:
    """Repeatable regression of disable-all: collections, diff, probe, joint repair (protocol §6)."""
    eid = entry["id"]
    o0_round = state.incumbent
    regression = {"round": trial["round"], "gate": gate.get("summary_path"), "verdict": gate.get("verdict"),
                  "mean_improvement_pct": gate["mean_improvement_pct"]}
    sides: dict[Literal["o0", "disable_all"], tuple[Literal["baseline_profile", "candidate_profile"], str]] = {
        "o0": ("baseline_profile", o0_round), "disable_all": ("candidate_profile", trial["round"])}
    last = {side: state.last(eid, "profile_result", side=side) for side in sides}
    for side, (role, cfg_round) in sides.items():
        prof, other = last[side], last["disable_all" if side == "o0" else "o0"]
        window = other.get("iterations") if other is not None and other["ok"] else None  # never longer than the other side
        if prof is None:
            return CollectProfile(eid, side, role, cfg_round, 1, window)
        if not prof["ok"]:
            if prof["attempt"] < policy.max_collect_attempts:
                return CollectProfile(eid, side, role, cfg_round, prof["attempt"] + 1, window)
            return Settle(
                eid, "rejected",
                coded("reason.dcci_profile_failed", side=side, attempts=prof["attempt"], why=_profile_why(prof)),
                {**regression, "profile": dict(prof)}, state.incumbent, family_rejected=True,
            )
    done = {side: prof for side, prof in last.items() if prof is not None}  # both sides ok here
    windows = {side: prof["iterations"] for side, prof in done.items() if prof.get("iterations") is not None}
    if len(windows) == len(done) and len(set(windows.values())) > 1:
        # a buffer-full re-collection shortened one side; validate_set needs one window for the pair
        longer = max(windows, key=lambda side: windows[side])
        if done[longer]["attempt"] < policy.max_collect_attempts:
            role, cfg_round = sides[longer]
            return CollectProfile(eid, longer, role, cfg_round, done[longer]["attempt"] + 1, min(windows.values()))
        return Settle(
            eid, "rejected",
            coded("reason.dcci_windows_differ", o0=windows["o0"], disable_all=windows["disable_all"], attempts=done[longer]["attempt"]),
            {**regression, "profiles": [dict(done["o0"]), dict(done["disable_all"])]}, state.incumbent, family_rejected=True,
        )
    diff = state.last(eid, "dcci_diff_result")
    if diff is None:
        return DcciDiff(eid, done["o0"]["root"], done["disable_all"]["root"], o0_round, trial["round"])
    if not diff["ok"] or not diff.get("patterns"):
        return Settle(
            eid, "rejected",
            coded("reason.dcci_no_repair", why=_diff_why(diff)),
            {**regression, "dcci_diff": diff.get("path")}, state.incumbent, family_rejected=True,
        )
    # a partial diagnosis (part of the graph not compared) still proposes its repair, but never without saying so
    partial = _partial(diff)
    root = matrix["options_root"]
    patterns = list(diff["patterns"])
    repair = (
        Change(option_pointer(root, "dcci_before_kernel_start"), patterns),
        Change(option_pointer(root, "dcci_after_kernel_end"), patterns),
    )
    probe = state.last(eid, "probe_result", purpose="dcci_repair")
    if probe is None:
        return ProbeRepair(eid, trial["round"], repair)
    if not probe["ready"]:
        return Settle(
            eid, "rejected",
            coded("reason.dcci_probe_failed", partial=partial),
            {**regression, "dcci_diff": diff.get("path"), "probe": probe.get("evidence")}, state.incumbent, family_rejected=True,
        )
    rep = state.last(eid, "trial_result", phase="repair")
    if rep is None:
        return run_action(entry, policy, state.next_round, "repair", trial["round"], repair)
    if not rep["ok"]:
        reason, ev = failure_reason(rep, "reason.dcci_repair_failed")
        return Settle(eid, "failed", reason, {**ev, **{"dcci_diff": diff.get("path")}}, state.incumbent, family_rejected=True)
    extension = gate_extension_failure(state, eid, rep["round"], "reason.dcci_gate_extension_failed", coded("label.dcci_combination", partial=partial))
    if extension is not None:  # its gate added a clean run that failed: a failed repair trial
        return Settle(eid, "failed", extension[0], {**extension[1], "dcci_diff": diff.get("path")}, state.incumbent, family_rejected=True)
    rgate = state.last(eid, "gate_result", round=rep["round"])
    if rgate is None:
        return Gate(rep["round"], o0_round, eid)
    combination = (Change(entry["pointer"], entry["value"]), *repair)
    if not rgate["accepted"]:
        return Settle(
            eid, "rejected",
            coded("reason.dcci_repair_rejected", mean_pct=rgate["mean_improvement_pct"], partial=partial),
            {**regression, "repair_round": rep["round"], "repair_gate": rgate.get("summary_path"), "dcci_diff": diff.get("path")},
            state.incumbent, family_rejected=True,
        )
    run = run_action(entry, policy, rep["round"], "repair", trial["round"], repair)
    return accept_path(entry, state, policy, run, combination, coded("label.dcci_combination", partial=partial), family_rejected=True)


def _words(zh: Any, en: Any, default: str) -> dict[str, Any]:
    """A lower layer's own words (a zh/en pair; a record with only one language gives it for both), or the
    message ``default`` when it gave none."""
    if not zh and not en:
        return coded(default)
    return {"zh": str(zh or en), "en": str(en or zh)}


def _profile_why(prof: Mapping[str, Any]) -> dict[str, Any]:
    """Why a collection failed the artifact contract, as its ``profile_result`` says it."""
    return _words(prof.get("reason_zh"), prof.get("reason"), "reason.manifest_invalid")


def _diff_why(diff: Mapping[str, Any]) -> Any:
    """Why dcci-diff proposed nothing: the recorded message, or an older record's Chinese sentence."""
    if isinstance(diff.get("reason"), Mapping):
        return diff["reason"]
    return _words(diff.get("reason_zh"), None, "reason.no_significant_child")


def _partial(diff: Mapping[str, Any]) -> Any:
    """The parenthesised partial-diagnosis note of a repair proposed from part of the graph ("" when complete)."""
    note = diff.get("partial_note") or diff.get("partial_note_zh")
    if not note:
        return ""
    return coded("dcci.partial_paren", note=note if isinstance(note, Mapping) else {"zh": note, "en": note})
