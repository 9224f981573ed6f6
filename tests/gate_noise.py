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

from sk_analytics.option_trial.executable import CANDIDATE_RUNS_CAP, candidate_runs
from sk_analytics.option_trial.gate import BASELINE_REQUIRED_RUNS, MAX_SPREAD_PCT, PROTOCOL_ALLOWANCES, Allowances, evaluate_candidate
from sk_analytics.option_trial.inference import EQUIVALENCE_MARGIN_PCT, POWER, ci_excludes_zero, log_effect_of_pct, planned_runs, runs_needed
from sk_analytics.option_trial.planning import noise_upper, pooled_sd, runs_per_side
from sk_analytics.option_trial.sequential import replay
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
    tail: str = "normal"
    """``normal`` or ``t3``: the drift drawn from a Student t of 3 degrees of freedom scaled to the same sd (heavy tails)."""

    @property
    def name(self) -> str:
        return f"drift {self.drift_pct:g} %" + ("" if self.tail == "normal" else f" {self.tail}")

    def samples(self, rng: np.random.Generator, trials: int, runs: int, scale: float) -> np.ndarray:
        shape = (trials, runs, 1, 1)
        if self.tail == "t3":
            drift = rng.standard_t(3, shape) * (self.drift_pct / 100 / math.sqrt(3))
        else:
            drift = rng.normal(0.0, self.drift_pct / 100, shape)
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


def decide(base: Side, cand: Side, allowances: Allowances = PROTOCOL_ALLOWANCES) -> dict[str, np.ndarray]:
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


# -- run pools: the per-run figures of many runs, drawn from for large Monte Carlos ---------------------------------
#
# Every figure the statistics policy, its sequential form and the run-count plans read is a per-run figure, and
# runs are independent in every noise model, so a trial can draw its runs from a large pool of runs simulated
# once. A true improvement ``e`` scales every step time by ``1 - e``, hence every per-run figure too (the
# simulator's 3-decimal rounding happens before the scaling: a difference below 1e-5 of a run's mean).

POOL_RUNS = 20_000
POWER_DRAWS = 2_000
SIMULATED_POWER_RUNS = 60
"""Delivered power is simulated from the pool up to this many runs a side; beyond, the mean of that many runs is
normal and the non-central t with the pool's true sd of the log run metric is exact enough."""


def run_pool(model: NoiseModel, runs: int = POOL_RUNS, seed: int = 28) -> RunFigures:
    """Per-run figures of ``runs`` runs of ``model`` at the baseline's step (drawn in chunks: bounded memory)."""
    key = (model, runs, seed)
    if key not in _POOLS:
        rng = np.random.default_rng(seed)
        parts = [Side.of(model.samples(rng, 1, min(2_000, runs - start), 1.0)).runs for start in range(0, runs, 2_000)]
        _POOLS[key] = RunFigures(*(np.concatenate([getattr(p, f)[0] for p in parts]) for f in ("mean_ms", "p90_ms", "stddev_ms")))
    return _POOLS[key]


_POOLS: dict[tuple[object, int, int], RunFigures] = {}


def draw_runs(pool: RunFigures, rng: np.random.Generator, shape: tuple[int, ...], effect_pct: float = 0.0) -> RunFigures:
    """Runs of ``shape`` (runs on the last axis) drawn from ``pool``, of a true improvement of ``effect_pct``."""
    index = rng.integers(0, pool.mean_ms.size, shape)
    scale = 1.0 - effect_pct / 100
    return RunFigures(pool.mean_ms[index] * scale, pool.p90_ms[index] * scale, pool.stddev_ms[index] * scale)


def delivered_power(pool: RunFigures, per_side: np.ndarray, effect_pct: float, rng: np.random.Generator,
                    draws: int = POWER_DRAWS) -> np.ndarray:
    """For each planned ``per_side`` count, the chance that that many fresh runs a side of a true
    ``effect_pct`` put the 95 % Welch interval above 0 (what the printed figure promises)."""
    from scipy import stats as sps

    sd = float(np.log(pool.mean_ms).std(ddof=1))
    power: dict[int, float] = {}
    for n in np.unique(per_side).astype(int):
        if n <= SIMULATED_POWER_RUNS:
            base = np.log(draw_runs(pool, rng, (draws, n)).mean_ms)
            cand = np.log(draw_runs(pool, rng, (draws, n), effect_pct).mean_ms)
            power[n] = float(ci_excludes_zero(base, cand).mean())
        else:
            df = 2 * n - 2
            ncp = -math.log1p(-effect_pct / 100) / (sd * math.sqrt(2 / n))
            power[n] = float(sps.nct.sf(sps.t.ppf(0.975, df), df, ncp))
    return np.array([power[int(n)] for n in per_side])


def _stable(base: RunFigures) -> np.ndarray:
    """The protocol's preconditions on the baseline side: five runs, decimal spread <= 5 %."""
    means = base.mean_ms
    return ((means.max(axis=-1) - means.min(axis=-1)) / means.mean(axis=-1) * 100 <= MAX_SPREAD_PCT) & (means.shape[-1] == BASELINE_REQUIRED_RUNS)


def runs_needed_cell(model: NoiseModel, seed: int, trials: int, effect_pct: float, nb: int = 5, nc: int = 3,
                     pool_runs: int = POOL_RUNS, draws: int = POWER_DRAWS) -> dict[str, float]:
    """Delivered power of the printed runs-needed figure of ``trials`` trials of ``nb`` vs ``nc`` runs.

    A true effect (``effect_pct`` > 0): the figures printed for a detected effect, their power at the true effect.
    No effect (0): the figures printed for the equivalence margin, their power at a true effect of the margin."""
    pool = run_pool(model, pool_runs)
    rng = np.random.default_rng(seed)
    base = np.log(draw_runs(pool, rng, (trials, nb)).mean_ms)
    cand = np.log(draw_runs(pool, rng, (trials, nc), effect_pct).mean_ms)
    plan = planned_runs(base, cand)
    basis = ~plan["detected"] if effect_pct == 0 else plan["detected"]
    printed = basis & np.isfinite(plan["per_side"])
    true_effect = EQUIVALENCE_MARGIN_PCT if effect_pct == 0 else effect_pct
    power = delivered_power(pool, plan["per_side"][printed], true_effect, rng, draws)
    oracle = runs_needed(log_effect_of_pct(true_effect), float(np.log(pool.mean_ms).std(ddof=1)))
    return {"printed": float(printed.mean()), "with_basis": float(basis.mean()), "power": float(power.mean()) if power.size else float("nan"),
            "below_target": float((power < POWER).mean()) if power.size else float("nan"),
            "median_runs": float(np.median(plan["per_side"][printed])) if power.size else float("nan"),
            "oracle_runs": float("nan") if oracle is None else float(oracle), "figures": int(printed.sum())}


def sequential_cell(model: NoiseModel, seed: int, trials: int, effect_pct: float, cap: int, nb: int = 5,
                    pool_runs: int = POOL_RUNS) -> dict[str, float]:
    """Acceptance and mean candidate runs of the sequential policy (looks at 3 .. ``cap``), beside the fixed
    statistics policy at 5 vs 3 and 5 vs 5 on the same draws."""
    pool = run_pool(model, pool_runs)
    rng = np.random.default_rng(seed)
    base = draw_runs(pool, rng, (trials, nb))
    cand = draw_runs(pool, rng, (trials, max(cap, 5)), effect_pct)
    stable = _stable(base)
    found = replay(base, cand, cap=cap, preconditions=stable)
    out = {"sequential": float((found.state == "accepted").mean()), "mean_runs": float(found.runs_used.mean())}
    for k in (3, 5):
        part = RunFigures(cand.mean_ms[:, :k], cand.p90_ms[:, :k], cand.stddev_ms[:, :k])
        out[f"fixed_{k}"] = float((stable & np.logical_and.reduce(list(metric_checks(bounds(base, part, Allowances())).values()))).mean())
    return out


def executable_cell(model: NoiseModel, seed: int, trials: int, effect_pct: float, nb: int = 5, nc: int = 3,
                    candidate_model: NoiseModel | None = None, pool_runs: int = POOL_RUNS, entries: int = 9,
                    session_model: NoiseModel | None = None) -> dict[str, float]:
    """Delivered power of the executable runs-needed figure (issue 43): ``trials`` situations of ``nb`` incumbent
    vs ``nc`` candidate runs of a true ``effect_pct`` (the candidate drawn from ``candidate_model``, default
    ``model``); the figure planned for the true effect; the candidate topped up to the stated count, the
    incumbent's runs kept as they are, and the 95 % Welch interval checked above 0.

    Each situation is an entry of a sweep of ``entries``, at a position drawn evenly: the gates before it decided
    that many other candidate trials of ``nc`` runs (drawn from ``session_model``, default the candidate's), which
    the figure learns the run-to-run noise from (:class:`~sk_analytics.option_trial.executable.SessionNoise`).

    ``power`` is over the figures that ask for more runs than were made (a figure at the runs made only says
    they suffice, and delivers whatever those runs give), ``stated_power`` the mean power those figures state
    (each the power its count is computed to give, from the runs the user has); ``stated``: a count up to the
    cap; ``more``: a count above the runs made; ``family``: pointed to the family policy; ``gap_first``/``gap_later``:
    delivered minus stated for the figures of the first two entries (0-1 other trials) and of the later ones."""
    pool = run_pool(model, pool_runs)
    cpool = pool if candidate_model is None else run_pool(candidate_model, pool_runs)
    spool = cpool if session_model is None else run_pool(session_model, pool_runs)
    rng = np.random.default_rng(seed)
    base = np.log(draw_runs(pool, rng, (trials, nb)).mean_ms)
    cand = np.log(draw_runs(cpool, rng, (trials, CANDIDATE_RUNS_CAP), effect_pct).mean_ms)
    earlier = rng.integers(0, entries, trials)
    others = np.log(draw_runs(spool, rng, (trials, max(entries - 1, 1), nc)).mean_ms)
    within = ((others - others.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1)
    counted = np.arange(within.shape[1]) < earlier[:, None]
    session_ss, session_df = (within * counted).sum(axis=1), earlier * (nc - 1)
    runs, power_stated = candidate_runs(base, cand[:, :nc], log_effect_of_pct(effect_pct), session_ss=session_ss, session_df=session_df)
    stated = np.isfinite(runs)
    more = stated & (runs > nc)
    shown = np.zeros(trials, dtype=bool)
    for k in np.unique(runs[more]).astype(int):
        at = more & (runs == k)
        shown[at] = ci_excludes_zero(base[at], cand[at, :k])

    def gap(where: np.ndarray) -> float:
        return float(shown[where].mean() - power_stated[where].mean()) if where.any() else float("nan")

    # the per-side figure (issue 28) for the same effect, executed as sk-tune can: the incumbent kept, the candidate topped up
    sd, dof = pooled_sd(base, cand[:, :nc])
    per_side = runs_per_side(log_effect_of_pct(effect_pct), noise_upper(sd, dof))
    ran = np.isfinite(per_side) & (per_side > nc) & (per_side <= CANDIDATE_RUNS_CAP)
    kept = [ci_excludes_zero(base[per_side == k], cand[per_side == k, :k]) for k in np.unique(per_side[ran]).astype(int)]
    per_side_shown = np.concatenate(kept) if kept else np.zeros(0, dtype=bool)
    return {"stated": float(stated.mean()), "more": float(more.mean()), "family": float((~stated).mean()),
            "power": float(shown[more].mean()) if more.any() else float("nan"), "figures": int(more.sum()),
            "stated_power": float(power_stated[more].mean()) if more.any() else float("nan"),
            "gap_first": gap(more & (earlier < 2)), "gap_later": gap(more & (earlier >= 2)),
            "per_side_power": float(per_side_shown.mean()) if per_side_shown.size else float("nan"),
            "median_runs": float(np.median(runs[more])) if more.any() else float("nan")}
