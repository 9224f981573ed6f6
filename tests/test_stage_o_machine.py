"""Transitions of the Stage O state machine, driven by hand-made ledgers.

A scripted "executor" answers every action with the ledger record a real run
would produce; the tests assert the exact sequence of actions and the final
statuses, for every branch of protocol §4-§6.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import pytest

from sk_analytics.errors import IntegrityError
from sk_analytics.messages import render
from sk_analytics.stage_o.machine import (
    O0,
    Change,
    CheckStability,
    CollectProfile,
    DcciDiff,
    Finished,
    FreezeBase,
    FreezeMatrix,
    Gate,
    ProbeRepair,
    RunTrial,
    Settle,
    Stop,
    WriteHandoff,
    classify_disable_all,
    fold,
    next_action,
    settle_record,
)
from sk_analytics.stage_o.matrix import build_matrix, freeze_matrix, protocol_candidates
from sk_analytics.stage_o.state import Policy


def zh(action: Any) -> str:
    """The Chinese wording of a Settle's or Stop's recorded reason (a message id and its facts)."""
    return render(action.reason, "zh")

ROOT = "/super_kernel_optimize_options"
SEED = {"super_kernel_optimize": True, "super_kernel_optimize_options": {}}


def make_matrix(ids: list[str], *, unprobed: tuple[str, ...] = (), not_ready: tuple[str, ...] = ()) -> dict[str, Any]:
    probes = []
    for c in protocol_candidates():
        if c.id in unprobed:
            continue
        probes.append({"option": c.option, "value": c.value, "ready": c.id not in not_ready, "evidence": {"probe": c.id}})
    matrix = build_matrix(SEED, probes)
    matrix["entries"] = [e for e in matrix["entries"] if e["id"] in ids]
    return freeze_matrix(matrix, frozen_ns=1)


def frozen(matrix: Mapping[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [("matrix_frozen", {"fingerprint": matrix["freeze"]["fingerprint"]})]


Outcome = dict[str, Any]


class Script:
    """Scripted results keyed by round/entry; defaults are the happy path."""

    def __init__(self, **kw: Any) -> None:
        self.trial_ok: dict[tuple[str | None, str], Any] = kw.get("trial_ok", {})  # (entry, phase) -> False | reason
        self.gate: dict[tuple[str | None, str], Outcome] = kw.get("gate", {})  # (entry, phase) -> gate fields
        self.stable: dict[tuple[str | None, str], bool] = kw.get("stable", {})
        self.profile_ok: dict[tuple[str, int], bool] = kw.get("profile_ok", {})
        self.patterns: list[str] | None = kw.get("patterns", ["MatMul.*"])
        self.probe_ready: bool = kw.get("probe_ready", True)
        self.phase_of_round: dict[str, str] = {}
        self.runs: dict[str, int] = {}

    def __call__(self, action: Any) -> tuple[str, dict[str, Any]]:
        if isinstance(action, RunTrial):
            if action.phase != "top_up":
                self.phase_of_round[action.round] = action.phase
            ok = self.trial_ok.get((action.entry_id, action.phase), True)
            have = self.runs.get(action.round, 0)
            added = action.runs - have if ok is True else 1
            self.runs[action.round] = have + added
            failure = None if ok is True else {"stage": "execution", "reason_zh": ok, "scene": f"FAILURE_SCENES/{action.round}/attempt-1"}
            return "trial_result", {
                "round": action.round, "entry_id": action.entry_id, "phase": action.phase, "ok": ok is True,
                "runs_added": added, "runs_total": self.runs[action.round], "failure": failure,
            }
        if isinstance(action, Gate):
            phase = self.phase_of_round[action.round]
            g = {"accepted": True, "mean_improvement_pct": 1.5, "verdict": "win",
                 "baseline_run_metrics": [10, 10.1, 10.05, 9.95, 10.0], "candidate_run_metrics": [9.8, 9.85, 9.9]}
            g.update(self.gate.get((action.entry_id, phase), {}))
            return "gate_result", {"round": action.round, "baseline_round": action.baseline_round,
                                   "entry_id": action.entry_id, "summary_path": f"{action.round}/summary.json", **g}
        if isinstance(action, CheckStability):
            phase = self.phase_of_round.get(action.round, "o0")
            stable = self.stable.get((action.entry_id, phase), True)
            return "stability_result", {"round": action.round, "entry_id": action.entry_id, "stable": stable,
                                        "spread_pct": 1.0 if stable else 7.5}
        if isinstance(action, CollectProfile):
            ok = self.profile_ok.get((action.side, action.attempt), True)
            return "profile_result", {"entry_id": action.entry_id, "side": action.side, "attempt": action.attempt, "ok": ok,
                                      "root": f"DCCI/diag/{action.side}-{action.attempt}", "reason_zh": None if ok else "清单缺失"}
        if isinstance(action, DcciDiff):
            return "dcci_diff_result", {"entry_id": action.entry_id, "ok": True, "path": "DCCI/dcci-diff.json",
                                        "patterns": self.patterns or [], "reason_zh": None if self.patterns else "无显著子节点"}
        if isinstance(action, ProbeRepair):
            return "probe_result", {"entry_id": action.entry_id, "purpose": "dcci_repair", "ready": self.probe_ready,
                                    "values": [c.value for c in action.values]}
        if isinstance(action, Settle):
            return "entry_settled", settle_record(action)
        if isinstance(action, Stop):
            return "session_stopped", {"reason": dict(action.reason)}
        if isinstance(action, FreezeBase):
            return "base_frozen", {"round": action.round}
        if isinstance(action, WriteHandoff):
            return "handoff_written", {"outcome": action.outcome}
        raise AssertionError(f"unexpected action {action}")


def drive(matrix: dict[str, Any], script: Callable[[Any], tuple[str, dict[str, Any]]], policy: Policy = Policy()) -> tuple[list[Any], list[Any]]:
    records: list[Any] = frozen(matrix)
    actions: list[Any] = []
    for _ in range(300):
        action = next_action(matrix, records, policy)
        actions.append(action)
        if isinstance(action, Finished):
            return actions, records
        records.append(script(action))
        # purity: asking twice with the same ledger gives the same answer
        assert next_action(matrix, records[:-1], policy) == action
    raise AssertionError("machine did not finish")


def kinds(actions: list[Any]) -> list[str]:
    out = []
    for a in actions:
        if isinstance(a, RunTrial):
            out.append(f"Run:{a.round}:{a.phase}:{a.runs}")
        elif isinstance(a, Gate):
            out.append(f"Gate:{a.round}<{a.baseline_round}")
        elif isinstance(a, Settle):
            out.append(f"Settle:{a.entry_id}:{a.status}")
        elif isinstance(a, CollectProfile):
            out.append(f"Profile:{a.side}:{a.attempt}")
        else:
            out.append(a.kind)
    return out


def settled(records: list[Any]) -> dict[str, str]:
    return {d["entry_id"]: d["status"] for k, d in records if k == "entry_settled"}


# --------------------------------------------------------------------------- O0


def test_unfrozen_ledger_asks_to_freeze() -> None:
    assert next_action(make_matrix(["auto-op-parallel-1"]), [], Policy()) == FreezeMatrix()


def test_o0_then_accept_then_base() -> None:
    matrix = make_matrix(["auto-op-parallel-1"])
    actions, records = drive(matrix, Script())
    assert kinds(actions) == [
        "Run:O0-INCUMBENT:o0:5", "CheckStability",
        "Run:O1:trial:3", "Gate:O1<O0-INCUMBENT", "Run:O1:top_up:5", "CheckStability",
        "Settle:auto-op-parallel-1:accepted", "FreezeBase", "WriteHandoff", "Finished",
    ]
    first = actions[0]
    assert first.correctness and first.base_round is None and first.changes == ()
    trial = actions[2]
    assert trial.changes == (Change(f"{ROOT}/auto_op_parallel", 1),) and trial.base_round == O0 and trial.correctness
    top_up = actions[4]
    assert not top_up.correctness and (top_up.base_round, top_up.changes) == (trial.base_round, trial.changes)
    base = actions[7]
    assert base == FreezeBase("O1", ("auto-op-parallel-1",), (Change(f"{ROOT}/auto_op_parallel", 1),))


def test_o0_unstable_stops_with_reason() -> None:
    actions, records = drive(make_matrix(["auto-op-parallel-1"]), Script(stable={(None, "o0"): False}))
    assert kinds(actions) == ["Run:O0-INCUMBENT:o0:5", "CheckStability", "Stop", "WriteHandoff", "Finished"]
    assert "极差 7.500% > 5.0%" in zh(actions[2]) and actions[-1].outcome == "stopped"


def test_o0_failure_stops() -> None:
    actions, _ = drive(make_matrix(["auto-op-parallel-1"]), Script(trial_ok={(None, "o0"): "正确性校验失败"}))
    assert kinds(actions)[:2] == ["Run:O0-INCUMBENT:o0:5", "Stop"]
    assert "正确性校验失败" in zh(actions[1])


def test_a_failed_incumbent_extension_stops_before_the_gate_decides() -> None:
    """The family gate records a failed run of the incumbent's extension as a failed ``incumbent_extension`` trial of
    the incumbent (its gate's entry): the session stops on it, naming the runs planned and made and the failure,
    and the entry is never gated on fewer incumbent runs."""
    matrix = make_matrix(["auto-op-parallel-1", "split-mode-1"])
    family = Policy(gate="family")
    script = Script()
    records: list[Any] = frozen(matrix)
    while not isinstance(action := next_action(matrix, records, family), Gate):
        records.append(script(action))
    records.append(("trial_result", {
        "round": O0, "entry_id": "auto-op-parallel-1", "phase": "incumbent_extension", "ok": False, "gate_round": "O1",
        "runs_planned": 10, "runs_before": 5, "runs_added": 3, "runs_total": 8,
        "failure": {"stage": "crash", "message": "run-9: ended early", "scene": "experiments/Sbest/O0-INCUMBENT/FAILURE_SCENES/attempt-1"}}))
    stop = next_action(matrix, records, family)
    assert isinstance(stop, Stop) and stop.reason["code"] == "reason.incumbent_extension_failed"
    assert stop.evidence == {"round": O0, "scene": "experiments/Sbest/O0-INCUMBENT/FAILURE_SCENES/attempt-1", "stage": "crash",
                             "gate_round": "O1", "runs_planned": 10, "runs_made": 8}
    en = render(stop.reason, "en")
    assert en.startswith(f"the incumbent {O0} failed a clean run while the family policy extended it for the gate of O1 "
                         "(8 of 10 planned incumbent runs made): process crash or device error (run-9: ended early).")
    assert "计划 10 次基线运行，完成 8 次" in zh(stop)
    ok = dict(records[-1][1], ok=True, failure=None)  # an extension that worked is no stop: the gate goes on
    assert next_action(matrix, [*records[:-1], ("trial_result", ok)], family) == Gate("O1", O0, "auto-op-parallel-1")


def test_a_failed_run_the_gate_added_to_the_candidate_settles_the_entry_failed() -> None:
    """A sequential or family gate records a clean run it added to the candidate (its policy undecided) that failed
    as a failed ``gate_extension`` trial of the candidate's round: the entry settles ``failed`` on it, naming the run,
    the runs made and the failure with its scene, never gated on the runs before the failure; the incumbent stays
    and the next entry runs against it. A DCCI entry's failure rejects the DCCI family, as its failed trial does."""
    scene = "experiments/Sbest/O1/FAILURE_SCENES/attempt-1"
    for gate, ids, dcci in (("sequential", ["auto-op-parallel-1", "split-mode-1"], False), ("family", DCCI_IDS, True)):
        matrix, policy, script = make_matrix(ids), Policy(gate=gate), Script()
        records: list[Any] = frozen(matrix)
        while not isinstance(action := next_action(matrix, records, policy), Gate):
            records.append(script(action))
        assert action.round == "O1"
        records.append(("trial_result", {
            "round": "O1", "entry_id": ids[0], "phase": "gate_extension", "ok": False, "gate_mode": gate, "runs_cap": 7,
            "failed_run": 5, "runs_before": 3, "runs_added": 1, "runs_total": 4, "base_round": O0, "changes": [],
            "failure": {"stage": "crash", "message": "run-5: ended early", "scene": scene}}))
        settle = next_action(matrix, records, policy)
        assert isinstance(settle, Settle) and (settle.entry_id, settle.status, settle.incumbent_round) == (ids[0], "failed", O0)
        assert settle.family_rejected is dcci
        assert settle.reason["code"] == ("reason.dcci_gate_extension_failed" if dcci else "reason.gate_extension_failed")
        assert settle.evidence == {"round": "O1", "scene": scene, "stage": "crash", "phase": "gate_extension", "failed_run": 5, "runs_made": 4}
        en = render(settle.reason, "en")
        policy_words = "sequential statistics policy" if gate == "sequential" else "family policy"
        assert en.startswith("dcci_disable_on_kernel=" if dcci else "auto_op_parallel=1 failed clean run 5")
        assert f"failed clean run 5, which the {policy_words} (not the protocol) added while undecided (3 clean runs before it, 4 made, at most 7)" in en
        assert en.endswith("process crash or device error (run-5: ended early)")
        assert ("whole DCCI family rejected" in en) is dcci
        assert "第 5 次干净运行失败（追加前 3 次，完成 4 次，上限 7 次）" in zh(settle)
        records.append(script(settle))
        after = next_action(matrix, records, policy)  # the incumbent is unchanged: the next entry runs against O0
        assert isinstance(after, RunTrial) and (after.round, after.base_round) == ("O2", O0)
        ok = dict(records[-2][1], ok=True, failure=None)  # a run that was added cleanly settles nothing: the gate goes on
        assert next_action(matrix, [*records[:-2], ("trial_result", ok)], policy) == Gate("O1", O0, ids[0])


# --------------------------------------------------------------------------- ordinary entries


def test_reject_keeps_incumbent_and_next_trial_uses_it() -> None:
    matrix = make_matrix(["auto-op-parallel-1", "preload-code-0", "split-mode-1"])
    checks = {"baseline_stable": True, "mean_improvement": False, "p90_no_material_regression": False, "stddev_no_material_regression": True}
    script = Script(gate={("auto-op-parallel-1", "trial"): {"accepted": False, "mean_improvement_pct": -0.2, "verdict": "neutral",
                                                             "checks": checks}})  # as the sweep records them: name -> passed
    actions, records = drive(matrix, script)
    rejected = actions[4]
    assert render(rejected.reason, "en") == ("auto_op_parallel=1 did not pass the gate (mean improvement -0.200%; failed checks: mean, P90); "
                                             "incumbent restored")
    assert zh(rejected) == "auto_op_parallel=1 未通过门禁（均值改善 -0.200%；未通过的检查：均值、P90），恢复原基线"
    assert kinds(actions)[2:] == [
        "Run:O1:trial:3", "Gate:O1<O0-INCUMBENT", "Settle:auto-op-parallel-1:rejected",
        "Run:O2:trial:3", "Gate:O2<O0-INCUMBENT", "Run:O2:top_up:5", "CheckStability", "Settle:preload-code-0:accepted",
        "Run:O3:trial:3", "Gate:O3<O2", "Run:O3:top_up:5", "CheckStability", "Settle:split-mode-1:accepted",
        "FreezeBase", "WriteHandoff", "Finished",
    ]
    o3 = actions[10]
    assert o3.base_round == "O2" and o3.changes == (Change(f"{ROOT}/split_mode", 1),)
    base = [a for a in actions if isinstance(a, FreezeBase)][0]
    assert base.round == "O3" and base.accepted_entries == ("preload-code-0", "split-mode-1")
    assert set(base.option_changes) == {Change(f"{ROOT}/preload_code", 0), Change(f"{ROOT}/split_mode", 1)}


def test_reject_by_a_non_protocol_policy_names_no_protocol_check() -> None:
    checks = {"mean_improvement": True, "p90_no_material_regression": False}  # the stats policy decided, not these checks
    script = Script(gate={("auto-op-parallel-1", "trial"): {"accepted": False, "mean_improvement_pct": 0.4, "verdict": "neutral",
                                                             "checks": checks, "gate_is_protocol": False}})
    actions, _ = drive(make_matrix(["auto-op-parallel-1"]), script)
    assert render(actions[4].reason, "en") == "auto_op_parallel=1 did not pass the gate (mean improvement +0.400%); incumbent restored"


def test_trial_failure_settles_failed_with_scene_and_continues() -> None:
    matrix = make_matrix(["aggressive-task1-value0", "split-mode-1"])
    actions, records = drive(matrix, Script(trial_ok={("aggressive-task1-value0", "trial"): "设备错误：进程崩溃"}))
    first = actions[2]
    assert first.entry_id == "aggressive-task1-value0"
    assert first.isolated and first.timeout_s == Policy().risky_timeout_s
    settle = actions[3]
    assert settle.status == "failed" and settle.incumbent_round == O0
    assert settle.evidence["scene"] == "FAILURE_SCENES/O1/attempt-1" and "设备错误" in zh(settle)
    assert actions[4].round == "O2" and actions[4].base_round == O0 and not actions[4].isolated
    assert settled(records) == {"aggressive-task1-value0": "failed", "split-mode-1": "accepted"}


def test_top_up_failure_and_unstable_withdraw_acceptance() -> None:
    matrix = make_matrix(["auto-op-parallel-1", "preload-code-0"])
    script = Script(trial_ok={("auto-op-parallel-1", "top_up"): "补足时超时"}, stable={("preload-code-0", "trial"): False})
    actions, records = drive(matrix, script)
    assert settled(records) == {"auto-op-parallel-1": "failed", "preload-code-0": "failed"}
    unstable = [a for a in actions if isinstance(a, Settle)][1]
    assert "撤回接受" in zh(unstable) and "极差 7.500% > 5.0%" in zh(unstable)
    base = [a for a in actions if isinstance(a, FreezeBase)][0]
    assert base == FreezeBase(O0, (), ())  # no option helped: BASE equals SEED


@pytest.mark.parametrize(
    ("entry", "policy", "matrix_kw", "needle"),
    [
        ("early-start-1", Policy(), {}, "算子侧适配"),
        ("aggressive-event1-task0-value0", Policy(), {}, "事件语义评审"),
        ("auto-op-parallel-1", Policy(), {"unprobed": ("auto-op-parallel-1",)}, "选项探测未执行"),
        ("auto-op-parallel-1", Policy(), {"not_ready": ("auto-op-parallel-1",)}, "ready=false"),
        ("aggressive-task1-value0", Policy(max_risk="medium"), {}, "风险等级 high 未获用户授权"),
        ("auto-op-parallel-1", Policy(budget_runs=9), {}, "预算已明确耗尽：已用 5/9"),
    ],
)
def test_pre_run_blockers(entry: str, policy: Policy, matrix_kw: dict[str, Any], needle: str) -> None:
    matrix = make_matrix([entry], **matrix_kw)
    actions, records = drive(matrix, Script(), policy)
    assert kinds(actions) == ["Run:O0-INCUMBENT:o0:5", "CheckStability", f"Settle:{entry}:blocked", "FreezeBase", "WriteHandoff", "Finished"]
    assert needle in zh(actions[2]) and actions[2].evidence


def test_authorised_and_adapted_entries_run() -> None:
    matrix = make_matrix(["early-start-1", "aggressive-event1-task0-value0"])
    policy = Policy(operator_adaptation=True, authorisations=frozenset({"event_breaker_bypass"}), budget_runs=15)
    actions, records = drive(matrix, Script(), policy)
    assert settled(records) == {"early-start-1": "accepted", "aggressive-event1-task0-value0": "accepted"}
    # budget: 5 (O0) + 5 (O1) used, 5 left for O2 exactly
    assert [a.round for a in actions if isinstance(a, RunTrial) and a.phase == "trial"] == ["O1", "O2"]


def test_budget_runs_out_midway() -> None:
    matrix = make_matrix(["auto-op-parallel-1", "preload-code-0"])
    actions, records = drive(matrix, Script(), Policy(budget_runs=12))
    assert settled(records) == {"auto-op-parallel-1": "accepted", "preload-code-0": "blocked"}


# --------------------------------------------------------------------------- DCCI


DCCI_IDS = ["dcci-disable-all", "auto-op-parallel-1"]
LOSS = {"accepted": False, "mean_improvement_pct": -3.0, "verdict": "loss",
        "baseline_run_metrics": [10, 10.1, 10.05, 9.95, 10.0], "candidate_run_metrics": [10.3, 10.35, 10.28]}


def test_dcci_gain_accepts_and_no_before_after_trials() -> None:
    actions, records = drive(make_matrix(DCCI_IDS), Script())
    assert kinds(actions)[2:7] == ["Run:O1:trial:3", "Gate:O1<O0-INCUMBENT", "Run:O1:top_up:5", "CheckStability", "Settle:dcci-disable-all:accepted"]
    assert actions[2].changes == (Change(f"{ROOT}/dcci_disable_on_kernel", [".*"]),)
    assert not any(isinstance(a, (CollectProfile, ProbeRepair)) for a in actions)


def test_dcci_noise_rejects_family() -> None:
    gate = {"accepted": False, "mean_improvement_pct": -0.1, "verdict": "neutral",
            "candidate_run_metrics": [10.0, 10.2, 9.9]}
    actions, records = drive(make_matrix(DCCI_IDS), Script(gate={("dcci-disable-all", "trial"): gate}))
    settle = actions[4]
    assert kinds(actions)[4] == "Settle:dcci-disable-all:rejected" and settle.family_rejected
    assert "噪声带" in zh(settle) and "before/after" in zh(settle)
    assert actions[5].round == "O2" and actions[5].base_round == O0


def test_dcci_failure_settles_failed_family_rejected() -> None:
    actions, records = drive(make_matrix(DCCI_IDS), Script(trial_ok={("dcci-disable-all", "trial"): "挂起超时"}))
    settle = actions[3]
    assert (settle.status, settle.family_rejected) == ("failed", True) and "DCCI 家族" in zh(settle)
    assert not any(isinstance(a, CollectProfile) for a in actions)


def test_dcci_regression_repair_accepted_as_combination() -> None:
    script = Script(gate={("dcci-disable-all", "trial"): LOSS}, patterns=["MatMul.*", "RmsNorm.*"])
    actions, records = drive(make_matrix(DCCI_IDS), script)
    assert kinds(actions)[2:15] == [
        "Run:O1:trial:3", "Gate:O1<O0-INCUMBENT", "Profile:o0:1", "Profile:disable_all:1", "DcciDiff", "ProbeRepair",
        "Run:O2:repair:3", "Gate:O2<O0-INCUMBENT", "Run:O2:top_up:5", "CheckStability",
        "Settle:dcci-disable-all:accepted", "Run:O3:trial:3", "Gate:O3<O2",
    ]
    assert actions[4].config_round == O0 and actions[5].config_round == "O1"
    assert actions[4].role == "baseline_profile" and actions[5].role == "candidate_profile"
    assert actions[6] == DcciDiff("dcci-disable-all", "DCCI/diag/o0-1", "DCCI/diag/disable_all-1", O0, "O1")
    assert actions[7].disable_all_round == "O1"
    repair = actions[8]
    before, after = f"{ROOT}/dcci_before_kernel_start", f"{ROOT}/dcci_after_kernel_end"
    assert repair.joint_dcci and repair.base_round == "O1"  # diff vs the disable-all config ...
    assert repair.changes == (Change(before, ["MatMul.*", "RmsNorm.*"]), Change(after, ["MatMul.*", "RmsNorm.*"]))
    assert actions[9].baseline_round == O0  # ... but compared with O0
    top_up = actions[10]
    assert (top_up.phase, top_up.base_round, top_up.changes, top_up.joint_dcci) == ("top_up", "O1", repair.changes, True)
    accepted = actions[12]
    assert accepted.incumbent_round == "O2"
    assert accepted.accepted_changes == (
        Change(f"{ROOT}/dcci_disable_on_kernel", [".*"]), Change(before, ["MatMul.*", "RmsNorm.*"]), Change(after, ["MatMul.*", "RmsNorm.*"])
    )
    base = [a for a in actions if isinstance(a, FreezeBase)][0]
    assert len(base.option_changes) == 4


def test_dcci_repair_not_better_than_o0_rejects_family() -> None:
    script = Script(gate={("dcci-disable-all", "trial"): LOSS,
                          ("dcci-disable-all", "repair"): {"accepted": False, "mean_improvement_pct": -0.3, "verdict": "neutral"}})
    actions, records = drive(make_matrix(DCCI_IDS), script)
    settle = [a for a in actions if isinstance(a, Settle)][0]
    assert (settle.status, settle.family_rejected, settle.incumbent_round) == ("rejected", True, O0)
    assert "相对 disable-all 的恢复不构成接受" in zh(settle)
    assert [a for a in actions if isinstance(a, RunTrial) and a.phase == "trial"][-1].base_round == O0


def test_dcci_regression_without_repair_rejects_family() -> None:
    actions, records = drive(make_matrix(DCCI_IDS), Script(gate={("dcci-disable-all", "trial"): LOSS}, patterns=None))
    assert kinds(actions)[4:8] == ["Profile:o0:1", "Profile:disable_all:1", "DcciDiff", "Settle:dcci-disable-all:rejected"]
    assert "无显著子节点" in zh(actions[7])


def test_dcci_repair_probe_failure_and_repair_crash() -> None:
    actions, _ = drive(make_matrix(DCCI_IDS), Script(gate={("dcci-disable-all", "trial"): LOSS}, probe_ready=False))
    assert kinds(actions)[7:9] == ["ProbeRepair", "Settle:dcci-disable-all:rejected"]
    actions, _ = drive(make_matrix(DCCI_IDS), Script(gate={("dcci-disable-all", "trial"): LOSS},
                                                     trial_ok={("dcci-disable-all", "repair"): "正确性失败"}))
    settle = [a for a in actions if isinstance(a, Settle)][0]
    assert settle.status == "failed" and settle.family_rejected and settle.evidence["scene"] == "FAILURE_SCENES/O2/attempt-1"


def test_dcci_invalid_collection_recollects_then_gives_up() -> None:
    script = Script(gate={("dcci-disable-all", "trial"): LOSS}, profile_ok={("disable_all", 1): False})
    actions, _ = drive(make_matrix(DCCI_IDS), script)
    assert kinds(actions)[4:8] == ["Profile:o0:1", "Profile:disable_all:1", "Profile:disable_all:2", "DcciDiff"]
    script = Script(gate={("dcci-disable-all", "trial"): LOSS}, profile_ok={("o0", 1): False, ("o0", 2): False})
    actions, _ = drive(make_matrix(DCCI_IDS), script)
    assert kinds(actions)[4:7] == ["Profile:o0:1", "Profile:o0:2", "Settle:dcci-disable-all:rejected"]
    assert "不产生子节点正则" in zh(actions[6])


@pytest.mark.parametrize(
    ("gate", "expected"),
    [
        ({"accepted": True, "mean_improvement_pct": 1.0}, "gain"),
        ({"accepted": False, "mean_improvement_pct": -2.0, "verdict": "loss"}, "regression"),
        ({"accepted": False, "mean_improvement_pct": -2.0, "verdict": "inconclusive",
          "baseline_run_metrics": [1.0, 1.01], "candidate_run_metrics": [1.02, 1.03]}, "regression"),
        ({"accepted": False, "mean_improvement_pct": -2.0, "verdict": "inconclusive",
          "baseline_run_metrics": [1.0, 1.03], "candidate_run_metrics": [1.02, 1.04]}, "noise"),
        ({"accepted": False, "mean_improvement_pct": 0.5, "verdict": "loss"}, "noise"),
        ({"accepted": False, "mean_improvement_pct": -0.1, "verdict": "neutral"}, "noise"),
    ],
)
def test_classify_disable_all(gate: dict[str, Any], expected: str) -> None:
    assert classify_disable_all(gate) == expected


# --------------------------------------------------------------------------- resume and integrity


def test_resume_from_every_prefix_gives_same_next_action() -> None:
    matrix = make_matrix(DCCI_IDS)
    script = Script(gate={("dcci-disable-all", "trial"): LOSS})
    actions, records = drive(matrix, script)
    for cut in range(1, len(records)):
        assert next_action(matrix, records[:cut], Policy()) == actions[cut - 1]


def test_edited_matrix_refused() -> None:
    matrix = make_matrix(DCCI_IDS)
    records = frozen(matrix)
    edited = json.loads(json.dumps(matrix))
    edited["entries"][0]["risk"] = "low"
    with pytest.raises(IntegrityError, match="edited after freezing"):
        next_action(edited, records, Policy())
    refrozen = freeze_matrix({k: v for k, v in edited.items() if k != "freeze"}, frozen_ns=2)
    with pytest.raises(IntegrityError, match="recorded in the ledger"):
        next_action(refrozen, records, Policy())


def test_inconsistent_ledgers_refused() -> None:
    matrix = make_matrix(DCCI_IDS)
    with pytest.raises(IntegrityError, match="not in the frozen matrix"):
        next_action(matrix, [*frozen(matrix), ("entry_settled", {"entry_id": "nope", "status": "blocked"})], Policy())
    twice = ("entry_settled", {"entry_id": "auto-op-parallel-1", "status": "blocked", "incumbent_round": O0})
    with pytest.raises(IntegrityError, match="twice"):
        next_action(matrix, [*frozen(matrix), twice, twice], Policy())


def test_policy_json_roundtrip_and_fold_counts() -> None:
    policy = Policy(authorisations=frozenset({"b", "a"}), budget_runs=30)
    assert policy.to_json()["authorisations"] == ["a", "b"]
    assert Policy.from_json(json.loads(json.dumps(policy.to_json()))) == policy
    matrix = make_matrix(DCCI_IDS)
    _, records = drive(matrix, Script())
    state = fold(records, matrix)
    assert state.runs_used == 15 and state.trial_rounds == ["O1", "O2"] and state.incumbent == "O2"
    assert replace(policy, budget_runs=None).budget_runs is None
