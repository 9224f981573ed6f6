"""The family policy (``"gate": "family"``): decisions controlled across the
whole sweep matrix, not entry by entry (issue 43). Not the Stage O protocol.

A Stage O sweep is a family of 9-15 tests whose one product is the frozen
BASE; a gate that is right for one entry at 5 % is wrong for the sweep about
half of the time. This policy makes the BASE right as a whole:

* **error spending across the matrix**: the one-sided false-win level
  :data:`FAMILY_LEVEL` is split evenly over the matrix's entries (Bonferroni:
  the chance that *any* no-effect value is frozen is at most the family level,
  whatever the order of the entries and whichever incumbent each one meets);
* **group-sequential looks per entry**: after the 3rd candidate run and every
  further one up to the per-entry cap, the Welch t of the improvement of the
  ln worst-rank run means (per-side variances: the candidate may be noisier)
  is turned into a normal score through its Welch-Satterthwaite t
  distribution, and compared with boundaries that spend the entry's level over
  the looks (``level * ((k - first + 1) / (cap - first + 1)) ** SPENDING_SHAPE``
  by candidate run ``k``: little at the first, uninformative looks), calibrated
  exactly on the normal null by one seeded simulation per design (cached);
* **a minimum effect that matters** (``policy.min_effect_pct``, default
  :data:`MIN_EFFECT_PCT`): a value whose estimated gain is below it is not
  frozen, and an entry stops as futile as soon as the one-sided upper bound of
  its gain is below it, at a confidence that falls over the looks from 75 % to
  25 % (:data:`FUTILITY_CONFIDENCE`; non-binding: it only lowers the false-win
  rate);
* **incumbent runs that serve every entry**: the incumbent is extended to
  ``entries + 4`` runs (10 to 17, :func:`~sk_analytics.option_trial.modes.family_incumbent_runs`:
  each extra run sharpens every later test; recorded as ``incumbent_runs_added_by_gate``) and a
  frozen winner, which becomes the next incumbent, is topped up to as many;
* P90 and stddev must not be significantly worse, at the entry's level (the
  statistics policy's tests, :mod:`stats_gate`), so a variance-neutral win is
  not lost to a coin flip.

Measured on whole simulated sweeps (``benchmarks/bench_session_mc.py``,
docs/option-trial.md). Vectorised over leading axes; pure (no I/O).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from sk_analytics.lazy_module import lazy_module
from sk_analytics.messages import coded, rendered_fields
from sk_analytics.option_trial.gate import CANDIDATE_MIN_RUNS, PROTOCOL_ALLOWANCES, Allowances
from sk_analytics.option_trial.inference import log_effect_of_pct, log_improvement_pct, welch_terms
from sk_analytics.option_trial.modes import FAMILY_CAP, FAMILY_MIN_EFFECT_PCT, family_incumbent_runs
from sk_analytics.option_trial.sequential import VARIANCE_CHECKS, json_number
from sk_analytics.option_trial.stats_gate import RunFigures, bounds, metric_checks

sps = lazy_module("scipy.stats")

POLICY = "family"
FAMILY_LEVEL = 0.05
"""One-sided chance that the sweep freezes at least one value that changes nothing (the whole matrix)."""
MIN_EFFECT_PCT = FAMILY_MIN_EFFECT_PCT
"""Default ``policy.min_effect_pct``: a gain below 1 % is not worth freezing into BASE (twice the 0.5 % band the
statistics call no effect, :data:`~sk_analytics.option_trial.inference.EQUIVALENCE_MARGIN_PCT`)."""
CAP = FAMILY_CAP
"""Default most candidate runs of one entry."""
FIRST_LOOK = CANDIDATE_MIN_RUNS
SPENDING_SHAPE = 2.0
"""Exponent of the spending function: the share of an entry's level spent by a look grows as its run share squared."""
FUTILITY_CONFIDENCE = (0.75, 0.25)
"""One-sided confidence of the upper bound of the gain that must reach the minimum effect to go on, at the first
look and at the cap (between them linear in the normal score over the looks: 50 % halfway, where the estimate
itself must reach it). Early looks cannot tell a no-effect value from a real +2 % win, late ones can: a constant
75 % kept no-effect values looking to the cap (``benchmarks/bench_session_mc.py``)."""
CALIBRATION_TRIALS = 200_000
CALIBRATION_SEED = 20_261_206


@dataclass(frozen=True)
class FamilyDesign:
    """The family policy of one sweep, stated up front (in the plan and every gate record)."""

    entries: int
    """Entries of the frozen matrix (the family the level is spent over)."""
    level: float = FAMILY_LEVEL
    min_effect_pct: float = MIN_EFFECT_PCT
    incumbent_runs: int = 0
    """Runs of the incumbent (0: :func:`~sk_analytics.option_trial.modes.family_incumbent_runs` of the entries)."""
    cap: int = CAP
    """Most candidate runs of one entry."""
    first: int = FIRST_LOOK

    def __post_init__(self) -> None:
        if self.entries < 1:
            raise ValueError(f"a family needs at least one entry, not {self.entries}")
        if self.incumbent_runs == 0:
            object.__setattr__(self, "incumbent_runs", family_incumbent_runs(self.entries))
        if not 0 < self.level < 1:
            raise ValueError(f"the family level {self.level!r} is not in (0, 1)")
        if not (np.isfinite(self.min_effect_pct) and self.min_effect_pct >= 0):
            raise ValueError(f"min_effect_pct {self.min_effect_pct!r} is not a finite number >= 0")
        if self.first < 2 or self.cap < self.first or self.incumbent_runs < 2:
            raise ValueError(f"no family design with looks {self.first}..{self.cap} and {self.incumbent_runs} incumbent runs")

    @property
    def entry_level(self) -> float:
        """One-sided level of each entry's test (the family level split over the entries)."""
        return self.level / self.entries

    @property
    def runs_per_entry_cap(self) -> int:
        """Most device runs one entry can take: its candidate runs, or a winner's top-up to the incumbent's runs."""
        return max(self.cap, self.incumbent_runs)

    @property
    def session_cap(self) -> int:
        """Most device runs the whole sweep can take (the incumbent's runs plus every entry at its cap)."""
        return self.incumbent_runs + self.entries * self.runs_per_entry_cap

    def to_json(self) -> dict[str, Any]:
        return {
            "policy": POLICY, "entries": self.entries, "family_level_one_sided": self.level,
            "entry_level_one_sided": self.entry_level, "spending": f"Bonferroni over the entries; per entry level * (look share) ** {SPENDING_SHAPE:g}",
            "min_effect_pct": self.min_effect_pct, "incumbent_runs": self.incumbent_runs, "first_look": self.first,
            "cap_runs_per_entry": self.runs_per_entry_cap, "cap_candidate_runs": self.cap, "cap_runs_per_session": self.session_cap,
            "futility": (f"stop when the one-sided upper bound of the gain is below min_effect_pct, at a confidence falling from "
                         f"{FUTILITY_CONFIDENCE[0]:.0%} at the first look to {FUTILITY_CONFIDENCE[1]:.0%} at the cap"),
        }


def _z_of_t(t: np.ndarray, df: np.ndarray) -> np.ndarray:
    """The normal score of a t statistic with ``df`` degrees of freedom (same one-sided p-value); +/-inf kept."""
    with np.errstate(invalid="ignore", divide="ignore"):
        p = sps.t.sf(t, np.where(np.isfinite(df) & (df > 0), df, 1.0))
        return np.where(np.isinf(t), t, sps.norm.isf(p))


def welch_z(base: np.ndarray, cand: np.ndarray, shift: float = 0.0) -> np.ndarray:
    """Normal score of the Welch t of ``mean(base) - mean(cand) - shift`` along the last axis (NaN: < 2 runs a side)."""
    d, se, df = welch_terms(base, cand)
    with np.errstate(invalid="ignore", divide="ignore"):
        t = np.where(se > 0, (d - shift) / np.where(se > 0, se, 1.0), np.where(d > shift, np.inf, np.where(d < shift, -np.inf, np.nan)))
    return _z_of_t(t, df)


def spent(k: int, first: int, cap: int, level: float) -> float:
    """Level spent by the look at candidate run ``k`` (cumulative)."""
    return float(level * ((k - first + 1) / (cap - first + 1)) ** SPENDING_SHAPE)


@lru_cache(maxsize=64)
def boundaries(baseline_runs: int, cap: int, level: float, first: int = FIRST_LOOK) -> tuple[float, ...]:
    """Normal-score boundaries of the looks at ``first .. cap`` candidate runs against ``baseline_runs``
    incumbent runs: under the null (normal runs, equal variance) the chance that a look crosses before or
    at run ``k`` is :func:`spent` ``(k)``."""
    if baseline_runs < 2 or first < 2 or cap < first:
        raise ValueError(f"no family design for {baseline_runs} baseline runs and looks {first}..{cap}")
    rng = np.random.default_rng(CALIBRATION_SEED)
    base = rng.standard_normal((CALIBRATION_TRIALS, baseline_runs))
    cand = rng.standard_normal((CALIBRATION_TRIALS, cap))
    alive = np.ones(CALIBRATION_TRIALS, dtype=bool)
    found: list[float] = []
    for k in range(first, cap + 1):
        z = welch_z(base, cand[:, :k])
        budget = int(round((spent(k, first, cap, level) - (spent(k - 1, first, cap, level) if k > first else 0.0)) * CALIBRATION_TRIALS))
        remaining = np.sort(z[alive])[::-1]
        c = float(remaining[budget]) if budget < remaining.size else float("inf")
        found.append(c)
        alive &= ~(z > c)
    return tuple(found)


def design_boundaries(design: FamilyDesign) -> tuple[float, ...]:
    """The boundaries of a design's looks. Calibrated at the design's incumbent runs whatever the incumbent
    has: on the normal-score scale the boundaries hardly move with the run counts (a winner's incumbent may
    keep more runs), and one calibration serves the sweep (the benchmark measures the false wins this gives)."""
    return boundaries(design.incumbent_runs, design.cap, design.entry_level, design.first)


def futility_scores(design: FamilyDesign) -> np.ndarray:
    """Normal score of the futility bound's confidence at each look (:data:`FUTILITY_CONFIDENCE`, linear over the looks)."""
    first, last = sps.norm.ppf(FUTILITY_CONFIDENCE)
    return np.asarray(np.linspace(first, last, design.cap - design.first + 1))


@dataclass(frozen=True)
class Replay:
    """The looks of the family policy replayed over the runs there are (trials on leading axes)."""

    state: np.ndarray
    """``accepted`` / ``rejected`` / ``undecided``."""
    runs_used: np.ndarray
    """Candidate runs at the deciding look (the runs there are when undecided)."""
    reason: np.ndarray
    """``crossed`` / ``futile`` / ``below_min_effect`` / ``cap_reached`` / ``add_a_run``."""
    z: np.ndarray
    """Normal score of the improvement at every look (last axis), NaN after the decision."""


def replay(base: RunFigures, cand: RunFigures, design: FamilyDesign, allowances: Allowances = PROTOCOL_ALLOWANCES) -> Replay:
    """The family decision of every trial from its runs in run order (looks at ``first .. min(cap, runs)``)."""
    nc = cand.mean_ms.shape[-1]
    lead = base.mean_ms.shape[:-1]
    limit = min(design.cap, nc)
    c = design_boundaries(design)
    state = np.full(lead, "undecided", dtype=object)
    reason = np.full(lead, "add_a_run", dtype=object)
    runs_used = np.full(lead, limit, dtype=int)
    zs = np.full((*lead, design.cap - design.first + 1), np.nan)
    open_ = np.ones(lead, dtype=bool)
    delta = log_effect_of_pct(design.min_effect_pct)
    futility_z = futility_scores(design)
    with np.errstate(invalid="ignore", divide="ignore"):
        base_logs = np.log(np.where(base.mean_ms > 0, base.mean_ms, np.nan))
        for j, k in enumerate(range(design.first, limit + 1)):
            part = RunFigures(cand.mean_ms[..., :k], cand.p90_ms[..., :k], cand.stddev_ms[..., :k])
            cand_logs = np.log(np.where(part.mean_ms > 0, part.mean_ms, np.nan))
            z = welch_z(base_logs, cand_logs)
            d = base_logs.mean(axis=-1) - cand_logs.mean(axis=-1)
            checks = metric_checks(bounds(base, part, allowances, design.entry_level))
            variance_ok = checks[VARIANCE_CHECKS[0]] & checks[VARIANCE_CHECKS[1]]
            zs[..., j] = np.where(open_, z, np.nan)
            crossed = open_ & (z > c[j]) & variance_ok
            accept = crossed & (d >= delta)
            small = crossed & ~accept
            futile = open_ & ~crossed & ~(welch_z(base_logs, cand_logs, delta) > -futility_z[j])
            stop = accept | small | futile
            state = np.where(accept, "accepted", np.where(small | futile, "rejected", state))
            reason = np.where(accept, "crossed", np.where(small, "below_min_effect", np.where(futile, "futile", reason)))
            runs_used = np.where(stop, k, runs_used)
            open_ = open_ & ~stop
    at_cap = open_ & (limit == design.cap)
    state = np.where(at_cap, "rejected", state)
    reason = np.where(at_cap, "cap_reached", reason)
    return Replay(state, runs_used, reason, zs)


def evaluate_family(baseline: Mapping[str, Any], candidate: Mapping[str, Any], design: FamilyDesign,
                    allowances: Allowances = PROTOCOL_ALLOWANCES) -> dict[str, Any]:
    """``family_policy_evaluation`` of one candidate (JSON-ready); it decides only under ``"gate": "family"``.

    ``undecided`` asks for one more candidate run (``next``); the incumbent's run count is whatever the
    sweep gave it (it extends the incumbent to ``design.incumbent_runs`` before the first look)."""
    base, cand = RunFigures.of_summary(baseline), RunFigures.of_summary(candidate)
    nb, nc = base.mean_ms.size, cand.mean_ms.size
    designed = nb >= 2
    found = replay(base, cand, design, allowances) if designed and nc >= design.first else None
    if not designed:
        state, reason = "rejected", "no_incumbent_runs"
    else:
        state = "undecided" if found is None else str(found.state)
        reason = "add_a_run" if found is None else str(found.reason)
    used = min(nc, design.cap) if found is None else int(found.runs_used)
    bounds_ = design_boundaries(design) if designed else ()
    looks = [] if found is None else [
        {"candidate_runs": design.first + j, "z": json_number(z), "boundary": json_number(c)}
        for j, (z, c) in enumerate(zip(found.z, bounds_, strict=True)) if design.first + j <= used
    ]
    return {
        "policy": POLICY, "is_protocol": False, **rendered_fields("label", coded("gate_label.family")),
        "accepted": state == "accepted", "state": state, "reason": reason,
        "runs_used": used, "candidate_runs_available": nc, "incumbent_runs": nb,
        # its own figures: the improvement and its 95 % interval over the runs it used, both sides
        "estimate": {k: None if v is None else json_number(v) for k, v in estimate(base.mean_ms, cand.mean_ms[:used]).items()},
        "next": "add one candidate run and evaluate again" if state == "undecided" else None,
        "design": design.to_json(), "boundaries": [json_number(c) for c in bounds_], "looks": looks,
        **allowances.to_json(),
    }


def estimate(base_ms: np.ndarray, cand_ms: np.ndarray, confidence: float = 0.95) -> dict[str, float | None]:
    """Improvement % and its two-sided Welch interval (per-side variances) from per-run worst-rank means."""
    base, cand = np.log(np.asarray(base_ms, dtype=float)), np.log(np.asarray(cand_ms, dtype=float))
    if base.size < 2 or cand.size < 2:
        return {"improvement_pct": None, "ci_low_pct": None, "ci_high_pct": None}
    d, se, df = (float(x) for x in welch_terms(base, cand))
    half = float(sps.t.ppf(0.5 + confidence / 2, df)) * se if se > 0 else 0.0
    return {"improvement_pct": log_improvement_pct(d), "ci_low_pct": log_improvement_pct(d - half),
            "ci_high_pct": log_improvement_pct(d + half)}
