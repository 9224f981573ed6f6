"""Sessions as Ray tasks: Ray places a new session by its resources, a resumed one by hard node affinity.

Ray is imported here lazily, when a campaign runs on it. With no address it starts
an embedded local Ray (this machine, its CPUs and any NPUs Ray detects); with
an address (or ``RAY_ADDRESS``) it joins that cluster.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from sk_analytics.errors import EnvironmentBlocker
from sk_runner.campaign import storage
from sk_runner.campaign.job import Job, JobResult, NodeInfo, run_job
from sk_runner.campaign.resources import Capacity, NodeCapacity
from sk_runner.hosts.ray_hosts import join
from sk_runner.hosts.topology import assigned_npus

INSTALL_HINT = "pip install 'sk-tune[ray]'"
#: Embedded Ray's object store: sessions exchange only small records through it.
EMBEDDED_OBJECT_STORE = 128 * 1024 * 1024


def import_ray() -> Any:
    """The ray module, or an environment error saying how to install it."""
    try:
        import ray
    except ImportError:
        raise EnvironmentBlocker(f"Ray is not installed: {INSTALL_HINT} (without an address, omit --ray to run sessions one by one locally)") from None
    return ray


def _this_node() -> NodeInfo:
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    info: dict[str, Any] = next((n for n in ray.nodes() if n["NodeID"] == node_id), {})
    return NodeInfo(node_id, str(info.get("NodeName") or node_id), str(info.get("NodeManagerHostname") or ""))


def _ray_job(job: Job) -> JobResult:
    """The Ray task: run the job on whichever node Ray placed it, on the NPUs Ray assigned it (still under the host's
    lease: a hand-started sweep on the same devices and this session exclude each other)."""
    import dataclasses

    import ray

    if job.spans is not None:  # the sweep reserves the session's hosts on this very cluster
        return run_job(dataclasses.replace(job, ray_address=ray.get_runtime_context().gcs_address), _this_node())
    npus = assigned_npus(ray.get_runtime_context().get_accelerator_ids())
    return run_job(job if npus is None else dataclasses.replace(job, device_ids=npus), _this_node())


def _ray_probe(root: str, token: str) -> tuple[str, str, str]:
    node = _this_node()
    return node.node_id, node.node_name, storage.probe(root, token, node.node_id)


def autoscaler_node_types() -> tuple[NodeCapacity, ...]:
    """The node types the autoscaler may still start (``max_count`` not 0), from the cluster config
    it publishes in the GCS; none on a cluster without an autoscaler (or a Ray that does not say)."""
    try:
        from ray._private.state import state

        config = state.get_cluster_config()
    except Exception:  # noqa: BLE001 - a private API: without it, only alive nodes count
        return ()
    if config is None:
        return ()
    return tuple(NodeCapacity(f"node type {group.name or '?'}", dict(group.resources), None if group.max_count < 0 else group.max_count)
                 for group in config.node_group_configs if group.max_count != 0)


class RayExecutor:
    """Submits jobs to a Ray cluster (embedded or joined)."""

    kind = "ray"

    def __init__(self, address: str | None) -> None:
        ray = self.ray = import_ray()
        address = address or os.environ.get("RAY_ADDRESS") or None
        quiet: dict[str, Any] = {"log_to_driver": False, "logging_level": "ERROR", "configure_logging": True}
        if address:
            join(ray, address, **quiet)
        else:
            try:  # embedded: this machine only, bound to loopback (nothing of it is reachable from outside)
                ray.init(address="local", _node_ip_address="127.0.0.1", include_dashboard=False,
                         object_store_memory=EMBEDDED_OBJECT_STORE, **quiet)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise EnvironmentBlocker(f"cannot start Ray on this machine: {' '.join(str(exc).split())[:300]}") from exc
        self.address = address or "embedded"
        self._job = ray.remote(_ray_job)
        self._probe = ray.remote(_ray_probe)

    def nodes(self) -> list[NodeInfo]:
        return [NodeInfo(n["NodeID"], str(n.get("NodeName") or n["NodeID"]), str(n.get("NodeManagerHostname") or ""))
                for n in self.ray.nodes() if n.get("Alive")]

    def capacity(self) -> Capacity:
        """Every alive node's declared resources, and the autoscaler's node types where Ray reports them."""
        nodes = tuple(NodeCapacity(str(n.get("NodeName") or n["NodeID"]), dict(n.get("Resources") or {}))
                      for n in self.ray.nodes() if n.get("Alive"))
        return Capacity(nodes, autoscaler_node_types())

    def node_alive(self, node_id: str, settle_s: float = 0.0) -> bool:
        """Whether the node is alive; with ``settle_s``, give Ray that long to notice a death."""
        deadline = time.monotonic() + settle_s
        while True:
            alive = any(n.node_id == node_id for n in self.nodes())
            if not alive or time.monotonic() >= deadline:
                return alive
            time.sleep(0.5)

    def _pinned(self, node_id: str) -> Any:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        return NodeAffinitySchedulingStrategy(node_id=node_id, soft=False)

    def check_storage(self, root: Path, needs: list[dict[str, float]]) -> list[dict[str, str]]:
        """Probe every alive node that could run one of the tasks (``needs``: their resources); when none can
        yet (every task is pending_unsatisfiable), every alive node. A node that joins later is not probed."""
        token = storage.write_driver_token(root)
        alive = [n for n in self.ray.nodes() if n.get("Alive")]
        able = [n["NodeID"] for n in alive if any(all(n.get("Resources", {}).get(k, 0) >= v for k, v in need.items()) for need in needs)]
        able = able or [n["NodeID"] for n in alive]  # every task waits for a node yet to come: check the root on the nodes there are
        refs = [self._probe.options(num_cpus=0, max_retries=0, scheduling_strategy=self._pinned(node_id)).remote(str(root), token)
                for node_id in able]
        answers = {}
        for ref in refs:
            try:
                node_id, name, problem = self.ray.get(ref, timeout=120)
            except Exception as exc:
                raise EnvironmentBlocker(f"storage check on a node failed: {' '.join(str(exc).split())[:300]}") from exc
            answers[node_id] = (name, problem)
        return storage.verdict(root, token, answers)

    def submit(self, job: Job, resources: dict[str, float], pin: NodeInfo | None) -> Any:
        if job.spans is not None:  # the job only runs the sweep, which reserves the hosts (resources = one host's bundle)
            resources, pin = {"CPU": 0.0}, None
        options: dict[str, Any] = {
            "num_cpus": resources.get("CPU", 0.0),
            "resources": {k: v for k, v in resources.items() if k != "CPU"},
            "max_retries": 0,  # the campaign decides: same node, another node, or wait
        }
        if pin is not None:
            options["scheduling_strategy"] = self._pinned(pin.node_id)
        return self._job.options(**options).remote(job)

    def wait(self, handles: list[Any], timeout: float) -> list[Any]:
        """The jobs that have ended, as soon as one has (at most ``timeout`` s): waiting for
        all of them would hold every ended session until the poll timeout."""
        if not handles:
            return []
        ready: list[Any]
        ready, _ = self.ray.wait(handles, num_returns=1, timeout=timeout, fetch_local=False)
        return ready

    def result(self, handle: Any) -> JobResult:
        result: JobResult = self.ray.get(handle)
        return result

    def cancel(self, handle: Any, session: str) -> None:
        """Kill the task's worker: the sweep dies with it (parent-death signal), and each of its
        simulator/workload runs with the sweep (same signal), on whichever node they run.

        (A non-forced cancel only raises in the worker between two Python bytecodes, never while
        it waits for the sweep; the sweep itself is built to be killed at any point and resumed.)"""
        self.ray.cancel(handle, force=True)

    def is_node_failure(self, exc: BaseException) -> bool:
        """Errors that mean the node (not the session) failed."""
        from ray import exceptions as rex

        return isinstance(exc, (rex.NodeDiedError, rex.TaskUnschedulableError, rex.WorkerCrashedError, rex.LocalRayletDiedError))

    def shutdown(self) -> None:
        self.ray.shutdown()


def _ray_reap(root: str) -> list[str]:
    from sk_runner.campaign.job import reap_workers

    return reap_workers(Path(root), _this_node().node_id)


def reap_remote(executor: RayExecutor, root: Path) -> list[str]:
    """On every alive node, kill the sweep process groups recorded for that node."""
    reap = executor.ray.remote(_ray_reap)
    refs = [reap.options(num_cpus=0, max_retries=0, scheduling_strategy=executor._pinned(n.node_id)).remote(str(root))
            for n in executor.nodes()]
    return [name for found in executor.ray.get(refs, timeout=120) for name in found]
