"""The lease options every device command shares: ``--lease-root``, ``--device-id``, ``--lease-timeout``.

``@lease_options`` adds them (with their environment defaults) to a click
command; :func:`lease_request` turns the values into a
:class:`~sk_runner.devices.lease.LeaseRequest`. Without the options the
complete markers of a parent's lease are the request (the child inherits it),
then a command's own default (the demo's lease under its session, the lease
a resumed sweep recorded), else no lease. Light: ``--help`` imports nothing
heavy.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import click

from sk_analytics.cli._base import PathArg
from sk_analytics.errors import UsageError
from sk_runner.devices.lease import DEFAULT_LEASE_TIMEOUT_S, LeaseRequest
from sk_runner.devices.markers import DEVICES_ENV, ROOT_ENV, TIMEOUT_ENV, Need, lease_root_text, marker_need, parse_device_ids

F = TypeVar("F", bound=Callable[..., Any])


def lease_options(command: F) -> F:
    """Add the shared lease options to a click command (parameters ``lease_root``, ``device_ids``, ``lease_timeout``)."""
    for option in reversed((
        click.option("--lease-root", type=PathArg(file_okay=False, path_type=Path), default=None, envvar=ROOT_ENV, show_envvar=True,
                     help="the host's NPU lease folder (<DIR>/npu-device-<id>.lock, shared with the controller); "
                          "default: the root of an inherited lease"),
        click.option("--device-id", "device_ids", multiple=True, metavar="N|A-B", envvar=DEVICES_ENV, show_envvar=True,
                     help="NPU to lease, repeatable or a range (0-7); rank i runs on the i-th id in ascending order"),
        click.option("--lease-timeout", type=click.FloatRange(min=0), default=DEFAULT_LEASE_TIMEOUT_S, show_default=True,
                     envvar=TIMEOUT_ENV, show_envvar=True,
                     help="seconds to wait for busy devices before giving up (exit 3, nothing runs)"),
    )):
        command = option(command)
    return command


def lease_request(lease_root: Path | None, device_ids: tuple[str, ...], lease_timeout: float, *,
                  env: Mapping[str, str] | None = None, default: Need | None = None) -> LeaseRequest:
    """The request of the lease options: both given, a parent's complete markers, ``default``, or none.

    A root without devices (or devices without a root) is a usage error (exit 2)."""
    env = os.environ if env is None else env
    try:
        ids = parse_device_ids(device_ids)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if lease_root is None and not ids:
        return LeaseRequest(marker_need(env) or default, lease_timeout)
    if lease_root is None:
        raise UsageError(f"--device-id needs --lease-root DIR (or {ROOT_ENV}): the folder of the host's NPU lease files")
    if not ids:
        raise UsageError(f"--lease-root needs the devices to lease: --device-id N or A-B (or {DEVICES_ENV})")
    return LeaseRequest(Need(lease_root_text(lease_root), ids), lease_timeout)


def rerun_options(request: LeaseRequest) -> list[str]:
    """The options that ask for ``request`` again (in a recorded rerun command)."""
    if request.need is None:
        return []
    devices = [a for i in request.need.device_ids for a in ("--device-id", str(i))]
    return ["--lease-root", request.need.root, *devices, "--lease-timeout", f"{request.timeout_s:g}"]
