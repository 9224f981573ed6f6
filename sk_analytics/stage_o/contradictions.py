"""Decisions of the protocol gate that the statistics contradict (issue 43).

The default path must not end quietly on them. Under the protocol gate a round is *contradicted* when

* ``accepted_not_supported``: the protocol accepted it, but the 95 % confidence interval of the
  improvement (Welch, per-run worst-rank means) does not lie above 0 — the gain may be noise;
* ``rejected_likely_gain``: the protocol rejected it while that interval lies above 0 — likely a
  real gain lost to a check of the protocol.

The hand-off lists them (one machine-readable list), the report puts them in its headline and the
sweep's last console lines name them, with the one command that re-decides the session under the
family policy from the runs already made (:func:`redecide_argv`). Pure: ledger records in, JSON out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sk_analytics.messages import Messages, tables

KINDS = ("accepted_not_supported", "rejected_likely_gain")
SUCCESSOR_SUFFIX = "-family"
TEXT: dict[str, Messages] = tables("contradiction.")
"""The contradiction lines' words (``contradiction.*`` of the catalogs) in each language."""


def _kind(gate: Mapping[str, Any]) -> str | None:
    ci = gate.get("ci_pct")
    above = ci is not None and float(ci[0]) > 0
    if gate.get("accepted") and not above:
        return KINDS[0]
    if not gate.get("accepted") and above:
        return KINDS[1]
    return None


def contradictions(records: Iterable[tuple[str, Mapping[str, Any]]]) -> list[dict[str, Any]]:
    """Every gated round the protocol decided (``gate_mode`` protocol) whose decision its statistics contradict,
    in ledger order: entry, round, kind, the protocol's decision, the estimated improvement and its 95 % CI."""
    found: dict[str, dict[str, Any]] = {}
    for kind, data in records:
        if kind != "gate_result" or (data.get("gate_mode") or "protocol") != "protocol":
            continue
        which = _kind(data)
        if which is None:
            found.pop(str(data["round"]), None)
            continue
        found[str(data["round"])] = {
            "entry_id": data.get("entry_id"), "round": data["round"], "kind": which,
            "protocol_accepted": bool(data.get("accepted")), "improvement_pct": data.get("mean_improvement_pct"),
            "ci95_pct": None if data.get("ci_pct") is None else [float(x) for x in data["ci_pct"]],
            "verdict": data.get("verdict"),
        }
    return list(found.values())


def redecide_argv(session_path: str) -> list[str]:
    """The one command that re-decides a session under the family policy into a linked successor session."""
    return ["sk-run", "sweep", "--redecide", session_path, "--gate", "family", "--session", session_path.rstrip("/") + SUCCESSOR_SUFFIX]


def _ci(ci: list[float] | None) -> str:
    return "—" if ci is None else f"[{ci[0]:+.2f}%, {ci[1]:+.2f}%]"


def lines(found: Sequence[Mapping[str, Any]], argv: Sequence[str] | None, lang: str = "en") -> list[str]:
    """Human lines naming each contradicted entry and the command (empty when there is none)."""
    if not found:
        return []
    t = TEXT["zh" if lang == "zh" else "en"]
    out = [t["list_head"].format(head=t["head"].format(n=len(found)))]
    for c in found:
        imp = "—" if c.get("improvement_pct") is None else f"{float(c['improvement_pct']):+.2f}%"
        out.append("  " + t["line"].format(entry=c["entry_id"], round=c["round"], kind=t[c["kind"]], imp=imp, ci=_ci(c.get("ci95_pct"))))
    if argv:
        out.append("  " + t["command_line"].format(command=t["command"], argv=" ".join(argv)))
    return out


def contradictions_block(records: Iterable[tuple[str, Mapping[str, Any]]], session_path: str) -> dict[str, Any]:
    """The hand-off's ``contradictions``: the list and the re-deciding command (None when the list is empty)."""
    found = contradictions(records)
    return {"entries": found, "redecide_argv": redecide_argv(session_path) if found else None}
