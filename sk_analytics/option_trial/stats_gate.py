"""The statistics policy (``--gate stats``): an explicit alternative to the
Stage O protocol gate, labelled *not the protocol* wherever it decides.

Why it exists: with 3-5 runs a side the protocol's metric checks are coin
flips under noise (a variance-neutral option fails "pooled stddev not worse"
half of the time whatever its gain, and a null option passes mean + median
about 40 % of the time); see ``benchmarks/bench_gate_mc.py`` and
docs/option-trial.md for the measured false-win and power table.

The policy keeps the protocol's preconditions (stable five-run baseline, at
least three candidate runs) and replaces its four metric checks by three
tests at one stated one-sided level (:data:`LEVEL`):

* ``mean_improvement_significant``: the one-sided lower confidence bound of
  the improvement of the per-run worst-rank means (logs, Welch t) is above 0;
* ``p90_not_significantly_worse`` / ``stddev_not_significantly_worse``: the
  per-run decode P90 (stddev) of the candidate is not significantly above
  ``(1 + allowance / 100)`` times the baseline's: the one-sided lower bound
  of ``mean(cand) - (1 + a) * mean(base)`` (Welch t) is <= 0, so an option
  that leaves the variance unchanged fails each check with probability at
  most :data:`LEVEL`, not one half;
* the median-run check is dropped: the mean test already decides the
  direction, and a second coin flip only costs power.

Every function is vectorised over leading axes: the CLI passes one trial,
the Monte-Carlo test thousands. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from sk_analytics.messages import coded, rendered_fields
from sk_analytics.option_trial.gate import Allowances
from sk_analytics.option_trial.inference import log_improvement_pct, welch_lower_bound

POLICY = "stats"
LEVEL = 0.05
"""One-sided level of every test of the policy (mean: a 95 % lower bound)."""
PRECONDITIONS = ("baseline_stable", "baseline_min_runs", "candidate_min_runs")
"""Protocol checks the policy keeps as they are."""
METRIC_CHECKS = ("mean_improvement_significant", "p90_not_significantly_worse", "stddev_not_significantly_worse")
CHECK_NAMES = (*PRECONDITIONS, *METRIC_CHECKS)


@dataclass(frozen=True)
class RunFigures:
    """Per-run figures of one side, the runs on the last axis (trials on any leading axes)."""

    mean_ms: np.ndarray
    """Worst-rank mean of each run (the run metric)."""
    p90_ms: np.ndarray
    """Decode P90 of each run (all ranks of the run pooled)."""
    stddev_ms: np.ndarray
    """Decode population stddev of each run."""

    @classmethod
    def of_summary(cls, summary: Mapping[str, Any]) -> RunFigures:
        """The figures of an option-trial summary side (its ``runs``, in run order)."""
        runs = summary["runs"]
        return cls(
            np.asarray(summary["run_worst_rank_means_ms"], dtype=float),
            np.asarray([r["decode"]["p90_ms"] for r in runs], dtype=float),
            np.asarray([r["decode"]["stddev_ms"] for r in runs], dtype=float),
        )


def _log(values: np.ndarray) -> np.ndarray:
    """Natural log; NaN for values <= 0 (no ratio exists, the check then fails)."""
    positive = values > 0
    return np.where(positive, np.log(np.where(positive, values, 1.0)), np.nan)


def bounds(base: RunFigures, cand: RunFigures, allowances: Allowances, level: float = LEVEL) -> dict[str, np.ndarray]:
    """The three one-sided bounds the checks compare with 0.

    ``improvement_log``: lower bound of ``mean(ln base) - mean(ln cand)``;
    ``p90_excess_ms`` / ``stddev_excess_ms``: lower bound of
    ``mean(cand) - (1 + a/100) * mean(base)``. NaN where undefined (< 2 runs
    a side, a run metric <= 0): the check fails closed.
    """
    return {
        "improvement_log": welch_lower_bound(_log(base.mean_ms), _log(cand.mean_ms), level),
        "p90_excess_ms": welch_lower_bound(cand.p90_ms, base.p90_ms * (1 + allowances.p90_pct / 100), level),
        "stddev_excess_ms": welch_lower_bound(cand.stddev_ms, base.stddev_ms * (1 + allowances.stddev_pct / 100), level),
    }


def metric_checks(found: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The three metric checks from :func:`bounds` (NaN fails)."""
    with np.errstate(invalid="ignore"):
        return {
            "mean_improvement_significant": found["improvement_log"] > 0,
            "p90_not_significantly_worse": found["p90_excess_ms"] <= 0,
            "stddev_not_significantly_worse": found["stddev_excess_ms"] <= 0,
        }


def _finite(value: np.ndarray | float) -> float | None:
    number = float(value)
    return number if np.isfinite(number) else None


def _share_pct(excess_ms: np.ndarray, base_ms: np.ndarray) -> float | None:
    """An excess bound as % of the baseline's mean per-run figure."""
    scale = float(base_ms.mean()) if base_ms.size else 0.0
    excess = _finite(excess_ms)
    return None if excess is None or scale == 0 else excess / scale * 100


def evaluate_stats(
    protocol_evaluation: Mapping[str, Any],
    baseline: Mapping[str, Any],
    candidate: Mapping[str, Any],
    allowances: Allowances = Allowances(),
    level: float = LEVEL,
) -> dict[str, Any]:
    """``stats_policy_evaluation`` of one candidate (JSON-ready).

    Always computed beside the protocol answer; it decides only under
    ``--gate stats``. The preconditions are read from the protocol evaluation.
    """
    base, cand = RunFigures.of_summary(baseline), RunFigures.of_summary(candidate)
    found = bounds(base, cand, allowances, level)
    checks = {name: bool(protocol_evaluation["checks"][name]) for name in PRECONDITIONS}
    checks.update({name: bool(ok) for name, ok in metric_checks(found).items()})
    improvement = _finite(found["improvement_log"])
    return {
        "policy": POLICY,
        "is_protocol": False,
        **rendered_fields("label", coded("gate_label.stats")),  # worded here, not at import
        "accepted": all(checks.values()),
        "checks": checks,
        "failed_checks": [name for name in CHECK_NAMES if not checks[name]],
        "level_one_sided": level,
        "method": "Welch t on per-run figures: ln worst-rank means (improvement); decode P90 and stddev (not significantly worse)",
        **allowances.to_json(),
        "mean_improvement_lower_bound_pct": None if improvement is None else log_improvement_pct(improvement),
        "p90_excess_lower_bound_pct": _share_pct(found["p90_excess_ms"], base.p90_ms),
        "stddev_excess_lower_bound_pct": _share_pct(found["stddev_excess_ms"], base.stddev_ms),
    }
