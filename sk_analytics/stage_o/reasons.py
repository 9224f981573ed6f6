"""Recorded Stage O reasons, rendered for a reader in Chinese or English.

A settlement or stop records its reason as a message id and its facts
(``reason``: :func:`sk_analytics.messages.coded`), worded here in the
reader's language from the catalogs. Sessions recorded before that keep one
Chinese reason (``reason_zh``) per settlement and stop; that text stays their
record. An English report must not print it as is, so for those records
:func:`settled_reason` and :func:`stop_reason` rebuild an English sentence
from the structured facts the same records hold (status, evidence keys, the
round's gate improvement and failed checks, the failure kind and its English
runner message). Where an old reason carries no structured facts (a
Chinese-only diagnosis text), the Chinese text is shown and marked as such,
never silently mixed into English prose. Presentation only: nothing here
decides anything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sk_analytics.messages import render, text
from sk_analytics.stage_o.probe_cause import cause_message
from sk_analytics.stage_o.state import SessionState
from sk_analytics.stage_o.steps import check_names, failure_message

FAILURE_EN: dict[str, str] = {
    "crash": "process crash or device error",
    "timeout": "timeout/hang, process group terminated",
    "wrong_output": "correctness check failed (wrong output)",
    "bad_logs": "logs missing or unparsable",
    "invalid_value": "the runtime reported the value invalid and fell back to the default",
}


def recorded_zh(text: str | None) -> str:
    """A Chinese text shown in an English report, marked as the untranslated record."""
    return f"(recorded reason, in Chinese) {text or '—'}"


def _pct(value: Any, *, sign: bool = True) -> str:
    if value is None:
        return "?"
    return f"{float(value):+.3f}%" if sign else f"{float(value):.3f}%"


def _label(entry: Mapping[str, Any]) -> str:
    value = json.dumps(entry["value"], ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return f"{entry['option']}={value}"


_COMBINATION = "DCCI disable+before+after (one indivisible combination)"


def _is_repair(entry_id: str, round_: Any, state: SessionState) -> bool:
    """Whether ``round_`` is the DCCI joint-repair round of the entry."""
    return round_ is not None and state.last(entry_id, "trial_result", round=round_, phase="repair") is not None


def failure_text(failure: Mapping[str, Any] | None, lang: str) -> str:
    """A trial failure in ``lang``: one recorded as facts (its kind and the runner's words) worded from the catalogs;
    an older record's Chinese ``reason_zh``, or in English its kind plus the runner's English message."""
    failure = failure or {}
    if "reason_zh" not in failure:  # recorded as facts: the kind and the runner's own words
        return render(failure_message(failure), lang)
    if lang != "en":
        return str(failure.get("reason_zh"))
    kind = failure.get("stage")
    if kind not in FAILURE_EN:
        return recorded_zh(failure.get("reason_zh"))
    message = failure.get("message")
    return FAILURE_EN[kind] + (f" ({message})" if message else "")


def _gate_text(gate: Mapping[str, Any] | None) -> str:
    """``mean improvement +x%; failed: P90, stddev`` of a gate record."""
    if gate is None:
        return "mean improvement ?"
    failed = check_names(gate.get("checks"), "en")
    return f"mean improvement {_pct(gate.get('mean_improvement_pct'))}" + (f"; failed checks: {', '.join(failed)}" if failed else "")


def _blocked_en(entry: Mapping[str, Any], ev: Mapping[str, Any]) -> str | None:
    """An older blocked settlement in English, from its evidence: the message a new one records (``reason.*``)."""
    label = _label(entry)
    probe = ev.get("probe_evidence")
    if isinstance(probe, Mapping):
        if not probe.get("probed"):
            return text("reason.not_probed", "en", label=label)
        return text("reason.not_ready", "en", label=label, cause=cause_message(probe))
    if "prerequisite" in ev:
        return text("reason.operator_adaptation", "en", label=label)
    if "authorisation" in ev:
        return text("reason.not_authorised", "en", label=label, authorisation=ev["authorisation"])
    if "max_risk" in ev:
        return text("reason.risk_not_authorised", "en", label=label, risk=ev.get("risk"), max_risk=ev["max_risk"])
    if "budget_runs" in ev:  # the record does not say how many runs a trial needed
        return f"budget explicitly exhausted: {ev.get('runs_used')}/{ev['budget_runs']} clean runs used, not enough for a full trial"
    return None


def _failed_en(entry: Mapping[str, Any], settled: Mapping[str, Any], state: SessionState) -> str | None:
    ev = settled.get("evidence") or {}
    label = _COMBINATION if _is_repair(entry["id"], ev.get("round"), state) else _label(entry)
    stab = ev.get("stability")
    if isinstance(stab, Mapping) and not stab.get("stable", True):
        return (f"{label}: stability re-check after the top-up to five runs failed (spread {_pct(stab.get('spread_pct'), sign=False)}"
                f" > {stab.get('max_spread_pct', 5.0)}%); acceptance withdrawn, incumbent restored")
    trial = next((t for t in reversed(state.records(entry["id"], "trial_result", round=ev.get("round"))) if t.get("failure")), None)
    if trial is None:
        return None
    what = failure_text(trial["failure"], "en")
    if trial.get("phase") == "top_up":
        return f"{label} passed the gate but failed while topping up to five runs; acceptance withdrawn: {what}"
    if trial.get("phase") == "repair":
        return f"DCCI joint repair trial failed; O0 restored, DCCI family rejected: {what}"
    family = "; whole DCCI family rejected" if settled.get("family_rejected") else ""
    return f"{label} trial failed, incumbent restored{family}: {what}"


def _rejected_en(entry: Mapping[str, Any], settled: Mapping[str, Any], state: SessionState) -> str | None:
    ev = settled.get("evidence") or {}
    eid = entry["id"]
    gate = state.last(eid, "gate_result", round=ev.get("round")) if ev.get("round") else None
    if "repair_round" in ev:
        rgate = state.last(eid, "gate_result", round=ev["repair_round"])
        return (f"DCCI joint repair did not beat O0 under the full gate ({_gate_text(rgate)}); recovering relative to disable-all "
                "is not acceptance; DCCI family rejected, O0 restored, child list not grown")
    if "probe" in ev:
        return "the exact regex lists of the joint repair failed the same-environment probe (ready=false); no repair run, DCCI family rejected"
    if isinstance(ev.get("profile"), Mapping):
        prof = ev["profile"]
        why = prof.get("reason") or recorded_zh(prof.get("reason_zh"))
        return (f"disable-all regresses repeatably, but the {prof.get('side')} diagnostic collection failed the artifact contract in "
                f"{prof.get('attempt')} attempt(s) ({why}); attribution stopped, no child regex, no repair, DCCI family rejected")
    if "dcci_diff" in ev:
        diff = state.last(eid, "dcci_diff_result")
        why = recorded_zh(diff.get("reason_zh")) if diff and diff.get("reason_zh") else "no significantly slower child"
        return f"disable-all regresses repeatably, but dcci-diff proposed no repair ({why}); DCCI family rejected, O0 kept"
    if settled.get("family_rejected"):
        return (f"DCCI disable-all shows no gain within the noise band ({_gate_text(gate)}); whole DCCI family rejected, "
                "O0 kept, no before/after trials")
    if gate is None:
        return None
    return f"{_label(entry)} did not pass the gate ({_gate_text(gate)}); incumbent restored"


def settled_reason(entry: Mapping[str, Any], settled: Mapping[str, Any], state: SessionState, lang: str) -> str:
    """The reason of an entry's settlement in ``lang`` (of an older record: its Chinese text for ``zh``)."""
    if isinstance(settled.get("reason"), Mapping):
        return render(settled["reason"], lang)
    if lang != "en":
        return str(settled.get("reason_zh") or "")
    status = settled.get("status")
    ev = settled.get("evidence") or {}
    text: str | None = None
    if status == "accepted":
        gate = state.last(entry["id"], "gate_result", round=ev.get("round"))
        stab = ev.get("stability") or {}
        label = _COMBINATION if _is_repair(entry["id"], ev.get("round"), state) else _label(entry)
        text = (f"{label}: gate passed ({_gate_text(gate)}), topped up to five runs and stable "
                f"(spread {_pct(stab.get('spread_pct'), sign=False)}); new incumbent")
    elif status == "blocked":
        text = _blocked_en(entry, ev)
    elif status == "failed":
        text = _failed_en(entry, settled, state)
    elif status == "rejected":
        text = _rejected_en(entry, settled, state)
    elif status == "skipped" and "session_stopped" in ev:
        text = "the session stopped at O0; this entry was not run"
    return text if text is not None else recorded_zh(settled.get("reason_zh"))


def stop_reason(stopped: Mapping[str, Any], state: SessionState, lang: str) -> str:
    """Why the session stopped, in ``lang``."""
    if isinstance(stopped.get("reason"), Mapping):
        return render(stopped["reason"], lang)
    if lang != "en":
        return str(stopped.get("reason_zh") or "")
    ev = stopped.get("evidence") or {}
    stab = ev.get("stability")
    if isinstance(stab, Mapping):
        return (f"the five clean O0-INCUMBENT runs are unstable (spread {_pct(stab.get('spread_pct'), sign=False)} > "
                f"{stab.get('max_spread_pct', 5.0)}%); investigate environment noise before starting Stage O")
    trial = next((t for t in reversed(state.records(None, "trial_result", round=ev.get("round"))) if t.get("failure")), None)
    if trial is not None:
        return f"O0-INCUMBENT failed, Stage O cannot start: {failure_text(trial['failure'], 'en')}"
    return recorded_zh(stopped.get("reason_zh"))
