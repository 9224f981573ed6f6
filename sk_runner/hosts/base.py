"""What the engines see of a run's hosts: the :class:`Hosts` seam, each host's record, one result for all groups.

The trial, profile and probe engines start their processes through
:func:`sk_runner.process.run_process` on one host, or through a :class:`Hosts`
object when the run spans hosts (:mod:`sk_runner.hosts.ray_hosts` on Ray):
``run`` starts one rank group per host at the same time, waits for all, and
returns one :class:`MultiHostResult` (a :class:`ProcessResult` whose ``groups``
say what each host's group did). A host lost during a run raises
:class:`HostLost`, an environment blocker: never a measurement.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sk_analytics.errors import EnvironmentBlocker
from sk_runner.devices.lease import HeldLease, LeaseLike, lease_devices, lease_record
from sk_runner.devices.markers import fits
from sk_runner.process import ProcessResult, run_process
from sk_runner.process.faults import EnvironmentFault


class HostLost(EnvironmentBlocker):
    """A host of the run died or left the cluster while its group ran (or before it could start)."""


@dataclass(frozen=True)
class HostSlot:
    """One reserved host: its index (rank group), the Ray node, its address, the NPUs Ray assigned and its lease."""

    index: int
    node_id: str
    node_name: str
    host: str
    address: str
    device_ids: tuple[int, ...]
    lease: Mapping[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["device_ids"] = list(self.device_ids)
        data["lease"] = dict(self.lease)
        return data

    def identity(self) -> dict[str, Any]:
        """What a fingerprint records of the host: the server (name, host) and its devices, not Ray's node id,
        which a restarted server changes (it is still the same server)."""
        return {"index": self.index, "node_name": self.node_name, "host": self.host, "device_ids": list(self.device_ids)}

    def describe(self) -> str:
        return f"host {self.index} ({self.node_name}, node {self.node_id[:12]})"


@dataclass(frozen=True)
class MultiHostResult(ProcessResult):
    """The run of every host's group as one process result: the first group that failed by itself decides the
    exit code or signal (a group stopped because another failed is ``stopped``); ``timed_out`` when any timed out."""

    groups: tuple[Mapping[str, Any], ...] = ()


def combine(groups: Sequence[Mapping[str, Any]]) -> MultiHostResult:
    """One result of the groups' records (``index``, ``process``: a :class:`ProcessResult`, ``stopped``: killed by us)."""
    procs: list[ProcessResult] = [g["process"] for g in groups]
    own = sorted((g for g in groups if not g.get("stopped") and not g["process"].ok), key=lambda g: g["process"].ended_ns)
    first = own[0]["process"] if own else None
    timed_out = any(p.timed_out for p in procs)
    exit_code, sig = (0, None) if first is None else (first.exit_code, first.signal)
    if first is None and timed_out:
        exit_code = None
    started = min(p.started_ns for p in procs)
    ended = max(p.ended_ns for p in procs)
    records = tuple({**{k: v for k, v in g.items() if k != "process"}, "process": g["process"].to_json()} for g in groups)
    return MultiHostResult(pid=procs[0].pid, exit_code=exit_code, signal=sig, timed_out=timed_out, started_ns=started, ended_ns=ended,
                           duration_s=max(p.duration_s for p in procs), groups=records)


def group_fault(record: Mapping[str, Any], where: str) -> EnvironmentBlocker:
    """The blocker of a host whose group could not run (``record["fault"]``), named by ``where``: the
    :class:`~sk_runner.process.faults.EnvironmentFault` itself when the group died of the machine, so the session
    records its errno and names its stderr where the run is moved, as for a one-host run."""
    if "environment_fault" in record:
        return EnvironmentFault.from_json(record["environment_fault"], where)
    return EnvironmentBlocker(f"{where}: {record['fault']}")


def hosts_lease_record(slots: Sequence[HostSlot]) -> dict[str, Any]:
    """The lease record of a multi-host run: each host's, and at the top the one every reader of a one-host record
    understands (``mode`` only when every host held its lease in that mode; host 0's root and devices)."""
    modes = {slot.lease.get("mode") for slot in slots}
    mode = modes.pop() if len(modes) == 1 else None
    first = slots[0].lease if slots else {}
    return {"mode": mode, "root": first.get("root") if mode else None, "device_ids": first.get("device_ids") if mode else None,
            "hosts": [{"index": s.index, "node_name": s.node_name, "host": s.host, **dict(s.lease)} for s in slots]}


def ranks_problem(hosts: Hosts | None, lease: LeaseLike, ranks: int) -> str | None:
    """Why ``ranks`` ranks cannot run: more than the leased devices (rank i on the i-th), not one per NPU of the hosts,
    or a lease of its own beside hosts that each take their own; None when they can."""
    if hosts is not None:
        return hosts.fits(ranks) or (None if lease is None else "a run that spans hosts takes each host's lease on that host: "
                                                                 "give it no lease of its own")
    devices = lease_devices(lease)
    return None if devices is None else fits(devices, ranks)


def run_lease_record(hosts: Hosts | None, lease: HeldLease | None) -> dict[str, Any]:
    """The lease a run's processes ran under, as its records keep it: every host's of a multi-host run, else this host's."""
    return hosts.lease_record() if hosts is not None else lease_record(lease)


def launch(hosts: Hosts | None, argv: list[str], *, cwd: Path, local_env: Mapping[str, str], contract_env: Mapping[str, str],
           stdout_path: Path, stderr_path: Path, timeout_s: float | None) -> ProcessResult:
    """One run of ``argv``: one rank group per host, each in its host's environment plus ``contract_env`` (docs/runner.md
    "Runs that span hosts"), or one process here in ``local_env`` (this host's, already scrubbed, with the contract)."""
    if hosts is not None:
        return hosts.run(argv, cwd=cwd, contract_env=contract_env, stdout_path=stdout_path, stderr_path=stderr_path, timeout_s=timeout_s)
    return run_process(argv, cwd=cwd, env=dict(local_env), stdout_path=stdout_path, stderr_path=stderr_path, timeout_s=timeout_s)


class ProofLike(Protocol):
    """The clean-device proof of a run (:class:`sk_runner.devices.proof.CleanDeviceProof`, or every host's)."""

    discarded: list[dict[str, Any]]

    def before(self, run: str) -> Any: ...
    def after(self) -> Any: ...
    def discard(self, run: str, before: Any, after: Any, moved_to: Path | None) -> None: ...
    def record(self, before: Any, after: Any) -> dict[str, Any]: ...


class Hosts(Protocol):
    """The hosts a run spans, held for a whole session (or command)."""

    spec: Any  # HostsSpec
    slots: tuple[HostSlot, ...]

    def run(self, argv: list[str], *, cwd: Path, contract_env: Mapping[str, str], stdout_path: Path, stderr_path: Path,
            timeout_s: float | None) -> MultiHostResult:
        """Start every host's group, wait for all; kill every group when one fails, times out or its host is lost
        (:class:`HostLost`)."""

    def proof(self, round_dir: Path, round_name: str, backend: str) -> ProofLike | None:
        """The clean-device proof on every leased host (None when the hosts are not leased)."""

    def lease_record(self) -> dict[str, Any]:
        """:func:`hosts_lease_record` of the slots."""

    def environment(self) -> dict[str, Any]:
        """What the environment part of a trial fingerprint adds: every host (server and devices)."""

    def fits(self, ranks: int) -> str | None:
        """Why ``ranks`` ranks do not match the hosts (one rank per NPU), or None."""

    def placement(self) -> dict[str, Any]:
        """Where a session on these hosts runs (its ``session.json`` ``placement``)."""

    def close(self) -> None:
        """Give the hosts back: every group ended, every lease dropped."""
