"""Pre-run blockers of a matrix entry (protocol §3): the closed list of reasons to settle ``blocked``.

Only these block an entry before it runs: the exact value not probed or not
ready, operator adaptation not declared, authorisation missing, risk above the
user's maximum, budget exhausted. Each comes with a Chinese reason and evidence.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sk_analytics.stage_o.probe_cause import probe_cause
from sk_analytics.stage_o.state import Policy, SessionState
from sk_analytics.stage_o.steps import short_value

RISK_ORDER = {"low": 0, "medium": 1, "high": 2}


def pre_run_blocker(entry: Mapping[str, Any], state: SessionState, policy: Policy) -> tuple[str, dict[str, Any]] | None:
    """The first pre-run blocker of an entry (Chinese reason, evidence), or None."""
    probe = entry["probe_evidence"]
    label = f"{entry['option']}={short_value(entry['value'])}"
    if not probe["probed"]:
        return f"{label} 的精确取值未经过探测（选项探测未执行），不得试验", {"probe_evidence": probe}
    if not probe["ready"]:  # each cause in its own words: not listed, wrapper refused, probe crashed, defaulted, no evidence
        cause = probe_cause(probe)
        return f"{label} 未就绪（探测 ready=false）：{cause['zh']}", {"probe_evidence": probe, "cause": cause}
    if "operator_adaptation" in entry["prerequisites"] and not policy.operator_adaptation:
        return (
            f"{label} 需要算子侧适配，但任务未声明算子适配；封装接受不代表运行时语义正确",
            {"prerequisite": "operator_adaptation", "declared": False},
        )
    if entry["authorisation"] and entry["authorisation"] not in policy.authorisations:
        return (
            f"{label} 需要事件语义评审并由用户授权该风险（{entry['authorisation']}），当前未授权",
            {"authorisation": entry["authorisation"], "authorised": sorted(policy.authorisations)},
        )
    if RISK_ORDER[entry["risk"]] > RISK_ORDER.get(policy.max_risk, 2):
        return (
            f"{label} 的风险等级 {entry['risk']} 未获用户授权（允许的最高风险等级为 {policy.max_risk}）",
            {"risk": entry["risk"], "max_risk": policy.max_risk},
        )
    if policy.budget_runs is not None and policy.budget_runs - state.runs_used < policy.incumbent_runs:
        return (
            f"预算已明确耗尽：已用 {state.runs_used}/{policy.budget_runs} 次干净运行，不足一次完整试验所需的 {policy.incumbent_runs} 次",
            {"budget_runs": policy.budget_runs, "runs_used": state.runs_used},
        )
    return None
