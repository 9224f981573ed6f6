"""Per-iteration launch and child timeline of the profiled rank (vectorized over iterations).

Times are float microseconds *relative to the first decode step*; writers add
the integer host / device clock bases, so no precision is lost on epoch
values (a float64 epoch in µs has only 0.25 µs resolution).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sk_runner.sim.model import StepModel
from sk_runner.sim.noise import NoiseParams, relative_jitter


@dataclass(frozen=True)
class Timeline:
    """Iterations x launches and iterations x members (relative µs)."""

    first_iteration: int
    launch_start: np.ndarray
    launch_dur: np.ndarray
    child_start: np.ndarray
    child_dur: np.ndarray

    @property
    def iterations(self) -> int:
        return int(self.launch_start.shape[0])

    def slice(self, start: int, stop: int) -> Timeline:
        """Iterations ``start .. stop-1`` (relative to this timeline)."""
        return Timeline(
            self.first_iteration + start,
            self.launch_start[start:stop],
            self.launch_dur[start:stop],
            self.child_start[start:stop],
            self.child_dur[start:stop],
        )


def step_starts(decode_ms: np.ndarray) -> np.ndarray:
    """Start of every decode step relative to the first one (µs)."""
    return np.concatenate([[0.0], np.cumsum(decode_ms[:-1] * 1000.0)])


def build_timeline(model: StepModel, decode_ms: np.ndarray, first: int, count: int, rng: np.random.Generator, params: NoiseParams) -> Timeline:
    """Timeline of iterations ``first .. first+count-1`` of one rank whose step times are ``decode_ms``."""
    graph = model.graph
    timing = graph.network.timing
    iters = np.arange(first, min(first + count, decode_ms.size))
    scale = (decode_ms[iters] * 1000.0 / model.step_us)[:, None]
    jit = relative_jitter(rng, (iters.size, graph.n_launches), params.launch_sigma, params.factor)
    cjit = relative_jitter(rng, (iters.size, graph.n_members), params.launch_sigma / 2, params.factor)
    launch_of = graph.member_launch
    factor = scale * jit
    child_off = model.child_start_us[None, :] * factor[:, launch_of]
    child_dur = np.where(graph.member_is_kernel, model.child_us[None, :] * factor[:, launch_of] * cjit, 0.0)
    child_end = child_off + child_dur
    first_m = graph.launch_first
    launch_dur = np.maximum(model.launch_us[None, :] * factor, np.maximum.reduceat(child_end, first_m, axis=1))

    main = graph.launch_stream == 0
    if model.options.get("stream_fusion") == 0:
        main = np.ones_like(main)
    slot = np.maximum(np.cumsum(main) - 1, 0)
    slot_first = np.flatnonzero(np.diff(np.concatenate([[-1], slot])))
    slot_dur = np.maximum.reduceat(launch_dur, slot_first, axis=1)
    slot_start = np.concatenate([np.zeros((iters.size, 1)), np.cumsum(slot_dur + timing.host_gap_us, axis=1)[:, :-1]], axis=1)
    base = step_starts(decode_ms)[iters][:, None]
    launch_start = base + slot_start[:, slot] + timing.host_gap_us * (~main)[None, :]
    child_start = launch_start[:, launch_of] + child_off
    return Timeline(int(first), launch_start, launch_dur, child_start, child_dur)
