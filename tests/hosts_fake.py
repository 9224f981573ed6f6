"""Two "hosts" in this process, for the engine tests of multi-host runs without Ray.

Each host is a :class:`~sk_runner.hosts.agent.HostAgent` with its own environment (lease root, simulated-device
registry), as two servers would have; their groups run in threads. The Ray placement, the stop-all-on-failure and
the lost host are :class:`~sk_runner.hosts.ray_hosts.RayHosts`' and are tested on a real cluster (test_hosts_ray.py).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from sk_runner.hosts.agent import HostAgent
from sk_runner.hosts.base import HostSlot, MultiHostResult, combine, group_fault, hosts_lease_record
from sk_runner.hosts.proof import HostsProof
from sk_runner.hosts.topology import HostsSpec, group_env, host_path, hosts_problem


class ThreadHosts:
    """``spec.hosts`` local agents (host ``i`` leases NPUs 0..npus_per_host-1 under ``<base>/locks-<i>``)."""

    def __init__(self, base: Path, spec: HostsSpec) -> None:
        self.spec = spec
        self.agents = []
        leases = []
        for i in range(spec.hosts):
            env = {**os.environ, "SK_RUN_LEASE_ROOT": str(base / f"locks-{i}"), "SK_SIM_DEVICE_REGISTRY": str(base / f"registry-{i}")}
            agent = HostAgent(i, tuple(range(spec.npus_per_host)), lease_root=None, lease_timeout_s=5.0, session=None, command="test",
                              env=env, name=f"host-{i}")
            answer = agent.start()
            assert "fault" not in answer, answer
            self.agents.append(agent)
            leases.append(answer["lease"])
        self.slots = tuple(HostSlot(i, f"node-{i}", f"host-{i}", "localhost", "127.0.0.1", a.device_ids or (), lease)
                           for i, (a, lease) in enumerate(zip(self.agents, leases, strict=True)))
        self.pool = ThreadPoolExecutor(max_workers=spec.hosts)

    def run(self, argv: list[str], *, cwd: Path, contract_env: Mapping[str, str], stdout_path: Path, stderr_path: Path,
            timeout_s: float | None) -> MultiHostResult:
        run_id = uuid.uuid4().hex
        futures = [self.pool.submit(self.agents[i].run, run_id, argv, str(cwd), dict(contract_env),
                                    group_env(i, self.spec.hosts, self.spec.npus_per_host, "127.0.0.1", 29500),
                                    str(host_path(stdout_path, i)), str(host_path(stderr_path, i)), timeout_s) for i in range(self.spec.hosts)]
        records = [f.result() for f in futures]
        for slot, record in zip(self.slots, records, strict=True):
            if "fault" in record:
                raise group_fault(record, slot.describe())
        return combine(records)

    def proof(self, round_dir: Path, round_name: str, backend: str) -> HostsProof:
        key = uuid.uuid4().hex
        return HostsProof(lambda phase, **kw: [a.proof(phase, key, str(round_dir), round_name, backend, **kw) for a in self.agents])

    def lease_record(self) -> dict[str, Any]:
        return hosts_lease_record(self.slots)

    def environment(self) -> dict[str, Any]:
        return {"hosts": [slot.identity() for slot in self.slots]}

    def fits(self, ranks: int) -> str | None:
        return hosts_problem(self.spec.hosts, self.spec.npus_per_host, ranks)

    def placement(self) -> dict[str, Any]:
        return {"spans": self.spec.to_json(), "hosts": [slot.to_json() for slot in self.slots]}

    def close(self) -> None:
        for agent in self.agents:
            agent.release()
        self.pool.shutdown()
