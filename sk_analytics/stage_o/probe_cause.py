"""Why an exact value is not ready: the one cause of a ``blocked`` matrix entry, in Chinese and English.

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


def _how(process: Mapping[str, Any] | None) -> tuple[str, str]:
    """How the probe process ended (zh, en)."""
    process = process or {}
    if process.get("timed_out"):
        return "超时被终止", "timed out and was killed"
    if process.get("signal") is not None:
        name = process.get("signal_name") or f"signal {process['signal']}"
        return f"被信号 {name} 终止", f"killed by {name}"
    return f"退出码 {process.get('exit_code')}", f"exit {process.get('exit_code')}"


def probe_cause(probe_evidence: Mapping[str, Any] | None) -> ProbeCause:
    """The cause of a not-ready value from a matrix entry's ``probe_evidence``
    (``{probed, ready, evidence}``) or a probe record's ``evidence`` itself."""
    probe = dict(probe_evidence or {})
    if "probed" in probe and not probe.get("probed"):
        return {"kind": "not_probed", "zh": "该精确取值未经过探测（选项探测未执行）",
                "en": "the exact value was never probed (option probe not run)"}
    evidence = probe.get("evidence") if "probed" in probe else probe
    evidence = evidence if isinstance(evidence, Mapping) else {}
    if evidence.get("task") is not None:
        return {"kind": NOT_LISTED,
                "zh": "调度任务的 accepted_option_values 未列出该取值（未探测，未启动任何进程）",
                "en": "not listed in the task's accepted_option_values (not probed, no process started)"}
    wrapper = evidence.get("wrapper") if isinstance(evidence.get("wrapper"), Mapping) else {}
    if wrapper and not wrapper.get("accepted", True):
        reason = str(wrapper.get("reason") or "")
        return {"kind": "wrapper_refused", "zh": f"封装拒绝该精确取值：{reason}", "en": f"the wrapper refuses the exact value: {reason}"}
    runtime = evidence.get("runtime")
    runtime = runtime if isinstance(runtime, Mapping) else {}
    status = runtime.get("status")
    if status == "process_failed":
        zh, en = _how(runtime.get("process"))
        tail = _lines(runtime.get("stderr_tail"))
        return {"kind": "probe_crashed",
                "zh": f"探测进程失败（{zh}）" + (f"；stderr 末行：{' | '.join(tail)}" if tail else "；stderr 为空"),
                "en": f"the probe process failed ({en})" + (f"; last stderr: {' | '.join(tail)}" if tail else "; stderr empty")}
    if status == "invalid_default":
        line = (runtime.get("invalid_lines") or [""])[0]
        return {"kind": "invalid_default", "zh": f"运行时报告该取值无效并回退默认值：{line}",
                "en": f"the runtime reports the value invalid and uses the default: {line}"}
    if status in ("no_evidence", "not_named"):
        return {"kind": "no_evidence", "zh": "探测进程未写出确认该取值的 super_kernel.log 选项行",
                "en": "the probe process wrote no super_kernel.log option line confirming the value"}
    return {"kind": "unknown", "zh": "探测证据未说明原因", "en": "the probe evidence names no cause"}
