"""The simulated host's device-occupancy registry: which processes use which simulated NPU.

A real NPU's driver knows its processes (``npu-smi info`` lists them); the
simulated device has this registry instead. Every simulated device process
(a workload run of the simulator, a foreign load of ``sk-run sim
--foreign-load``) keeps one entry per device it uses while it runs::

    <registry>/npu-<id>/<pid>.json   {"device", "pid", "command", "kind", "slowdown", "start_ticks", "since_ns"}

and removes it when it ends. An entry whose process is gone (killed without
clean-up) or whose pid now belongs to another process (kernel start time
differs) is stale and ignored. The registry is ``$SK_SIM_DEVICE_REGISTRY`` (of the
workload's environment, else of the process), else ``<temp dir>/sk-tune-sim-devices-<uid>``: one per user and host, like
the devices themselves.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

from sk_analytics.ledger.evidence import LEASE_DIR
from sk_runner.process import process_alive
from sk_runner.process.lifetime import start_ticks

REGISTRY_ENV = "SK_SIM_DEVICE_REGISTRY"
PRIVATE_REGISTRY = f"{LEASE_DIR}/sim-registry"
"""A session's own simulated host (beside the demo's lock files, outside the session's evidence): where its simulated
processes register when no registry is named, so two demos or test runs on one machine never see each other."""
WORKLOAD, FOREIGN_LOAD = "workload", "foreign_load"


def registry_root(env: Mapping[str, str] | None = None) -> Path:
    """``$SK_SIM_DEVICE_REGISTRY`` of ``env``, else of this process (the registry belongs to the host, not to one
    workload's environment: an in-process simulator run given a bare environment still uses the host's),
    else the user's registry in the temp folder."""
    value = ((env or {}).get(REGISTRY_ENV, "") or os.environ.get(REGISTRY_ENV, "")).strip()
    if value:
        return Path(value)
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"sk-tune-sim-devices-{uid}"


def private_registry(session: Path) -> Path:
    """The registry of ``session``'s own simulated host: ``<session>/.device-leases/sim-registry`` (absolute)."""
    return Path(os.path.abspath(Path(session) / PRIVATE_REGISTRY))


@contextmanager
def session_registry(session: Path, simulated: bool) -> Iterator[Path | None]:
    """For a session whose devices are simulated (``simulated``) and that names no registry
    (``$SK_SIM_DEVICE_REGISTRY`` unset): its private registry, set in this process's environment (every workload,
    foreign-load check and in-process simulator of the session sees it) while the block runs. Yields it (None: a
    named registry, or real devices)."""
    if not simulated or os.environ.get(REGISTRY_ENV, "").strip():
        yield None
        return
    path = private_registry(session)
    os.environ[REGISTRY_ENV] = str(path)
    try:
        yield path
    finally:
        if os.environ.get(REGISTRY_ENV) == str(path):
            del os.environ[REGISTRY_ENV]


def device_folder(root: Path, device: int) -> Path:
    return root / f"npu-{device}"


@dataclass(frozen=True)
class Tenant:
    """One process using one simulated device: a workload, or a foreign load slowing the device by ``slowdown``."""

    device: int
    pid: int
    command: str
    kind: str
    slowdown: float
    start_ticks: str | None
    since_ns: int

    def alive(self) -> bool:
        """The process still runs (and is the one that registered, not a later one with its pid)."""
        if not process_alive(self.pid):
            return False
        return self.start_ticks is None or start_ticks(self.pid) in (None, self.start_ticks)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


class Registration:
    """The entries of one process on its devices; removed by :meth:`close` (``with`` does it)."""

    def __init__(self, root: Path, devices: Iterable[int], *, command: str, kind: str = WORKLOAD, slowdown: float = 1.0,
                 pid: int | None = None) -> None:
        self.root = Path(root)
        self.pid = os.getpid() if pid is None else pid
        self.paths: list[Path] = []
        ticks = start_ticks(self.pid)
        now = time.time_ns()
        for device in sorted(set(devices)):
            tenant = Tenant(device, self.pid, command, kind, float(slowdown), ticks, now)
            self.paths.append(_write(device_folder(self.root, device) / f"{self.pid}.json", tenant.to_json()))

    def close(self) -> None:
        paths, self.paths = self.paths, []
        for path in paths:
            try:
                path.unlink()
            except FileNotFoundError:
                pass

    def __enter__(self) -> Registration:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.close()


def _write(path: Path, data: Mapping[str, Any]) -> Path:
    """Write an entry by rename, so a reader never sees half of one (no fsync: the registry is as volatile as the processes)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{time.time_ns()}.tmp")
    tmp.write_text(json.dumps(dict(data), sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)
    return path


def tenants(root: Path, devices: Iterable[int]) -> list[Tenant]:
    """The live entries on ``devices``, by device then pid (stale and unreadable entries are skipped)."""
    found: list[Tenant] = []
    for device in sorted(set(devices)):
        try:
            names = sorted(os.listdir(device_folder(root, device)))
        except (FileNotFoundError, NotADirectoryError):
            continue
        for name in names:
            stem = name[:-5]
            if not name.endswith(".json") or not stem.isdigit() or not process_alive(int(stem)):
                continue  # a temp file, or the entry of a process that has exited: stale without reading it
            tenant = _read(device_folder(root, device) / name, device)
            if tenant is not None and tenant.alive():
                found.append(tenant)
    return found


def _read(path: Path, device: int) -> Tenant | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return Tenant(device, int(data["pid"]), str(data.get("command", "")), str(data.get("kind", WORKLOAD)),
                      float(data.get("slowdown", 1.0)), data.get("start_ticks"), int(data.get("since_ns", 0)))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def slowdowns(root: Path, devices: list[int], *, own_pid: int | None = None) -> list[float]:
    """Per position of ``devices``: the factor by which the live foreign loads on that device slow a kernel there
    (1.0 on a device no foreign load uses)."""
    own = os.getpid() if own_pid is None else own_pid
    factor: dict[int, float] = {}
    for tenant in tenants(root, devices):
        if tenant.kind == FOREIGN_LOAD and tenant.pid != own:
            factor[tenant.device] = factor.get(tenant.device, 1.0) * tenant.slowdown
    return [factor.get(device, 1.0) for device in devices]
