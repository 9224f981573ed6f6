"""Runs that span hosts: one rank group per host, started together, stopped together (docs/runner.md).

:mod:`.topology` (the per-host bundle, the rank groups and their environment,
pure), :mod:`.base` (the :class:`Hosts` seam the engines use, each host's
record, one result for all groups), :mod:`.agent` (one host's lease holder and
group starter), :mod:`.proof` (the clean-device proof on every host),
:mod:`.ray_hosts` (the placement group on Ray; Ray is imported there, lazily).
This face loads them on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sk_analytics.lazy_module import lazy_face

if TYPE_CHECKING:
    from sk_runner.hosts.base import (
        HostLost as HostLost,
        Hosts as Hosts,
        HostSlot as HostSlot,
        MultiHostResult as MultiHostResult,
    )
    from sk_runner.hosts.ray_hosts import (
        RayHosts as RayHosts,
        reserve as reserve,
    )
    from sk_runner.hosts.topology import (
        HostsSpec as HostsSpec,
        check_hosts as check_hosts,
        group_env as group_env,
        local_ranks as local_ranks,
    )

_HOMES = {
    **dict.fromkeys(("HostLost", "Hosts", "HostSlot", "MultiHostResult"), "base"),
    **dict.fromkeys(("RayHosts", "reserve"), "ray_hosts"),
    **dict.fromkeys(("HostsSpec", "check_hosts", "group_env", "local_ranks"), "topology"),
}
__all__ = sorted(_HOMES)
__getattr__ = lazy_face(__name__, _HOMES)
