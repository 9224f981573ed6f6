"""The controller's shared-NPU lease protocol as pure rules (protocol §9): markers, device ids, acquire-or-inherit.

A parent that holds the lease exports exactly three markers to its children.
A process started with all three, exactly matching the lease root and the
devices it needs, *inherits* (takes no lock); with none it *acquires*; with
some but not all, or with another root or device set, it *fails closed*.
Nothing here touches a file or a lock: :mod:`sk_runner.devices.lease` does.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

HELD = "SUPERKERNEL_DEVICE_LEASE_HELD"
IDS = "SUPERKERNEL_DEVICE_IDS"
ROOT = "SUPERKERNEL_DEVICE_LEASE_ROOT"
MARKERS = (HELD, IDS, ROOT)
"""The three markers a lease holder exports to its children, in the protocol's order."""
VISIBLE = "ASCEND_RT_VISIBLE_DEVICES"
"""The runtime's device mask: rank i of a child runs on the i-th id listed."""

ROOT_ENV = "SK_RUN_LEASE_ROOT"
DEVICES_ENV = "SK_RUN_DEVICE_IDS"
TIMEOUT_ENV = "SK_RUN_LEASE_TIMEOUT"
"""Environment defaults of ``--lease-root``, ``--device-id`` and ``--lease-timeout``."""

ACQUIRED, INHERITED = "acquired", "inherited"
LEASE_MODES = (ACQUIRED, INHERITED)

_SPEC = re.compile(r"^\s*(\d+)\s*(?:-\s*(\d+)\s*)?$")
MAX_DEVICE_ID = 4095


def parse_device_ids(specs: Iterable[str]) -> tuple[int, ...]:
    """Device ids of ``--device-id`` values (``3``, ``0-7``, ``0,2,4-5``; repeatable), ascending and unique.

    Raises ``ValueError`` naming the value and what was expected."""
    ids: set[int] = set()
    for spec in specs:
        for part in str(spec).split(","):
            match = _SPEC.match(part)
            if match is None:
                raise ValueError(f"--device-id {spec!r}: expected a device id N or a range A-B (e.g. 0-7)")
            low = int(match.group(1))
            high = int(match.group(2)) if match.group(2) is not None else low
            if high < low or high > MAX_DEVICE_ID:
                raise ValueError(f"--device-id {spec!r}: expected a range A-B with A <= B <= {MAX_DEVICE_ID}")
            ids.update(range(low, high + 1))
    return tuple(sorted(ids))


def format_ids(ids: Iterable[int]) -> str:
    """The marker form of a device set: ascending, comma-separated (``0,1``)."""
    return ",".join(str(i) for i in sorted(set(ids)))


def lease_root_text(root: str | os.PathLike[str]) -> str:
    """The absolute form of a lease root as the markers carry it (normalised, symbolic links kept)."""
    return os.path.abspath(os.fspath(root))


def lease_markers(root: str, ids: Iterable[int]) -> dict[str, str]:
    """The three markers a holder of ``ids`` under ``root`` exports to its children."""
    return {HELD: "1", IDS: format_ids(ids), ROOT: root}


def child_variables(root: str, ids: tuple[int, ...]) -> dict[str, str]:
    """What every rank process of a lease holder gets: the markers and the device mask (rank i on the i-th id)."""
    return {**lease_markers(root, ids), VISIBLE: ",".join(str(i) for i in ids)}


@dataclass(frozen=True)
class Need:
    """The lease a command needs: an absolute root and its device ids in ascending order."""

    root: str
    device_ids: tuple[int, ...]


@dataclass(frozen=True)
class Decision:
    """What to do about the lease: ``acquire``, ``inherit``, ``none`` (no lease asked, no markers) or ``refuse``."""

    action: str
    reason: str = ""
    need: Need | None = None


def markers_in(env: Mapping[str, str]) -> dict[str, str]:
    """The lease markers present in ``env`` (present = set, even to an empty value)."""
    return {name: env[name] for name in MARKERS if name in env}


def marker_need(env: Mapping[str, str]) -> Need | None:
    """The lease the complete, well-formed markers of ``env`` describe (None otherwise)."""
    found = markers_in(env)
    if len(found) != len(MARKERS) or found[HELD] != "1" or not os.path.isabs(found[ROOT]):
        return None
    try:
        ids = parse_device_ids([found[IDS]]) if found[IDS].strip() else ()
    except ValueError:
        return None
    if not ids or format_ids(ids) != found[IDS]:
        return None
    return Need(found[ROOT], ids)


def decide(env: Mapping[str, str], need: Need | None) -> Decision:
    """Acquire-or-inherit (protocol §9) for ``need`` in a process started with ``env``.

    All three markers exactly matching ``need`` -> inherit; none -> acquire (or
    ``none`` when no lease is needed); anything else -> refuse, with the reason.
    """
    found = markers_in(env)
    if not found:
        return Decision("none") if need is None else Decision("acquire", need=need)
    shown = ", ".join(f"{k}={v!r}" for k, v in found.items())
    if len(found) != len(MARKERS):
        missing = ", ".join(name for name in MARKERS if name not in found)
        return Decision("refuse", f"partial lease markers ({shown}; missing {missing}): a parent's lease is half exported")
    if need is None:  # complete markers are taken as the need (options.resolve): only a malformed set lands here
        return Decision("refuse", f"malformed lease markers ({shown}): expected {HELD}=1, {IDS}=ascending ids, {ROOT}=absolute path")
    expected = lease_markers(need.root, need.device_ids)
    differ = [name for name in MARKERS if found[name] != expected[name]]
    if differ:
        asked = f"root {need.root}, devices {format_ids(need.device_ids)}"
        return Decision("refuse", f"the lease markers ({shown}) are not this command's lease ({asked}): "
                                  f"{', '.join(differ)} differ(s); a child may only inherit exactly its parent's lease")
    return Decision("inherit", need=need)


def fits(device_ids: tuple[int, ...], ranks: int) -> str | None:
    """Why ``ranks`` ranks do not fit on the leased devices (rank i runs on the i-th device), or None."""
    if ranks > len(device_ids):
        return (f"--ranks {ranks} needs {ranks} leased devices (rank i runs on the i-th), "
                f"the lease holds {len(device_ids)} ({format_ids(device_ids)})")
    return None
