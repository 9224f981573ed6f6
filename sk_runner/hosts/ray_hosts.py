"""Hosts of a multi-host run on Ray: a STRICT_SPREAD placement group held for the session, one agent per host.

:func:`reserve` connects to the cluster, reserves ``hosts`` bundles
``{NPU: npus_per_host, CPU: cpus_per_host}`` with ``STRICT_SPREAD`` (each on
another node; a resumed session's bundles are pinned to its recorded servers
by Ray's ``ray.io/node-id`` label), and starts one :class:`~sk_runner.hosts.agent.HostAgent`
actor in each bundle, which takes that host's device lease on the NPUs Ray
assigned to it; a resumed session's host takes the lease it recorded again, on
the NPUs it recorded (:func:`host_leases`). The caller holds the returned :class:`RayHosts` for the whole
session, so every run of the session uses the same hosts, and closes it at the
end. Everything the reservation holds (the group, the agents, their leases,
their running groups) belongs to this process's Ray job: if this process dies,
even by SIGKILL, Ray ends the agents, each agent's death kills its group
(parent-death signal and :mod:`sk_runner.process.lifetime`'s watchdog), and the
kernel drops its locks: nothing of the session survives on any host.

Ray is imported here lazily, only when a run spans hosts (and by the campaign's executor).
"""

from __future__ import annotations

import os
import signal
import socket
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from sk_analytics.errors import EnvironmentBlocker, UsageError
from sk_runner.devices.lease import LeaseFault
from sk_runner.hosts.agent import HostAgent
from sk_runner.hosts.base import HostLost, HostSlot, MultiHostResult, combine, group_fault, hosts_lease_record
from sk_runner.hosts.proof import HostsProof
from sk_runner.hosts.topology import RAY_HINT, SPANS, HostsSpec, assigned_npus, group_env, host_path, hosts_problem, same_server

NAMESPACE = "sk-tune"
RESERVE_TIMEOUT_S = 120.0
"""How long :func:`reserve` waits for Ray to place every bundle before it gives up (exit 3, nothing ran)."""
ANSWER_GRACE_S = 120.0
"""How long past a run's own timeout a host may take to answer before it counts as lost."""
NODE_ID_LABEL = "ray.io/node-id"
JOIN_CHECK_S = 10.0
"""How long :func:`join` waits for a TCP answer at the cluster's address before it says nothing answers there."""


def connect(address: str | None) -> Any:
    """The ray module, connected to the cluster at ``address`` (else ``RAY_ADDRESS``); a usage error without Ray."""
    try:
        import ray
    except ImportError:
        raise UsageError(f"a run that spans hosts needs Ray, which is not installed: {RAY_HINT}") from None
    if ray.is_initialized():
        return ray
    address = address or os.environ.get("RAY_ADDRESS") or None
    if address is None:
        raise UsageError(f"a run that spans hosts needs a Ray cluster: {RAY_HINT}")
    join(ray, address, namespace=NAMESPACE, log_to_driver=False, logging_level="ERROR", configure_logging=True)
    return ray


def unreachable(address: str, timeout_s: float = JOIN_CHECK_S) -> str | None:
    """Why nothing answers at a ``host:port`` Ray address (None: something does, or the address is another form:
    ``auto``, ``ray://``). Ray itself retries an address that does not answer for minutes."""
    host, sep, port = address.rpartition(":")
    if "://" in address or not sep or not port.isdigit() or not host:
        return None
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            return None
    except OSError as exc:
        return exc.strerror or type(exc).__name__


def join(ray: Any, address: str, **options: Any) -> None:
    """``ray.init(address=...)`` that ends in one line instead of hanging on an address where nothing answers, and
    keeps this process's SIGTERM handling: ``ray.init`` installs a bare ``sys.exit`` for SIGTERM, which sk-run's own
    handler replaces again (exit 143 and the ``--resume`` line), also for a SIGTERM that lands during the join."""
    problem = unreachable(address)
    if problem is not None:
        raise EnvironmentBlocker(f"cannot join Ray at {address}: nothing answers there ({problem}); is the cluster up "
                                 "(ray start --head) and the address its GCS's (host:6379)?")
    on_sigterm = signal.getsignal(signal.SIGTERM)
    try:
        ray.init(address=address, **options)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise EnvironmentBlocker(f"cannot join Ray at {address}: {' '.join(str(exc).split())[:300]}") from exc
    except SystemExit as exc:  # Ray's own SIGTERM handler, run during the join
        if exc.code != signal.SIGTERM or not callable(on_sigterm):
            raise
        on_sigterm(signal.SIGTERM, None)  # sk-run's handler: records the signal and raises its interrupt
        raise
    finally:
        if on_sigterm is not None and threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGTERM, on_sigterm)


class RayAgent(HostAgent):
    """A :class:`HostAgent` as a Ray actor: its devices are the NPUs Ray assigned to its bundle."""

    def __init__(self, index: int, *, lease_root: str | None, lease_timeout_s: float, session: str | None, command: str,
                 device_ids: tuple[int, ...] | None = None) -> None:
        """``device_ids``: the NPUs a resumed session's host recorded its lease on (None: the ones Ray assigned now)."""
        import ray

        ctx = ray.get_runtime_context()
        self.node_id = ctx.get_node_id()
        info: dict[str, Any] = next((n for n in ray.nodes() if n["NodeID"] == self.node_id), {})
        self.node_name = str(info.get("NodeName") or self.node_id)
        self.host = str(info.get("NodeManagerHostname") or "")
        self.address = ray.util.get_node_ip_address()
        super().__init__(index, device_ids or assigned_npus(ctx.get_accelerator_ids()), lease_root=lease_root,
                         lease_timeout_s=lease_timeout_s, session=session, command=command, name=self.node_name)

    def start(self) -> dict[str, Any]:
        """The lease (or why not) and where this agent is."""
        return {**super().start(), "node_id": self.node_id, "node_name": self.node_name, "host": self.host, "address": self.address,
                "device_ids": list(self.device_ids or ())}


class HostsLeaseBlocked(LeaseFault):
    """A host's lease could not be had: nothing ran on any host."""

    def __init__(self, message: str, record: Mapping[str, Any] | None) -> None:
        super().__init__(message)
        self._record = dict(record or {})

    def record(self) -> dict[str, Any]:
        return {**super().record(), **self._record, "message": self.one_line()}


def _lost(ray: Any, exc: BaseException) -> bool:
    """Whether a failed call means the agent's host (its process or node) is gone, not a bug in the call."""
    return isinstance(exc, ray.exceptions.RayError) and not isinstance(exc, ray.exceptions.RayTaskError)


class RayHosts:
    """The reserved hosts of a session (see the module docstring); implements :class:`sk_runner.hosts.base.Hosts`."""

    def __init__(self, ray: Any, spec: HostsSpec, group: Any, agents: Sequence[Any], slots: Sequence[HostSlot],
                 lease_timeout_s: float) -> None:
        self.ray, self.spec, self.group = ray, spec, group
        self.lease_timeout_s = lease_timeout_s
        self.agents = list(agents)
        self.slots = tuple(slots)
        self.closed = False

    # -- records --------------------------------------------------------------------
    def lease_record(self) -> dict[str, Any]:
        return hosts_lease_record(self.slots)

    def environment(self) -> dict[str, Any]:
        return {"hosts": [slot.identity() for slot in self.slots]}

    def placement(self) -> dict[str, Any]:
        """Where a session runs (its ``session.json`` ``placement``): host 0's node as a one-host session records it,
        the hosts' spec and every host (Ray node, server, address, devices, lease), in rank-group order."""
        first = self.slots[0]
        return {"node_id": first.node_id, "node_name": first.node_name, "host": first.host, SPANS: self.spec.to_json(),
                "hosts": [slot.to_json() for slot in self.slots]}

    def fits(self, ranks: int) -> str | None:
        return hosts_problem(self.spec.hosts, self.spec.npus_per_host, ranks, self.spec.cpus_per_host)

    # -- runs -----------------------------------------------------------------------
    def _lost_error(self, index: int, exc: BaseException, what: str) -> HostLost:
        detail = " ".join(str(exc).split())[:300]
        return HostLost(f"{self.slots[index].describe()} was lost {what}: {type(exc).__name__}: {detail}; "
                        "the run is not a measurement (every group of the run was stopped)")

    def run(self, argv: list[str], *, cwd: Path, contract_env: Mapping[str, str], stdout_path: Path, stderr_path: Path,
            timeout_s: float | None) -> MultiHostResult:
        """Every host's group at once; the first that fails by itself, times out or is lost
        stops all the others. A lost host raises :class:`HostLost`, a host that could not start its group an
        :class:`EnvironmentBlocker` (:func:`~sk_runner.hosts.base.group_fault`: a group that died of the machine
        raises its :class:`~sk_runner.process.faults.EnvironmentFault`); otherwise one result for all groups."""
        ray = self.ray
        indices = list(range(self.spec.hosts))
        run_id = uuid.uuid4().hex
        try:
            port = ray.get(self.agents[0].free_port.remote(), timeout=ANSWER_GRACE_S)
        except Exception as exc:
            if _lost(ray, exc):
                raise self._lost_error(0, exc, "before the run started") from exc
            raise
        pending = {}
        for i in indices:
            env = group_env(i, self.spec.hosts, self.spec.npus_per_host, self.slots[0].address, port)
            pending[self.agents[i].run.remote(run_id, list(argv), str(cwd), dict(contract_env), env, str(host_path(stdout_path, i)),
                                              str(host_path(stderr_path, i)), timeout_s)] = i
        deadline = None if timeout_s is None else time.monotonic() + timeout_s + ANSWER_GRACE_S
        records: dict[int, Mapping[str, Any]] = {}
        lost: HostLost | None = None
        fault: EnvironmentBlocker | None = None
        stopping = False
        try:
            while pending:
                wait_s = None if deadline is None else max(0.0, deadline - time.monotonic())
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=wait_s)
                if not ready:  # a host that answers nothing past the run's own timeout is as good as lost
                    i = next(iter(pending.values()))
                    lost = lost or HostLost(f"{self.slots[i].describe()} did not answer within {timeout_s:g} s + {ANSWER_GRACE_S:g} s; "
                                            "the run is not a measurement")
                    self._stop(run_id, pending.values())
                    break
                for ref in ready:
                    i = pending.pop(ref)
                    try:
                        record = ray.get(ref)
                    except Exception as exc:
                        if not _lost(ray, exc):
                            raise
                        lost = lost or self._lost_error(i, exc, "during the run")
                        record = None
                    if record is not None and "fault" in record:
                        fault = fault or group_fault(record, self.slots[i].describe())
                    elif record is not None:
                        records[i] = {**record, "node_name": self.slots[i].node_name, "host": self.slots[i].host}
                    failed = record is None or "fault" in record or not record["process"].ok
                    if failed and not stopping:
                        stopping = True
                        self._stop(run_id, pending.values())
        except BaseException:  # an error of ours or an interrupt: no host's group of this run goes on
            self._stop(run_id, pending.values())
            raise
        if lost is not None:
            raise lost
        if fault is not None:
            raise fault
        return combine([records[i] for i in indices])

    def check_storage(self, folder: Path) -> None:
        """Every host sees ``folder`` (the session folder's parent) as this process does: a file written here is read
        back on each host. Else an :class:`EnvironmentBlocker` naming the first host that does not, before anything
        runs; its groups would write their logs where the session never sees them (and the run would look failed)."""
        folder.mkdir(parents=True, exist_ok=True)
        token, content = folder / f".sk-storage-check-{uuid.uuid4().hex}", uuid.uuid4().hex
        token.write_text(content, encoding="utf-8")
        try:
            answers = self.ray.get([agent.sees.remote(str(token), content) for agent in self.agents], timeout=ANSWER_GRACE_S)
        finally:
            token.unlink(missing_ok=True)
        for slot, problem in zip(self.slots, answers, strict=True):
            if problem is not None:
                raise EnvironmentBlocker(f"{slot.describe()} does not see the session's storage: {problem}; the session folder must "
                                         "be on storage every host shares, at the same path; nothing ran")

    def _stop(self, run_id: str, indices: Any) -> None:
        """Tell every host still running ``run_id`` to end its group (a lost host's call simply fails)."""
        for i in list(indices):
            self.agents[i].stop.remote(run_id)

    # -- the clean-device proof -------------------------------------------------------
    def proof(self, round_dir: Path, round_name: str, backend: str) -> HostsProof | None:
        if not any(slot.lease.get("mode") for slot in self.slots):
            return None
        key = uuid.uuid4().hex

        def ask(phase: str, **arguments: Any) -> list[Any]:
            refs = [agent.proof.remote(phase, key, str(round_dir), round_name, backend, **arguments) for agent in self.agents]
            answers = []
            for i, ref in enumerate(refs):
                try:
                    answers.append(self.ray.get(ref, timeout=self.lease_timeout_s + ANSWER_GRACE_S))
                except Exception as exc:
                    if not _lost(self.ray, exc):
                        raise
                    raise self._lost_error(i, exc, f"while proving its devices ({phase})") from exc
            return answers

        return HostsProof(ask)

    # -- the end --------------------------------------------------------------------
    def close(self) -> None:
        """End every agent (its lease is dropped with it) and give the hosts back (idempotent)."""
        if self.closed:
            return
        self.closed = True
        from ray.util import remove_placement_group

        for agent in self.agents:
            try:
                self.ray.kill(agent)
            except Exception:  # noqa: BLE001 - an agent of a lost host is already gone
                pass
        try:
            remove_placement_group(self.group)
        except Exception:  # noqa: BLE001 - a group Ray already removed (its job ended)
            pass

    def __enter__(self) -> RayHosts:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _pinned_selectors(ray: Any, pinned: Sequence[Mapping[str, Any]]) -> list[dict[str, str]]:
    """One ``ray.io/node-id`` selector per recorded host: the alive node that is that server (its node id, or
    the same named server back); a host of the session not in the cluster is :class:`HostLost`."""
    alive = [n for n in ray.nodes() if n.get("Alive")]
    selectors = []
    for record in pinned:
        node = next((n for n in alive if same_server(record, n["NodeID"], str(n.get("NodeName") or ""),
                                                     str(n.get("NodeManagerHostname") or ""))), None)
        if node is None:
            raise HostLost(f"host {record.get('index')} of the session ({record.get('node_name')}, node "
                           f"{str(record.get('node_id'))[:12]}) is not in the cluster; the session continues only on its own hosts")
        selectors.append({NODE_ID_LABEL: node["NodeID"]})
    return selectors


def recorded_root(host: Mapping[str, Any]) -> str | None:
    """The lease root a recorded host held (None: it held none): what it leases again when no root is given."""
    lease = host.get("lease") or {}
    return lease.get("root") if lease.get("mode") else None


def recorded_devices(host: Mapping[str, Any]) -> tuple[int, ...] | None:
    """The NPU ids a recorded host held its lease on, ascending (None: it held none)."""
    lease = host.get("lease") or {}
    ids = lease.get("device_ids") if lease.get("mode") else None
    return tuple(sorted(int(i) for i in ids)) if ids else None


def host_leases(hosts: int, lease_root: str | None, pinned: Sequence[Mapping[str, Any]] | None) -> list[tuple[str | None, tuple[int, ...] | None]]:
    """(lease root, device ids) each host's agent leases: a new session's under ``lease_root`` (else the host's own
    ``SK_RUN_LEASE_ROOT``: None) on the NPUs Ray assigns (None); a resumed session's host takes the lease it recorded
    again, on the devices it recorded whatever Ray assigns its bundle now (runs on other devices are another
    environment, protocol §5.1: the resume would stop at its first trial), under ``lease_root`` when given, else its
    recorded root. A recorded host that held no lease gets Ray's assignment, as before."""
    return [(lease_root or (None if pinned is None else recorded_root(pinned[i])), None if pinned is None else recorded_devices(pinned[i]))
            for i in range(hosts)]


def reserve(spec: HostsSpec, *, address: str | None, lease_root: str | None, lease_timeout_s: float, session: str | None,
            command: str, pinned: Sequence[Mapping[str, Any]] | None = None, wait_s: float = RESERVE_TIMEOUT_S) -> RayHosts:
    """Reserve the hosts of ``spec`` (``pinned``: a session's recorded hosts, in order) and take each one's lease: under
    ``lease_root``, else the root that host recorded, else the host's own ``SK_RUN_LEASE_ROOT``; a recorded host on the
    devices it recorded, a new one on those Ray assigns (:func:`host_leases`)."""
    ray = connect(address)
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    if pinned is not None and len(pinned) != spec.hosts:
        raise UsageError(f"the session records {len(pinned)} hosts, the run asks for {spec.hosts}")
    selectors = None if pinned is None else _pinned_selectors(ray, pinned)
    group = placement_group([spec.bundle() for _ in range(spec.hosts)], strategy="STRICT_SPREAD", bundle_label_selector=selectors)
    if not group.wait(timeout_seconds=wait_s):
        remove_placement_group(group)
        able = sum(all(n.get("Resources", {}).get(k, 0) >= v for k, v in spec.bundle().items()) for n in ray.nodes() if n.get("Alive"))
        where = "on the session's own servers" if pinned is not None else "each on another node (STRICT_SPREAD)"
        raise EnvironmentBlocker(f"could not reserve {spec.hosts} hosts with NPU: {spec.npus_per_host}, CPU: {spec.cpus_per_host:g} "
                                 f"{where} within {wait_s:g} s ({able} alive node(s) could hold one now); nothing ran")
    agent_class = ray.remote(RayAgent)
    leases = host_leases(spec.hosts, lease_root, pinned)
    agents = [agent_class.options(num_cpus=spec.cpus_per_host, resources={"NPU": spec.npus_per_host}, max_concurrency=8, max_restarts=0,
                                  scheduling_strategy=PlacementGroupSchedulingStrategy(group, placement_group_bundle_index=i))
              .remote(i, lease_root=root, lease_timeout_s=lease_timeout_s, session=session, command=f"{command} (host {i})", device_ids=ids)
              for i, (root, ids) in enumerate(leases)]
    hosts = RayHosts(ray, spec, group, agents, [], lease_timeout_s)
    try:  # every host takes its lease at once: none holds its NPUs idle while another waits for its own
        answers = ray.get([agent.start.remote() for agent in agents], timeout=lease_timeout_s + ANSWER_GRACE_S)
    except Exception as exc:
        hosts.close()
        if isinstance(exc, ray.exceptions.GetTimeoutError):
            raise EnvironmentBlocker(f"a host's agent did not answer within {lease_timeout_s + ANSWER_GRACE_S:g} s (the lease timeout "
                                     f"+ {ANSWER_GRACE_S:g} s); nothing ran") from exc
        if _lost(ray, exc):
            raise HostLost(f"a host was lost while its agent started: {' '.join(str(exc).split())[:300]}") from exc
        raise
    faults = [(i, a) for i, a in enumerate(answers) if "fault" in a]
    if faults:
        hosts.close()
        i, answer = faults[0]
        raise HostsLeaseBlocked(f"host {i} ({answer.get('node_name')}): {answer['fault']}", {**(answer.get("lease_blocked") or {}), "host": i})
    hosts.slots = tuple(HostSlot(i, a["node_id"], a["node_name"], a["host"], a["address"], tuple(a["device_ids"]), a["lease"])
                        for i, a in enumerate(answers))
    return hosts
