"""English renderings of recorded Chinese reasons: the catalog's message built from the record's structured facts,
else marked as the Chinese record."""

from __future__ import annotations

from typing import Any

import pytest

from sk_analytics.messages import coded
from sk_analytics.stage_o.machine import O0, fold
from sk_analytics.stage_o.reasons import failure_text, settled_reason, stop_reason
from sk_analytics.stage_o.state import skipped_settlement
from sk_analytics.stage_o.steps import failure_message

ENTRY = {"id": "e", "category": "split", "option": "split_mode", "value": 3}
DCCI = {"id": "d", "category": "dcci", "option": "dcci_disable_on_kernel", "value": [".*"]}
GATE = {"entry_id": "e", "round": "O1", "baseline_round": O0, "accepted": False, "mean_improvement_pct": -0.2971,
        "checks": {"mean_improvement": False, "median_run_direction": True, "p90_no_material_regression": False}}


def _state(*records: tuple[str, dict[str, Any]]) -> Any:
    return fold(list(records))


def test_rejected_names_improvement_and_failed_checks() -> None:
    state = _state(("gate_result", GATE))
    settled = {"status": "rejected", "reason_zh": "split_mode=3 未通过门禁", "evidence": {"round": "O1"}}
    assert settled_reason(ENTRY, settled, state, "en") == (
        "split_mode=3 did not pass the gate (mean improvement -0.297%; failed checks: mean, P90); incumbent restored")
    assert settled_reason(ENTRY, settled, state, "zh") == "split_mode=3 未通过门禁"  # the record itself, untouched


def test_accepted_dcci_repair_is_the_combination() -> None:
    gate = {"entry_id": "d", "round": "O2", "accepted": True, "mean_improvement_pct": 2.391, "checks": {"mean_improvement": True}}
    state = _state(("trial_result", {"entry_id": "d", "round": "O2", "phase": "repair", "ok": True}), ("gate_result", gate))
    settled = {"status": "accepted", "reason_zh": "…", "evidence": {"round": "O2", "stability": {"stable": True, "spread_pct": 0.9561}}}
    assert settled_reason(DCCI, settled, state, "en") == (
        "DCCI disable+before+after (one indivisible combination) passed the gate (mean improvement +2.391%), "
        "topped up to 5 runs and stable; new incumbent")
    # the runs its stability re-check read, where the record keeps them
    settled["evidence"]["stability"]["run_metrics"] = [1.0] * 6
    assert "topped up to 6 runs and stable" in settled_reason(DCCI, settled, state, "en")


def test_an_old_acceptance_without_its_gate_record_is_the_marked_chinese_record() -> None:
    """The sentence needs the gate's improvement; a record without the gate says its own words, marked, never "?%"."""
    settled = {"status": "accepted", "reason_zh": "接受", "evidence": {"round": "O2", "stability": {"stable": True}}}
    assert settled_reason(ENTRY, settled, _state(), "en") == "(recorded reason, in Chinese) 接受"


def test_failed_trial_uses_failure_kind_and_english_message() -> None:
    failure = {"stage": "timeout", "reason_zh": "超时/挂起", "message": "no exit within 15.0 s", "scene": "O3/FAILURE_SCENES/attempt-1"}
    state = _state(("trial_result", {"entry_id": "e", "round": "O3", "phase": "trial", "ok": False, "failure": failure}))
    settled = {"status": "failed", "reason_zh": "…", "evidence": {"round": "O3", "scene": failure["scene"], "stage": "timeout"}}
    assert settled_reason(ENTRY, settled, state, "en") == (
        "split_mode=3 trial failed, incumbent restored: timeout/hang, process group terminated (no exit within 15.0 s)")
    assert failure_text(failure, "zh") == "超时/挂起"
    assert failure_text({"stage": "mystery", "reason_zh": "怪"}, "en") == "(recorded reason, in Chinese) 怪"
    # an empty runner message: no empty parentheses
    assert failure_text({**failure, "message": ""}, "en") == "timeout/hang, process group terminated"


@pytest.mark.parametrize(("phase", "expected"), [
    ("top_up", "split_mode=3 passed the gate but failed while topping up to 5 runs; acceptance withdrawn: "
               "process crash or device error (exit status 1)"),
    ("repair", "DCCI joint repair trial failed; O0 restored, DCCI family rejected: process crash or device error (exit status 1)"),
])
def test_failed_top_up_and_repair(phase: str, expected: str) -> None:
    failure = {"stage": "crash", "reason_zh": "崩溃", "message": "exit status 1"}
    state = _state(("trial_result", {"entry_id": "e", "round": "O3", "phase": phase, "ok": False, "failure": failure}))
    settled = {"status": "failed", "reason_zh": "…", "evidence": {"round": "O3"}}
    assert settled_reason(ENTRY, settled, state, "en") == expected


def test_failed_stability_after_top_up() -> None:
    settled = {"status": "failed", "reason_zh": "…",
               "evidence": {"round": "O4", "stability": {"stable": False, "spread_pct": 6.25, "max_spread_pct": 5.0}}}
    assert settled_reason(ENTRY, settled, _state(), "en") == (
        "split_mode=3: stability re-check after the top-up to 5 runs failed (spread 6.250% > 5.0%); "
        "acceptance withdrawn, incumbent restored")


@pytest.mark.parametrize(("evidence", "expected"), [
    ({"authorisation": "event_breaker_bypass", "authorised": []},
     "split_mode=3 needs an event-semantics review and the user's authorisation of this risk (event_breaker_bypass); not authorised"),
    ({"risk": "high", "max_risk": "medium"}, "risk level high of split_mode=3 is not authorised (highest allowed: medium)"),
    # the record does not say how many runs a full trial needed: the protocol's five
    ({"budget_runs": 10, "runs_used": 8}, "budget explicitly exhausted: 8/10 clean runs used, fewer than the 5 a full trial needs"),
    ({"prerequisite": "operator_adaptation", "declared": False},
     "split_mode=3 needs operator-side adaptation (operator_adaptation), which the task does not declare; that the wrapper "
     "accepts a value says nothing of its run-time semantics"),
    ({"probe_evidence": {"probed": False, "ready": False}},
     "the exact value split_mode=3 was never probed (option probe not run); it may not be tried"),
    ({"probe_evidence": {"probed": True, "ready": False}}, "split_mode=3 is not ready (probe ready=false): the probe evidence names no cause"),
    # each cause in its own words (issue 37: one sentence stood for all of them)
    ({"probe_evidence": {"probed": True, "ready": False, "evidence": {"task": "not_listed"}}},
     "split_mode=3 is not ready (probe ready=false): not listed in the task's accepted_option_values (not probed, no process started)"),
    ({"probe_evidence": {"probed": True, "ready": False, "evidence": {"wrapper": {"accepted": False, "reason": "not an int"}}}},
     "split_mode=3 is not ready (probe ready=false): the wrapper refuses the exact value: not an int"),
    ({"probe_evidence": {"probed": True, "ready": False, "evidence": {
        "wrapper": {"accepted": True}, "runtime": {"status": "process_failed", "process": {"exit_code": 2, "signal": None},
                                                   "stderr_tail": ["Traceback", "ValueError: bad"]}}}},
     "split_mode=3 is not ready (probe ready=false): the probe process failed (exit 2); last stderr: Traceback | ValueError: bad"),
    ({"probe_evidence": {"probed": True, "ready": False, "evidence": {
        "wrapper": {"accepted": True}, "runtime": {"status": "process_failed", "process": {"timed_out": True}}}}},
     "split_mode=3 is not ready (probe ready=false): the probe process failed (timed out and was killed); stderr empty"),
    ({"probe_evidence": {"probed": True, "ready": False, "evidence": {
        "wrapper": {"accepted": True}, "runtime": {"status": "invalid_default", "invalid_lines": ["OptionName: split_mode, set value is invalid"]}}}},
     "split_mode=3 is not ready (probe ready=false): the runtime reports the value invalid and uses the default: "
     "OptionName: split_mode, set value is invalid"),
    ({"other": 1}, "(recorded reason, in Chinese) 别的原因"),
])
def test_blocked_reasons(evidence: dict[str, Any], expected: str) -> None:
    assert settled_reason(ENTRY, {"status": "blocked", "reason_zh": "别的原因", "evidence": evidence}, _state(), "en") == expected


def test_dcci_family_rejections() -> None:
    gate = {**GATE, "entry_id": "d", "checks": {}}
    noise = {"status": "rejected", "family_rejected": True, "reason_zh": "…", "evidence": {"round": "O1"}}
    assert settled_reason(DCCI, noise, _state(("gate_result", gate)), "en") == (
        "DCCI disable-all shows no gain within the noise band (mean improvement -0.297%); whole DCCI family rejected, "
        "O0 kept, no before/after trials")
    rgate = {"entry_id": "d", "round": "O2", "accepted": False, "mean_improvement_pct": -0.5, "checks": {"mean_improvement": False}}
    repair = {"status": "rejected", "family_rejected": True, "reason_zh": "…", "evidence": {"round": "O1", "repair_round": "O2"}}
    assert settled_reason(DCCI, repair, _state(("gate_result", rgate)), "en") == (
        "DCCI joint repair did not beat O0 under the full gate (mean improvement -0.500%); recovering relative to "
        "disable-all is not acceptance; DCCI family rejected, O0 restored, child list not grown")
    assert settled_reason(DCCI, repair, _state(), "en") == "(recorded reason, in Chinese) …"  # no gate record of the repair
    profile = {"status": "rejected", "family_rejected": True, "reason_zh": "…",
               "evidence": {"profile": {"side": "o0", "attempt": 2, "reason": "manifest missing"}}}
    assert "o0 diagnostic collection failed the artifact contract in 2 attempt(s) (manifest missing)" in settled_reason(
        DCCI, profile, _state(), "en")


def test_stop_reasons() -> None:
    unstable = {"reason_zh": "不稳定", "evidence": {"round": O0, "stability": {"stable": False, "spread_pct": 7.5, "max_spread_pct": 5.0}}}
    assert stop_reason(unstable, _state(), "en") == (
        "the five clean O0-INCUMBENT runs are unstable (spread 7.500% > 5.0%); investigate environment noise before starting Stage O")
    assert stop_reason(unstable, _state(), "zh") == "不稳定"
    crash = {"stage": "crash", "message": "exit status 1", "reason_zh": "崩溃"}
    state = _state(("trial_result", {"entry_id": None, "round": O0, "phase": "o0", "ok": False, "failure": crash}))
    assert stop_reason({"reason_zh": "…", "evidence": {"round": O0}}, state, "en") == (
        "O0-INCUMBENT failed, Stage O cannot start: process crash or device error (exit status 1)")
    state = _state(("trial_result", {"entry_id": None, "round": O0, "phase": "o0", "ok": False, "failure": {**crash, "message": ""}}))
    assert stop_reason({"reason_zh": "…", "evidence": {"round": O0}}, state, "en") == (
        "O0-INCUMBENT failed, Stage O cannot start: process crash or device error")


def test_a_recorded_message_is_worded_in_the_readers_language() -> None:
    """Sessions recorded since reasons are codes: the same record gives the Chinese and the English sentence."""
    failure = {"stage": "timeout", "message": "no exit within 15.0 s", "scene": "O3/FAILURE_SCENES/attempt-1"}
    reason = coded("reason.trial_failed", label="split_mode=3", failure=failure_message(failure))
    settled = {"status": "failed", "reason": reason, "evidence": {"round": "O3", "scene": failure["scene"], "stage": "timeout"}}
    assert settled_reason(ENTRY, settled, _state(), "zh") == "split_mode=3 试验失败，恢复原基线：超时/挂起，进程组已被终止（no exit within 15.0 s）"
    assert settled_reason(ENTRY, settled, _state(), "en") == (
        "split_mode=3 trial failed, incumbent restored: timeout/hang, process group terminated (no exit within 15.0 s)")
    assert failure_text(failure, "en") == "timeout/hang, process group terminated (no exit within 15.0 s)"
    stopped = {"reason": coded("reason.o0_unstable", spread_pct=7.5, max_spread_pct=5.0), "evidence": {"round": O0}}
    assert stop_reason(stopped, _state(), "zh") == "O0-INCUMBENT 五次干净运行不稳定（极差 7.500% > 5.0%），先排查环境噪声再开始 Stage O"
    assert stop_reason(stopped, _state(), "en").startswith("the five clean O0-INCUMBENT runs are unstable (spread 7.500% > 5.0%)")


def test_entries_a_stopped_session_skipped_keep_the_form_of_its_stop_record() -> None:
    """An old session's derived files (settled matrix, hand-off) said "skipped" in Chinese: re-deriving them gives
    the same bytes, so `ledger verify` still agrees; a new session records the message."""
    old = skipped_settlement({"reason_zh": "不稳定", "evidence": {}})
    assert old["reason_zh"] == "会话在 O0 阶段停止，本条目未执行" and "reason" not in old
    new = skipped_settlement({"reason": coded("reason.o0_unstable", spread_pct=7.5, max_spread_pct=5.0), "evidence": {}})
    assert new["reason"] == {"code": "reason.skipped_stopped", "params": {}} and "reason_zh" not in new
    assert settled_reason(ENTRY, new, _state(), "en") == "the session stopped at O0; this entry was not run"


@pytest.mark.parametrize(("family", "en", "zh"), [
    # futility is judged on a one-sided bound of 75 % to 25 % confidence: the record's 95 % interval may reach past
    # min_effect_pct (+6.10 %), and "cannot reach 5 % (upper bound +6.10 %)" was said; no bound is named
    ({"reason": "futile", "design": {"min_effect_pct": 5.0}, "estimate": {"ci_high_pct": 6.1}},
     " (stopped as futile: the gain is unlikely to reach min_effect_pct 5%); incumbent restored",
     "（提前判定无望：增益很可能达不到 min_effect_pct 5%），恢复原基线"),
    ({"reason": "below_min_effect", "design": {"min_effect_pct": 5.0}, "estimate": {"ci_high_pct": 4.2}},
     " (a real gain, below min_effect_pct 5%); incumbent restored", "（增益真实存在，但低于 min_effect_pct 5%），恢复原基线"),
    ({"reason": "cap_reached", "design": {"min_effect_pct": 1.0, "cap_candidate_runs": 30}, "runs_used": 30},
     " (still undecided at the cap of 30 candidate runs); incumbent restored", "（到 30 次实验运行的上限仍未判定），恢复原基线"),
    ({"design": {"min_effect_pct": 1.0}}, "candidate runs); incumbent restored", "次运行，均值改善 +3.000%），恢复原基线"),
])
def test_a_family_rejection_says_why(family: dict[str, Any], en: str, zh: str) -> None:
    """A +3 % gain rejected under ``"gate": "family"`` with ``min_effect_pct`` 5 read "was not accepted by the family
    policy (... mean improvement +3.000% ...)" and no more: the record's own reason (futile, below the minimum effect,
    the cap) is said with it; a record without one (older sessions) reads as before."""
    from zh_words import stray_english

    from sk_analytics.messages import render
    from sk_analytics.stage_o.steps import gate_rejection

    gate = {"mean_improvement_pct": 3.0, "family": family, "baseline_run_metrics": [1.0] * 17, "candidate_run_metrics": [1.0] * 3}
    reason = gate_rejection("auto_op_parallel=1", gate)
    assert render(reason, "en").endswith(en), render(reason, "en")
    said = render(reason, "zh")
    assert said.endswith(zh) and stray_english(said.replace("min_effect_pct", "")) == [], said
    # a reason recorded by an older sessions (no ``why`` fact) still renders: a resume re-writes its report
    older = coded("reason.family_rejected", label="auto_op_parallel=1", mean_pct=3.0, base=17, cand=3)
    assert render(older, "en").endswith("over 17 incumbent and 3 candidate runs); incumbent restored")
