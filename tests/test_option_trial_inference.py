"""Statistics beside the gate, checked against hand calculations."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from sk_analytics.messages import text
from sk_analytics.option_trial import planning
from sk_analytics.option_trial.inference import (
    equivalence,
    log_effect_of_pct,
    null_run_checks_pass_rate,
    runs_needed,
    trial_statistics,
    verdict,
    welch_interval,
)

# ln(run metric / 100): baseline mean 0, sample variance 1e-3/4 = 2.5e-4;
# candidate mean -0.04, sample variance 2e-4/2 = 1e-4.
BASE = [100 * math.exp(x) for x in (0.0, 0.02, -0.02, 0.01, -0.01)]
CAND = [100 * math.exp(x) for x in (-0.05, -0.03, -0.04)]


def test_welch_interval_hand_values() -> None:
    w = welch_interval(np.log(BASE), np.log(CAND))
    assert w is not None
    assert w["log_effect"] == pytest.approx(0.04, abs=1e-12)
    # se^2 = 2.5e-4/5 + 1e-4/3 = 1/12000; df = (1/12000)^2 / ((5e-5)^2/4 + (1e-4/3)^2/2) = 100/17
    assert w["se_log"] == pytest.approx(math.sqrt(1 / 12000), rel=1e-9)
    assert w["df"] == pytest.approx(100 / 17, rel=1e-9)
    t = sps.t.ppf(0.975, 100 / 17)
    assert w["ci_low_log"] == pytest.approx(0.04 - t * math.sqrt(1 / 12000), rel=1e-9)
    assert w["p_one_sided"] == pytest.approx(sps.t.sf(0.04 / math.sqrt(1 / 12000), 100 / 17), rel=1e-9)


def test_trial_statistics_win() -> None:
    st = trial_statistics(BASE, CAND)
    assert st["improvement_pct"] == pytest.approx((1 - math.exp(-0.04)) * 100, rel=1e-9)
    low, high = st["ci_pct"]
    assert 0 < low < st["improvement_pct"] < high
    assert st["verdict"] == "win" and st["verdict_zh"] == "确有提升" and st["ci_excludes_zero"] is True
    assert st["noise"]["baseline_run_cv_pct"] == pytest.approx(math.sqrt(2.5e-4) * 100, rel=1e-9)
    assert st["noise"]["neutral_margin_pct"] == pytest.approx(math.sqrt(2.5e-4) * 100, rel=1e-9)
    b_low, b_high = st["bootstrap_ci_pct"]
    assert b_low > 0 and st["methods_agree"] is True
    assert st["false_win_risk"]["p_value_one_sided"] < 0.025


def test_loss_neutral_inconclusive() -> None:
    assert trial_statistics(CAND, BASE)["verdict"] == "loss"
    assert verdict({"ci_low_log": -0.001, "ci_high_log": 0.002}, margin_pct=0.5) == "neutral"
    assert verdict({"ci_low_log": -0.01, "ci_high_log": 0.02}, margin_pct=0.5) == "inconclusive"
    assert verdict(None, margin_pct=0.5) == "inconclusive"


def test_single_candidate_run_is_inconclusive() -> None:
    st = trial_statistics(BASE, [90.0])
    assert st["ci_pct"] is None and st["bootstrap_ci_pct"] is None and st["verdict"] == "inconclusive"
    assert st["false_win_risk"]["p_value_one_sided"] is None
    # no effect detected: no figure for the observed effect, one for a 0.5 % effect from the baseline noise alone
    assert st["runs_needed_per_side"] is None
    assert st["runs_needed"]["basis"] == "no_effect_detected" and st["runs_needed"]["per_side"] is not None


def test_zero_noise_identical_runs() -> None:
    st = trial_statistics([100.0] * 5, [100.0] * 3)
    assert st["improvement_pct"] == 0.0 and st["ci_pct"] == [0.0, 0.0]
    assert st["verdict"] == "neutral" and st["runs_needed_per_side"] is None


def test_null_pass_rate_two_runs_each() -> None:
    # two runs a side: mean and median coincide, so the rate is P(mean_c < mean_b) = 1/2
    assert null_run_checks_pass_rate(2, 2, simulations=40_000) == pytest.approx(0.5, abs=0.01)
    rate = null_run_checks_pass_rate(5, 3)
    assert rate is not None and 0.25 < rate < 0.5


def test_runs_needed_formula() -> None:
    sd, effect = 0.02, 0.01
    n = runs_needed(effect, sd)
    assert n is not None

    def detectable(k: int) -> float:
        df = 2 * k - 2
        return (sps.t.ppf(0.975, df) + sps.t.ppf(0.8, df)) * sd * math.sqrt(2 / k)

    assert detectable(n) <= effect < detectable(n - 1)
    # normal approximation: 2 * (1.96 + 0.84)^2 * (sd/effect)^2 = 62.7 -> t quantiles add a run or two
    assert 63 <= n <= 66
    # no figure ever asks for fewer runs than the protocol's minimum of 3 (a noise-free effect used to say 2)
    assert runs_needed(0.0, sd) is None and runs_needed(effect, 0.0) == 3
    assert runs_needed(0.2, sd) == 3 and runs_needed(-effect, sd) == n


def test_zero_run_metric_has_no_log_statistics() -> None:
    st = trial_statistics([0.0, 1.0], [1.0, 1.0, 1.0])
    assert st["verdict"] == "inconclusive" and st["ci_pct"] is None and st["ci_excludes_zero"] is False
    assert st["improvement_pct"] is None and st["runs_needed_per_side"] is None


def test_runs_needed_plans_at_the_bounds_not_the_estimates() -> None:
    win = trial_statistics(BASE, CAND)
    base, cand = np.log(BASE), np.log(CAND)
    sd = math.sqrt((4 * 2.5e-4 + 2 * 1e-4) / 6)  # pooled sd of the logs, 6 degrees of freedom
    sd_up = sd * math.sqrt(6 / sps.chi2.ppf(0.2, 6))  # its one-sided 80 % upper bound
    se, df = math.sqrt(1 / 12000), 100 / 17  # Welch terms of the hand values above
    effect_low = 0.04 - sps.t.ppf(0.95, df) * se  # one-sided 95 % lower bound of the detected effect
    figure = win["runs_needed"]
    assert figure["basis"] == "observed_effect" and figure["effect_pct"] == pytest.approx(win["improvement_pct"], rel=1e-12)
    assert figure["planned_noise_pct"] == pytest.approx(sd_up * 100, rel=1e-9)
    assert figure["planned_effect_pct"] == pytest.approx((1 - math.exp(-effect_low)) * 100, rel=1e-9)
    assert figure["per_side"] == runs_needed(effect_low, sd_up) == win["runs_needed_per_side"]
    # the estimates alone would promise far fewer runs: that optimism is what issue 28 removes
    assert runs_needed(0.04, sd) < figure["per_side"]
    assert "upper confidence bound" in figure["assumes"] and "置信上界" in figure["assumes_zh"]
    # the sentences are rendered from the coded message where the figure is built; planning keeps none of its own
    assert figure["assumes"] == text("advice.assumes", "en", noise=0.8, effect=0.95, min_runs=3)
    assert figure["assumes_zh"] == text("advice.assumes", "zh", noise=0.8, effect=0.95, min_runs=3)
    assert not any(isinstance(value, str) and value in (figure["assumes"], figure["assumes_zh"]) for value in vars(planning).values())
    assert figure["power"] == 0.8 and figure["confidence"] == 0.95
    # a null trial: the observed effect is noise, so no figure promises to resolve it; the margin's figure instead
    logs = np.array([0.004, -0.006, 0.001])
    null = trial_statistics(BASE, list(100 * np.exp(logs)))
    assert null["verdict"] != "win" and null["runs_needed_per_side"] is None
    figure = null["runs_needed"]
    assert figure["basis"] == "no_effect_detected" and figure["effect_pct"] == 0.5 == figure["planned_effect_pct"]
    sd_null = math.sqrt((4 * 2.5e-4 + 2 * logs.var(ddof=1)) / 6)
    assert figure["per_side"] == runs_needed(log_effect_of_pct(0.5), sd_null * math.sqrt(6 / sps.chi2.ppf(0.2, 6)))
    assert base.size == 5 and cand.size == 3


def test_runs_needed_never_below_the_protocol_minimum() -> None:
    """A huge effect on noise-free runs: the figure is the protocol's 3, not 2."""
    st = trial_statistics([100.0, 100.0, 100.0, 100.0, 100.0], [80.0, 80.0, 80.0])
    assert st["runs_needed"]["per_side"] == 3
    # one candidate run: no effect can be detected, the margin's figure comes from the baseline's noise alone
    one = trial_statistics(BASE, [90.0])
    assert one["runs_needed"]["basis"] == "no_effect_detected" and one["runs_needed"]["per_side"] >= 3


def test_equivalence_tost_at_half_a_percent() -> None:
    tight = np.log([100.0, 100.05, 99.95, 100.02, 99.98])
    same = equivalence(tight, tight + 0.0001)
    assert same["equivalent"] is True and same["margin_pct"] == 0.5
    low, high = same["ci90_pct"]
    assert -0.5 < low < high < 0.5
    noisy = equivalence(np.log(BASE), np.log(BASE) + 0.001)  # 1.6 % noise: the 90 % CI reaches past +/- 0.5 %
    assert noisy["equivalent"] is False and noisy["ci90_pct"][0] < -0.5
    assert equivalence(np.log([100.0]), tight)["ci90_pct"] is None
    assert log_effect_of_pct(0.5) == pytest.approx(-math.log(0.995), rel=1e-15)
