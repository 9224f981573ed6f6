"""Pre-run blockers of a matrix entry (protocol §3): the closed list of reasons to settle ``blocked``.

Only these block an entry before it runs: the exact value not probed or not
ready, operator adaptation not declared, authorisation missing, risk above the
user's maximum, budget exhausted. Each comes with its reason (a message id and facts) and evidence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sk_analytics.messages import coded
from sk_analytics.stage_o.probe_cause import cause_message
from sk_analytics.stage_o.state import Policy, SessionState
from sk_analytics.stage_o.steps import short_value

RISK_ORDER = {"low": 0, "medium": 1, "high": 2}


def pre_run_blocker(entry: Mapping[str, Any], state: SessionState, policy: Policy) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """The first pre-run blocker of an entry (reason as a recorded message, evidence), or None."""
    probe = entry["probe_evidence"]
    label = f"{entry['option']}={short_value(entry['value'])}"
    if not probe["probed"]:
        return coded("reason.not_probed", label=label), {"probe_evidence": probe}
    if not probe["ready"]:  # each cause in its own words: not listed, wrapper refused, probe crashed, defaulted, no evidence
        cause = cause_message(probe)  # the evidence names its kind too (docs/sweep.md: evidence.cause {kind, code, params})
        return coded("reason.not_ready", label=label, cause=cause), {"probe_evidence": probe, "cause": {"kind": cause["code"].split(".", 1)[1], **cause}}
    if "operator_adaptation" in entry["prerequisites"] and not policy.operator_adaptation:
        return (
            coded("reason.operator_adaptation", label=label),
            {"prerequisite": "operator_adaptation", "declared": False},
        )
    if entry["authorisation"] and entry["authorisation"] not in policy.authorisations:
        return (
            coded("reason.not_authorised", label=label, authorisation=entry["authorisation"]),
            {"authorisation": entry["authorisation"], "authorised": sorted(policy.authorisations)},
        )
    if RISK_ORDER[entry["risk"]] > RISK_ORDER.get(policy.max_risk, 2):
        return (
            coded("reason.risk_not_authorised", label=label, risk=entry["risk"], max_risk=policy.max_risk),
            {"risk": entry["risk"], "max_risk": policy.max_risk},
        )
    if policy.budget_runs is not None and policy.budget_runs - state.runs_used < policy.incumbent_runs:
        return (
            coded("reason.budget_exhausted", used=state.runs_used, budget=policy.budget_runs, needed=policy.incumbent_runs),
            {"budget_runs": policy.budget_runs, "runs_used": state.runs_used},
        )
    return None
