"""Noise models and a vectorised Monte Carlo of the option-trial gates.

Synthetic data generators for the tests and ``benchmarks/bench_gate_mc.py``
only (never the runtime package). A trial draws ``nb`` baseline and ``nc``
candidate runs of ``ranks x samples`` post-warm-up decode times; a candidate
with a true improvement ``e`` has every step time multiplied by ``1 - e``.

Noise models:

* :class:`DriftModel`: every run is offset by a lognormal run-level drift of
  ``drift_pct`` (0.5 % or 1 %: a machine whose speed moves between runs) and
  every sample carries ``jitter_pct`` of independent jitter;
* :class:`SimulatorModel`: the simulator's own noise
  (:func:`sk_runner.sim.noise.step_multipliers`: process offset, rank
  offsets with a straggler, jitter, rare spikes, warm-up ramp), one call per
  run as the simulator draws it, values rounded to the logs' 3 decimals.

:func:`decide` answers every gate for every trial: ``protocol`` through the
runtime's own :func:`~sk_analytics.option_trial.gate.evaluate_candidate` (one
call per trial), ``strict`` and ``stats`` through the runtime's vectorised
bounds, so the Monte Carlo measures the shipped decisions, not copies.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from sk_analytics.option_trial.gate import BASELINE_REQUIRED_RUNS, MAX_SPREAD_PCT, Allowances, evaluate_candidate
from sk_analytics.option_trial.inference import ci_excludes_zero
from sk_analytics.option_trial.stats_gate import PRECONDITIONS, RunFigures, bounds, metric_checks
from sk_runner.sim.noise import NoiseParams, step_multipliers

STEP_MS = 50.0
GATES = ("protocol", "strict", "stats")


class NoiseModel(Protocol):
    name: str

    def samples(self, rng: np.random.Generator, trials: int, runs: int, scale: float) -> np.ndarray:
        """Decode times, shape ``(trials, runs, ranks, samples)``, of a side whose step is ``STEP_MS * scale``."""
        ...


@dataclass(frozen=True)
class DriftModel:
    """Lognormal run-level drift plus independent per-sample jitter."""

    drift_pct: float
    jitter_pct: float = 1.0
    ranks: int = 4
    per_rank: int = 50

    @property
    def name(self) -> str:
        return f"drift {self.drift_pct:g} %"

    def samples(self, rng: np.random.Generator, trials: int, runs: int, scale: float) -> np.ndarray:
        drift = rng.normal(0.0, self.drift_pct / 100, (trials, runs, 1, 1))
        jitter = rng.normal(0.0, self.jitter_pct / 100, (trials, runs, self.ranks, self.per_rank))
        return STEP_MS * scale * np.exp(drift + jitter)


@dataclass(frozen=True)
class SimulatorModel:
    """The simulator's noise (default :class:`NoiseParams`), post-warm-up samples."""

    ranks: int = 4
    iterations: int = 58
    warmup: int = 8
    name: str = "simulator"

    def samples(self, rng: np.random.Generator, trials: int, runs: int, scale: float) -> np.ndarray:
        params = NoiseParams()
        out = np.empty((trials, runs, self.ranks, self.iterations - self.warmup))
        for t in range(trials):
            for r in range(runs):
                out[t, r] = step_multipliers(rng, self.ranks, self.iterations, self.warmup, params)[:, self.warmup:]
        return np.round(STEP_MS * scale * out, 3)


MODELS: tuple[NoiseModel, ...] = (DriftModel(0.5), DriftModel(1.0), SimulatorModel())


@dataclass(frozen=True)
class Side:
    """The figures the gates read, trials on axis 0."""

    runs: RunFigures
    """Per run (axis 1): worst-rank mean, decode P90 and stddev of the run."""
    pooled_p90: np.ndarray
    pooled_sd: np.ndarray

    @classmethod
    def of(cls, samples: np.ndarray) -> Side:
        trials, runs = samples.shape[:2]
        per_run = samples.reshape(trials, runs, -1)
        pooled = samples.reshape(trials, -1)
        return cls(
            RunFigures(samples.mean(axis=-1).max(axis=-1), np.quantile(per_run, 0.9, axis=-1), per_run.std(axis=-1)),
            np.quantile(pooled, 0.9, axis=-1),
            pooled.std(axis=-1),
        )

    def summary(self, i: int) -> dict[str, object]:
        """Trial ``i`` as the keys :func:`evaluate_candidate` reads."""
        means = self.runs.mean_ms[i]
        return {"run_count": means.size, "worst_rank_mean_ms": float(means.mean()), "median_run_worst_rank_mean_ms": float(np.median(means)),
                "decode": {"p90_ms": float(self.pooled_p90[i]), "stddev_ms": float(self.pooled_sd[i])}}


def draw(model: NoiseModel, rng: np.random.Generator, trials: int, nb: int, nc: int, effect_pct: float) -> tuple[Side, Side]:
    """Baseline and candidate sides of ``trials`` trials of a true improvement of ``effect_pct``."""
    return Side.of(model.samples(rng, trials, nb, 1.0)), Side.of(model.samples(rng, trials, nc, 1.0 - effect_pct / 100))


def decide(base: Side, cand: Side, allowances: Allowances = Allowances()) -> dict[str, np.ndarray]:
    """Accept/reject of every gate for every trial (boolean arrays)."""
    means = base.runs.mean_ms
    stable = ((means.max(axis=1) - means.min(axis=1)) / means.mean(axis=1) * 100 <= MAX_SPREAD_PCT) & (means.shape[1] == BASELINE_REQUIRED_RUNS)
    protocol, preconditions = [], []
    for i in range(means.shape[0]):
        ev = evaluate_candidate(base.summary(i), {"stable": bool(stable[i])}, cand.summary(i), allowances)
        protocol.append(ev["accepted"])
        preconditions.append(all(ev["checks"][name] for name in PRECONDITIONS))
    protocol_ok = np.array(protocol)
    stats_ok = np.array(preconditions) & np.logical_and.reduce(list(metric_checks(bounds(base.runs, cand.runs, allowances)).values()))
    return {
        "protocol": protocol_ok,
        "strict": protocol_ok & ci_excludes_zero(np.log(means), np.log(cand.runs.mean_ms)),
        "stats": stats_ok,
    }


def acceptance(model: NoiseModel, seed: int, trials: int, nb: int, nc: int, effect_pct: float) -> dict[str, float]:
    """Share of ``trials`` accepted by each gate (one seeded draw)."""
    base, cand = draw(model, np.random.default_rng(seed), trials, nb, nc, effect_pct)
    return {gate: float(accepted.mean()) for gate, accepted in decide(base, cand).items()}


def binomial_sigma(rate: float, trials: int) -> float:
    """Standard deviation of an observed share of ``trials`` when the true rate is ``rate``."""
    return math.sqrt(rate * (1 - rate) / trials)
