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
from sk_runner.devices.markers import DEVICES_ENV, ROOT_ENV, TIMEOUT_ENV, Need, format_ids, lease_root_text, marker_need, parse_device_ids
from sk_runner.limits import LEASE_TIMEOUT

F = TypeVar("F", bound=Callable[..., Any])


def lease_options(command: F) -> F:
    """Add the shared lease options to a click command (parameters ``lease_root``, ``device_ids``, ``lease_timeout``)."""
    for option in reversed((
        click.option("--lease-root", type=PathArg(file_okay=False, path_type=Path), default=None, envvar=ROOT_ENV, show_envvar=True,
                     help="the host's NPU lease folder (<DIR>/npu-device-<id>.lock, shared with the controller); "
                          "default: the root of an inherited lease"),
        click.option("--device-id", "device_ids", multiple=True, metavar="N|A-B", envvar=DEVICES_ENV, show_envvar=True,
                     help="NPU to lease, repeatable or a range (0-7); rank i runs on the i-th id in ascending order"),
        click.option("--lease-timeout", type=LEASE_TIMEOUT, default=DEFAULT_LEASE_TIMEOUT_S, show_default=True,
                     envvar=TIMEOUT_ENV, show_envvar=True,
                     help="seconds to wait for busy devices before giving up (exit 3, nothing runs); finite, >= 0"),
        click.option("--unleased", is_flag=True,
                     help="run without a device lease on real NPUs (npu backend, or command backend where npu-smi shows NPUs); "
                          "recorded: nothing proves that no other work shared the NPUs"),
    )):
        command = option(command)
    return command


def lease_request(lease_root: Path | None, device_ids: tuple[str, ...], lease_timeout: float, *,
                  env: Mapping[str, str] | None = None, default: Need | None = None, unleased: bool = False) -> LeaseRequest:
    """The request of the lease options: both given, a parent's complete markers, ``default``, or none
    (``unleased``: the user's explicit opt-out, which goes with no lease option).

    A root without devices (or devices without a root) is a usage error (exit 2)."""
    env = os.environ if env is None else env
    try:
        ids = parse_device_ids(device_ids)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if unleased:
        if lease_root is not None or ids:
            raise UsageError("--unleased runs without a device lease: it goes without --lease-root/--device-id "
                             f"({ROOT_ENV}/{DEVICES_ENV})")
        return LeaseRequest(None, lease_timeout, unleased=True)
    if lease_root is None and not ids:
        return LeaseRequest(marker_need(env) or default, lease_timeout)
    if lease_root is None:
        raise UsageError(f"--device-id needs --lease-root DIR (or {ROOT_ENV}): the folder of the host's NPU lease files")
    if not ids:
        raise UsageError(f"--lease-root needs the devices to lease: --device-id N or A-B (or {DEVICES_ENV})")
    return LeaseRequest(Need(lease_root_text(lease_root), ids), lease_timeout)


def resume_request(lease_root: Path | None, device_ids: tuple[str, ...], lease_timeout: float, *, recorded: Need | None,
                   recorded_unleased: bool = False, unleased: bool = False, env: Mapping[str, str] | None = None,
                   what: str = "the session", again: str = "") -> LeaseRequest:
    """The lease of something that resumes (a sweep session, a trial round): the lease it recorded, taken again.

    Without options: the recorded lease (acquired again, or inherited from exactly matching markers), the recorded
    opt-out, else as :func:`lease_request`. Options naming another lease than the recorded one are a usage error
    (exit 2) that names the recorded lease and ``again``, the command that takes it."""
    asked = lease_request(lease_root, device_ids, lease_timeout, env=env, unleased=unleased)
    given = lease_root is not None or bool(device_ids) or unleased
    if not given:
        if recorded is not None:
            return LeaseRequest(recorded, lease_timeout)
        return LeaseRequest(None, lease_timeout, unleased=True) if recorded_unleased else asked
    if recorded is None and not recorded_unleased:
        return asked
    if asked.need == recorded and asked.unleased == recorded_unleased:
        return asked
    was = "no lease (--unleased)" if recorded is None else f"devices {format_ids(recorded.device_ids)} under {recorded.root}"
    raise UsageError(f"{what} recorded {was}, this command asks for {asked.describe()}: a resume takes the recorded lease again "
                     f"(runs on other devices are another environment); {again or 'give no lease options'}")


def require_lease(request: LeaseRequest, backend: str, *, has_npus: Callable[[], bool] | None = None) -> None:
    """Refuse (exit 2) clean runs on real NPUs without a lease, unless the user opted out (``--unleased``): the ``npu``
    backend, or ``command`` on a host where ``npu-smi`` shows NPUs (``has_npus``, asked only then)."""
    if request.need is not None or request.unleased or backend == "sim":
        return
    if backend != "npu" and not (has_npus or npus_shown)():
        return
    where = "the npu backend" if backend == "npu" else "this host (npu-smi shows NPUs)"
    raise UsageError(f"clean runs on {where} are leased: give --lease-root DIR and --device-id N|A-B (or {ROOT_ENV} and "
                     f"{DEVICES_ENV}), or opt out with --unleased (recorded; nothing then proves the NPUs were not shared)")


def npus_shown() -> bool:
    """Whether ``npu-smi info`` runs here and lists at least one NPU."""
    import shutil
    import subprocess

    from sk_runner.devices.occupancy import NPU_SMI, parse_npu_smi

    exe = shutil.which(NPU_SMI)
    if exe is None:
        return False
    try:
        out = subprocess.run([exe, "info"], capture_output=True, text=True, timeout=60, check=False, stdin=subprocess.DEVNULL)
        table = parse_npu_smi(out.stdout) if out.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return False
    return table is not None and bool(table.devices or table.rows or table.idle_npus)


def rerun_options(request: LeaseRequest) -> list[str]:
    """The options that ask for ``request`` again (in a recorded rerun command)."""
    if request.unleased:
        return ["--unleased"]
    if request.need is None:
        return []
    devices = [a for i in request.need.device_ids for a in ("--device-id", str(i))]
    return ["--lease-root", request.need.root, *devices, "--lease-timeout", f"{request.timeout_s:g}"]
