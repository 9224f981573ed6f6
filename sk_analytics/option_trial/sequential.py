"""The sequential form of the statistics policy (``--gate sequential``): not
the Stage O protocol, chosen by the user to reach the power of more runs
without always paying for them (issue 28).

At the design the sweep gates on (5 baseline vs 3 candidate runs) the fixed
statistics policy finds a true +2 % only about 70 % of the time under 1 %
run-to-run drift. The sequential form looks after the 3rd candidate run and
after every further one up to a stated cap, and stops at the first look that
decides:

* **accept** when the policy's checks all pass at that look: the Welch t of
  the improvement of the ln worst-rank means crosses the look's boundary, and
  P90 and stddev are not significantly worse (:mod:`stats_gate`, one-sided
  :data:`~sk_analytics.option_trial.stats_gate.LEVEL`), the protocol's
  preconditions holding;
* **reject** (futility) when the candidate is not faster on average at that
  look (Welch t <= :data:`FUTILITY_T`), or when the cap is reached undecided;
* else **undecided**: add one candidate run.

Error spending: the boundaries spend the one-sided level :data:`SPENT_LEVEL`
(a margin under the promised :data:`LEVEL`) linearly over the looks (``alpha * j / K`` by look ``j`` of
``K``, a Pocock-like shape that decides early). The Welch t of normal runs
of equal variance is scale-free, so the boundaries are computed exactly for
every (baseline runs, cap) by one seeded simulation of that null
(:data:`CALIBRATION_TRIALS` paths, cached); the futility stop only lowers
the false-win rate (non-binding). Measured false wins, power and mean runs
on the three noise models: ``benchmarks/bench_gate_mc.py``,
docs/option-trial.md. Vectorised over leading axes; pure (no I/O).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from sk_analytics.messages import coded, rendered_fields
from sk_analytics.option_trial.gate import CANDIDATE_MIN_RUNS, Allowances
from sk_analytics.option_trial.inference import welch_terms
from sk_analytics.option_trial.modes import SEQUENTIAL_CAP
from sk_analytics.option_trial.stats_gate import PRECONDITIONS, RunFigures, bounds, metric_checks

POLICY = "sequential"
LEVEL = 0.05
"""The promised overall one-sided false-win rate."""
SPENT_LEVEL = 0.045
"""The level the boundaries spend: a margin below :data:`LEVEL` for noise that is not normal (the run metric is a
worst-rank maximum, the simulator has spikes): spending the full 5 % measured 5.1-5.2 % false wins at cap 8."""
CAP = SEQUENTIAL_CAP
"""Default most candidate runs (option-trial); the sweep caps at its incumbent's run count."""
FIRST_LOOK = CANDIDATE_MIN_RUNS
FUTILITY_T = 0.0
CALIBRATION_TRIALS = 100_000
CALIBRATION_SEED = 20_261_203
VARIANCE_CHECKS = ("p90_not_significantly_worse", "stddev_not_significantly_worse")


def _welch_t(base: np.ndarray, cand: np.ndarray) -> np.ndarray:
    """Welch t of ``mean(base) - mean(cand)`` (+/-inf for a difference of constant sides, NaN for none)."""
    d, se, _ = welch_terms(base, cand)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(se > 0, d / np.where(se > 0, se, 1.0), np.where(d > 0, np.inf, np.where(d < 0, -np.inf, np.nan)))


@lru_cache(maxsize=32)
def boundaries(baseline_runs: int, cap: int, first: int = FIRST_LOOK, level: float = SPENT_LEVEL) -> tuple[float, ...]:
    """Welch-t boundaries of the looks at ``first .. cap`` candidate runs:
    under the null (normal runs, equal variance, the baseline fixed) the
    chance that some look's t crosses its boundary is ``level``, spent
    ``level * j / K`` by look ``j`` of ``K``."""
    if baseline_runs < 2 or first < 2 or cap < first:
        raise ValueError(f"no sequential design for {baseline_runs} baseline runs and looks {first}..{cap}")
    rng = np.random.default_rng(CALIBRATION_SEED)
    base = rng.standard_normal((CALIBRATION_TRIALS, baseline_runs))
    cand = rng.standard_normal((CALIBRATION_TRIALS, cap))
    paths = np.stack([_welch_t(base, cand[:, :k]) for k in range(first, cap + 1)], axis=1)
    looks = paths.shape[1]
    alive = np.ones(CALIBRATION_TRIALS, dtype=bool)
    found: list[float] = []
    for j in range(looks):
        crossings = int(round(level / looks * CALIBRATION_TRIALS))  # the look's share of the level, of all paths
        remaining = np.sort(paths[alive, j])[::-1]
        c = float(remaining[crossings]) if crossings < remaining.size else float("inf")
        found.append(c)
        alive &= ~(paths[:, j] > c)
    return tuple(found)


@dataclass(frozen=True)
class Replay:
    """The looks replayed over the candidate runs there are (trials on leading axes)."""

    state: np.ndarray
    """``accepted`` / ``rejected`` / ``undecided`` per trial."""
    runs_used: np.ndarray
    """Candidate runs at the deciding look (the runs there are when undecided)."""
    reason: np.ndarray
    """``crossed`` / ``not_faster`` / ``cap_reached`` / ``add_a_run``."""
    t: np.ndarray
    """Welch t of the improvement at every look (last axis), NaN after the decision or beyond the runs there are."""


def replay(base: RunFigures, cand: RunFigures, allowances: Allowances = Allowances(), cap: int = CAP,
           preconditions: np.ndarray | bool = True) -> Replay:
    """The sequential decision of every trial from its runs in run order
    (looks at ``FIRST_LOOK .. min(cap, candidate runs)``; runs beyond the cap are not read)."""
    nb, nc = base.mean_ms.shape[-1], cand.mean_ms.shape[-1]
    lead = base.mean_ms.shape[:-1]
    limit = min(cap, nc)
    c = boundaries(nb, cap)
    state = np.full(lead, "undecided", dtype=object)
    reason = np.full(lead, "add_a_run", dtype=object)
    runs_used = np.full(lead, limit, dtype=int)
    ts = np.full((*lead, max(cap - FIRST_LOOK + 1, 0)), np.nan)
    open_ = np.ones(lead, dtype=bool) & np.asarray(preconditions, dtype=bool)
    state = np.where(open_, state, "rejected")
    reason = np.where(open_, reason, "preconditions")
    runs_used = np.where(open_, runs_used, min(nc, FIRST_LOOK))
    with np.errstate(invalid="ignore", divide="ignore"):
        base_logs = np.log(np.where(base.mean_ms > 0, base.mean_ms, np.nan))
        for j, k in enumerate(range(FIRST_LOOK, limit + 1)):
            part = RunFigures(cand.mean_ms[..., :k], cand.p90_ms[..., :k], cand.stddev_ms[..., :k])
            t = _welch_t(base_logs, np.log(np.where(part.mean_ms > 0, part.mean_ms, np.nan)))
            checks = metric_checks(bounds(base, part, allowances))
            variance_ok = checks[VARIANCE_CHECKS[0]] & checks[VARIANCE_CHECKS[1]]
            ts[..., j] = np.where(open_, t, np.nan)
            accept = open_ & (t > c[j]) & variance_ok
            futile = open_ & ~accept & ~(t > FUTILITY_T)
            state = np.where(accept, "accepted", np.where(futile, "rejected", state))
            reason = np.where(accept, "crossed", np.where(futile, "not_faster", reason))
            runs_used = np.where(accept | futile, k, runs_used)
            open_ = open_ & ~accept & ~futile
        at_cap = open_ & (limit == cap)
    state = np.where(at_cap, "rejected", state)
    reason = np.where(at_cap, "cap_reached", reason)
    return Replay(state, runs_used, reason, ts)


def json_number(value: float) -> float | str | None:
    """A float for strict JSON: +/-inf (a difference of constant sides, a look that cannot cross) as text, NaN as null."""
    number = float(value)
    if np.isnan(number):
        return None
    return number if np.isfinite(number) else ("inf" if number > 0 else "-inf")


def evaluate_sequential(protocol_evaluation: Mapping[str, Any], baseline: Mapping[str, Any], candidate: Mapping[str, Any],
                        allowances: Allowances = Allowances(), cap: int = CAP) -> dict[str, Any]:
    """``sequential_policy_evaluation`` of one candidate (JSON-ready); it decides only under ``--gate sequential``."""
    base, cand = RunFigures.of_summary(baseline), RunFigures.of_summary(candidate)
    nb, nc = base.mean_ms.size, cand.mean_ms.size
    held = all(bool(protocol_evaluation["checks"][name]) for name in PRECONDITIONS)
    designed = nb >= 2 and cap >= FIRST_LOOK
    found = replay(base, cand, allowances, cap, held) if designed and nc >= FIRST_LOOK else None
    state = "rejected" if not held or not designed else ("undecided" if found is None else str(found.state))
    reason = "preconditions" if not held or not designed else ("add_a_run" if found is None else str(found.reason))
    looks = [] if found is None else [
        {"candidate_runs": FIRST_LOOK + j, "welch_t": json_number(t), "boundary": json_number(c)}
        for j, (t, c) in enumerate(zip(found.t, boundaries(nb, cap), strict=True)) if held and FIRST_LOOK + j <= int(found.runs_used)
    ]
    return {
        "policy": POLICY, "is_protocol": False, **rendered_fields("label", coded("gate_label.sequential")),
        "accepted": state == "accepted", "state": state, "reason": reason,
        "runs_used": min(nc, cap) if found is None else int(found.runs_used),
        "candidate_runs_available": nc, "cap": cap, "first_look": FIRST_LOOK,
        "next": "add one candidate run and evaluate again" if state == "undecided" else None,
        "level_one_sided": LEVEL, "level_spent": SPENT_LEVEL,
        "spending": "linear (alpha * j / K by look j of K), Welch t boundaries calibrated on the normal null",
        "futility": f"stop and reject when the Welch t of the improvement is <= {FUTILITY_T:g} (not faster on average)",
        "boundaries": [json_number(c) for c in boundaries(nb, cap)] if designed else [],
        "looks": looks, **allowances.to_json(),
    }
