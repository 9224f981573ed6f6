"""The exact-value probes behind a session's option matrix (protocol §3).

Only a value the dispatched task lists in ``accepted_option_values`` is
probed: any other is blocked anyway, so it gets a record saying so and no
process (issue 37: a multi-minute probe of a value that cannot be tried is
wasted device time). Every probe process runs with the session's rank count,
timeout and working directory, like the trials after it.

A probe that crashes or times out is the value's outcome, unless the
workload fails in probe mode whatever the value: the first time a probe
process fails, the unchanged SEED config is probed once (the *control
probe*); when that fails too, the cause is the environment (a wrong path, a
missing module), and the sweep stops with exit 3 instead of settling every
value ``blocked``. A probe that writes no evidence at all stops the sweep at
once (:class:`~sk_runner.probe.evidence.ProbeEvidenceMissing`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from sk_analytics.errors import EnvironmentBlocker
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.fingerprint import canonical_json
from sk_analytics.messages import coded, text
from sk_analytics.stage_o.layout import PROBES_DIR
from sk_analytics.stage_o.matrix import protocol_candidates
from sk_analytics.stage_o.probe_cause import NOT_LISTED, probe_cause
from sk_runner.backends.base import Backend, Control
from sk_runner.hosts.base import Hosts
from sk_runner.probe.evidence import CONTRACT_DOC
from sk_runner.sweep.session import SweepSession

Say = Callable[[str], None]
CONTROL_LABEL = "SEED-control"
"""Folder (under ``PROBES/``) of the control probe of the unchanged SEED config."""


def probe_control(session: SweepSession) -> Control:
    """The controls of a sweep's probes: the session's ranks, warm-up and iterations, the policy's timeout."""
    return replace(session.control, timeout_s=session.policy.timeout_s)


def listed_values(session: SweepSession) -> set[tuple[str, str]] | None:
    """(option, canonical value) of every value the task lists as accepted; None without a task (everything is probed)."""
    if session.task is None:
        return None
    return {(v["option"], canonical_json(v["value"])) for v in session.task.get("accepted_option_values", [])}


def not_listed_record(option: str, value: Any) -> dict[str, Any]:
    """The probe record of a value the task does not list: not ready, no process started."""
    evidence: dict[str, Any] = {"reason": "not listed in the task's accepted_option_values; not probed", "wrapper": None,
                                "runtime": None, "task": NOT_LISTED}
    return {"option": option, "value": value, "ready": False, "evidence": {**evidence, "cause": probe_cause(evidence)}}


@dataclass
class ControlProbe:
    """The one probe of the unchanged SEED config, run only after the first failed probe process."""

    session: SweepSession
    backend: Backend
    say: Say
    env: Mapping[str, str] | None = None
    hosts: Hosts | None = None
    lang: str = "zh"
    checked: bool = False

    def require_environment(self, failure: dict[str, Any]) -> None:
        """After a failed probe process (``failure``: its runtime evidence): probe the SEED config once;
        when that fails too, stop with exit 3 naming both failures (never a verdict on the value)."""
        from sk_runner.probe import runtime_check

        if self.checked:
            return
        self.checked = True
        self.say(text("progress.probe_control", self.lang))
        seed_config = load_json_file(self.session.seed_config_path)
        check = runtime_check({}, self.backend, out_dir=self.session.root / PROBES_DIR, config=seed_config,
                              control=probe_control(self.session), seed=self.session.seed, cwd=self.session.backend.workdir,
                              label=CONTROL_LABEL, env=self.env, hosts=self.hosts)
        if check.status == "process_failed":
            raise EnvironmentBlocker(
                f"the workload fails in probe mode whatever the option value: {failure.get('reason')} "
                f"({failure.get('attempt_dir')}), and the unchanged SEED config fails too: {check.reason} ({check.attempt_dir}); "
                f"fix the workload command, its working directory ({check.cwd}) or its environment "
                f"(see {CONTRACT_DOC})")


def probe_candidates(session: SweepSession, backend: Backend, say: Say, env: Mapping[str, str] | None = None,
                     hosts: Hosts | None = None, lang: str = "zh") -> list[dict[str, Any]]:
    """Exact-value probes of every protocol candidate (wrapper + runtime), in one folder, with the child environment
    ``env`` (the device lease's markers; ``hosts``: a multi-host session's, one rank group per host as its trials);
    every record's evidence carries its ``cause`` when it is not ready (:func:`~sk_analytics.stage_o.probe_cause.probe_cause`);
    progress lines in ``lang``."""
    from sk_runner.probe import probe_values

    seed_config = load_json_file(session.seed_config_path)
    by_option: dict[str, list[Any]] = {}
    for cand in protocol_candidates():
        by_option.setdefault(cand.option, []).append(cand.value)
    listed = listed_values(session)
    control = ControlProbe(session, backend, say, env, hosts, lang)
    records: list[dict[str, Any]] = []
    for option, values in by_option.items():
        probed = [v for v in values if listed is None or (option, canonical_json(v)) in listed]
        skipped = len(values) - len(probed)
        say(text("progress.probe_option", lang, option=option, n=len(probed), skipped=coded("progress.probe_skipped", n=skipped) if skipped else ""))
        for value in values:
            if value not in probed:
                records.append(not_listed_record(option, value))
                continue
            # one value at a time: the control probe follows the first failed process at once
            [probe] = probe_values(option, [value], backend, out_dir=session.root / PROBES_DIR, base_config=seed_config,
                                   base_source=session.seed_config_path, control=probe_control(session),
                                   cwd=session.backend.workdir, env=env, hosts=hosts).values
            record = probe.to_record()
            runtime = record["evidence"].get("runtime") or {}
            if runtime.get("status") == "process_failed":
                control.require_environment(runtime)
            if not record["ready"]:
                record["evidence"] = {**record["evidence"], "cause": probe_cause(record["evidence"])}
            records.append(record)
    return records

