"""Why an exact value is not ready: the one cause of a ``blocked`` matrix entry, as a message (``probe_cause.*``).

A probe record (``sk-run probe --json`` records, ``PROBES/probes.json``, a
matrix entry's ``probe_evidence.evidence``) says what happened to one exact
value: the task did not list it, the wrapper refused it, the probe process
crashed or timed out, the runtime reported it invalid and defaulted, or no
evidence was written. Each of these is a different cause with a different
remedy, so each gets its own words (issue 37: one sentence used to stand for
all of them). Pure: it reads the record, nothing else.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

from sk_analytics.messages import coded, render

NOT_LISTED = "not_listed"
"""Marker a sweep writes as the record's ``task`` when the dispatched task does not list the value."""

STDERR_LINES = 3
"""How many of the probe process's last stderr lines a cause quotes."""


class ProbeCause(TypedDict):
    """The cause of a value that is not ready: ``kind`` plus the sentence in both languages."""

    kind: str
    zh: str
    en: str


def _lines(value: Any) -> list[str]:
    if isinstance(value, str):
        return [line for line in value.splitlines() if line.strip()][-STDERR_LINES:]
    if isinstance(value, Sequence):
        return [str(line) for line in value if str(line).strip()][-STDERR_LINES:]
    return []


def _how(process: Mapping[str, Any] | None) -> dict[str, Any]:
    """How the probe process ended (a message)."""
    process = process or {}
    if process.get("timed_out"):
        return coded("probe_cause.timed_out")
    if process.get("signal") is not None:
        return coded("probe_cause.killed", name=process.get("signal_name") or f"signal {process['signal']}")
    return coded("probe_cause.exited", code=process.get("exit_code"))


def cause_message(probe_evidence: Mapping[str, Any] | None) -> dict[str, Any]:
    """The cause of a not-ready value as a message (``probe_cause.<kind>`` and its facts), from a matrix entry's
    ``probe_evidence`` (``{probed, ready, evidence}``) or a probe record's ``evidence`` itself."""
    probe = dict(probe_evidence or {})
    if "probed" in probe and not probe.get("probed"):
        return coded("probe_cause.not_probed")
    found = probe.get("evidence") if "probed" in probe else probe
    evidence: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    if evidence.get("task") is not None:
        return coded(f"probe_cause.{NOT_LISTED}")
    wrapper: Mapping[str, Any] = evidence["wrapper"] if isinstance(evidence.get("wrapper"), Mapping) else {}
    if wrapper and not wrapper.get("accepted", True):
        return coded("probe_cause.wrapper_refused", reason=str(wrapper.get("reason") or ""))
    runtime: Mapping[str, Any] = evidence["runtime"] if isinstance(evidence.get("runtime"), Mapping) else {}
    status = runtime.get("status")
    if status == "process_failed":
        tail = _lines(runtime.get("stderr_tail"))
        return coded("probe_cause.probe_crashed", how=_how(runtime.get("process")),
                     tail=coded("probe_cause.stderr_tail", lines=" | ".join(tail)) if tail else coded("probe_cause.stderr_empty"))
    if status == "invalid_default":
        return coded("probe_cause.invalid_default", line=(runtime.get("invalid_lines") or [""])[0])
    if status == "value_differs":
        return coded("probe_cause.value_differs", line=(runtime.get("differing_lines") or [""])[0])
    if status in ("no_evidence", "not_named"):
        return coded("probe_cause.no_evidence")
    return coded("probe_cause.unknown")


def probe_cause(probe_evidence: Mapping[str, Any] | None) -> ProbeCause:
    """:func:`cause_message` worded in both languages, as a probe record's ``cause`` keeps it (``PROBES/probes.json``)."""
    message = cause_message(probe_evidence)
    return {"kind": message["code"].split(".", 1)[1], "zh": render(message, "zh"), "en": render(message, "en")}
