"""Phase entry (protocol §2): validate the phase manifest and the dispatched stage-O task, emit the plan.

Accepted input only: a ``superkernel-phase-manifest-v1`` manifest whose four
fields are present and whose every runtime tool resolves to one of our
commands, and a stage-O task carrying a frozen Sbest-SEED (config plus its
fingerprint), the option values the active wrapper already accepts, and clean
artifacts bound to S0. Any missing piece is a one-line error naming the file
and the field. Entering the same task twice continues the same session.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from sk_analytics.errors import InputError, IntegrityError
from sk_analytics.files.strict_json import check_against_schema, load_json_file
from sk_analytics.fingerprint import canonical_json, fingerprint
from sk_analytics.ledger.chain import read_records
from sk_analytics.messages import coded
from sk_analytics.option_trial.modes import FAMILY_MIN_EFFECT_PCT
from sk_analytics.stage_o.machine import Policy
from sk_analytics.stage_o.option_values import name_problem, value_problem
from sk_analytics.stage_o.options import is_debug_option, spec_of
from sk_runner.backends.base import PLACEHOLDERS, Control, unknown_placeholders
from sk_runner.config import check_config_options, load_config
from sk_runner.limits import size_problem
from sk_runner.sweep.session import SESSION_FILE, BackendSpec, SweepSession, create_session, load_session
from sk_runner.sweep.task_schema import PHASE_SCHEMA, TASK_SCHEMA, phase_manifest_schema, task_schema

PHASE = "stage_o_option_tuning"
AGENT_ID = "sk-stage-o-option-tuning"

#: Runtime tool names of existing Stage O flows -> (our CLI, sub-command).
RUNTIME_TOOLS: dict[str, tuple[str, str]] = {
    "analyze_performance": ("sk-analyze", "option-trial"),
    "option_trial": ("sk-analyze", "option-trial"),
    "stability": ("sk-analyze", "stability"),
    "artifact_contract": ("sk-analyze", "contract"),
    "contract": ("sk-analyze", "contract"),
    "dcci_diff": ("sk-analyze", "dcci-diff"),
    "ledger": ("sk-analyze", "ledger"),
    "ingest": ("sk-analyze", "ingest"),
    "trial": ("sk-run", "trial"),
    "probe": ("sk-run", "probe"),
    "option_probe": ("sk-run", "probe"),
    "profile": ("sk-run", "profile"),
    "matrix": ("sk-run", "matrix"),
    "sweep": ("sk-run", "sweep"),
}


def _field(data: dict[str, Any], key: str, kind: type | tuple[type, ...], path: Path, what: str) -> Any:
    if key not in data:
        raise InputError(path, f"{what} has no '{key}'", record=key)
    value = data[key]
    if not isinstance(value, kind):
        raise InputError(path, f"{what} field '{key}' has the wrong type ({type(value).__name__})", record=key)
    return value


def _our_document(path: Path, schema: str, what: str) -> dict[str, Any]:
    """``path`` as a JSON object of ``schema`` addressed to this agent (else a one-line InputError)."""
    data = load_json_file(path)
    if not isinstance(data, dict):
        raise InputError(path, f"{what} must be a JSON object")
    if data.get("schema_version") != schema:
        raise InputError(path, f"schema_version is {data.get('schema_version')!r}", record="schema_version", expected=schema)
    if _field(data, "agent_id", str, path, what) != AGENT_ID:
        raise InputError(path, f"agent_id is {data['agent_id']!r}: not a stage-O {what}", record="agent_id", expected=AGENT_ID)
    return data


def resolve_tool(name: str) -> tuple[str, str] | None:
    """Our command for a runtime tool name: an ``sk-run`` command, or an ``sk-analyze`` one whose module is installed."""
    from sk_analytics.cli import COMMANDS as ANALYZE
    from sk_analytics.lazy_module import module_exists
    from sk_runner.commands import SUMMARIES as RUN

    key = name.strip().lower().replace("-", "_")
    parts = key.split()
    target: tuple[str, str] | None
    if len(parts) == 2 and parts[0] in ("sk_analyze", "sk_run"):
        target = ("sk-analyze" if parts[0] == "sk_analyze" else "sk-run", parts[1].replace("_", "-"))
    else:
        target = RUNTIME_TOOLS.get(key)
    if target is None:
        return None
    if target[0] == "sk-run":
        return target if target[1] in RUN else None
    module = ANALYZE.get(target[1], "").split(":")[0]
    return target if module and module_exists(module) else None


def validate_phase_manifest(path: Path) -> dict[str, Any]:
    """The manifest, or an error naming the missing/invalid field, an unknown key (with the closest valid one: the
    task's check, :func:`~sk_runner.sweep.task_schema.phase_manifest_schema`) or an unresolvable tool."""
    data = _our_document(path, PHASE_SCHEMA, "phase manifest")
    check_against_schema(phase_manifest_schema(), data, path, "phase manifest")
    if data["phase"] != PHASE:
        raise InputError(path, f"phase is {data['phase']!r}", record="phase", expected=PHASE)
    if not data["skill"].strip():
        raise InputError(path, "skill is empty", record="skill")
    tools = data["runtime_tools"]
    if not tools or not all(t.strip() for t in tools):
        raise InputError(path, "runtime_tools must be a non-empty list of tool names", record="runtime_tools")
    missing = [t for t in tools if resolve_tool(t) is None]
    if missing:
        raise InputError(path, f"runtime tool(s) {missing} do not resolve to an installed sk-analyze/sk-run command",
                         record="runtime_tools", expected=f"names among {sorted(RUNTIME_TOOLS)}")
    return data


@dataclasses.dataclass(frozen=True)
class StageOTask:
    """A validated dispatched task."""

    path: Path
    data: dict[str, Any]
    manifest: dict[str, Any]
    seed_config: dict[str, Any]
    backend: BackendSpec
    control: Control
    policy: Policy
    seed: int
    session: Path | None

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.data)


def _relative(base: Path, value: str) -> Path:
    p = Path(value)
    return p if p.is_absolute() else base / p


def validate_task(path: Path) -> StageOTask:
    """Validate the dispatched task and everything it points at: first its schema (every key known, every value of its
    type and in its bounds: :func:`~sk_runner.sweep.task_schema.task_schema`), then what a schema cannot say."""
    path = Path(path)
    data = _our_document(path, TASK_SCHEMA, "task")
    check_against_schema(task_schema(), data, path, "task")
    here = path.parent
    manifest = validate_phase_manifest(_relative(here, data["phase_manifest"]))
    seed = data["seed"]
    if seed["name"] != "Sbest-SEED" or seed["frozen"] is not True:
        raise InputError(path, "seed must be the frozen Sbest-SEED", record="/seed", expected='{"name": "Sbest-SEED", "frozen": true, ...}')
    config_path = _relative(here, seed["config"])
    seed_config = load_config(config_path)
    check_config_options(seed_config, config_path)
    if (actual := fingerprint(seed_config)) != seed["config_fingerprint"]:  # both named: a hand-written task can be checked
        raise IntegrityError(f"{config_path}: SEED config does not match seed.config_fingerprint of {path} (the SEED is not frozen): "
                             f"its canonical fingerprint is {actual}, the task says {seed['config_fingerprint'][:80]}")
    listed: dict[tuple[str, str], int] = {}
    for i, item in enumerate(data["accepted_option_values"]):
        spec = spec_of(item["option"])
        problem = name_problem(item["option"]) if spec is None else value_problem(spec, item["value"])
        if problem is None and is_debug_option(item["option"]):
            problem = f"debug option {item['option']} never enters Stage O"
        if problem is None and spec is not None:  # one value, two records (or its torch_npu name and the runtime's)
            key = (spec.name, canonical_json(item["value"]))
            if (first := listed.setdefault(key, i)) != i:
                problem = f"{spec.name}={key[1]} is listed twice (also /accepted_option_values/{first})"
        if problem is not None:
            raise InputError(path, problem, record=f"/accepted_option_values/{i}")
    clean = data["clean_artifacts"]
    if clean["bound_to"] != "S0":
        raise InputError(path, "clean artifacts are not bound to S0", record="/clean_artifacts/bound_to", expected='"S0"')
    clean_path = _relative(here, clean["path"])
    if not clean_path.is_dir() or not any(clean_path.glob("run-*/log_*.log")):
        raise InputError(clean_path, "S0 clean artifacts not found", record="/clean_artifacts/path", expected="a folder with run-*/log_<rank>.log")
    backend, control, seed_value = _workload(data["workload"], path)
    session = data.get("session")
    return StageOTask(path, data, manifest, seed_config, backend, control, _policy(data.get("policy"), path), seed_value,
                      _relative(here, session) if isinstance(session, str) else None)


def _workload(workload: dict[str, Any], path: Path) -> tuple[BackendSpec, Control, int]:
    """Backend, run controls and seed of the task's schema-checked ``workload``; a size no process can run refused."""
    name = workload.get("backend", "sim")
    command = workload.get("command") or []
    if name != "sim" and not command:
        raise InputError(path, f"backend {name} needs a workload command", record="/workload/command")
    for i, arg in enumerate(command if name != "sim" else ()):  # a typo such as {rundir} named by its argument
        if unknown := unknown_placeholders([arg]):
            raise InputError(path, f"workload/command argument {arg!r} has unknown placeholder(s) {', '.join(unknown)}",
                             record=f"/workload/command/{i}", expected=f"only {', '.join(PLACEHOLDERS)}")
    noise = workload.get("noise")
    control = Control(workload.get("ranks", 8), workload.get("iterations"), workload.get("warmup", 8))
    if control.iterations is not None and control.iterations <= control.warmup:
        raise InputError(path, f"workload/iterations {control.iterations} is not more than workload/warmup {control.warmup}",
                         record="/workload/iterations", expected="decode samples left after warm-up")
    problem = size_problem(control.ranks, control.iterations, control.warmup)
    if problem is not None:  # ranks x iterations over the samples one process may write: what the sweep would refuse
        raise InputError(path, problem.replace("--", "workload/"), record="/workload")
    cwd = _cwd(workload, name, path)
    sources = _sources(workload.get("sources"), Path(cwd) if cwd is not None else Path.cwd(), path)
    return (BackendSpec(name, workload.get("network"), None if noise is None else float(noise), tuple(command), cwd, sources),
            control, workload.get("seed", 0))


def _sources(value: list[str] | None, cwd: Path, path: Path) -> tuple[str, ...] | None:
    """The task's schema-checked ``workload/sources`` (files or folders relative to the workload's working directory),
    each of which must exist; absent: None, the default sources of :mod:`sk_runner.trial.sources`."""
    if value is None:
        return None
    for i, entry in enumerate(value):
        if not (cwd / entry).exists():
            raise InputError(path, f"workload/sources/{i} {entry!r} does not exist in the workload's working directory {cwd}",
                             record=f"/workload/sources/{i}", expected="a file or folder relative to workload/cwd")
    return tuple(value)


def _cwd(workload: dict[str, Any], backend: str, path: Path) -> str | None:
    """The working directory of every process of the workload: ``workload/cwd`` (relative to the task file),
    else the folder sk-run was started from; recorded in the session, so a resume from elsewhere runs it alike.
    None for the simulator, whose command names every path absolutely."""
    value = workload.get("cwd")
    if value is None:
        return None if backend == "sim" else str(Path.cwd().resolve())
    folder = _relative(path.parent, value)
    if not folder.is_dir():
        raise InputError(path, f"workload/cwd {value!r} is not a folder ({folder})", record="/workload/cwd",
                         expected="an existing working directory of the workload")
    return str(folder.resolve())


def _policy(raw: dict[str, Any] | None, path: Path) -> Policy:
    """The task's schema-checked ``policy`` (absent: the protocol defaults)."""
    raw = {} if raw is None else raw
    if raw.get("gate") in ("sequential", "family") and raw.get("budget_runs") is not None:
        # these gates add runs inside the gate action, which the run budget does not count yet
        raise InputError(path, f"policy/budget_runs cannot be combined with policy/gate {raw['gate']}", record="/policy/budget_runs",
                         expected="no budget_runs, or another gate mode")
    floats: dict[str, float] = {name: float(raw[name]) for name in ("allow_p90_regression_pct", "allow_stddev_regression_pct", "min_effect_pct")
                                if name in raw}
    return Policy.from_json({**raw, **floats})


def plan(task: StageOTask, session: Path) -> dict[str, Any]:
    """The entry output of formats.md §8."""
    from sk_runner.sweep.handoff import HANDOFF_SCHEMA  # the hand-off stack (Polars, SciPy): not for validate_task

    root = str(session.resolve())
    return {
        "phase": PHASE,
        "agent_id": AGENT_ID,
        "task_fingerprint": task.fingerprint,
        "phase_manifest": task.manifest,
        "commands": [
            {"argv": ["sk-run", "sweep", "--resume", root]},
            {"argv": ["sk-analyze", "ledger", "verify", root]},
            {"argv": ["sk-analyze", "ledger", "show", root]},
        ],
        "handoff": {"schema_version": HANDOFF_SCHEMA, "session_path": root, "step_id": PHASE, "seal_after_agent_result": True},
        **({"gate_policy": family_plan(task.policy)} if task.policy.gate == "family" else {}),
    }


def family_plan(policy: Policy) -> dict[str, Any]:
    """The family policy's design stated up front (issue 43): its level, minimum effect and caps, for a matrix of
    every protocol candidate (a value the task does not list still enters the matrix, settled blocked)."""
    from sk_analytics.option_trial.family import FamilyDesign
    from sk_analytics.stage_o.matrix import protocol_candidates

    effect = FAMILY_MIN_EFFECT_PCT if policy.min_effect_pct is None else policy.min_effect_pct
    return FamilyDesign(len(protocol_candidates()), min_effect_pct=effect).to_json()


def check_workload_command(task: StageOTask) -> None:
    """Raise the backend's one-line error when the task's workload command cannot start (no check: nothing to do)."""
    check = getattr(task.backend.build(), "check_command", None)
    if check is not None:
        check()


def enter_phase(
    task_path: Path, session_dir: Path | None, *, placement: dict[str, Any] | None = None, lease: dict[str, Any] | None = None
) -> tuple[SweepSession, dict[str, Any]]:
    """Validate, create (or re-open) the session, record the entry, return the plan.

    ``placement`` pins a new campaign session to its node (recorded in session.json); ``lease``: the
    ``lease_requested`` record of a new session (:mod:`sk_runner.sweep.leasing`)."""
    task = validate_task(task_path)
    check_workload_command(task)  # before any session folder exists
    root = session_dir or task.session
    if root is None:
        raise InputError(task_path, "no session folder: give --session or the task's 'session'", record="session")
    if root.exists() and not root.is_dir():  # a file where the session belongs: said as the task's field, not 'Not a directory'
        raise InputError(task_path, f"session {str(root)!r} is not a folder", record="/session",
                         expected="a new folder or an existing session folder")
    record = {"task_fingerprint": task.fingerprint, "path": str(task.path.resolve()),
              "accepted_option_values": task.data["accepted_option_values"], "clean_artifacts": task.data["clean_artifacts"],
              "phase_manifest": task.manifest}
    if (root / SESSION_FILE).is_file():
        session = load_session(root)
        if (session.task or {}).get("task_fingerprint") != task.fingerprint:
            raise IntegrityError(f"{root}: the session belongs to another task; use a new --session")
    else:
        session = create_session(root, task.seed_config, seed=task.seed, backend=task.backend, control=task.control,
                                 policy=task.policy, task=record, placement=placement, lease=lease)
    entry = plan(task, root)  # recorded once, also when an earlier entry stopped right after creating the session
    if not any(r.kind == "phase_entry" for r in read_records(root)):
        session.append("phase_entry", {**entry, "summary": coded("summary.phase_entry", fp=task.fingerprint[:12])})
    return session, entry
