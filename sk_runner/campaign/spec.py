"""The campaign spec: a list of dispatched Stage O tasks with resources, timeout and priority.

A spec (YAML or JSON) is validated against the shipped JSON Schema, then every
task file goes through the sweep's own phase entry validation
(``superkernel-stage-o-task-v1``), so a campaign never starts a session that
``sk-run sweep --task`` would refuse. The resolved spec (absolute task paths,
task fingerprints) is frozen into ``campaign.json`` when the campaign starts;
a resume re-validates the task files against those fingerprints.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema

from sk_analytics.errors import InputError
from sk_analytics.strict_json import load_config_file

SPEC_SCHEMA = "sk-tune-campaign-v1"
ON_NODE_LOST = ("restart", "wait")


@dataclass(frozen=True)
class TaskSpec:
    """One task of the campaign: its dispatched task file and how to schedule it."""

    id: str
    task: str  # absolute path of the superkernel-stage-o-task-v1 file
    task_fingerprint: str
    resources: dict[str, float]
    timeout_s: float | None
    priority: int
    lease_root: str | None = None
    """The host's NPU lease folder (absolute); None: ``SK_RUN_LEASE_ROOT`` on the node, else unleased."""
    device_ids: tuple[int, ...] | None = None
    """NPUs to lease (a Ray task requesting ``NPU`` gets Ray's assignment instead)."""
    lease_timeout_s: float | None = None


@dataclass(frozen=True)
class CampaignSpec:
    """A validated campaign spec (tasks sorted by priority, highest first; ties keep spec order)."""

    name: str
    tasks: tuple[TaskSpec, ...]
    on_node_lost: str = "restart"
    node_wait_s: float = 600.0
    max_attempts: int = 2
    root: str | None = None
    source: str | None = field(default=None, compare=False)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["tasks"] = [asdict(t) for t in self.tasks]
        data.pop("source")
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CampaignSpec:
        tasks = tuple(TaskSpec(**{**t, "device_ids": None if t.get("device_ids") is None else tuple(t["device_ids"])}) for t in data["tasks"])
        return cls(data["name"], tasks, data["on_node_lost"], float(data["node_wait_s"]), int(data["max_attempts"]), data.get("root"))

    def task(self, task_id: str) -> TaskSpec:
        return next(t for t in self.tasks if t.id == task_id)


@lru_cache(maxsize=1)
def spec_schema() -> dict[str, Any]:
    """The campaign spec JSON Schema shipped with the package."""
    text = resources.files("sk_runner.campaign").joinpath("campaign-spec.schema.json").read_text(encoding="utf-8")
    return json.loads(text)


def default_resources(task_data: dict[str, Any]) -> dict[str, float]:
    """``{"NPU": ranks}`` for the npu backend (the whole server), ``{"CPU": 1}`` for the simulator or a command."""
    workload = task_data.get("workload") or {}
    if workload.get("backend") == "npu":
        return {"NPU": float(workload.get("ranks", 8))}
    return {"CPU": 1.0}


def validate_spec_data(data: Any, source: Path) -> None:
    """Raise :class:`InputError` naming the first schema violation (file, JSON pointer, what was expected)."""
    validator = jsonschema.Draft202012Validator(spec_schema())
    # the deepest problem first; 'unevaluated' only when nothing more precise is known
    errors = sorted(validator.iter_errors(data), key=lambda e: (e.validator == "unevaluatedProperties", -len(e.absolute_path)))
    if errors:
        err = errors[0]
        where = "/" + "/".join(str(p) for p in err.absolute_path)
        raise InputError(source, f"campaign spec invalid at {where}: {err.message}", record=where, expected=SPEC_SCHEMA)
    ids = [t["id"] for t in data["tasks"]]
    dup = sorted({i for i in ids if ids.count(i) > 1})
    if dup:
        raise InputError(source, f"task id(s) {dup} appear more than once", record="tasks", expected="unique task ids")


def load_spec(path: Path) -> CampaignSpec:
    """Load, schema-check and resolve a spec; every task file passes the phase entry validation."""
    from sk_runner.sweep.phase import validate_task

    path = Path(path)
    data = load_config_file(path)
    validate_spec_data(data, path)
    defaults = data.get("defaults", {})
    tasks = []
    for i, item in enumerate(data["tasks"]):
        task_path = Path(item["task"])
        task_path = (task_path if task_path.is_absolute() else path.parent / task_path).resolve()
        if not task_path.is_file():
            raise InputError(path, f"task file {task_path} not found", record=f"/tasks/{i}/task", expected="a superkernel-stage-o-task-v1 file")
        task = validate_task(task_path)
        merged = {**defaults, **item}
        resources_ = merged.get("resources") or default_resources(task.data)
        lease_root = merged.get("lease_root")
        tasks.append(TaskSpec(item["id"], str(task_path), task.fingerprint, {k: float(v) for k, v in resources_.items()},
                              None if merged.get("timeout_s") is None else float(merged["timeout_s"]), int(merged.get("priority", 0)),
                              None if lease_root is None else str((path.parent / lease_root).absolute()),
                              _device_ids(merged.get("device_ids"), path, i),
                              None if merged.get("lease_timeout_s") is None else float(merged["lease_timeout_s"])))
    order = sorted(range(len(tasks)), key=lambda i: (-tasks[i].priority, i))
    root = data.get("root")
    if root is not None and not Path(root).is_absolute():
        root = str((path.parent / root).resolve())
    return CampaignSpec(data.get("name", path.stem), tuple(tasks[i] for i in order), data.get("on_node_lost", "restart"),
                        float(data.get("node_wait_s", 600)), int(data.get("max_attempts", 2)), root, str(path))


def _device_ids(value: list[int | str] | None, path: Path, index: int) -> tuple[int, ...] | None:
    """A task's ``device_ids`` (ids and ranges) ascending, or a one-line error naming the spec and the task."""
    if value is None:
        return None
    from sk_runner.devices.markers import parse_device_ids

    try:
        return parse_device_ids(str(v) for v in value)
    except ValueError as exc:
        raise InputError(path, str(exc).replace("--device-id", "device_ids"), record=f"/tasks/{index}/device_ids",
                         expected="device ids or ranges like 0-7") from None


def revalidate(spec: CampaignSpec, source: Path) -> None:
    """On resume: every task file still validates and still has the fingerprint frozen at the start."""
    from sk_analytics.errors import IntegrityError
    from sk_runner.sweep.phase import validate_task

    for t in spec.tasks:
        if validate_task(Path(t.task)).fingerprint != t.task_fingerprint:
            raise IntegrityError(f"{t.task}: task {t.id} changed since the campaign {source} started (fingerprint mismatch)")
