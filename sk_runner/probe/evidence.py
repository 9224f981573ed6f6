"""What one probe process showed about the values it was given, and when that is the environment's fault.

A probe is only evidence when the workload wrote it: ``super_kernel.log``
below its run folder with an option line for every probed option (formats.md
§4/§5). A workload that writes no such file, or a file that names none of the
probed options, has not been told the contract, or its runtime dumps the file
elsewhere: that is the same for every value, so it must stop the session at
the first probe with one line saying which file was expected where
(:class:`ProbeEvidenceMissing`, exit 3), never settle every value ``blocked``
(issue 37). A crash, a timeout or an invalid-and-defaulted line is the value's
own outcome and stays a verdict on that value.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sk_analytics.errors import EnvironmentBlocker
from sk_analytics.stage_o.logged_values import FORMS, kind_of

CONTRACT_DOC = "docs/runner.md#probe-mode"
"""Where the probe mode of the workload contract is written down (named in every stop)."""
SWITCH = "ASCEND_OP_COMPILE_SAVE_KERNEL_META=1"
WORK_PATH_ENV = "ASCEND_WORK_PATH"
"""Where CANN writes what it would otherwise write into the cwd (kernel_meta, …): set to the run folder of
a probe or profile process, which runs in the workload's own working directory, not in that folder."""

MISSING = ("no_evidence", "not_named", "not_comparable")
"""Statuses that say the workload wrote no usable evidence: an environment stop, not a verdict (a value logged in a
form that cannot be compared with the probed one is logged so for every value of its kind)."""


@dataclass(frozen=True)
class Verdict:
    """How one probe process came out: ``status`` and the reason in one sentence."""

    status: str  # accepted | invalid_default | value_differs | process_failed | no_evidence | not_named | not_comparable
    reason: str


def judge(
    options: Mapping[str, Any],
    *,
    failed: str | None,
    stderr: str,
    logs: Sequence[str],
    unnamed: Sequence[str],
    invalid_lines: Sequence[str],
    set_lines: Sequence[str],
    differing_lines: Sequence[str] = (),
    uncomparable_lines: Sequence[str] = (),
) -> Verdict:
    """The verdict of a probe process. ``failed``: how it failed (``exit 2``, ``timed out``) or None when it
    exited 0; ``stderr``: the note of its last stderr lines; ``logs``: the super_kernel.log files found;
    ``unnamed``: the probed options no option line names; ``differing_lines``: set-value lines of another value
    than the probed one (the exact value did not take effect, formats.md §5); ``uncomparable_lines``: set-value lines
    whose value cannot be compared with the probed one (never taken for a confirmation)."""
    if failed is not None:
        return Verdict("process_failed", f"probe process failed ({failed}){stderr}")
    if not logs:
        return Verdict("no_evidence", "no super_kernel.log written: the runtime use of the value cannot be confirmed")
    if invalid_lines:
        return Verdict("invalid_default", f"runtime reports the value as invalid and uses the default: {invalid_lines[0]}")
    if differing_lines:
        return Verdict("value_differs", f"the runtime logged another value than the probed one: {differing_lines[0]}")
    if uncomparable_lines:
        return Verdict("not_comparable", f"super_kernel.log logs a value that cannot be compared with the probed one: {uncomparable_lines[0]}")
    if unnamed:
        return Verdict("not_named", f"super_kernel.log names no option {', '.join(unnamed)}: the runtime use of the value cannot be confirmed")
    seen = "set-value line found" if set_lines else "no invalid-value line"
    return Verdict("accepted", f"wrapper accepted and runtime used the value ({seen})")


def _value_text(options: Mapping[str, Any]) -> str:
    import json

    return ", ".join(f"{name}={json.dumps(value, ensure_ascii=False, separators=(',', ':'))}" for name, value in options.items())


class ProbeEvidenceMissing(EnvironmentBlocker):
    """The probe process wrote no ``super_kernel.log`` (or none naming the option): the workload does not
    follow the probe mode of the contract. Exit 3, at the first probe, one line."""

    def __init__(self, status: str, options: Mapping[str, Any], run_dir: Path, logs: Sequence[str], lines: Sequence[str] = (),
                 unnamed: Sequence[str] = ()) -> None:
        what = f"probe of {_value_text(options)}" if options else "probe of the unchanged config"
        if status == "not_comparable":  # lines: the set-value lines whose value cannot be compared
            forms = "; ".join(f"{name} as {FORMS[kind_of(name)]}" for name in options)  # words, not the registry's kind codes
            text = (f"{what}: super_kernel.log below {run_dir} logs a value that cannot be compared with the probed one "
                    f"({lines[0] if lines else '?'}); a value can be compared when it is logged {forms}")
        elif status == "no_evidence":
            text = (f"{what}: no super_kernel.log below {run_dir}; a probe process ({SWITCH}) must write super_kernel.log "
                    "below its run folder $SK_RUN_DIR with a line 'OptionName: <name>, set value: <value>' for every SK option it set")
        else:
            missing = list(unnamed) or list(options)  # unnamed: the options (or a struct's fields) no line names
            example = next(iter(missing), "<name>")
            text = (f"{what}: super_kernel.log below {run_dir} ({', '.join(logs)}) names no option {', '.join(missing)}; "
                    f"it needs a line 'OptionName: {example}, set value: <value>' for every probed option")
        super().__init__(f"{text} (see {CONTRACT_DOC})")
        self.status = status
