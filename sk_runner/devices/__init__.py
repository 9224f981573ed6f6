"""Devices owned: the controller's shared-NPU lease and the clean-device proof (protocol §9, docs/runner.md).

:mod:`.markers` (the three markers, device ids, acquire-or-inherit as pure
rules), :mod:`.lease` (``flock`` on ``<root>/npu-device-<id>.lock``: acquire,
inherit, hold, the holder record), :mod:`.options` (the CLI options every
device command shares), :mod:`.registry` (the simulated host's occupancy
registry), :mod:`.occupancy` (who uses a device: ``npu-smi info`` or the
registry), :mod:`.proof` (before/after every clean run). This face loads them
on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sk_analytics.lazy_module import lazy_face

if TYPE_CHECKING:
    from sk_runner.devices.lease import (
        DEFAULT_LEASE_TIMEOUT_S as DEFAULT_LEASE_TIMEOUT_S,
        HeldLease as HeldLease,
        Holder as Holder,
        LazyLease as LazyLease,
        LeaseBlocked as LeaseBlocked,
        LeaseFault as LeaseFault,
        LeaseRefused as LeaseRefused,
        LeaseRequest as LeaseRequest,
        acquire as acquire,
        hold as hold,
        lease_record as lease_record,
        lock_path as lock_path,
        take as take,
    )
    from sk_runner.devices.markers import (
        Need as Need,
        decide as decide,
        parse_device_ids as parse_device_ids,
    )
    from sk_runner.devices.occupancy import (
        DeviceProcess as DeviceProcess,
        occupancy_source as occupancy_source,
        parse_npu_smi as parse_npu_smi,
    )
    from sk_runner.devices.proof import (
        CleanDeviceProof as CleanDeviceProof,
    )

_HOMES = {
    **dict.fromkeys(("DEFAULT_LEASE_TIMEOUT_S", "HeldLease", "Holder", "LazyLease", "LeaseBlocked", "LeaseFault", "LeaseRefused",
                     "LeaseRequest", "acquire", "hold", "lease_record", "lock_path", "take"), "lease"),
    **dict.fromkeys(("Need", "decide", "parse_device_ids"), "markers"),
    **dict.fromkeys(("DeviceProcess", "occupancy_source", "parse_npu_smi"), "occupancy"),
    "CleanDeviceProof": "proof",
}
__all__ = sorted(_HOMES)
__getattr__ = lazy_face(__name__, _HOMES)
