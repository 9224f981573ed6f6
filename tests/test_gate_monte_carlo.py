"""Monte Carlo of the gates at a size CI affords (issue 18 targets).

The statistics policy, 5 baseline vs 5 candidate runs, on each noise model of
:mod:`gate_noise`: false wins <= 5 %, >= 80 % acceptance of a true +2 % win,
<= 1 % acceptance of a true -1 % loss. Each observed share of ``TRIALS`` is
held to its bound up to three binomial standard deviations (seeded draws, so
the test is deterministic). The full table is ``benchmarks/bench_gate_mc.py``.
"""

from __future__ import annotations

import pytest

from gate_noise import MODELS, NoiseModel, acceptance, binomial_sigma

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
