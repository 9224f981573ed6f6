"""Monte Carlo of the gates at a size CI affords (issue 18 targets).

The statistics policy, 5 baseline vs 5 candidate runs, on each noise model of
:mod:`gate_noise`: false wins <= 5 %, >= 80 % acceptance of a true +2 % win,
<= 1 % acceptance of a true -1 % loss. Each observed share of ``TRIALS`` is
held to its bound up to three binomial standard deviations (seeded draws, so
the test is deterministic). The full table is ``benchmarks/bench_gate_mc.py``.
"""

from __future__ import annotations

import numpy as np
import pytest

from gate_noise import MODELS, NoiseModel, acceptance, binomial_sigma
from sk_analytics.option_trial.inference import POWER, ci_excludes_zero, log_effect_of_pct, runs_needed, trial_statistics

TRIALS = 500
Z = 3.0

# (true improvement %, bound, is the bound an upper bound)
TARGETS = [(0.0, 0.05, True), (2.0, 0.80, False), (-1.0, 0.01, True)]


@pytest.mark.parametrize("model", MODELS, ids=lambda m: m.name)
def test_stats_policy_meets_its_targets(model: NoiseModel) -> None:
    for seed, (effect, bound, upper) in enumerate(TARGETS, start=1):
        rates = acceptance(model, seed, TRIALS, 5, 5, effect)
        slack = Z * binomial_sigma(bound, TRIALS)
        observed = rates["stats"]
        if upper:
            assert observed <= bound + slack, f"{model.name}: stats accepts {observed:.3f} of {effect:+g} % trials (bound {bound})"
        else:
            assert observed >= bound - slack, f"{model.name}: stats accepts only {observed:.3f} of {effect:+g} % wins (bound {bound})"
        if effect == 0.0:
            # why the policy exists: the protocol gate passes far more null trials than its 5 % would suggest
            assert rates["protocol"] >= 0.10 + slack, f"{model.name}: protocol null pass rate {rates['protocol']:.3f}"


@pytest.mark.parametrize(("sd_pct", "effect_pct"), [(0.5, 1.0), (1.0, 2.0), (1.0, 1.0)])
def test_runs_needed_gives_its_stated_power(sd_pct: float, effect_pct: float) -> None:
    """n = runs_needed(effect, sd) runs a side find a true effect of that size (95 % CI above 0) with >= 80 % power."""
    d, sd = log_effect_of_pct(effect_pct), sd_pct / 100
    n = runs_needed(d, sd)
    assert n is not None
    rng = np.random.default_rng(int(sd_pct * 100 + effect_pct))
    found = ci_excludes_zero(rng.normal(0.0, sd, (TRIALS * 4, n)), rng.normal(-d, sd, (TRIALS * 4, n)))
    assert found.mean() >= POWER - Z * binomial_sigma(POWER, TRIALS * 4)


def test_runs_needed_is_rarely_finite_on_null_trials() -> None:
    """On trials of an option that changes nothing the figure for the observed effect exists only when the 95 % CI
    excludes 0 by chance (about 5 %), not 95 % of the time as a figure computed from the noise would."""
    rng = np.random.default_rng(7)
    finite = [trial_statistics(list(100 * np.exp(rng.normal(0, 0.01, 5))), list(100 * np.exp(rng.normal(0, 0.01, 5))))["runs_needed_per_side"]
              is not None for _ in range(100)]
    assert np.mean(finite) <= 0.05 + Z * binomial_sigma(0.05, 100)
