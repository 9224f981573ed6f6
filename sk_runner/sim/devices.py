"""The simulated NPUs a simulated process uses: ``ASCEND_RT_VISIBLE_DEVICES``, the occupancy registry, foreign loads.

Rank i runs on the i-th id of ``ASCEND_RT_VISIBLE_DEVICES`` (without it, on
device i), as on a real host. While it runs, the process keeps its entries in
the simulated host's occupancy registry (:mod:`sk_runner.devices.registry`),
so a clean-device proof sees it, and its kernels on a device that a foreign
load uses (``sk-run sim --foreign-load``) are slowed by that load's factor.
Artifacts keep the logical device numbers 0..n-1, as the runtime numbers the
visible devices.
"""

from __future__ import annotations

import shlex
import signal
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from sk_analytics.errors import InputError
from sk_runner.devices.markers import VISIBLE
from sk_runner.devices.registry import FOREIGN_LOAD, WORKLOAD, Registration, registry_root, slowdowns


def rank_devices(env: Mapping[str, str], ranks: int) -> list[int]:
    """The device of each rank: the i-th id of ``ASCEND_RT_VISIBLE_DEVICES``, else device i."""
    raw = env.get(VISIBLE, "").strip()
    if not raw:
        return list(range(ranks))
    parts = [p.strip() for p in raw.split(",")]
    if not all(p.isdigit() for p in parts):
        raise InputError(VISIBLE, f"value {raw!r} is not a list of device ids", expected="comma-separated device ids, e.g. 0,1")
    ids = [int(p) for p in parts]
    if len(ids) < ranks:
        raise InputError(VISIBLE, f"value {raw!r} makes {len(ids)} device(s) visible, {ranks} ranks need {ranks}",
                         expected="one visible device per rank (rank i on the i-th)")
    return ids[:ranks]


def this_command() -> str:
    """This process's command line as a user would type it (what a proof names)."""
    head = sys.argv[0] if sys.argv else ""
    program = ("python -m sk_runner.sim" if head.endswith("__main__.py") else "sk-run" if head == "-c" else Path(head).name or "python")
    return " ".join([program, shlex.join(sys.argv[1:])]).strip()


@contextmanager
def occupy(env: Mapping[str, str], ranks: int) -> Iterator[np.ndarray]:
    """Register this process on its ranks' devices while it runs; yields each rank's foreign-load slowdown."""
    devices = rank_devices(env, ranks)
    root = registry_root(env)
    with Registration(root, devices, command=this_command(), kind=WORKLOAD):
        yield np.asarray(slowdowns(root, devices), dtype=float)


def foreign_load(devices: tuple[int, ...], slowdown: float, *, env: Mapping[str, str], until_file: Path | None = None,
                 duration_s: float | None = None, poll_s: float = 0.1) -> int:
    """Use ``devices`` as a process outside any lease: registered in the occupancy registry, slowing every simulated
    kernel there by ``slowdown``, until SIGTERM/SIGINT, ``until_file`` exists or ``duration_s`` passed."""
    root = registry_root(env)
    stop = {"now": False}

    def ended(signum: int, frame: object) -> None:
        stop["now"] = True

    previous = {sig: signal.signal(sig, ended) for sig in (signal.SIGTERM, signal.SIGINT)}
    deadline = None if duration_s is None else time.monotonic() + duration_s
    try:
        with Registration(root, devices, command=this_command(), kind=FOREIGN_LOAD, slowdown=slowdown):
            ids = ",".join(str(d) for d in devices)
            print(f"foreign load on NPU {ids} (slowdown x{slowdown:g}), pid registered in {root}", flush=True)
            while not stop["now"] and (until_file is None or not until_file.exists()) and (deadline is None or time.monotonic() < deadline):
                time.sleep(poll_s)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0
