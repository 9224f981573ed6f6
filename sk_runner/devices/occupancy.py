"""Who uses a device right now: ``npu-smi info``'s process table on NPUs, the occupancy registry on the simulator.

The clean-device proof (:mod:`sk_runner.devices.proof`) asks a source for the
processes on the leased devices before and after every clean run. Sources:

* ``npu-smi`` — parses the process table of ``npu-smi info``
  (``| NPU  Chip | Process id | Process name | Process memory(MB) [| Process id in container] |``
  rows and ``No running processes found in NPU <n>``); a chip's device id is the
  ``Phy-ID``/``Device`` column of the device table where npu-smi prints one
  (two chips per NPU on Atlas A3), else its NPU id (one chip per NPU, Atlas A2);
* ``sim-registry`` — the simulated host's registry (:mod:`sk_runner.devices.registry`).

An output without a process table is an environment blocker: a device that
cannot be shown free is never taken as free.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sk_analytics.errors import EnvironmentBlocker
from sk_analytics.messages import render, text
from sk_runner.devices.registry import registry_root, tenants
from sk_runner.process import command_line

NPU_SMI = "npu-smi"
NPU_SMI_TIMEOUT_S = 60.0
LOCK_SOURCE = "lease-lock"
"""The source of a sighting that is no process on the device but the lease's lock lost (removed, replaced, released)."""
LOCK_LOST = "the lease's lock is lost: "
"""How the recorded ``command`` of a :data:`LOCK_SOURCE` sighting begins (the why follows, in English; the record's
``problem`` holds the why as a message, which the sighting's line renders in its own language)."""
_IDLE = re.compile(r"No running processes found in NPU\s+(\d+)")


@dataclass(frozen=True)
class DeviceProcess:
    """A process seen on a device: its pid, command (as far as known) and the source that saw it."""

    device: int
    pid: int
    command: str
    source: str
    memory_mb: int | None = None
    problem: Mapping[str, Any] | None = field(default=None, hash=False)
    """Why the lease's lock is lost, as a recorded message (:func:`~sk_analytics.messages.coded`): only on a
    :data:`LOCK_SOURCE` sighting."""

    @classmethod
    def lock_lost(cls, device: int, problem: Mapping[str, Any]) -> DeviceProcess:
        """The sighting of ``device``'s lease lock lost for ``problem`` (a recorded message): no process, the lock."""
        return cls(device, 0, LOCK_LOST + render(problem, "en"), LOCK_SOURCE, problem=dict(problem))

    def to_json(self) -> dict[str, Any]:
        found = asdict(self)
        if found["problem"] is None:  # a process sighting records what it always did
            del found["problem"]
        return found

    def describe(self, lang: str = "en") -> str:
        """The process in ``lang`` (a progress line of the session's language; an error line: English)."""
        if self.source == LOCK_SOURCE:  # not a process the source saw: the lease's own lock was lost (proof.py)
            return text("device.lock_lost", lang, device=self.device, why=self.problem)
        return text("device.process", lang, pid=self.pid, device=self.device, command=self.command or text("device.unknown_command", lang))


@dataclass(frozen=True)
class NpuSmiRow:
    """One row of npu-smi's process table."""

    npu: int
    chip: int
    pid: int
    name: str
    memory_mb: int | None
    container_pid: str | None = None


@dataclass
class NpuSmiTable:
    """What ``npu-smi info`` says: (NPU, chip) -> device id from the device table, the process rows, the idle NPUs."""

    devices: dict[tuple[int, int], int] = field(default_factory=dict)
    rows: list[NpuSmiRow] = field(default_factory=list)
    idle_npus: list[int] = field(default_factory=list)

    def device_of(self, row: NpuSmiRow) -> int:
        """The device id of a process row (its NPU id where the device table names no chip id)."""
        return self.devices.get((row.npu, row.chip), row.npu)


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def _ints(text: str) -> list[int] | None:
    parts = text.split()
    return [int(p) for p in parts] if parts and all(p.isdigit() for p in parts) else None


def parse_npu_smi(text: str) -> NpuSmiTable:
    """Parse ``npu-smi info``; ``ValueError`` when it holds no process table."""
    table = NpuSmiTable()
    npu: int | None = None
    in_processes = False
    container_col: int | None = None
    for line in text.splitlines():
        if not line.lstrip().startswith("|"):
            continue  # borders (+---+) and anything npu-smi prints around the tables
        cells = _cells(line)
        if "Process id" in line and "Process name" in line:
            in_processes = True
            container_col = next((i for i, c in enumerate(cells) if c.lower() == "process id in container"), None)
            continue
        if not in_processes:
            head = cells[0].split()
            if len(head) >= 2 and head[0].isdigit() and not head[1].isdigit():
                npu = int(head[0])  # "0     910B3": the NPU row of a chip
            elif npu is not None and (numbers := _ints(cells[0])) is not None and len(numbers) <= 2:
                if len(numbers) == 2:
                    table.devices[(npu, numbers[0])] = numbers[1]  # "1     3": chip and its Phy-ID / device id
            continue
        idle = _IDLE.search(cells[0])
        if idle is not None:
            table.idle_npus.append(int(idle.group(1)))
            continue
        where = _ints(cells[0])
        if where is None or len(where) != 2 or len(cells) < 3 or not cells[1].isdigit():
            continue
        memory = cells[3] if len(cells) > 3 else ""
        container = cells[container_col] if container_col is not None and container_col < len(cells) else None
        table.rows.append(NpuSmiRow(where[0], where[1], int(cells[1]), cells[2], int(memory) if memory.isdigit() else None, container))
    if not in_processes:
        raise ValueError("no process table (no 'Process id | Process name' header)")
    return table


def npu_smi_processes(text: str, devices: Iterable[int]) -> list[DeviceProcess]:
    """The processes npu-smi lists on ``devices`` (full command line where visible: the container pid, else the pid)."""
    table = parse_npu_smi(text)
    wanted = set(devices)
    found = []
    for row in table.rows:
        device = table.device_of(row)
        if device not in wanted:
            continue
        local = int(row.container_pid) if row.container_pid and row.container_pid.isdigit() else None
        command = (command_line(local) if local is not None else None) or row.name
        found.append(DeviceProcess(device, row.pid, command, NPU_SMI, row.memory_mb))
    return found


class OccupancySource(Protocol):
    """Something that lists the processes on devices right now."""

    name: str

    def snapshot(self, devices: tuple[int, ...]) -> list[DeviceProcess]:
        """The processes on ``devices`` now."""


class NpuSmiSource:
    """``npu-smi info``'s process table (the npu backend)."""

    name = NPU_SMI

    def snapshot(self, devices: tuple[int, ...]) -> list[DeviceProcess]:
        exe = shutil.which(NPU_SMI)
        if exe is None:
            raise EnvironmentBlocker(f"{NPU_SMI} not found on PATH: the clean-device proof of a leased run reads its process table")
        try:
            out = subprocess.run([exe, "info"], capture_output=True, text=True, timeout=NPU_SMI_TIMEOUT_S, check=False,
                                 stdin=subprocess.DEVNULL)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise EnvironmentBlocker(f"{NPU_SMI} info failed: {exc}") from exc
        if out.returncode != 0:
            tail = " ".join((out.stderr or out.stdout).split())[-300:]
            raise EnvironmentBlocker(f"{NPU_SMI} info exited {out.returncode}: {tail}")
        try:
            return npu_smi_processes(out.stdout, devices)
        except ValueError as exc:
            raise EnvironmentBlocker(f"{NPU_SMI} info printed {exc}: the devices cannot be shown free") from exc


class RegistrySource:
    """The simulated host's occupancy registry (the sim backend)."""

    name = "sim-registry"

    def __init__(self, root: Path) -> None:
        self.root = root

    def snapshot(self, devices: tuple[int, ...]) -> list[DeviceProcess]:
        return [DeviceProcess(t.device, t.pid, t.command, self.name) for t in tenants(self.root, devices)]


def simulated_devices(backend: str) -> bool:
    """Whether ``backend``'s devices are proven by the simulated registry (sim; command where npu-smi is not installed)."""
    return backend == "sim" or (backend != "npu" and shutil.which(NPU_SMI) is None)


def occupancy_source(backend: str, env: Mapping[str, str] | None = None) -> OccupancySource:
    """The source of the clean-device proof for ``backend``: npu-smi on ``npu``, the registry on ``sim``;
    a ``command`` workload is proven by npu-smi where it is installed, else by the simulated host's registry."""
    if not simulated_devices(backend):
        return NpuSmiSource()
    return RegistrySource(registry_root(env))
