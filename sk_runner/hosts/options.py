"""The options of a command whose runs may span hosts: ``--hosts``, ``--npus-per-host``, ``--cpus-per-host``, ``--ray-address``.

``@hosts_options`` adds them to a click command; :func:`hosts_request` checks
them against the run's ranks and the lease options (one line, exit 2, for
anything impossible, also for ``--hosts`` above 1 without Ray). Light: ``--help``
imports nothing heavy.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any, TypeVar

import click

from sk_analytics.cli._base import FiniteFloat
from sk_analytics.errors import UsageError
from sk_runner.hosts.topology import DEFAULT_CPUS_PER_HOST, RAY_HINT, HostsSpec, check_hosts

F = TypeVar("F", bound=Callable[..., Any])


def hosts_options(command: F) -> F:
    """Add the multi-host options to a click command (parameters ``hosts``, ``npus_per_host``, ``cpus_per_host``, ``ray_address``)."""
    for option in reversed((
        click.option("--hosts", "hosts", type=click.IntRange(min=1), default=1, show_default=True,
                     help="hosts the ranks span (one rank group per host, started together; above 1 needs Ray)"),
        click.option("--npus-per-host", "npus_per_host", type=click.IntRange(min=1), default=None,
                     help="NPUs (one rank each) reserved on every host; hosts x this = the run's ranks"),
        click.option("--cpus-per-host", "cpus_per_host", type=FiniteFloat(min=0, min_open=True), default=DEFAULT_CPUS_PER_HOST,
                     show_default=True, help="CPUs reserved with each host's NPUs"),
        click.option("--ray-address", "ray_address", default=None, envvar="RAY_ADDRESS", show_envvar=True, metavar="HOST:PORT",
                     help="the Ray cluster whose nodes are the hosts (with --hosts above 1)"),
    )):
        command = option(command)
    return command


def hosts_request(hosts: int, npus_per_host: int | None, cpus_per_host: float, ray_address: str | None, *, ranks: int | None,
                  device_ids: tuple[str, ...] = ()) -> HostsSpec | None:
    """The hosts asked for (None: this host only); a usage error (exit 2) for impossible values, for ``--device-id``
    beside hosts (each host leases the NPUs Ray assigns it) and for ``--hosts`` above 1 without Ray."""
    spec = check_hosts(hosts, npus_per_host, ranks, cpus_per_host)
    if spec is None:
        return None
    if device_ids:
        raise UsageError("--device-id is for one host; with --hosts each host leases the NPUs Ray assigns it (--lease-root names "
                         "the hosts' lease folder)")
    require_ray(ray_address, f"--hosts {hosts}")
    return spec


def require_ray(address: str | None, what: str) -> None:
    """A usage error (exit 2) naming ``what`` when Ray is not installed or no cluster address is given."""
    if importlib.util.find_spec("ray") is None:
        raise UsageError(f"{what}: a run that spans hosts needs Ray, which is not installed ({RAY_HINT}); without Ray a run uses this host only")
    if not address:
        raise UsageError(f"{what}: a run that spans hosts needs a Ray cluster: give --ray-address HOST:PORT (or RAY_ADDRESS); "
                         "without Ray a run uses this host only")
