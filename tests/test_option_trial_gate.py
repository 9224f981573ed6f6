"""Protocol gate with hand-computed values (formats.md §1, protocol §4-5).

Each rank of ``uniform_runs`` logs 2 warm-up samples of 999 ms and then two
copies of its run's value, so a run's metric is exactly that value and the
pooled decode samples are every run value 4 times (2 ranks x 2 samples).
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest
from ot_logs import uniform_runs, write_candidate

from sk_analytics.ingest.timings import read_candidate
from sk_analytics.option_trial import evaluate_option_trial, stability
from sk_analytics.option_trial.gate import decimal_spread, evaluate_stability, spread_within_limit

STABLE_BASE = ["100", "102.5", "97.5", "100", "100"]  # spread (102.5-97.5)/100 = 5.00 %


def load(tmp_path: Path, name: str, runs: list[dict[int, list[str]]]):
    return read_candidate(write_candidate(tmp_path / name, runs), expected_ranks=len(runs[0]), warmup=2)


def trial(tmp_path: Path, base_runs, cand_runs, gate: str = "protocol") -> dict:
    base = load(tmp_path, "base", base_runs)
    cand = load(tmp_path, "cand", cand_runs)
    return evaluate_option_trial(base, {"O1": cand}, warmup=2, gate=gate, expected_ranks=len(base_runs[0]))


def test_spread_exactly_five_percent_is_stable(tmp_path: Path) -> None:
    result = stability(load(tmp_path, "b", uniform_runs(STABLE_BASE)), 2, expected_ranks=2)
    st = result["baseline_stability"]
    assert st["spread_pct"] == 5.0 and st["spread_ms"] == 5.0 and st["mean_ms"] == 100.0
    assert st["stable"] is True and st["checks"] == {"required_run_count": True, "max_spread_pct": True}
    assert result["baseline"]["decode"]["p90_ms"] == 102.5
    assert result["baseline"]["decode"]["stddev_ms"] == pytest.approx(2.5**0.5, rel=1e-15)


def test_spread_is_decimal_where_float_would_exceed_five(tmp_path: Path) -> None:
    values = ["18.611", "19.076275", "18.145725", "18.611", "18.611"]
    floats = [float(v) for v in values]
    assert (max(floats) - min(floats)) / (sum(floats) / 5) * 100 > 5.0  # float arithmetic: 5.000000000000001
    st = stability(load(tmp_path, "b", uniform_runs(values)), 2, expected_ranks=2)["baseline_stability"]
    assert st["spread_pct"] == 5.0 and st["stable"] is True
    assert st["run_worst_rank_means_exact_ms"] == values


def test_spread_just_above_five_is_unstable() -> None:
    spread = decimal_spread(["100", "102.51", "97.5", "100", "100"])
    assert spread["spread_ms"] == pytest.approx(5.01)
    assert spread["mean_ms"] == 100.002
    assert spread["spread_pct"] == pytest.approx(5.01 / 100.002 * 100, rel=1e-15)
    assert spread["spread_pct"] > 5.0


def test_clear_win_is_accepted_with_hand_values(tmp_path: Path) -> None:
    result = trial(tmp_path, uniform_runs(STABLE_BASE), uniform_runs(["99", "98", "99.5"]))
    cand = result["candidates"]["O1"]
    ev = cand["option_trial_evaluation"]
    assert cand["worst_rank_mean_ms"] == pytest.approx(98.83333333333333, rel=1e-15)  # (99+98+99.5)/3
    assert cand["median_run_worst_rank_mean_ms"] == 99.0
    assert ev["mean_improvement_pct"] == pytest.approx((100 - 296.5 / 3) / 100 * 100, rel=1e-12)
    assert ev["median_run_improvement_pct"] == pytest.approx(1.0, rel=1e-12)
    # pooled candidate samples: 98 x4, 99 x4, 99.5 x4; P90 at (12-1)*0.9 = 9.9 -> 99.5
    assert cand["decode"]["p90_ms"] == 99.5
    assert ev["p90_regression_pct"] == pytest.approx((99.5 - 102.5) / 102.5 * 100, rel=1e-12)
    assert all(ev["checks"].values()) and ev["accepted"] is True
    assert ev["mean_improvement_rule"] == "strictly_positive" and ev["min_improvement_pct"] == 0.0
    sel = result["selection"]
    assert sel["option_trial_accepted"] is True and sel["recommended"] == "O1" and sel["retained_incumbent"] == "O1"


def test_tie_in_mean_is_rejected(tmp_path: Path) -> None:
    result = trial(tmp_path, uniform_runs(STABLE_BASE), uniform_runs(["99", "101", "100"]))
    ev = result["candidates"]["O1"]["option_trial_evaluation"]
    assert ev["mean_improvement_pct"] == 0.0 and ev["median_run_improvement_pct"] == 0.0
    assert ev["checks"]["mean_improvement"] is False and ev["checks"]["median_run_direction"] is False
    assert ev["accepted"] is False


def test_exact_tie_in_mean_is_rejected_where_float_means_differ(tmp_path: Path) -> None:
    """Both sides average exactly 19.981 ms, but the mean of the runs' binary floats puts the candidate one ulp
    below the baseline: the means come from the exact decimal run metrics, so the tie is a tie (not > 0)."""
    base, cand = ["19.972", "19.931", "19.916", "20.023", "20.063"], ["20.011", "19.961", "19.971"]
    # the legacy mean of the runs' floats would call it a 1.8e-14 % gain
    assert statistics.mean(float(v) for v in cand) < statistics.mean(float(v) for v in base)
    result = trial(tmp_path, uniform_runs(base), uniform_runs(cand))
    summary = result["candidates"]["O1"]
    ev = summary["option_trial_evaluation"]
    assert result["baseline"]["worst_rank_mean_ms"] == summary["worst_rank_mean_ms"] == 19.981
    assert ev["mean_improvement_pct"] == 0.0 and summary["improvement_pct"] == 0.0
    assert ev["checks"]["mean_improvement"] is False and ev["accepted"] is False
    assert result["selection"]["option_trial_accepted"] is False


def test_median_of_an_even_run_count_is_the_exact_midpoint(tmp_path: Path) -> None:
    """The median of four runs is the exact midpoint of the two middle run metrics, rounded once."""
    assert (0.1 + 0.2) / 2 == 0.15000000000000002  # the float midpoint is not the decimal one
    summary = trial(tmp_path, uniform_runs(STABLE_BASE), uniform_runs(["0.1", "0.1", "0.2", "0.2"]))["candidates"]["O1"]
    assert summary["median_run_worst_rank_mean_ms"] == 0.15 and summary["worst_rank_mean_ms"] == 0.15


def test_median_tie_rejects_despite_better_mean(tmp_path: Path) -> None:
    result = trial(tmp_path, uniform_runs(STABLE_BASE), uniform_runs(["100", "99.9", "100"]))
    ev = result["candidates"]["O1"]["option_trial_evaluation"]
    assert ev["checks"]["mean_improvement"] is True and ev["checks"]["median_run_direction"] is False
    assert ev["failed_checks"] == ["median_run_direction"]


# Ranks unbalanced in the baseline (rank 1 is the slow one) and balanced in the
# candidate: same pooled samples {10, 10, 12, 12} per run, lower worst rank.
BASE_UNBALANCED = [{0: ["999", "999", "10", "10"], 1: ["999", "999", "12", "12"]}] * 5


def test_p90_and_stddev_equal_pass(tmp_path: Path) -> None:
    cand = [{0: ["999", "999", "10", "12"], 1: ["999", "999", "12", "10"]}] * 3
    result = trial(tmp_path, BASE_UNBALANCED, cand)
    c, b = result["candidates"]["O1"], result["baseline"]
    assert (b["decode"]["p90_ms"], c["decode"]["p90_ms"]) == (12.0, 12.0)
    assert (b["decode"]["stddev_ms"], c["decode"]["stddev_ms"]) == (1.0, 1.0)
    ev = c["option_trial_evaluation"]
    assert ev["p90_regression_pct"] == 0.0 and ev["stddev_regression_pct"] == 0.0
    assert ev["mean_improvement_pct"] == pytest.approx(100 / 12, rel=1e-12)  # worst rank 12 -> 11
    assert ev["accepted"] is True


def test_p90_worse_fails(tmp_path: Path) -> None:
    # pooled {10, 12.5, 11, 11}: sorted x3 -> P90 index 9.9 -> 12.5 > 12; stddev 0.8927 < 1
    cand = [{0: ["999", "999", "10", "12.5"], 1: ["999", "999", "11", "11"]}] * 3
    ev = trial(tmp_path, BASE_UNBALANCED, cand)["candidates"]["O1"]["option_trial_evaluation"]
    assert ev["p90_regression_pct"] == pytest.approx(0.5 / 12 * 100, rel=1e-12)
    assert ev["stddev_regression_pct"] == pytest.approx((0.796875**0.5 - 1) * 100, rel=1e-12)
    assert ev["failed_checks"] == ["p90_no_material_regression"]


def test_stddev_worse_fails(tmp_path: Path) -> None:
    # pooled {9, 9, 12, 12}: P90 12 (equal), stddev 1.5 > 1
    cand = [{0: ["999", "999", "9", "12"], 1: ["999", "999", "12", "9"]}] * 3
    ev = trial(tmp_path, BASE_UNBALANCED, cand)["candidates"]["O1"]["option_trial_evaluation"]
    assert ev["p90_regression_pct"] == 0.0 and ev["stddev_regression_pct"] == pytest.approx(50.0)
    assert ev["failed_checks"] == ["stddev_no_material_regression"]


def test_candidate_with_two_runs_is_rejected_but_gets_statistics(tmp_path: Path) -> None:
    result = trial(tmp_path, uniform_runs(STABLE_BASE), uniform_runs(["90", "91"]))
    cand = result["candidates"]["O1"]
    assert cand["run_count"] == 2
    assert cand["option_trial_evaluation"]["failed_checks"] == ["candidate_min_runs"]
    assert cand["statistics"]["ci_pct"] is not None and cand["statistics"]["run_count"] == {"baseline": 5, "candidate": 2}


@pytest.mark.parametrize("runs", [["100", "101", "99", "100"], ["100", "101", "99", "100", "100", "100"]])
def test_baseline_with_four_or_six_runs_is_not_stable(tmp_path: Path, runs: list[str]) -> None:
    result = trial(tmp_path, uniform_runs(runs), uniform_runs(["90", "90.5", "89.5"]))
    st = result["baseline_stability"]
    assert st["checks"] == {"required_run_count": False, "max_spread_pct": True}
    assert st["stable"] is False and st["spread_pct"] == pytest.approx(2.0)
    ev = result["candidates"]["O1"]["option_trial_evaluation"]
    assert ev["failed_checks"] == ["baseline_stable", "baseline_min_runs"]


def test_worst_rank_and_exact_text(tmp_path: Path) -> None:
    # rank 1 is slower in run 1 (mean 10.25 vs 10.2), ranks tie in run 2 -> lowest rank
    runs = [{0: ["9", "10.1", "10.3"], 1: ["9", "10.25", "10.250"]}, {0: ["9", "7", "8"], 1: ["9", "8", "7"]}]
    summary = stability(load(tmp_path, "b", runs), 1, expected_ranks=2)["baseline"]
    assert [r["worst_rank"] for r in summary["runs"]] == [1, 0]
    assert summary["run_worst_rank_means_exact_ms"] == ["10.250", "7.5"]
    assert summary["run_worst_rank_means_ms"] == [10.25, 7.5]
    assert summary["runs"][0]["ranks"]["0"]["mean_exact_ms"] == "10.2"


def test_strict_gate_needs_interval_above_zero(tmp_path: Path) -> None:
    protocol = trial(tmp_path / "p", uniform_runs(STABLE_BASE), uniform_runs(["99", "98", "99.5"]))
    strict = trial(tmp_path / "s", uniform_runs(STABLE_BASE), uniform_runs(["99", "98", "99.5"]), gate="strict")
    assert protocol["candidates"]["O1"]["option_trial_evaluation"] == strict["candidates"]["O1"]["option_trial_evaluation"]
    assert strict["candidates"]["O1"]["gate"] == {
        "mode": "strict", "accepted": False, "protocol_accepted": True, "ci_excludes_zero": False,
        "allow_p90_regression_pct": 0.0, "allow_stddev_regression_pct": 0.0, "is_protocol": False,
        "label": "protocol gate + 95 % CI of the improvement above 0 (stricter than the protocol)", "stats_accepted": False,
        "sequential_accepted": False, "sequential_state": "undecided",
    }
    assert strict["selection"]["option_trial_accepted"] is False
    assert strict["selection"]["protocol_accepted_candidates"] == ["O1"]
    win = trial(tmp_path / "w", uniform_runs(STABLE_BASE), uniform_runs(["90", "90.5", "89.5"]), gate="strict")
    assert win["candidates"]["O1"]["gate"]["accepted"] is True and win["selection"]["recommended"] == "O1"


def test_units_fast_and_exact_paths_agree() -> None:
    import polars as pl

    from sk_analytics.option_trial.stats import with_units

    texts = ["12.5", "0.125", "3", "7.", ".5", "99999.999"]
    frame = pl.DataFrame({"value_text": texts}).with_columns(pl.col("value_text").cast(pl.Float64).alias("value_ms"))
    fast = with_units(frame.lazy(), 3, max_ms=99999.999).collect()
    exact = with_units(frame.lazy(), 3).collect()
    assert fast["units"].to_list() == exact["units"].to_list() == [12500, 125, 3000, 7000, 500, 99999999]
    assert exact["frac_digits"].to_list() == [1, 3, 0, 0, 1, 3]
    # beyond the float-exact bound only the text path is right
    huge = pl.DataFrame({"value_text": ["123456789012.3456789"]}).with_columns(pl.col("value_text").cast(pl.Float64).alias("value_ms"))
    assert with_units(huge.lazy(), 7, max_ms=1.3e11).collect()["units"].item() == 1234567890123456789


def test_spread_above_five_beyond_float_precision_is_unstable() -> None:
    """28-digit run means: the spread's float rounds onto 5.0, the decimal comparison must not."""
    values = ["97.5", "102.500000000000000001", "100", "100", "99.999999999999999999"]
    assert decimal_spread(values)["spread_pct"] == 5.0  # the JSON float
    assert spread_within_limit(values) is False
    assert spread_within_limit(["97.5", "102.5", "100", "100", "100"]) is True  # exactly 5 is stable
    assert spread_within_limit([]) is False
    summary = {"run_worst_rank_means_ms": [float(v) for v in values], "run_worst_rank_means_exact_ms": values}
    st = evaluate_stability(summary)
    assert st["spread_pct"] == 5.0 and st["checks"]["max_spread_pct"] is False and st["stable"] is False
