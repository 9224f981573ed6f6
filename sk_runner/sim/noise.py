"""Run-to-run noise of the simulated device: seeded, realistic, scalable to zero.

A decode step of rank ``r`` at iteration ``i`` takes ``step_us * M[r, i]`` where
``M`` combines a per-process offset (shared by all ranks), per-rank offsets
with one straggler rank, per-iteration jitter with rare spikes, and a
deterministic warm-up ramp over the first iterations. ``factor`` scales every
random part (``--noise 0`` leaves only the warm-up ramp: fully deterministic).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class NoiseParams:
    """Relative sigmas (fractions of the step time); defaults give ~0.5-1% run-to-run."""

    process_sigma: float = 0.0035
    rank_sigma: float = 0.001
    straggler_low: float = 0.002
    straggler_high: float = 0.006
    jitter_sigma: float = 0.006
    spike_probability: float = 0.002
    spike_low: float = 0.02
    spike_high: float = 0.04
    warmup_amplitude: float = 0.35
    launch_sigma: float = 0.012
    """Per-launch jitter inside a step (profiling timelines only)."""
    core_sigma: float = 0.02
    """Per-core spread of one child's duration (sk_prof only)."""
    factor: float = 1.0


def warmup_ramp(iterations: int, warmup: int, amplitude: float) -> np.ndarray:
    """1 + amplitude * exp(-i / tau), tau = warmup / 5: negligible once ``warmup`` samples are dropped."""
    tau = max(warmup, 1) / 5.0
    return 1.0 + amplitude * np.exp(-np.arange(iterations) / tau)


def step_multipliers(rng: np.random.Generator, ranks: int, iterations: int, warmup: int, params: NoiseParams) -> np.ndarray:
    """Multipliers ``M[rank, iteration]`` of the noise-free step time."""
    f = params.factor
    process = rng.normal(0.0, params.process_sigma * f)
    rank = rng.normal(0.0, params.rank_sigma * f, size=ranks)
    straggler = rng.integers(ranks)
    rank[straggler] += rng.uniform(params.straggler_low, params.straggler_high) * f
    jitter = rng.normal(0.0, params.jitter_sigma * f, size=(ranks, iterations))
    spikes = (rng.random((ranks, iterations)) < params.spike_probability * min(f, 1.0)) * rng.uniform(
        params.spike_low, params.spike_high, size=(ranks, iterations)
    ) * f
    ramp = warmup_ramp(iterations, warmup, params.warmup_amplitude)
    factors: np.ndarray = (1.0 + process + rank[:, None] + jitter + spikes) * ramp[None, :]
    return factors


def relative_jitter(rng: np.random.Generator, shape: tuple[int, ...], sigma: float, factor: float) -> np.ndarray:
    """Lognormal multipliers around 1 with relative spread ``sigma * factor``."""
    s = sigma * factor
    if s <= 0:
        return np.ones(shape)
    return rng.lognormal(-0.5 * s * s, s, size=shape)
