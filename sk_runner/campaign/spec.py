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
from dataclasses import asdict, dataclass, field, fields, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Any

from sk_analytics.errors import InputError
from sk_analytics.files.strict_json import check_against_schema, load_config_file
from sk_runner.hosts.topology import DEFAULT_CPUS_PER_HOST, HostsSpec, hosts_problem, spans_of

SPEC_SCHEMA = "sk-tune-campaign-v1"
ON_NODE_LOST = ("restart", "wait")


@dataclass(frozen=True, kw_only=True)
class Placement:
    """Where a task's session runs: the host's NPU lease and the hosts its ranks span. The task carries it from the
    spec and its job carries it to the node, so both are one record (keyword fields, after each record's own)."""

    lease_root: str | None = None
    """The host's NPU lease folder (absolute). Required for npu/command tasks on NPUs (:func:`load_spec` refuses them
    without); None (simulator tasks only): ``SK_RUN_LEASE_ROOT`` on the node, else unleased."""
    device_ids: tuple[int, ...] | None = None
    """NPUs to lease (a Ray task requesting ``NPU`` gets Ray's assignment instead)."""
    lease_timeout_s: float | None = None
    hosts: int = 1
    """Hosts the session's ranks span; above 1, ``resources`` is one host's bundle ``{NPU: npus_per_host, CPU: cpus_per_host}``."""
    npus_per_host: int | None = None
    cpus_per_host: float = DEFAULT_CPUS_PER_HOST

    @property
    def spans(self) -> HostsSpec | None:
        """The hosts of a multi-host task (None: one host)."""
        return spans_of(self.hosts, self.npus_per_host, self.cpus_per_host)

    def placement(self) -> dict[str, Any]:
        """The placement fields alone, to hand to another record (a task's to its job)."""
        return {f.name: getattr(self, f.name) for f in fields(Placement)}

    @staticmethod
    def from_json_fields(data: dict[str, Any]) -> dict[str, Any]:
        """``data`` with its JSON list of device ids turned back into the tuple the record holds."""
        ids = data.get("device_ids")
        return {**data, "device_ids": None if ids is None else tuple(ids)}


@dataclass(frozen=True)
class TaskSpec(Placement):
    """One task of the campaign: its dispatched task file, how to schedule it and where it runs."""

    id: str
    task: str  # absolute path of the superkernel-stage-o-task-v1 file
    task_fingerprint: str
    resources: dict[str, float]
    timeout_s: float | None
    priority: int


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
        tasks = tuple(TaskSpec(**Placement.from_json_fields(t)) for t in data["tasks"])
        return cls(data["name"], tasks, data["on_node_lost"], float(data["node_wait_s"]), int(data["max_attempts"]), data.get("root"))

    def task(self, task_id: str) -> TaskSpec:
        return next(t for t in self.tasks if t.id == task_id)


@lru_cache(maxsize=1)
def spec_schema() -> dict[str, Any]:
    """The campaign spec JSON Schema shipped with the package."""
    text = resources.files("sk_runner.campaign").joinpath("campaign-spec.schema.json").read_text(encoding="utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema


def default_resources(task_data: dict[str, Any]) -> dict[str, float]:
    """``{"NPU": ranks}`` for the npu backend (the whole server), ``{"CPU": 1}`` for the simulator or a command."""
    workload = task_data.get("workload") or {}
    if workload.get("backend") == "npu":
        return {"NPU": float(workload.get("ranks", 8))}
    return {"CPU": 1.0}


def validate_spec_data(data: Any, source: Path) -> None:
    """Raise :class:`InputError` naming the first schema violation (file, JSON pointer, what was expected)."""
    check_against_schema(spec_schema(), data, source, "campaign spec")
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
        spans = _spans(merged, item, task.control.ranks, path, i)
        resources_ = spans.bundle() if spans is not None else merged.get("resources") or default_resources(task.data)
        lease_root = merged.get("lease_root")
        _require_lease_root(item["id"], task.backend.name, resources_, lease_root, path, i)
        where = Placement(lease_root=None if lease_root is None else str((path.parent / lease_root).absolute()),
                          device_ids=None if spans is not None else _device_ids(merged.get("device_ids"), path, i),
                          lease_timeout_s=None if merged.get("lease_timeout_s") is None else float(merged["lease_timeout_s"]))
        if spans is not None:
            where = replace(where, hosts=spans.hosts, npus_per_host=spans.npus_per_host, cpus_per_host=spans.cpus_per_host)
        tasks.append(TaskSpec(item["id"], str(task_path), task.fingerprint, {k: float(v) for k, v in resources_.items()},
                              None if merged.get("timeout_s") is None else float(merged["timeout_s"]), int(merged.get("priority", 0)),
                              **where.placement()))
    order = sorted(range(len(tasks)), key=lambda i: (-tasks[i].priority, i))
    root = data.get("root")
    if root is not None and not Path(root).is_absolute():
        root = str((path.parent / root).resolve())
    return CampaignSpec(data.get("name", path.stem), tuple(tasks[i] for i in order), data.get("on_node_lost", "restart"),
                        float(data.get("node_wait_s", 600)), int(data.get("max_attempts", 2)), root, str(path))


def _spans(settings: dict[str, Any], own: dict[str, Any], ranks: int, path: Path, index: int) -> HostsSpec | None:
    """A task's hosts (None: one host), or a one-line error naming the spec and the task: hosts x npus_per_host must be
    the workload's ranks, and a multi-host task's resources are its per-host bundle and its NPUs those Ray assigns, so
    the task itself (``own``) names neither ``resources`` nor ``device_ids``; the defaults' are for one-host tasks."""
    hosts = int(settings.get("hosts", 1))
    cpus = float(settings.get("cpus_per_host", DEFAULT_CPUS_PER_HOST))
    problem = hosts_problem(hosts, settings.get("npus_per_host"), ranks, cpus)
    expected = "hosts x npus_per_host = the workload's ranks (one rank per NPU)"
    if problem is None and hosts > 1:
        taken = [key for key in ("resources", "device_ids") if own.get(key) is not None]
        if taken:
            problem = (f"a multi-host task reserves {{NPU: npus_per_host, CPU: cpus_per_host}} on each host and leases the NPUs Ray "
                       f"assigns there; it takes no {' and no '.join(taken)}")
            expected = "hosts and npus_per_host (and cpus_per_host), without resources or device_ids"
    if problem is not None:
        raise InputError(path, f"task {settings['id']}: {problem}", record=f"/tasks/{index}", expected=expected)
    return spans_of(hosts, settings.get("npus_per_host"), cpus)


def _require_lease_root(task_id: str, backend: str, resources_: dict[str, Any], lease_root: str | None, path: Path, index: int) -> None:
    """A task that runs real NPU work (backend ``npu`` or ``command``) on NPUs Ray assigns must name the hosts' lease root:
    its session then always takes the host's lease, so it and anything else started on those NPUs (a sweep by hand, the
    controller's own phases) exclude each other (protocol §9). The simulator's NPUs are leased where a root is given."""
    if backend != "sim" and float(resources_.get("NPU", 0)) > 0 and lease_root is None:
        raise InputError(path, f"task {task_id} runs on NPUs Ray assigns ({backend} backend) but names no lease_root: "
                               "its session must take each host's NPU lease", record=f"/tasks/{index}/lease_root",
                         expected="lease_root in the task or in defaults (the hosts' lease folder, the same path on every node)")


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
