"""How the ranks of one run spread over hosts: the per-host bundle, the rank groups and their environment (pure).

A multi-host run has ``hosts x ranks_per_host`` ranks (one rank per NPU). Each
clean run starts one **rank group** per host at the same time: host ``h`` runs
ranks ``h*rph .. (h+1)*rph-1``. Every group gets the variables of
:func:`group_env` (the usual distributed-launch variables plus sk-tune's own,
which the simulator reads); a single-host run gets none of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sk_analytics.errors import UsageError

HOSTS_ENV = "SK_RUN_HOSTS"
HOST_INDEX_ENV = "SK_RUN_HOST_INDEX"
RANKS_PER_HOST_ENV = "SK_RUN_RANKS_PER_HOST"
GROUP_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "NODE_RANK", "GROUP_RANK", "NNODES",
                   "MASTER_ADDR", "MASTER_PORT", HOSTS_ENV, HOST_INDEX_ENV, RANKS_PER_HOST_ENV)
"""Every variable a rank group gets (docs/runner.md "Runs that span hosts")."""
DEFAULT_CPUS_PER_HOST = 1.0
RAY_HINT = "pip install 'sk-tune[ray]' and give --ray-address HOST:PORT (or RAY_ADDRESS)"


@dataclass(frozen=True)
class HostsSpec:
    """A run's hosts: how many, the NPUs (= ranks) on each, the CPUs its group needs there."""

    hosts: int
    npus_per_host: int
    cpus_per_host: float = DEFAULT_CPUS_PER_HOST

    @property
    def ranks(self) -> int:
        return self.hosts * self.npus_per_host

    def bundle(self) -> dict[str, float]:
        """The Ray resources reserved on each host (one placement-group bundle)."""
        return {"NPU": float(self.npus_per_host), "CPU": float(self.cpus_per_host)}

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HostsSpec:
        return cls(int(data["hosts"]), int(data["npus_per_host"]), float(data.get("cpus_per_host", DEFAULT_CPUS_PER_HOST)))


SPANS = "spans"
"""The key of a session's ``placement`` that holds its :class:`HostsSpec` (beside ``hosts``: every reserved host)."""


def recorded_spans(placement: Mapping[str, Any] | None) -> tuple[HostsSpec, list[dict[str, Any]]] | None:
    """The hosts a session's ``placement`` records (its spec and every host, in rank-group order); None: one host."""
    if not placement or not isinstance(placement.get(SPANS), Mapping):
        return None
    return HostsSpec.from_json(placement[SPANS]), [dict(h) for h in placement.get("hosts") or ()]


def spans_of(hosts: int, npus_per_host: int | None, cpus_per_host: float = DEFAULT_CPUS_PER_HOST) -> HostsSpec | None:
    """The :class:`HostsSpec` of checked settings (None for one host)."""
    return None if hosts == 1 else HostsSpec(hosts, int(npus_per_host or 0), cpus_per_host)


def hosts_problem(hosts: int, npus_per_host: int | None, ranks: int | None, cpus_per_host: float = DEFAULT_CPUS_PER_HOST) -> str | None:
    """Why ``hosts`` x ``npus_per_host`` cannot run ``ranks`` ranks (one rank per NPU), or None."""
    if hosts < 1:
        return f"hosts {hosts}: expected at least 1"
    if hosts == 1:
        return None
    if npus_per_host is None or npus_per_host < 1:
        return f"hosts {hosts} needs npus_per_host (the NPUs, one rank each, of every host)"
    if not cpus_per_host > 0:
        return f"cpus_per_host {cpus_per_host:g}: expected a positive number"
    if ranks is not None and ranks != hosts * npus_per_host:
        return (f"hosts {hosts} x npus_per_host {npus_per_host} = {hosts * npus_per_host} ranks, "
                f"but the workload runs {ranks} (one rank per NPU)")
    return None


def check_hosts(hosts: int, npus_per_host: int | None, ranks: int | None, cpus_per_host: float = DEFAULT_CPUS_PER_HOST) -> HostsSpec | None:
    """The :class:`HostsSpec` of a multi-host run (None for one host); a usage error (exit 2) when it cannot be."""
    problem = hosts_problem(hosts, npus_per_host, ranks, cpus_per_host)
    if problem is not None:
        raise UsageError(problem)
    return spans_of(hosts, npus_per_host, cpus_per_host)


def assigned_npus(accelerator_ids: Mapping[str, Sequence[str]]) -> tuple[int, ...] | None:
    """The NPUs Ray assigned to the running task or actor (``get_accelerator_ids()``), ascending; None when it assigned none."""
    ids = [int(i) for i in accelerator_ids.get("NPU") or () if str(i).isdigit()]
    return tuple(sorted(ids)) or None


def same_server(record: Mapping[str, Any], node_id: str, node_name: str, host: str) -> bool:
    """True when the node (``node_id``, ``node_name``, ``host``) is the server ``record`` names: the same Ray node,
    or the same named server back after a restart (a new node id, the same name and host)."""
    return record.get("node_id") == node_id or (bool(record.get("node_name")) and record.get("node_name") == node_name
                                                   and record.get("host") == host)


def rank_range(index: int, ranks_per_host: int) -> range:
    """The global ranks of host ``index``'s group."""
    return range(index * ranks_per_host, (index + 1) * ranks_per_host)


def group_env(index: int, hosts: int, ranks_per_host: int, master_addr: str, master_port: int) -> dict[str, str]:
    """The variables of host ``index``'s rank group. ``RANK``/``LOCAL_RANK`` are the group's first rank (a launcher
    that starts one process per rank, such as torchrun, sets its own per process from ``NODE_RANK`` and the rest)."""
    return {
        "WORLD_SIZE": str(hosts * ranks_per_host),
        "RANK": str(index * ranks_per_host),
        "LOCAL_RANK": "0",
        "LOCAL_WORLD_SIZE": str(ranks_per_host),
        "NODE_RANK": str(index),
        "GROUP_RANK": str(index),
        "NNODES": str(hosts),
        "MASTER_ADDR": master_addr,
        "MASTER_PORT": str(master_port),
        HOSTS_ENV: str(hosts),
        HOST_INDEX_ENV: str(index),
        RANKS_PER_HOST_ENV: str(ranks_per_host),
    }


def local_ranks(env: Mapping[str, str], world: int) -> range:
    """The global ranks this process runs: all ``world`` ranks, or its host's group under :func:`group_env`.

    Raises ``ValueError`` naming the variable for values that do not describe a group of ``world`` ranks."""
    raw = env.get(HOSTS_ENV, "").strip()
    if raw in ("", "1"):
        return range(world)
    values = {}
    for name in (HOSTS_ENV, HOST_INDEX_ENV, RANKS_PER_HOST_ENV):
        text = env.get(name, "").strip()
        if not text.isdigit():
            raise ValueError(f"{name}={text!r}: expected a non-negative integer (a rank group of a multi-host run)")
        values[name] = int(text)
    hosts, index, per_host = values[HOSTS_ENV], values[HOST_INDEX_ENV], values[RANKS_PER_HOST_ENV]
    if per_host < 1 or index >= hosts:
        raise ValueError(f"{HOST_INDEX_ENV}={index}, {HOSTS_ENV}={hosts}, {RANKS_PER_HOST_ENV}={per_host}: no such rank group")
    ranks = rank_range(index, per_host)
    if ranks.start >= world:
        raise ValueError(f"host {index} of {hosts} ({per_host} ranks each) has no rank among the {world} ranks of the run")
    return range(ranks.start, min(ranks.stop, world))


def host_path(path: Path, index: int) -> Path:
    """Where host ``index``'s group writes what a one-host run writes to ``path`` (``stdout.txt`` ->
    ``stdout.host-1.txt``); host 0 keeps ``path`` itself, so a one-host reader finds it unchanged."""
    if index == 0:
        return path
    return path.with_name(f"{path.stem}.host-{index}{path.suffix}")
