"""Unstable identifiers of one simulated process (formats.md §4 "Stable vs unstable identity").

pid, rts model id, scope/sk ids, node/stream/task ids and the device clock
differ between processes exactly as they do on real hardware, even for the
same config and seed. They are drawn from the OS entropy, never from the
timing seed, so a test cannot accidentally rely on them being equal.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class ProcessIds:
    pid: int
    host: str
    started_ns: int
    rts_model_id: int
    call_count: int
    scope_id_base: int
    node_id_base: int
    stream_id_base: int
    task_id_base: int
    device_clock_offset_us: float
    """Device clock = host clock - this offset (device clock counts from device boot)."""
    rng_seed: int
    rank: int = 0
    """The process's rank in its tensor-parallel group (``RANK``)."""
    device_id: int = 0
    """The NPU the rank runs on (one device per rank)."""

    @property
    def model_id(self) -> str:
        """``args.modelId`` of sk_prof events: ``<rtsModelId>_<callCount>``."""
        return f"{self.rts_model_id}_{self.call_count}"

    @property
    def model_dir(self) -> str:
        return f"model_{self.rts_model_id}_{self.call_count}"

    def rng(self) -> np.random.Generator:
        """Generator for id gaps and permutations (not for timing)."""
        return np.random.default_rng(self.rng_seed)


def new_process_ids(rank: int = 0, pid: int | None = None) -> ProcessIds:
    """Fresh ids for this process (``rank`` on device ``rank``; ``pid`` defaults to this process's)."""
    pid = os.getpid() if pid is None else pid
    entropy = np.random.default_rng([pid, rank, time.time_ns() & 0xFFFFFFFF, int.from_bytes(os.urandom(4), "little")])
    started = time.time_ns()
    boot_us = float(entropy.uniform(3.0e9, 9.0e10))  # device up for 1 h .. 1 day
    return ProcessIds(
        pid=pid,
        host=socket.gethostname().split(".")[0] or "localhost",
        started_ns=started,
        rts_model_id=int(entropy.integers(0, 64)),
        call_count=int(entropy.integers(1, 4)),
        scope_id_base=int(entropy.integers(0, 400)),
        node_id_base=int(entropy.integers(100, 5000)),
        stream_id_base=int(entropy.integers(2, 40)),
        task_id_base=int(entropy.integers(1, 30000)),
        device_clock_offset_us=started / 1000.0 - boot_us,
        rng_seed=int(entropy.integers(0, 2**63 - 1)),
        rank=rank,
        device_id=rank,
    )


def rank_process_ids(ranks: Iterable[int], first: int = 0) -> dict[int, ProcessIds]:
    """Ids of the given ranks of one tensor-parallel launch (``first``: the first rank on this host), rank r on device r - first.

    The simulator is one OS process standing in for all ranks of its host: its first rank has this
    process's pid, rank r the pid r - first after it, and every rank its own ids (each
    numbers its model, scopes, nodes and tasks independently, as real ranks do)."""
    pid = os.getpid()
    ids = {r: new_process_ids(rank=r, pid=pid + r - first) for r in ranks}
    return {r: replace(i, device_id=r - first) for r, i in ids.items()} if first else ids
