"""The Stage O protocol gate (protocol §4-5, formats.md §1), exact to the
legacy ``analyze_performance --option-trial`` decision.

* Baseline stability: exactly 5 runs and spread = (max - min) / mean * 100 of
  the run metrics <= 5.0, computed in Python ``decimal`` (28 digits,
  half-even) from the run metrics' exact decimal texts;
* the seven checks of an option trial: baseline stable, baseline has exactly
  5 runs, candidate has >= 3 runs, mean improvement strictly > 0, median-run
  improvement > 0, pooled decode P90 not worse, pooled stddev not worse.

Pure functions over the summaries of :mod:`sk_analytics.option_trial.summary`.
"""

from __future__ import annotations

import decimal
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from sk_analytics.option_trial.stats import DECIMAL_CONTEXT

BASELINE_REQUIRED_RUNS = 5
MAX_SPREAD_PCT = 5.0
CANDIDATE_MIN_RUNS = 3
MIN_IMPROVEMENT_PCT = 0.0
ALLOW_P90_REGRESSION_PCT = 0.0
ALLOW_STDDEV_REGRESSION_PCT = 0.0
"""The protocol's allowances (the reference tool's defaults); :class:`Allowances` may raise them."""
STAGE = "winner_option_trial"
INCUMBENT = "baseline"
"""``selection.recommended`` when no candidate is accepted (legacy value); never a candidate name."""

CHECK_NAMES = (
    "baseline_stable",
    "baseline_min_runs",
    "candidate_min_runs",
    "mean_improvement",
    "median_run_direction",
    "p90_no_material_regression",
    "stddev_no_material_regression",
)


def _spread(exact_values: Sequence[str]) -> tuple[decimal.Decimal, decimal.Decimal, decimal.Decimal | None]:
    """(max - min, mean, spread %) of the run metrics in :data:`DECIMAL_CONTEXT`; spread None when mean is 0."""
    ctx = DECIMAL_CONTEXT
    values = [decimal.Decimal(v) for v in exact_values]
    width = ctx.subtract(max(values), min(values))
    total = decimal.Decimal(0)
    for value in values:
        total = ctx.add(total, value)
    mean = ctx.divide(total, decimal.Decimal(len(values)))
    spread_pct = ctx.multiply(ctx.divide(width, mean), decimal.Decimal(100)) if mean != 0 else None
    return width, mean, spread_pct


def decimal_spread(exact_values: Sequence[str]) -> dict[str, float | None]:
    """Spread of run metrics from their exact decimal texts.

    ``spread_ms = max - min``; ``mean = sum / n``; ``spread_pct = (max - min)
    / mean * 100``; every operation in :data:`DECIMAL_CONTEXT`, converted to
    float only for the JSON (None when undefined).
    """
    if not exact_values:
        return {"spread_ms": None, "mean_ms": None, "spread_pct": None}
    width, mean, spread_pct = _spread(exact_values)
    return {"spread_ms": float(width), "mean_ms": float(mean), "spread_pct": None if spread_pct is None else float(spread_pct)}


def spread_within_limit(exact_values: Sequence[str]) -> bool:
    """Spread % <= :data:`MAX_SPREAD_PCT`, compared in decimal.

    The float of a 28-digit spread can round onto the limit (5.000000000000000001
    becomes 5.0), so the comparison must not use the JSON float.
    """
    if not exact_values:
        return False
    spread_pct = _spread(exact_values)[2]
    return spread_pct is not None and spread_pct <= decimal.Decimal(str(MAX_SPREAD_PCT))


def evaluate_stability(summary: Mapping[str, Any]) -> dict[str, Any]:
    """``baseline_stability`` of the summary JSON (legacy keys and meaning)."""
    values = [float(v) for v in summary["run_worst_rank_means_ms"]]
    spread = decimal_spread(summary["run_worst_rank_means_exact_ms"])
    checks = {
        "required_run_count": len(values) == BASELINE_REQUIRED_RUNS,
        "max_spread_pct": spread_within_limit(summary["run_worst_rank_means_exact_ms"]),
    }
    return {
        "stable": all(checks.values()),
        "checks": checks,
        "required_run_count": BASELINE_REQUIRED_RUNS,
        "max_spread_pct": MAX_SPREAD_PCT,
        "run_worst_rank_means_ms": values,
        "run_worst_rank_means_exact_ms": list(summary["run_worst_rank_means_exact_ms"]),
        "spread_ms": spread["spread_ms"],
        "mean_ms": spread["mean_ms"],
        "spread_pct": spread["spread_pct"],
    }


def improvement_pct(baseline: float, candidate: float) -> float | None:
    """(base - cand) / base * 100 (positive = candidate faster); None if base is 0."""
    if baseline == 0:
        return None
    return (baseline - candidate) / baseline * 100


def relative_change_pct(new: float, old: float) -> float | None:
    """(new - old) / old * 100 (positive = regression of a time); None if old is 0."""
    if old == 0:
        return None
    return (new - old) / old * 100


@dataclass(frozen=True)
class Allowances:
    """How far pooled P90 / stddev may regress (in %) before their check fails.

    The reference tool's ``--allow-p90-regression-pct`` and
    ``--allow-stddev-regression-pct`` (default 0: not worse at all).
    """

    p90_pct: float = ALLOW_P90_REGRESSION_PCT
    stddev_pct: float = ALLOW_STDDEV_REGRESSION_PCT

    def __post_init__(self) -> None:
        for name, value in (("P90", self.p90_pct), ("stddev", self.stddev_pct)):
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
                raise ValueError(f"the {name} regression allowance {value!r} is not a finite number >= 0")

    @property
    def is_protocol(self) -> bool:
        """Both allowances are the protocol's 0 %."""
        return self.p90_pct == ALLOW_P90_REGRESSION_PCT and self.stddev_pct == ALLOW_STDDEV_REGRESSION_PCT

    def to_json(self) -> dict[str, float]:
        return {"allow_p90_regression_pct": float(self.p90_pct), "allow_stddev_regression_pct": float(self.stddev_pct)}


PROTOCOL_ALLOWANCES = Allowances()
"""The protocol's allowances (0 %): the default of every evaluation."""


def _decimal(value: float) -> Fraction:
    """A float as the decimal the JSON shows (its shortest repr): ``0.1`` is exactly 1/10."""
    return Fraction(repr(float(value)))


def regression_within(new: float, old: float, allow_pct: float) -> bool:
    """``(new - old) / old * 100 <= allow_pct`` in exact rational arithmetic.

    Every number is read as the decimal it prints as (the summary JSON's
    value, the allowance as typed), so a regression of exactly the allowance
    passes; with a 0 allowance this is ``new <= old``. A zero or non-finite
    ``old`` is undefined and fails closed.
    """
    if old == 0 or not (math.isfinite(new) and math.isfinite(old)):
        return False
    return (_decimal(new) - _decimal(old)) / _decimal(old) * 100 <= _decimal(allow_pct)


def evaluate_candidate(
    baseline: Mapping[str, Any],
    stability: Mapping[str, Any],
    candidate: Mapping[str, Any],
    allowances: Allowances = Allowances(),
) -> dict[str, Any]:
    """``option_trial_evaluation`` of one candidate: the seven checks.

    The P90/stddev checks compare exactly (:func:`regression_within`); with the
    default allowances they are "not worse at all", as the protocol says.
    """
    mean_improvement = improvement_pct(baseline["worst_rank_mean_ms"], candidate["worst_rank_mean_ms"])
    median_improvement = improvement_pct(
        baseline["median_run_worst_rank_mean_ms"], candidate["median_run_worst_rank_mean_ms"]
    )
    p90_regression = relative_change_pct(candidate["decode"]["p90_ms"], baseline["decode"]["p90_ms"])
    stddev_regression = relative_change_pct(candidate["decode"]["stddev_ms"], baseline["decode"]["stddev_ms"])
    checks = {
        "baseline_stable": bool(stability["stable"]),
        "baseline_min_runs": baseline["run_count"] == BASELINE_REQUIRED_RUNS,
        "candidate_min_runs": candidate["run_count"] >= CANDIDATE_MIN_RUNS,
        "mean_improvement": mean_improvement is not None and mean_improvement > MIN_IMPROVEMENT_PCT,
        "median_run_direction": median_improvement is not None and median_improvement > 0,
        "p90_no_material_regression": regression_within(
            candidate["decode"]["p90_ms"], baseline["decode"]["p90_ms"], allowances.p90_pct
        ),
        "stddev_no_material_regression": regression_within(
            candidate["decode"]["stddev_ms"], baseline["decode"]["stddev_ms"], allowances.stddev_pct
        ),
    }
    return {
        "accepted": all(checks.values()),
        "checks": checks,
        "failed_checks": [name for name in CHECK_NAMES if not checks[name]],
        "baseline_required_runs": BASELINE_REQUIRED_RUNS,
        "candidate_min_runs": CANDIDATE_MIN_RUNS,
        "min_improvement_pct": MIN_IMPROVEMENT_PCT,
        "mean_improvement_rule": "strictly_positive",
        **allowances.to_json(),
        "mean_improvement_pct": mean_improvement,
        "median_run_improvement_pct": median_improvement,
        "p90_regression_pct": p90_regression,
        "stddev_regression_pct": stddev_regression,
    }


def selection(candidates: Mapping[str, Mapping[str, Any]], accepted: Mapping[str, bool], gate: str) -> dict[str, Any]:
    """``selection`` block: the fastest accepted candidate, else the incumbent.

    ``accepted`` is the effective decision of the chosen gate per candidate.
    """
    def key(name: str) -> tuple[float, str]:
        return (candidates[name]["worst_rank_mean_ms"], name)

    ranked = sorted(candidates, key=key)
    eligible = [name for name in ranked if accepted[name]]
    recommended = eligible[0] if eligible else INCUMBENT
    protocol_accepted = [n for n in ranked if candidates[n]["option_trial_evaluation"]["accepted"]]
    return {
        "stage": STAGE,
        "gate": gate,
        "best_superkernel_candidate": ranked[0] if ranked else None,
        "recommended": recommended,
        "selected_for_deep_analysis": None,
        "baseline_retained": recommended == INCUMBENT,
        "promoted_candidates": [],
        "screening_eligible_candidates": [],
        "ranked_eligible_candidates": [],
        "ranked_candidates": ranked,
        "accepted_candidates": eligible,
        "protocol_accepted_candidates": protocol_accepted,
        "final_promotion_decision": "not_applicable_option_trial",
        "option_trial_accepted": bool(eligible),
        "retained_incumbent": recommended,
    }
