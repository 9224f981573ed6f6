"""The Stage O state machine: a pure function from (frozen matrix, ledger) to the next action.

The sweep executor has no memory of its own. It asks :func:`next_action`,
performs that one action (run a trial, gate it, collect a profile, …), appends
the outcome to the ledger as one record and asks again. Resuming after a crash
is therefore nothing but re-reading the ledger: an action whose outcome record
is missing is simply asked for again (the runner's trials continue partial
rounds without repeating finished runs).

Protocol mapping (``stage-o-protocol.md``):

* §4 O0-INCUMBENT: correctness + 5 clean runs, spread ≤ 5 %, else :class:`Stop`.
* §3/§5 each entry in frozen order: pre-run blockers settle ``blocked`` with a
  Chinese reason and evidence; otherwise trial (≥ 3 runs) → gate against the
  current five-run incumbent → on acceptance top-up to 5 and stability
  re-check (failing it withdraws the acceptance: ``failed``); rejection or
  failure keeps the incumbent (rollback = the next trial's base is unchanged).
* §6 DCCI: disable-all first; gain → accept; noise level → reject the family;
  failure → ``failed`` (scene sealed by the runner), family rejected;
  *repeatable regression* → paired diagnostic collections → ``dcci-diff`` →
  probe of the exact lists → one joint-repair trial compared with O0 (the
  incumbent when the family started, not disable-all) → accepted only as the
  indivisible three-option combination.

The pieces: :mod:`~sk_analytics.stage_o.actions` (what may be asked),
:mod:`~sk_analytics.stage_o.state` (policy, ledger fold),
:mod:`~sk_analytics.stage_o.blockers` (pre-run blockers),
:mod:`~sk_analytics.stage_o.steps` (trial and acceptance path),
:mod:`~sk_analytics.stage_o.dcci_steps` (§6, with the operational definition of
"repeatable regression"). This module composes them and re-exports their
public names, so ``sk_analytics.stage_o.machine`` stays the one import path.

Ledger record kinds written by the executor (``data`` fields the machine reads):

``matrix_frozen`` {fingerprint} · ``trial_result`` {round, entry_id, phase, ok,
runs_added, runs_total, clean_dir, config_path, failure{stage, message,
scene}} · ``gate_result`` {round, baseline_round, entry_id, accepted,
mean_improvement_pct, verdict, baseline_run_metrics, candidate_run_metrics,
summary_path} · ``stability_result`` {round, entry_id, stable, spread_pct, max_spread_pct} ·
``profile_result`` {entry_id, side, attempt, ok, root, manifest, reason_zh, iterations} ·
``dcci_diff_result`` {entry_id, ok, path, patterns, reason, diagnosis, compared_time_share, partial_note} ·
``probe_result`` {entry_id, purpose, ready, values, evidence} ·
``entry_settled`` (the :class:`Settle` action) · ``session_stopped``
(:class:`Stop`) · ``base_frozen`` (:class:`FreezeBase`) · ``handoff_written``.

Reasons and summaries are recorded as codes and facts (``{"code": message id, "params": {...}}``,
:mod:`sk_analytics.messages`); sessions recorded before that hold Chinese ``reason_zh``/``summary_zh``
(and failures their ``reason_zh``), which every reader still takes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from sk_analytics.messages import coded
from sk_analytics.stage_o.actions import (
    Action,
    Change,
    CheckStability,
    CollectProfile,
    DcciDiff,
    Finished,
    FreezeBase,
    FreezeMatrix,
    Gate,
    Phase,
    ProbeRepair,
    RunTrial,
    Settle,
    Status,
    Stop,
    WriteHandoff,
)
from sk_analytics.stage_o.blockers import RISK_ORDER, pre_run_blocker
from sk_analytics.stage_o.dcci_steps import (
    DcciOutcome,
    classify_disable_all,
    dcci_diagnosis,
)
from sk_analytics.stage_o.matrix import check_frozen
from sk_analytics.stage_o.state import (
    O0,
    Policy,
    Record,
    SessionState,
    as_records,
    fold,
)
from sk_analytics.stage_o.steps import (
    accept_path,
    failure_reason,
    gate_extension_failure,
    gate_rejection,
    incumbent_extension_stop,
    run_action,
    short_value,
)

__all__ = [
    "O0", "RISK_ORDER", "Action", "Change", "CheckStability", "CollectProfile", "DcciDiff", "DcciOutcome", "Finished",
    "FreezeBase", "FreezeMatrix", "Gate", "Phase", "Policy", "ProbeRepair", "Record", "RunTrial", "SessionState", "Settle",
    "Status", "Stop", "WriteHandoff", "as_records", "classify_disable_all", "entry_action", "fold", "next_action",
    "settle_record",
]


def entry_action(entry: Mapping[str, Any], matrix: Mapping[str, Any], state: SessionState, policy: Policy) -> Action:
    eid = entry["id"]
    change = Change(entry["pointer"], entry["value"])
    label = f"{entry['option']}={short_value(entry['value'])}"
    stop = incumbent_extension_stop(state, eid)  # its gate found the incumbent failing a clean run
    if stop is not None:
        return stop
    trial = state.last(eid, "trial_result", phase="trial")
    if trial is None:
        blocked = pre_run_blocker(entry, state, policy)
        if blocked is not None:
            return Settle(eid, "blocked", blocked[0], blocked[1], state.incumbent)
        return run_action(entry, policy, state.next_round, "trial", state.incumbent, (change,))
    is_dcci = entry["category"] == "dcci"
    if not trial["ok"]:
        reason, ev = failure_reason(trial, "reason.dcci_trial_failed" if is_dcci else "reason.trial_failed", label=label)
        return Settle(eid, "failed", reason, ev, state.incumbent, family_rejected=is_dcci)
    extension = gate_extension_failure(state, eid, trial["round"], "reason.dcci_gate_extension_failed" if is_dcci else "reason.gate_extension_failed",
                                       coded("label.option", name=label))
    if extension is not None:  # its gate added a clean run that failed: a failed trial, never decided on fewer runs
        return Settle(eid, "failed", *extension, state.incumbent, family_rejected=is_dcci)
    gate = state.last(eid, "gate_result", round=trial["round"])
    if gate is None:
        return Gate(trial["round"], state.incumbent, eid)
    if gate["accepted"]:
        run = run_action(entry, policy, trial["round"], "trial", state.incumbent, (change,))
        return accept_path(entry, state, policy, run, (change,), coded("label.option", name=label), family_rejected=is_dcci)
    evidence = {"round": trial["round"], "gate": gate.get("summary_path"), "verdict": gate.get("verdict")}
    if not is_dcci:
        return Settle(eid, "rejected", gate_rejection(label, gate), evidence, state.incumbent)
    if classify_disable_all(gate) == "noise":
        return Settle(
            eid, "rejected",
            coded("reason.dcci_noise", mean_pct=gate["mean_improvement_pct"]),
            evidence, state.incumbent, family_rejected=True,
        )
    return dcci_diagnosis(entry, matrix, state, policy, trial, gate)

def next_action(matrix: Mapping[str, Any], ledger_records: Iterable[Any], policy: Policy) -> Action:
    """The one next step of the session (pure: same inputs, same action)."""
    state = fold(ledger_records, matrix)
    if state.matrix_fingerprint is None:
        return FreezeMatrix()
    check_frozen(matrix, expected=state.matrix_fingerprint)
    if state.handoff is not None:
        return Finished("stopped" if state.stopped else "base")
    if state.stopped is not None:
        return WriteHandoff("stopped")
    if state.base is not None:
        return WriteHandoff("base")
    o0 = state.last(None, "trial_result", round=O0)
    if o0 is None:
        return RunTrial(O0, "o0", None, None, (), policy.incumbent_runs, True, policy.timeout_s)
    if not o0["ok"]:
        reason, ev = failure_reason(o0, "reason.o0_failed")
        return Stop(reason, ev)
    o0_stab = state.last(None, "stability_result", round=O0)
    if o0_stab is None:
        return CheckStability(O0, None)
    if not o0_stab["stable"]:
        return Stop(
            coded("reason.o0_unstable", spread_pct=o0_stab.get("spread_pct"), max_spread_pct=o0_stab.get("max_spread_pct", 5.0)),
            {"round": O0, "stability": dict(o0_stab)},
        )
    for entry in matrix["entries"]:
        if entry["id"] not in state.settled:
            return entry_action(entry, matrix, state, policy)
    accepted = tuple(e["id"] for e in matrix["entries"] if state.settled[e["id"]]["status"] == "accepted")
    return FreezeBase(state.incumbent, accepted, tuple(state.option_changes))


def settle_record(action: Settle) -> dict[str, Any]:
    """The ``entry_settled`` ledger data of a :class:`Settle` action."""
    data = action.to_json()
    data.pop("action")
    data["summary"] = coded("summary.settled", entry=action.entry_id, status=action.status, reason=action.reason)
    return data
