"""How many runs would settle it: run-count planning that accounts for what
a handful of runs does not know (issue 28).

A figure computed from the noise and effect observed in 5 + 3 runs as if they
were the truth is optimistic twice over: the sample sd of 6 degrees of
freedom is below the true one about half of the time, and an effect that was
*detected* is, on average, larger than the true one (only the lucky draws
cross the threshold). Both are planned for explicitly:

* noise: the sd of the log run metrics is replaced by its one-sided
  :data:`NOISE_UPPER_LEVEL` upper confidence bound ``s * sqrt(df / chi2_{1 -
  level}(df))`` (chi-square, ``df`` the degrees of freedom of ``s``);
* effect: a detected effect is planned at its one-sided
  :data:`EFFECT_LOWER_LEVEL` lower confidence bound (Welch t), not at the
  point estimate;
* runs: the smallest ``n`` with ``(t_{1-a/2} + t_power) * sd_upper *
  sqrt(2 / n) <= effect`` (``df = 2n - 2``), and never fewer than the
  protocol's minimum of :data:`MIN_RUNS` runs.

Checked by ``tests/test_gate_monte_carlo.py`` and ``benchmarks/bench_gate_mc.py``:
the printed ``n``, simulated on every noise model, delivers at least the
stated power on average at the *true* effect (docs/option-trial.md has the table).
Vectorised over any shape; pure (no I/O).
"""

from __future__ import annotations

import numpy as np

from sk_analytics.lazy_module import lazy_module
from sk_analytics.messages import coded
from sk_analytics.option_trial.gate import CANDIDATE_MIN_RUNS

sps = lazy_module("scipy.stats")

POWER = 0.80
"""Power every run-count figure promises."""
CONFIDENCE = 0.95
"""Two-sided confidence of the interval the planned runs should put above 0."""
NOISE_UPPER_LEVEL = 0.80
"""One-sided confidence of the upper bound the run-to-run sd is planned at."""
EFFECT_LOWER_LEVEL = 0.95
"""One-sided confidence of the lower bound a detected effect is planned at."""
MIN_RUNS = CANDIDATE_MIN_RUNS
"""No figure asks for fewer runs than the protocol's minimum (3 candidate runs)."""
MAX_RUNS_SEARCHED = 10_000

NOISE_ASSUMES_MESSAGE = coded("advice.noise_assumes", level=NOISE_UPPER_LEVEL)
"""What a runs figure assumes of the noise, as a message (nested in the advice sentences)."""
ASSUMES_MESSAGE = coded("advice.assumes", noise=NOISE_UPPER_LEVEL, effect=EFFECT_LOWER_LEVEL, min_runs=MIN_RUNS)
"""What a planned runs figure assumes (noise bound, effect bound, minimum runs), as a message: rendered
where the figure is recorded (:func:`~sk_analytics.messages.rendered_fields`)."""


def noise_upper(sd: np.ndarray | float, df: np.ndarray | float, level: float = NOISE_UPPER_LEVEL) -> np.ndarray:
    """One-sided ``level`` upper confidence bound of a normal sd estimated as
    ``sd`` with ``df`` degrees of freedom (NaN where ``df < 1``)."""
    sd, df = np.asarray(sd, dtype=float), np.asarray(df, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        ok = df >= 1
        chi = sps.chi2.ppf(1.0 - level, np.where(ok, df, 1.0))
        return np.where(ok, sd * np.sqrt(df / chi), np.nan)


def _detectable_factor(confidence: float, power: float) -> tuple[np.ndarray, np.ndarray]:
    """``n`` and ``(t_{(1+c)/2} + t_power) * sqrt(2 / n)`` for n = 2 .. MAX (decreasing in n)."""
    n = np.arange(2, MAX_RUNS_SEARCHED + 1)
    df = 2 * n - 2
    return n, (sps.t.ppf(0.5 + confidence / 2, df) + sps.t.ppf(power, df)) * np.sqrt(2.0 / n)


_FACTORS: dict[tuple[float, float], tuple[np.ndarray, np.ndarray]] = {}


def runs_per_side(effect: np.ndarray | float, sd: np.ndarray | float, confidence: float = CONFIDENCE,
                  power: float = POWER, minimum: int = MIN_RUNS) -> np.ndarray:
    """Runs per side (float array: NaN = more than :data:`MAX_RUNS_SEARCHED`,
    or an effect <= 0) for which a two-sided ``confidence`` Welch interval
    excludes 0 with ``power`` when the true effect is ``|effect|`` and the sd
    ``sd`` (both on the log scale); at least ``minimum``."""
    key = (confidence, power)
    if key not in _FACTORS:
        _FACTORS[key] = _detectable_factor(confidence, power)
    n, factor = _FACTORS[key]
    effect, sd = np.abs(np.asarray(effect, dtype=float)), np.asarray(sd, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(sd > 0, effect / np.where(sd > 0, sd, 1.0), np.inf)
        # first n with factor(n) <= ratio: factor decreases, so search the reversed (increasing) array
        index = factor.size - np.searchsorted(factor[::-1], ratio, side="right")
    found = np.where(index < factor.size, n[np.minimum(index, factor.size - 1)], np.nan).astype(float)
    found = np.where((effect > 0) & np.isfinite(effect) & ~np.isnan(sd), found, np.nan)
    return np.where(np.isnan(found), np.nan, np.maximum(found, minimum))


def planning_effect(d: np.ndarray | float, se: np.ndarray | float, df: np.ndarray | float,
                    level: float = EFFECT_LOWER_LEVEL) -> np.ndarray:
    """``|d|`` lowered to its one-sided ``level`` Welch bound toward 0 (0 when
    that bound crosses 0; ``|d|`` when ``se`` is 0)."""
    d, se, df = np.abs(np.asarray(d, dtype=float)), np.asarray(se, dtype=float), np.asarray(df, dtype=float)
    with np.errstate(invalid="ignore"):
        t = sps.t.ppf(level, np.where(np.isfinite(df) & (df > 0), df, 1.0))
        return np.where(se > 0, np.maximum(d - t * se, 0.0), d)


def pooled_sd(base: np.ndarray, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Pooled sample sd of the two sides (runs on the last axis) and its degrees of freedom."""
    parts = [(x.shape[-1] - 1, x.var(axis=-1, ddof=1)) for x in (base, cand) if x.shape[-1] >= 2]
    dof = sum(k for k, _ in parts)
    if not dof:
        return np.full(base.shape[:-1], np.nan), np.zeros(base.shape[:-1])
    return np.sqrt(sum(k * v for k, v in parts) / dof), np.full(base.shape[:-1], float(dof))
