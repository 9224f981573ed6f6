"""Advice beside the protocol decision: noise flags and what would settle them."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from ot_logs import uniform_runs, write_candidate
from scipy import stats as sps
from test_option_trial_stats_gate import BASE_MEANS, CAND_MEANS, spread_runs

from sk_analytics.cli import main
from sk_analytics.ingest.timings import read_candidate
from sk_analytics.option_trial import evaluate_option_trial
from sk_analytics.option_trial.advice import candidate_runs_to_resolve
from sk_analytics.option_trial.executable import CANDIDATE_RUNS_CAP, FAMILY_COMMAND

STABLE_BASE = ["100", "102.5", "97.5", "100", "100"]


def _detectable(vb: float, sc2: float, nb: int, n: int, level: float) -> float:
    vc = sc2 / n
    df = (vb + vc) ** 2 / (vb**2 / (nb - 1) + vc**2 / (n - 1))
    return (sps.t.ppf(1 - level, df) + sps.t.ppf(0.8, df)) * math.sqrt(vb + vc)


def test_candidate_runs_to_resolve_hand_values() -> None:
    base = np.array([0.0, 0.01, -0.01, 0.005, -0.005])  # sample variance 6.25e-5
    cand = np.array([0.02, 0.0, 0.01])  # sample variance 1e-4
    n = candidate_runs_to_resolve(base, cand, 0.02, 0.025)
    assert n is not None and n > 3
    # both variances scaled by 6 / chi2_0.2(6): the pooled sd (6 degrees of freedom) taken to its 80 % upper bound
    k = 6 / sps.chi2.ppf(0.2, 6)
    assert _detectable(k * 6.25e-5 / 5, k * 1e-4, 5, n, 0.025) <= 0.02 < _detectable(k * 6.25e-5 / 5, k * 1e-4, 5, n - 1, 0.025)
    # the observed spreads taken as the truth would promise fewer runs
    assert _detectable(6.25e-5 / 5, 1e-4, 5, n - 1, 0.025) <= 0.02
    # the baseline's own noise alone: (t + t) * sqrt(1.25e-5) > 0.005 for every candidate count
    assert candidate_runs_to_resolve(base, cand, 0.005, 0.025) is None
    assert candidate_runs_to_resolve(base, cand, 0.0, 0.025) is None
    assert candidate_runs_to_resolve(np.array([1.0, 1.0]), np.array([2.0, 2.0, 2.0]), 1.0, 0.025) == 3  # no noise at all


def _trial(tmp_path: Path, base_runs, cand_runs) -> dict:
    base = read_candidate(write_candidate(tmp_path / "base", base_runs), expected_ranks=2, warmup=2)
    cand = read_candidate(write_candidate(tmp_path / "cand", cand_runs), expected_ranks=2, warmup=2)
    return evaluate_option_trial(base, {"O1": cand}, warmup=2, expected_ranks=2)["candidates"]["O1"]


def test_protocol_accept_inside_the_noise_could_be_noise(tmp_path: Path) -> None:
    cand = _trial(tmp_path, uniform_runs(STABLE_BASE), uniform_runs(["99", "98", "99.5"]))
    assert cand["option_trial_evaluation"]["accepted"] is True and cand["statistics"]["ci_excludes_zero"] is False
    advice = cand["advice"]
    assert advice["kind"] == "could_be_noise" and advice["protocol_accepted"] is True
    # 1.8 % baseline noise over 5 runs leaves +/- 2.2 % on its own: no candidate count up to the family cap resolves
    # +1.2 % against those five runs as they are, so the advice points to the family policy (it extends the incumbent)
    assert advice["settle"] == [{"for": "mean_improvement", "candidate_runs": None, "incumbent_runs": 5, "settle_by": "family_policy",
                                 "family_command": FAMILY_COMMAND}]
    assert "could be noise" in advice["text"] and f"up to {CANDIDATE_RUNS_CAP} against the incumbent's 5 runs as they are" in advice["text"]
    assert "gate: family" in advice["text"] and FAMILY_COMMAND in advice["text"]
    assert "可能只是噪声" in advice["text_zh"] and "gate: family" in advice["text_zh"]


def test_could_be_noise_with_a_settling_count(tmp_path: Path) -> None:
    # quiet baseline (0.32 % noise), noisy candidate about 1 % faster
    cand = _trial(tmp_path, spread_runs(BASE_MEANS, [1.0] * 5), spread_runs([99.0, 99.9, 98.1], [0.7, 0.7, 0.7]))
    assert cand["option_trial_evaluation"]["accepted"] is True and cand["statistics"]["ci_excludes_zero"] is False
    settle = cand["advice"]["settle"][0]
    runs = settle["candidate_runs"]
    assert isinstance(runs, int) and 3 < runs <= CANDIDATE_RUNS_CAP and settle["settle_by"] == "candidate_runs"
    assert settle["family_command"] is None and settle["incumbent_runs"] == 5
    assert f"{runs} candidate runs (now 3; {runs - 3} more) against the incumbent's 5 runs as they are" in cand["advice"]["text"]
    assert f"现任者5次运行不变，候选运行增至{runs}次（当前3次，再加{runs - 3}次）" in cand["advice"]["text_zh"]


def test_reject_by_variance_check_alone_is_likely_a_lost_gain(tmp_path: Path) -> None:
    cand = _trial(tmp_path, spread_runs(BASE_MEANS, [1.0] * 5), spread_runs(CAND_MEANS, [1.03, 0.99, 1.04]))
    assert cand["option_trial_evaluation"]["failed_checks"] == ["stddev_no_material_regression"]
    advice = cand["advice"]
    assert advice["kind"] == "gain_lost_to_variance_check" and advice["protocol_accepted"] is False
    # per-run stddev: baseline exactly 1 (no variance), candidate 1.02 with sample variance 7e-4, so Welch df = n - 1;
    # the variance planned at k = 6 / chi2_0.2(6) times the observed one (the pooled sd's 80 % upper bound):
    # (t_0.95,22 + t_0.8,22) * sqrt(k * 7e-4 / 23) <= 0.02 < the same at 22 runs (13 runs with the observed spread)
    k = 6 / sps.chi2.ppf(0.2, 6)
    assert _detectable(0.0, k * 7e-4, 5, 23, 0.05) <= 0.02 < _detectable(0.0, k * 7e-4, 5, 22, 0.05)
    assert advice["settle"] == [{"for": "stddev_no_material_regression", "candidate_runs": 23}]
    assert "likely a real gain lost to the variance check" in advice["text"]
    assert "23 candidate runs would show whether the pooled stddev regression of +0.14% is real" in advice["text"]
    assert "upper confidence bound" in advice["text"] and "置信上界" in advice["text_zh"]
    assert "The statistics policy (not the protocol) would accept." in advice["text"]
    assert "统计策略（非协议）会接受" in advice["text_zh"]


def test_a_variance_check_against_a_zero_baseline_says_why_it_failed(tmp_path: Path) -> None:
    """Timings at a timer's resolution (every decode step 100 ms) give a baseline stddev of 0: the relative change is
    undefined and the check fails closed (formats.md §1). The advice says so, instead of a regression of '?' that
    'is within the run-to-run spread'."""
    cand = _trial(tmp_path, uniform_runs(["100"] * 5), uniform_runs(["99"] * 3))
    ev = cand["option_trial_evaluation"]
    assert ev["failed_checks"] == ["stddev_no_material_regression"] and ev["stddev_regression_pct"] is None
    advice = cand["advice"]
    assert advice["kind"] == "gain_lost_to_variance_check"
    assert advice["settle"] == [{"for": "stddev_no_material_regression", "candidate_runs": None}]
    assert "?" not in advice["text"] and "?" not in advice["text_zh"]
    assert ("the baseline's pooled stddev is 0, so its relative change is undefined and the check fails whatever the "
            "candidate's runs") in advice["text"]
    assert "基线的汇总标准差为 0" in advice["text_zh"]


def test_consistent_decisions(tmp_path: Path) -> None:
    win = _trial(tmp_path / "w", uniform_runs(STABLE_BASE), uniform_runs(["90", "90.5", "89.5"]))
    assert win["option_trial_evaluation"]["accepted"] is True and win["advice"]["kind"] == "consistent"
    loss = _trial(tmp_path / "l", uniform_runs(STABLE_BASE), uniform_runs(["110", "111", "109"]))
    assert loss["option_trial_evaluation"]["accepted"] is False and loss["advice"]["kind"] == "consistent"


def test_a_gain_rejected_by_a_check_other_than_variance_is_not_called_consistent(tmp_path: Path) -> None:
    """Six incumbent runs (a family session's, read by ``sk-analyze option-trial``) and a clear 10 % gain: the protocol
    rejects by its baseline-runs check while the CI lies far above 0. The advice said "the protocol's decision agrees
    with the confidence interval", which is the opposite of the case; it names the check and the disagreement."""
    cand = _trial(tmp_path, uniform_runs(["100", "100.5", "99.5", "100", "100.2", "99.8"]), uniform_runs(["90", "90.5", "89.5"]))
    ev, st = cand["option_trial_evaluation"], cand["statistics"]
    assert ev["accepted"] is False and "baseline_min_runs" in ev["failed_checks"] and st["ci_pct"][0] > 0
    advice = cand["advice"]
    assert advice["kind"] == "gain_rejected_by_other_checks" and advice["protocol_accepted"] is False
    assert advice["text"].startswith("rejected by the protocol's baseline stability, baseline runs and stddev check(s)"), advice
    assert advice["text_zh"].startswith("被协议的基线稳定性、基线运行数和标准差检查拒绝"), advice  # "a and b and c" read as neither
    assert "check(s) while the 95% CI of the improvement [" in advice["text"], advice
    assert "disagree" in advice["text"] and "agrees" not in advice["text"]
    assert advice["text_zh"].startswith("被协议的基线稳定性"), advice["text_zh"]


def test_advice_is_printed_in_both_languages(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write_candidate(tmp_path / "base", uniform_runs(STABLE_BASE))
    cand = write_candidate(tmp_path / "cand", uniform_runs(["99", "98", "99.5"]))
    args = ["option-trial", "--baseline", str(base), "--candidate", f"O1={cand}", "--warmup", "2", "--expected-ranks", "2"]
    for lang, needle in (("zh", "[O1] 建议: 协议接受，但提升的95%置信区间"), ("en", "[O1] advice: accepted by the protocol, but the 95% CI")):
        with pytest.raises(SystemExit):
            main([*args, "--lang", lang])
        assert needle in capsys.readouterr().out
