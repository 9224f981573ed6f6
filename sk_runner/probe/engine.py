"""Exact-value probe: does the wrapper accept the value, and does the runtime use it?

Two checks, both required for ``ready`` (protocol §3, formats.md §4–5):

1. the backend's wrapper check accepts the exact value (shape check of the
   registry on ``sim``/``command``; ``NPUGraph._validate_options`` on ``npu``);
2. one short workload process with the SK metadata dump switched on, whose
   ``super_kernel.log`` must not report the option as
   ``set value is invalid … the process will use default value`` (the runtime
   silently falling back to the default is a probe failure), nor log another
   value than the probed one (``set value: 3`` for a probed 2), compared for every
   kind of the registry (:mod:`sk_analytics.stage_o.logged_values`).

A value the wrapper rejects never starts a process. Each runtime probe gets its
own never-reused folder ``<out>/<option>/value-<sha8>/attempt-<n>/``.

An option may be named by the runtime (the registry, ``super_kernel.log``) or
by torch_npu (``opt_extend``); records use the runtime's name, the probe
process's config is written as the backend's workload takes it
(:meth:`~sk_runner.backends.base.Backend.workload_config`: torch_npu's names on
``npu``) and ``super_kernel.log`` lines are matched under either name.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
from jsonpointer import JsonPointer

from sk_analytics.errors import InputError
from sk_analytics.files.atomic import write_json
from sk_analytics.fingerprint import fingerprint, sha256_file
from sk_analytics.ingest.super_kernel_log import parse_super_kernel_log
from sk_analytics.stage_o.logged_values import same_value
from sk_analytics.stage_o.options import both_names, options_root, runtime_name, spec_of
from sk_runner.backends.base import Backend, Control, RunRequest, WrapperVerdict
from sk_runner.config import scrub_env
from sk_runner.hosts.base import Hosts, launch
from sk_runner.probe.evidence import MISSING, WORK_PATH_ENV, ProbeEvidenceMissing, judge
from sk_runner.process import ProcessResult
from sk_runner.process.attempts import new_attempt_dir
from sk_runner.process.stderr_tail import last_lines, stderr_note

#: The switch that makes the runtime write super_kernel.log (formats §4).
METADATA_ENV = {"ASCEND_OP_COMPILE_SAVE_KERNEL_META": "1"}
PROBE_CONTROL = Control(ranks=1, iterations=12, warmup=2, timeout_s=120.0)
"""Controls of ``sk-run probe`` (``--ranks`` sets the rank count); a trial's probe uses the trial's controls and
a sweep's probes the session's ranks and timeout."""
MINIMAL_CONFIG: dict[str, Any] = {"static_kernel_compile": True, "super_kernel_optimize": True, "super_kernel_optimize_options": {}}


@dataclass
class RuntimeCheck:
    """What the probe process showed about the value."""

    status: str  # accepted | invalid_default | value_differs | process_failed | no_evidence | not_named | not_comparable (.evidence)
    reason: str
    attempt_dir: Path
    argv: list[str]
    config_path: Path
    stdout_path: Path
    stderr_path: Path
    process: ProcessResult | None
    contract_env: dict[str, str] = field(default_factory=dict)
    logs: list[str] = field(default_factory=list)
    option_lines: list[str] = field(default_factory=list)
    invalid_lines: list[str] = field(default_factory=list)
    differing_lines: list[str] = field(default_factory=list)
    uncomparable_lines: list[str] = field(default_factory=list)
    cwd: Path | None = None
    stderr_tail: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "reason": self.reason,
            "attempt_dir": str(self.attempt_dir),
            "argv": self.argv,
            "cwd": None if self.cwd is None else str(self.cwd),
            "config_path": str(self.config_path),
            "contract_env": self.contract_env,
            "stderr_tail": self.stderr_tail,
            "process": None if self.process is None else self.process.to_json(),
            "super_kernel_logs": self.logs,
            "option_lines": self.option_lines,
            "invalid_lines": self.invalid_lines,
            "differing_lines": self.differing_lines,
            "uncomparable_lines": self.uncomparable_lines,
        }


@dataclass
class ValueProbe:
    """The probe of one exact value."""

    option: str
    value: Any
    wrapper: WrapperVerdict
    runtime: RuntimeCheck | None

    @property
    def ready(self) -> bool:
        return self.wrapper.accepted and self.runtime is not None and self.runtime.status == "accepted"

    @property
    def reason(self) -> str:
        if not self.wrapper.accepted:
            return self.wrapper.reason
        assert self.runtime is not None
        return self.runtime.reason

    def to_record(self) -> dict[str, Any]:
        """A ``ProbeRecord`` of the option matrix: {option, value, ready, evidence}."""
        return {
            "option": self.option,
            "value": self.value,
            "ready": self.ready,
            "evidence": {
                "reason": self.reason,
                "wrapper": self.wrapper.to_json(),
                "runtime": None if self.runtime is None else self.runtime.to_json(),
            },
        }


@dataclass
class ProbeResult:
    """Probe of one option over one or more exact values."""

    option: str
    backend: str
    values: list[ValueProbe]

    @property
    def ready(self) -> bool:
        return bool(self.values) and all(v.ready for v in self.values)

    @property
    def accepted_values(self) -> list[Any]:
        return [v.value for v in self.values if v.ready]

    @property
    def rejected_values(self) -> list[Any]:
        return [v.value for v in self.values if not v.ready]

    def to_json(self) -> dict[str, Any]:
        return {
            "option": self.option,
            "backend": self.backend,
            "ready": self.ready,
            "accepted_values": self.accepted_values,
            "rejected_values": self.rejected_values,
            "records": [v.to_record() for v in self.values],
        }


def probe_config(option: str, value: Any, base_config: Mapping[str, Any] | None, *, source: str | Path | None = None) -> dict[str, Any]:
    """``base_config`` (or a minimal torch.compile config) with only ``option`` set to ``value``
    (``source`` names the base config in errors)."""
    config = copy.deepcopy(dict(base_config if base_config is not None else MINIMAL_CONFIG))
    root = options_root(config)
    node: Any = config
    for part in JsonPointer(root).parts:
        node = node.setdefault(part, {}) if isinstance(node, dict) else None
    if not isinstance(node, dict):
        raise InputError(source, f"the options at {root} are not an object", expected="a JSON object of SK options")
    node[option] = copy.deepcopy(value)
    return config


def _attempt_dir(out_dir: Path, options: Mapping[str, Any]) -> Path:
    """A new ``<out>/<options>/value-<sha8>/attempt-<n>`` (a probe never reuses a folder)."""
    return new_attempt_dir(out_dir / "+".join(sorted(options)) / f"value-{fingerprint(dict(options))[:8]}")[1]


@dataclass(frozen=True)
class OptionLines:
    """What the super_kernel.log files say of the probed options (:func:`option_lines`)."""

    set_lines: list[str]
    invalid: list[str]
    differing: list[str]
    """Set-value lines of another value than the probed one (``split_mode, set value: 3`` for a probed 2)."""
    unnamed: list[str]
    uncomparable: list[str] = field(default_factory=list)
    """Set-value lines whose value cannot be compared with the probed one (:func:`~sk_analytics.stage_o.logged_values.same_value`)."""


def option_lines(logs: Sequence[Path], options: Mapping[str, Any], root: Path) -> OptionLines:
    """The set lines, invalid-and-defaulted lines, set lines of another value than the probed one, set lines whose
    value cannot be compared, and the options no line names, for ``options`` (name -> probed value) in the
    super_kernel.log files. Every kind of the registry is compared, in its normal form
    (:mod:`sk_analytics.stage_o.logged_values`): a handful of lines, each read as JSON or text.

    A struct option is logged field by field (``aggressive_opt_strategies.task_breaker_bypass``): such a
    line belongs to the option before the first dot. A field probed at another value than its registry default that
    no line names (and no line of the whole struct) is unnamed as ``<option>.<field>``: the other fields' lines, at
    their defaults, confirm nothing of it (a runtime that does not know the field logs only the ones it knows)."""
    frames = [parse_super_kernel_log(path, root=root).frame for path in logs]
    probed = {name: option for option in options for name in both_names(option)}  # the runtime may log either name
    markers = pl.concat(frames).with_columns(pl.col("option_name").str.split(".").list.first().alias("option")) \
        .filter(pl.col("option").is_in(list(probed)))
    set_rows = markers.filter(pl.col("kind") == "option_set")
    compared = [(row["text"], same_value(probed[row["option"]], options[probed[row["option"]]], row["option_name"], row["value_text"]))
                for row in set_rows.select("text", "option", "option_name", "value_text").iter_rows(named=True)]
    seen, named = set(markers["option"].to_list()), set(markers["option_name"].to_list())
    unnamed = [option for option in options if not seen & set(both_names(option))]
    unnamed += [f"{option}.{field}" for option in options if option not in unnamed for field in _changed_fields(option, options[option])
                if not named & {n for name in both_names(option) for n in (name, f"{name}.{field}")}]
    return OptionLines(set_rows["text"].to_list(), markers.filter(pl.col("kind") == "option_invalid")["text"].to_list(),
                       [line for line, same in compared if same is False], unnamed, [line for line, same in compared if same is None])


def _changed_fields(option: str, value: Any) -> list[str]:
    """The fields of a struct ``option``'s probed ``value`` at another value than the registry default (none for any
    other kind): what a line must name for the probe to confirm them."""
    spec = spec_of(option)
    if spec is None or spec.kind != "struct" or not isinstance(value, Mapping):
        return []
    return [field for field, number in value.items() if number != spec.default.get(field)]


def probe_env(run_dir: Path) -> dict[str, str]:
    """The switches of a probe process: the SK metadata dump on, CANN's work path in the run folder."""
    return {**METADATA_ENV, WORK_PATH_ENV: str(run_dir)}


def runtime_check(
    options: Mapping[str, Any],
    backend: Backend,
    *,
    out_dir: Path,
    config: Mapping[str, Any],
    control: Control = PROBE_CONTROL,
    seed: int = 0,
    env: Mapping[str, str] | None = None,
    hosts: Hosts | None = None,
    cwd: Path | None = None,
    label: str | None = None,
) -> RuntimeCheck:
    """Run one metadata-dumping workload process on ``config`` and check that the
    runtime used each of ``options`` (name -> exact value) without falling back
    (``hosts``: a multi-host session's, one rank group per host as in its clean runs).

    The process runs in ``cwd`` (default: ours), the working directory of every
    process of the workload, so a relative script path works as in its clean runs.
    No ``super_kernel.log`` below its run folder, or none naming an option, raises
    :class:`~sk_runner.probe.evidence.ProbeEvidenceMissing` (exit 3) after the
    attempt's ``probe.json`` is written. ``label`` names the attempt folder of a
    probe without options (default: the options' names)."""
    attempt = _attempt_dir(out_dir, options) if label is None else new_attempt_dir(out_dir / label)[1]
    config_path = attempt / "config.json"
    write_json(config_path, backend.workload_config(config))
    run_dir = attempt / "run"
    run_dir.mkdir()
    request = RunRequest(config_path.resolve(), run_dir.resolve(), seed, control)
    argv = backend.probe_argv(request)
    switches = probe_env(request.run_dir)
    child_env = {**scrub_env(os.environ if env is None else env), **request.contract_env(), **switches}
    stdout_path, stderr_path = attempt / "stdout.txt", attempt / "stderr.txt"
    workdir = (cwd or Path.cwd()).resolve()
    result = launch(hosts, argv, cwd=workdir, local_env=child_env, contract_env={**request.contract_env(), **switches},
                    stdout_path=stdout_path, stderr_path=stderr_path, timeout_s=control.timeout_s)
    logs = sorted(run_dir.rglob("super_kernel.log"))
    check = RuntimeCheck("accepted", "", attempt, argv, config_path, stdout_path, stderr_path, result,
                         {**request.contract_env(), **switches}, [p.relative_to(attempt).as_posix() for p in logs], cwd=workdir)
    failed: str | None = None
    unnamed: list[str] = []
    if not result.ok:
        failed = "timed out" if result.timed_out else f"exit {result.exit_code}" if result.signal is None else str(result.signal_name)
        check.stderr_tail = last_lines(stderr_path)
    elif logs:
        found = option_lines(logs, options, attempt)
        check.option_lines, check.invalid_lines, check.differing_lines, check.uncomparable_lines, unnamed = \
            found.set_lines, found.invalid, found.differing, found.uncomparable, found.unnamed
    verdict = judge(options, failed=failed, stderr=stderr_note(stderr_path) if failed else "", logs=check.logs,
                    unnamed=unnamed, invalid_lines=check.invalid_lines, set_lines=check.option_lines,
                    differing_lines=check.differing_lines, uncomparable_lines=check.uncomparable_lines)
    check.status, check.reason = verdict.status, verdict.reason
    write_json(attempt / "probe.json", {"options": dict(options), "runtime": check.to_json(), "config_sha256": sha256_file(config_path)})
    if check.status in MISSING:
        raise ProbeEvidenceMissing(check.status, options, request.run_dir, check.logs, check.uncomparable_lines, unnamed)
    return check


def probe_values(
    option: str,
    values: Sequence[Any],
    backend: Backend,
    *,
    out_dir: Path,
    base_config: Mapping[str, Any] | None = None,
    base_source: str | Path | None = None,
    control: Control = PROBE_CONTROL,
    env: Mapping[str, str] | None = None,
    hosts: Hosts | None = None,
    cwd: Path | None = None,
) -> ProbeResult:
    """Probe each exact value; a value the wrapper rejects starts no process.
    A base config without an options object is refused first (``base_source`` names it).
    ``option`` may be the runtime's or torch_npu's name; the records carry the runtime's.
    The first probe that writes no evidence stops them all (:func:`runtime_check`)."""
    option = runtime_name(option)
    backend.check_ready()
    probe_config(option, None, base_config, source=base_source)
    probes = []
    for value in values:
        verdict = backend.wrapper_check(option, value)
        runtime = None
        if verdict.accepted:
            config = probe_config(option, value, base_config, source=base_source)
            runtime = runtime_check({option: value}, backend, out_dir=out_dir, config=config, control=control, env=env, hosts=hosts,
                                    cwd=cwd)
        probes.append(ValueProbe(option, value, verdict, runtime))
    return ProbeResult(option, backend.name, probes)


def probe_value(option: str, value: Any, backend: Backend, *, out_dir: Path, **kwargs: Any) -> ProbeResult:
    """Probe one exact value (see :func:`probe_values`)."""
    return probe_values(option, [value], backend, out_dir=out_dir, **kwargs)
