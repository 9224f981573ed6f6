"""Statistics beside the protocol gate: how sure is the answer?

With 3-5 runs per side the protocol gate passes by chance alone far too often.
These figures are reported next to it and never change it (only
``--gate strict`` uses :func:`ci_excludes_zero` as an extra requirement;
``--gate stats`` decides with :func:`welch_lower_bound`, see
:mod:`sk_analytics.option_trial.stats_gate`).

All figures work on the **log** of the per-run metrics (worst-rank mean of
each run), so effects are ratios and runs of different scale mix cleanly:

* effect ``d = mean(ln base) - mean(ln cand)``; improvement % =
  ``(1 - exp(-d)) * 100`` (positive = candidate faster);
* 95% confidence interval of ``d`` by Welch's t (unequal variances,
  Welch-Satterthwaite degrees of freedom), cross-checked by a percentile
  bootstrap of the runs (seeded, so the JSON is reproducible);
* noise: run-to-run coefficient of variation of the baseline
  (sample sd of ``ln`` run metrics, in %);
* verdict: ``win`` (CI above 0), ``loss`` (CI below 0), ``neutral`` (CI inside
  +/- the neutral margin = max(baseline noise, 0.5 %)), else ``inconclusive``;
* false-win risk: the one-sided Welch p-value (chance of an improvement at
  least this large if the option changed nothing) and the chance that the
  gate's two run-level checks (mean and median run improve) pass when nothing
  changed, for these run counts (simulated; an upper bound for the full gate);
* equivalence: a TOST at +/- :data:`EQUIVALENCE_MARGIN_PCT` (two one-sided
  5 % Welch tests: the 90 % interval lies inside the margin);
* runs needed per side (:mod:`sk_analytics.option_trial.planning`): smallest
  n with ``(t_0.975 + t_0.80) * s_up * sqrt(2 / n) <= |d_plan|`` (5 %
  two-sided, 80 % power) and at least the protocol's 3, where ``s_up`` is the
  80 % upper confidence bound of the pooled sd of the log run metrics and
  ``d_plan`` the 95 % one-sided lower bound of a detected effect, so the
  figure keeps its power when the few runs were lucky. When the 95 % interval
  includes 0, no effect was detected: the observed ``d`` is then noise and a
  figure computed from it would promise a win that is not there, so the
  figure is given for an effect of the equivalence margin instead, and the
  TOST says whether effects beyond the margin are excluded.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sk_analytics.lazy_module import lazy_module
from sk_analytics.messages import Messages, coded, rendered_fields
from sk_analytics.option_trial.executable import NO_SESSION_NOISE, SessionNoise, settle_plan, settle_text
from sk_analytics.option_trial.planning import ASSUMES_MESSAGE, CONFIDENCE, POWER, noise_upper, planning_effect, pooled_sd, runs_per_side

sps = lazy_module("scipy.stats")  # imported on first use: reading and summarising logs does not carry it

BOOTSTRAP_RESAMPLES = 10_000
NULL_SIMULATIONS = 20_000
SEED = 20_260_501
NEUTRAL_MARGIN_FLOOR_PCT = 0.5
EQUIVALENCE_MARGIN_PCT = 0.5
"""Effects within +/- this (in %) count as no effect (TOST margin; the simulator's neutral band)."""
EQUIVALENCE_LEVEL = 0.05


def log_improvement_pct(log_effect: float) -> float:
    """Log effect -> improvement % of the candidate over the baseline."""
    return (1.0 - math.exp(-log_effect)) * 100.0


def welch_terms(base: np.ndarray, cand: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Welch's ``d = mean(base) - mean(cand)``, its standard error and the
    Welch-Satterthwaite degrees of freedom along the last axis (any leading
    shape: one trial or many). ``df`` is NaN where the standard error is 0;
    every figure is NaN with < 2 values on a side. A constant side has a
    variance of exactly 0 (not the rounding residue of an inexact mean)."""
    nb, nc = base.shape[-1], cand.shape[-1]

    def var_of_mean(x: np.ndarray, n: int) -> np.ndarray:
        if n < 2:
            return np.full(x.shape[:-1], np.nan)
        return np.where(x.max(axis=-1) == x.min(axis=-1), 0.0, x.var(axis=-1, ddof=1) / n)

    with np.errstate(invalid="ignore", divide="ignore"):
        d = base.mean(axis=-1) - cand.mean(axis=-1)
        vb, vc = var_of_mean(base, nb), var_of_mean(cand, nc)
        se = np.sqrt(vb + vc)
        df = (vb + vc) ** 2 / (vb**2 / (nb - 1) + vc**2 / (nc - 1))
    return d, se, np.where(se > 0, df, np.nan)


def welch_lower_bound(base: np.ndarray, cand: np.ndarray, level: float) -> np.ndarray:
    """One-sided ``1 - level`` lower confidence bound of ``mean(base) - mean(cand)``
    (Welch t) along the last axis; NaN with < 2 values on a side.

    Two constant sides (standard error 0) give their exact difference, so a
    tie of equal values is a bound of exactly 0.
    """
    d, se, df = welch_terms(base, cand)
    with np.errstate(invalid="ignore"):
        t = sps.t.ppf(1.0 - level, np.where(np.isnan(df), 1.0, df))
        bound = np.where(se > 0, d - t * se, base[..., 0] - cand[..., 0])
    return np.where(np.isnan(se), np.nan, bound)


def welch_interval(base: np.ndarray, cand: np.ndarray, confidence: float = CONFIDENCE) -> dict[str, Any] | None:
    """Welch CI of ``mean(base) - mean(cand)`` (logs); None with < 2 runs a side."""
    if base.size < 2 or cand.size < 2:
        return None
    d_, se_, df_ = welch_terms(base, cand)
    d, se = float(d_), float(se_)
    if se == 0.0:
        p = 0.0 if d > 0 else (1.0 if d < 0 else 0.5)
        return {"log_effect": d, "ci_low_log": d, "ci_high_log": d, "se_log": 0.0, "df": None, "t_crit": None, "p_one_sided": p}
    df = float(df_)
    t_crit = float(sps.t.ppf(0.5 + confidence / 2, df))
    p = float(sps.t.sf(d / se, df))
    return {
        "log_effect": d,
        "ci_low_log": d - t_crit * se,
        "ci_high_log": d + t_crit * se,
        "se_log": se,
        "df": df,
        "t_crit": t_crit,
        "p_one_sided": p,
    }


def ci_excludes_zero(base_logs: np.ndarray, cand_logs: np.ndarray) -> np.ndarray | bool:
    """The two-sided :data:`CONFIDENCE` Welch interval of the log improvement
    lies above 0 (what ``--gate strict`` adds); vectorised over leading axes."""
    excludes = welch_lower_bound(base_logs, cand_logs, (1 - CONFIDENCE) / 2) > 0
    return bool(excludes) if excludes.ndim == 0 else excludes


def bootstrap_interval(
    base: np.ndarray, cand: np.ndarray, confidence: float = CONFIDENCE, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = SEED
) -> dict[str, Any] | None:
    """Percentile bootstrap CI of the log effect, resampling runs on each side."""
    if base.size < 2 or cand.size < 2:
        return None
    rng = np.random.default_rng(seed)
    mb = base[rng.integers(0, base.size, (resamples, base.size))].mean(axis=1)
    mc = cand[rng.integers(0, cand.size, (resamples, cand.size))].mean(axis=1)
    low, high = np.quantile(mb - mc, [(1 - confidence) / 2, (1 + confidence) / 2])
    return {"ci_low_log": float(low), "ci_high_log": float(high), "resamples": resamples, "seed": seed, "method": "percentile"}


def null_run_checks_pass_rate(nb: int, nc: int, simulations: int = NULL_SIMULATIONS, seed: int = SEED) -> float | None:
    """Chance that mean and median of ``nc`` runs both beat those of ``nb``
    runs drawn from the same distribution (scale-free, so no noise level needed)."""
    if nb < 1 or nc < 1:
        return None
    rng = np.random.default_rng(seed)
    zb = rng.standard_normal((simulations, nb))
    zc = rng.standard_normal((simulations, nc))
    wins = (zc.mean(axis=1) < zb.mean(axis=1)) & (np.median(zc, axis=1) < np.median(zb, axis=1))
    return float(wins.mean())


def runs_needed(log_effect: float, sd: float | None) -> int | None:
    """Runs per side that resolve a true ``log_effect`` of a known ``sd`` at 5 %
    two-sided, 80 % power, at least the protocol's minimum (the plain formula:
    :func:`runs_needed_figure` plans with bounds instead of estimates)."""
    if sd is None or log_effect == 0.0:
        return None
    n = float(runs_per_side(log_effect, sd))
    return None if math.isnan(n) else int(n)


def log_effect_of_pct(improvement_pct: float) -> float:
    """Inverse of :func:`log_improvement_pct`."""
    return -math.log1p(-improvement_pct / 100)


def equivalence(base: np.ndarray, cand: np.ndarray, margin_pct: float = EQUIVALENCE_MARGIN_PCT) -> dict[str, Any]:
    """TOST at +/- ``margin_pct``: both one-sided :data:`EQUIVALENCE_LEVEL`
    Welch tests reject an improvement beyond the margin, i.e. the 90 %
    interval of the improvement lies strictly inside it."""
    low = float(welch_lower_bound(base, cand, EQUIVALENCE_LEVEL))
    high = -float(welch_lower_bound(cand, base, EQUIVALENCE_LEVEL))
    if math.isnan(low) or math.isnan(high):
        return {"margin_pct": margin_pct, "ci90_pct": None, "equivalent": False}
    inside = log_effect_of_pct(-margin_pct) < low and high < log_effect_of_pct(margin_pct)
    return {"margin_pct": margin_pct, "ci90_pct": [log_improvement_pct(low), log_improvement_pct(high)], "equivalent": bool(inside)}


def planned_runs(base: np.ndarray, cand: np.ndarray) -> dict[str, np.ndarray]:
    """The run-count plan of :func:`runs_needed_figure` for log run metrics,
    vectorised over leading axes (trials of a Monte Carlo): ``detected`` (the
    95 % interval excludes 0), the ``effect_log`` and ``sd_log`` planned at and
    ``per_side`` (NaN: no count up to the search limit)."""
    d, se, df = welch_terms(base, cand)
    half = (1 - CONFIDENCE) / 2
    with np.errstate(invalid="ignore"):
        detected = (welch_lower_bound(base, cand, half) > 0) | (welch_lower_bound(cand, base, half) > 0)
    sd, dof = pooled_sd(base, cand)
    sd_up = np.where(sd == 0, 0.0, noise_upper(sd, dof))
    effect = np.where(detected, planning_effect(d, se, df), log_effect_of_pct(EQUIVALENCE_MARGIN_PCT))
    return {"detected": detected, "effect_log": effect, "sd_log": sd_up, "per_side": runs_per_side(effect, sd_up)}


def runs_needed_figure(base: np.ndarray, cand: np.ndarray, session: SessionNoise = NO_SESSION_NOISE) -> dict[str, Any]:
    """What :func:`planned_runs` answers for one trial, honestly: for the
    observed effect when the 95 % interval excludes 0 (planned at its lower
    bound), else for an effect of the equivalence margin (the observed one is
    then noise); both at the upper bound of the noise, with what they assume. ``executable`` is the figure
    sk-tune can run (:mod:`~sk_analytics.option_trial.executable`): candidate runs against the incumbent's
    runs as they are, for the same planned effect, or the family policy when the cap falls short; ``session``:
    the session's other candidate trials that tell the candidate's run-to-run noise."""
    plan = planned_runs(base, cand)
    detected = bool(plan["detected"])
    per_side = float(plan["per_side"])
    sd_up = float(plan["sd_log"])
    planned_pct = abs(log_improvement_pct(float(plan["effect_log"]))) if detected else EQUIVALENCE_MARGIN_PCT
    executable = settle_plan(base, cand, float(plan["effect_log"]), session=session)
    executable["text"], executable["text_zh"] = settle_text(executable, coded("executable.effect_planned", pct=planned_pct))
    return {
        "basis": "observed_effect" if detected else "no_effect_detected",
        "effect_pct": log_improvement_pct(float(base.mean() - cand.mean())) if detected else EQUIVALENCE_MARGIN_PCT,
        "planned_effect_pct": planned_pct,
        "planned_noise_pct": None if math.isnan(sd_up) else sd_up * 100,
        "per_side": None if math.isnan(per_side) else int(per_side),
        "power": POWER, "confidence": CONFIDENCE, **rendered_fields("assumes", ASSUMES_MESSAGE),
        "executable": executable,
    }


def verdict(interval: dict[str, Any] | None, margin_pct: float) -> str:
    """``win`` / ``loss`` / ``neutral`` / ``inconclusive`` from the Welch CI."""
    if interval is None:
        return "inconclusive"
    low, high = log_improvement_pct(interval["ci_low_log"]), log_improvement_pct(interval["ci_high_log"])
    if low > 0:
        return "win"
    if high < 0:
        return "loss"
    if -margin_pct < low and high < margin_pct:
        return "neutral"
    return "inconclusive"


def _undefined(nb: int, nc: int) -> dict[str, Any]:
    """The statistics block when log run metrics do not exist."""
    return {
        "method": "undefined: a run metric is <= 0 ms",
        "confidence": CONFIDENCE,
        "run_count": {"baseline": nb, "candidate": nc},
        "improvement_pct": None,
        "ci_pct": None,
        "welch": None,
        "bootstrap_ci_pct": None,
        "bootstrap": None,
        "methods_agree": None,
        "ci_excludes_zero": False,
        "noise": {"baseline_run_cv_pct": None, "candidate_run_cv_pct": None, "neutral_margin_pct": None},
        "verdict": "inconclusive",
        "verdict_zh": VERDICT_ZH["inconclusive"],
        "false_win_risk": {"p_value_one_sided": None, "null_run_checks_pass_rate": None},
        "runs_needed_per_side": None,
        "runs_needed": None,
        "equivalence": None,
    }


VERDICTS = ("win", "loss", "neutral", "inconclusive")
"""The statistical verdicts of a comparison (each worded by ``verdict.<v>`` of the catalogs)."""
VERDICT_ZH: Mapping[str, str] = Messages("verdict.", "zh")
"""The Chinese word of each verdict (``verdict.*`` of the catalogs, worded when read, not at import)."""


def trial_statistics(base_ms: Sequence[float], cand_ms: Sequence[float], session: SessionNoise = NO_SESSION_NOISE) -> dict[str, Any]:
    """Every figure beside the gate for one candidate (JSON-ready); ``session``: the session's other candidate
    trials, which the runs-needed figure learns the run-to-run noise from.

    A run metric <= 0 ms has no logarithm: every figure is then null and the
    verdict ``inconclusive``.
    """
    if min(*base_ms, *cand_ms) <= 0:
        return _undefined(len(base_ms), len(cand_ms))
    base = np.log(np.asarray(base_ms, dtype=float))
    cand = np.log(np.asarray(cand_ms, dtype=float))
    welch = welch_interval(base, cand)
    boot = bootstrap_interval(base, cand)
    noise_pct = float(base.std(ddof=1)) * 100 if base.size >= 2 else None
    margin = max(noise_pct or 0.0, NEUTRAL_MARGIN_FLOOR_PCT)
    d = float(base.mean() - cand.mean())
    result = verdict(welch, margin)
    excludes = ci_excludes_zero(base, cand)
    detected = result in ("win", "loss")
    figure = runs_needed_figure(base, cand, session)
    return {
        "method": "log per-run worst-rank means; Welch t interval; percentile bootstrap cross-check",
        "confidence": CONFIDENCE,
        "run_count": {"baseline": int(base.size), "candidate": int(cand.size)},
        "improvement_pct": log_improvement_pct(d),
        "ci_pct": None if welch is None else [log_improvement_pct(welch["ci_low_log"]), log_improvement_pct(welch["ci_high_log"])],
        "welch": welch,
        "bootstrap_ci_pct": None if boot is None else [log_improvement_pct(boot["ci_low_log"]), log_improvement_pct(boot["ci_high_log"])],
        "bootstrap": boot,
        "methods_agree": None
        if welch is None or boot is None
        else (log_improvement_pct(welch["ci_low_log"]) > 0) == (log_improvement_pct(boot["ci_low_log"]) > 0),
        "ci_excludes_zero": excludes,
        "noise": {
            "baseline_run_cv_pct": noise_pct,
            "candidate_run_cv_pct": float(cand.std(ddof=1)) * 100 if cand.size >= 2 else None,
            "neutral_margin_pct": margin,
        },
        "verdict": result,
        "verdict_zh": VERDICT_ZH[result],
        "false_win_risk": {
            "p_value_one_sided": None if welch is None else welch["p_one_sided"],
            "null_run_checks_pass_rate": null_run_checks_pass_rate(base.size, cand.size),
        },
        "runs_needed_per_side": figure["per_side"] if detected else None,
        "runs_needed": figure,
        "equivalence": equivalence(base, cand),
    }
