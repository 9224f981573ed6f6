"""Recorded Stage O reasons, rendered for a reader in Chinese or English.

A settlement or stop records its reason as a message id and its facts
(``reason``: :func:`sk_analytics.messages.coded`), worded here in the
reader's language from the catalogs. Sessions recorded before that keep one
Chinese reason (``reason_zh``) per settlement and stop; that text stays their
record. An English report must not print it as is, so for those records
:func:`settled_reason` and :func:`stop_reason` build the message a new record
holds (``reason.*`` of the catalogs) from the structured facts the same records
hold (status, evidence keys, the round's gate record, the stability record, the
failure kind and its runner message). A fact an old record lacks comes from the
protocol's policy where the protocol fixed it (the five incumbent runs); where
the facts a sentence needs are missing altogether (no gate record, a
Chinese-only diagnosis text), the Chinese text is shown and marked as such,
never silently mixed into English prose. Presentation only: nothing here
decides anything.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from sk_analytics.messages import coded, render
from sk_analytics.stage_o.probe_cause import cause_message
from sk_analytics.stage_o.state import Policy, SessionState
from sk_analytics.stage_o.steps import FAILURE_KINDS, failure_message, gate_rejection

_PROTOCOL = Policy()
"""The protocol's policy: the runs an old record does not state (a full trial's, the top-up's) are its runs."""


def recorded_zh(text: str | None) -> str:
    """A Chinese text shown in an English report, marked as the untranslated record."""
    return f"(recorded reason, in Chinese) {text or '—'}"


def _label(entry: Mapping[str, Any]) -> str:
    value = json.dumps(entry["value"], ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return f"{entry['option']}={value}"


def _is_repair(entry_id: str, round_: Any, state: SessionState) -> bool:
    """Whether ``round_`` is the DCCI joint-repair round of the entry."""
    return round_ is not None and state.last(entry_id, "trial_result", round=round_, phase="repair") is not None


def _subject(entry: Mapping[str, Any], round_: Any, state: SessionState) -> dict[str, Any]:
    """What an old record's round tried, as a message: the DCCI combination of a repair round, else the option."""
    if _is_repair(entry["id"], round_, state):
        return coded("label.dcci_combination", partial="")  # old records predate the partial diagnosis
    return coded("label.option", name=_label(entry))


def _top_up_runs(stab: Mapping[str, Any] | None) -> int:
    """The runs a stability re-check read (its record's ``run_metrics``), else the protocol's incumbent runs."""
    runs = (stab or {}).get("run_metrics")
    return len(runs) if isinstance(runs, list) and runs else _PROTOCOL.incumbent_runs


def failure_text(failure: Mapping[str, Any] | None, lang: str) -> str:
    """A trial failure in ``lang``, worded from the catalogs (its kind and the runner's words); an older record's
    Chinese ``reason_zh`` for a Chinese reader, and for an English one where the catalogs do not know its kind."""
    failure = failure or {}
    if "reason_zh" in failure and (lang != "en" or failure.get("stage") not in FAILURE_KINDS):
        return str(failure.get("reason_zh")) if lang != "en" else recorded_zh(failure.get("reason_zh"))
    return render(failure_message(failure), lang)


def _failed_trial(entry_id: str | None, round_: Any, state: SessionState) -> Mapping[str, Any] | None:
    """The last failed trial record of ``round_``."""
    return next((t for t in reversed(state.records(entry_id, "trial_result", round=round_)) if t.get("failure")), None)


def _blocked(entry: Mapping[str, Any], ev: Mapping[str, Any]) -> dict[str, Any] | None:
    """An older blocked settlement's message, from its evidence."""
    label = _label(entry)
    probe = ev.get("probe_evidence")
    if isinstance(probe, Mapping):
        if not probe.get("probed"):
            return coded("reason.not_probed", label=label)
        return coded("reason.not_ready", label=label, cause=cause_message(probe))
    if "prerequisite" in ev:
        return coded("reason.operator_adaptation", label=label)
    if "authorisation" in ev:
        return coded("reason.not_authorised", label=label, authorisation=ev["authorisation"])
    if "max_risk" in ev:
        return coded("reason.risk_not_authorised", label=label, risk=ev.get("risk"), max_risk=ev["max_risk"])
    if "budget_runs" in ev:
        return coded("reason.budget_exhausted", used=ev.get("runs_used"), budget=ev["budget_runs"], needed=_PROTOCOL.incumbent_runs)
    return None


def _failed(entry: Mapping[str, Any], settled: Mapping[str, Any], state: SessionState) -> dict[str, Any] | None:
    """An older failed settlement's message: a stability re-check after the top-up, or the failed trial of its round."""
    ev = settled.get("evidence") or {}
    subject = _subject(entry, ev.get("round"), state)
    stab = ev.get("stability")
    if isinstance(stab, Mapping) and not stab.get("stable", True):
        return coded("reason.unstable_after_top_up", subject=subject, runs=_top_up_runs(stab), spread_pct=stab.get("spread_pct"),
                     max_spread_pct=stab.get("max_spread_pct", 5.0))
    trial = _failed_trial(entry["id"], ev.get("round"), state)
    if trial is None:
        return None
    failure = failure_text(trial["failure"], "en")  # an old record's reason is built for the English reader only
    if trial.get("phase") == "top_up":
        return coded("reason.top_up_failed", subject=subject, runs=_PROTOCOL.incumbent_runs, failure=failure)
    if trial.get("phase") == "repair":
        return coded("reason.dcci_repair_failed", failure=failure)
    code = "reason.dcci_trial_failed" if settled.get("family_rejected") else "reason.trial_failed"
    return coded(code, label=_label(entry), failure=failure)


def _rejected(entry: Mapping[str, Any], settled: Mapping[str, Any], state: SessionState) -> dict[str, Any] | None:
    """An older rejected settlement's message, from its evidence and the gate records of its rounds."""
    ev = settled.get("evidence") or {}
    eid = entry["id"]
    gate = state.last(eid, "gate_result", round=ev.get("round")) if ev.get("round") else None
    if "repair_round" in ev:
        rgate = state.last(eid, "gate_result", round=ev["repair_round"])
        return None if rgate is None else coded("reason.dcci_repair_rejected", mean_pct=rgate.get("mean_improvement_pct"), partial="")
    if "probe" in ev:
        return coded("reason.dcci_probe_failed", partial="")
    if isinstance(ev.get("profile"), Mapping):
        prof = ev["profile"]
        why = prof.get("reason") or recorded_zh(prof.get("reason_zh"))
        return coded("reason.dcci_profile_failed", side=prof.get("side"), attempts=prof.get("attempt"), why=why)
    if "dcci_diff" in ev:
        diff = state.last(eid, "dcci_diff_result")
        why = recorded_zh(diff.get("reason_zh")) if diff and diff.get("reason_zh") else coded("reason.no_significant_child")
        return coded("reason.dcci_no_repair", why=why)
    if gate is None:
        return None
    if settled.get("family_rejected"):
        return coded("reason.dcci_noise", mean_pct=gate.get("mean_improvement_pct"))
    return gate_rejection(_label(entry), gate)


def _accepted(entry: Mapping[str, Any], settled: Mapping[str, Any], state: SessionState) -> dict[str, Any] | None:
    """An older acceptance's message, from the gate record of its round and its stability re-check."""
    ev = settled.get("evidence") or {}
    gate = state.last(entry["id"], "gate_result", round=ev.get("round"))
    if gate is None:
        return None
    return coded("reason.accepted", subject=_subject(entry, ev.get("round"), state), mean_pct=gate.get("mean_improvement_pct"),
                 runs=_top_up_runs(ev.get("stability")))


def settled_reason(entry: Mapping[str, Any], settled: Mapping[str, Any], state: SessionState, lang: str) -> str:
    """The reason of an entry's settlement in ``lang`` (of an older record: its Chinese text for ``zh``)."""
    if isinstance(settled.get("reason"), Mapping):
        return render(settled["reason"], lang)
    if lang != "en":
        return str(settled.get("reason_zh") or "")
    status = settled.get("status")
    message: dict[str, Any] | None = None
    if status == "accepted":
        message = _accepted(entry, settled, state)
    elif status == "blocked":
        message = _blocked(entry, settled.get("evidence") or {})
    elif status == "failed":
        message = _failed(entry, settled, state)
    elif status == "rejected":
        message = _rejected(entry, settled, state)
    elif status == "skipped" and "session_stopped" in (settled.get("evidence") or {}):
        message = coded("reason.skipped_stopped")
    return render(message, lang) if message is not None else recorded_zh(settled.get("reason_zh"))


def stop_reason(stopped: Mapping[str, Any], state: SessionState, lang: str) -> str:
    """Why the session stopped, in ``lang``."""
    if isinstance(stopped.get("reason"), Mapping):
        return render(stopped["reason"], lang)
    if lang != "en":
        return str(stopped.get("reason_zh") or "")
    ev = stopped.get("evidence") or {}
    stab = ev.get("stability")
    if isinstance(stab, Mapping):
        return render(coded("reason.o0_unstable", spread_pct=stab.get("spread_pct"), max_spread_pct=stab.get("max_spread_pct", 5.0)), lang)
    trial = _failed_trial(None, ev.get("round"), state)
    if trial is not None:
        return render(coded("reason.o0_failed", failure=failure_text(trial["failure"], lang)), lang)
    return recorded_zh(stopped.get("reason_zh"))
