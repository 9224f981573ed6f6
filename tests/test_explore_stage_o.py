"""The notebook API's Stage O frames against hand-checked values (sk_analytics.explore.stage_o)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest

from sk_analytics import explore as ex
from sk_analytics.errors import InputError
from sk_analytics.option_trial.api import stability
from sk_analytics.report.render import RoundInfo, SessionView
from sk_analytics.stage_o.machine import O0, fold

WARMUP = 2


def _samples(round_: str, run: str, rank: int, decode: list[str], role: str = "trial") -> list[dict[str, Any]]:
    """One rank log: a prefill sample, then ``decode`` (the first WARMUP are warm-up)."""
    rows = [{"round": round_, "role": role, "run": run, "rank": rank, "phase": "prefill", "sample_index": 0,
             "value_text": "500.0"}]
    rows += [{"round": round_, "role": role, "run": run, "rank": rank, "phase": "decode", "sample_index": i, "value_text": v}
             for i, v in enumerate(decode)]
    return rows


def _timings() -> pl.DataFrame:
    rows = [
        # O0 run-1: rank 0 mean (10.0 + 10.2) / 2 = 10.1, rank 1 (10.4 + 10.4) / 2 = 10.4 -> worst rank 1
        *_samples(O0, "run-1", 0, ["99", "99", "10.0", "10.2"], "baseline"),
        *_samples(O0, "run-1", 1, ["99", "99", "10.4", "10.4"], "baseline"),
        # O0 run-2: a tie at 10.25 -> the lowest rank (0), as the gate
        *_samples(O0, "run-2", 0, ["1", "1", "10.25", "10.25"], "baseline"),
        *_samples(O0, "run-2", 1, ["1", "1", "10.2", "10.3"], "baseline"),
        # O1 run-10 sorts after run-2; rank 0 slowest in both runs
        *_samples("O1", "run-10", 0, ["5", "5", "9.5", "9.7"]),
        *_samples("O1", "run-10", 1, ["5", "5", "9.0", "9.0"]),
        *_samples("O1", "run-2", 0, ["5", "5", "9.8", "9.8"]),
        *_samples("O1", "run-2", 1, ["5", "5", "9.1", "9.3"]),
    ]
    return pl.DataFrame(rows).with_columns(pl.col("value_text").cast(pl.Float64).alias("value_ms"),
                                           pl.col("rank").cast(pl.Int32), pl.col("sample_index").cast(pl.Int32))


def test_rank_means_and_worst_rank_hand_values() -> None:
    means = ex.rank_means(_timings(), WARMUP)
    assert means.select("round", "run", "rank", "count", "is_worst").rows() == [
        (O0, "run-1", 0, 2, False), (O0, "run-1", 1, 2, True), (O0, "run-2", 0, 2, True), (O0, "run-2", 1, 2, False),
        ("O1", "run-2", 0, 2, True), ("O1", "run-2", 1, 2, False), ("O1", "run-10", 0, 2, True), ("O1", "run-10", 1, 2, False)]
    assert means["mean_ms"].to_list() == pytest.approx([10.1, 10.4, 10.25, 10.25, 9.8, 9.2, 9.6, 9.0])
    metrics = ex.run_metrics(_timings().lazy(), WARMUP)
    assert metrics["round_index"].to_list() == [0, 0, 1, 1] and metrics.schema["worst_rank"] == pl.Int32
    assert metrics.drop("round_index").rows() == [(O0, "baseline", "run-1", 1, pytest.approx(10.4)), (O0, "baseline", "run-2", 0, 10.25),
                              ("O1", "trial", "run-2", 0, pytest.approx(9.8)), ("O1", "trial", "run-10", 0, pytest.approx(9.6))]


def test_run_metric_is_bit_identical_to_the_gates() -> None:
    """Same numbers as the option-trial summary of the same samples, not merely close."""
    frame = _timings().filter(pl.col("round") == O0)
    gate = stability(frame.drop("round", "role"), WARMUP, expected_ranks=None)["baseline"]["per_run_metrics"]
    ours = ex.run_metrics(frame, WARMUP)
    assert ours.select("run", "worst_rank", "worst_rank_mean_ms").rows() == [(m["run"], m["worst_rank"], m["mean_ms"]) for m in gate]


def test_timings_without_a_needed_column_is_bad_input() -> None:
    with pytest.raises(InputError, match="lacks column\\(s\\) value_text"):
        ex.rank_means(_timings().drop("value_text"))


def test_slowest_ranks_counts_and_shares() -> None:
    metrics = pl.DataFrame({"round": [O0, O0, O0, "O1"], "worst_rank": [1, 1, 0, 3]})
    assert ex.slowest_ranks(metrics).rows() == [(O0, 0, 1, 2, pytest.approx(2 / 3)), (O0, 0, 0, 1, pytest.approx(1 / 3)),
                                                 ("O1", 1, 3, 1, 1.0)]


def _gate(round_: str, base: str, accepted: bool, **values: Any) -> dict[str, Any]:
    checks = {"baseline_stable": True, "baseline_min_runs": True, "candidate_min_runs": True,
              "mean_improvement": accepted, "median_run_direction": accepted,
              "p90_no_material_regression": True, "stddev_no_material_regression": accepted}
    return {"round": round_, "baseline_round": base, "accepted": accepted, "checks": checks,
            "baseline_run_metrics": [10.0] * 5, "candidate_run_metrics": [9.0, 9.1, 9.2], **values}


def _view(tmp_path: Path) -> SessionView:
    """O0 (mean 10.0) -> O1 accepted (9.5) -> O2 rejected -> O3 accepted (9.0) -> BASE = O3."""
    o0_runs = [{"run": f"run-{k}", "worst_rank": r, "mean_ms": v, "mean_exact_ms": str(v)}
               for k, (r, v) in enumerate([(0, 9.9), (1, 10.0), (1, 10.1), (0, 10.0), (2, 10.0)], start=1)]
    change = {"pointer": "/super_kernel_optimize_options/auto_op_parallel", "value": 1}
    change3 = {"pointer": "/super_kernel_optimize_options/dcci_before_kernel_start", "value": ["a_.*"]}
    g1 = _gate("O1", O0, True, mean_improvement_pct=5.0, median_run_improvement_pct=4.0, p90_regression_pct=-1.0,
               stddev_regression_pct=-2.0)
    g2 = _gate("O2", "O1", False, mean_improvement_pct=-0.5, median_run_improvement_pct=0.0, p90_regression_pct=0.5,
               stddev_regression_pct=3.0)
    records = [
        ("trial_result", {"round": O0, "entry_id": None, "phase": "o0", "base_round": None}),
        ("trial_result", {"round": "O1", "entry_id": "a", "phase": "trial", "base_round": O0}),
        ("gate_result", {**g1, "entry_id": "a"}),
        ("entry_settled", {"entry_id": "a", "status": "accepted", "incumbent_round": "O1", "accepted_changes": [change]}),
        ("trial_result", {"round": "O2", "entry_id": "b", "phase": "trial", "base_round": "O1"}),
        ("gate_result", {**g2, "entry_id": "b"}),
        ("entry_settled", {"entry_id": "b", "status": "rejected", "incumbent_round": "O1"}),
        ("entry_settled", {"entry_id": "c", "status": "accepted", "incumbent_round": "O3", "accepted_changes": [change3]}),
    ]
    rounds = {
        O0: RoundInfo(O0, None, "o0", [records[0][1]], stability={"stable": True, "mean_ms": 10.0, "run_metrics": [9.9, 10.0, 10.1, 10.0, 10.0]},
                      stability_file={"baseline": {"per_run_metrics": o0_runs}}),
        "O1": RoundInfo("O1", "a", "trial", [records[1][1]], gate=g1, stability={"stable": True, "mean_ms": 9.5, "run_metrics": [9.5] * 5},
                        summary={"baseline_stability": {"spread_pct": 2.0}}),
        "O2": RoundInfo("O2", "b", "trial", [records[4][1]], gate=g2,  # a gate run with a 0.5 % P90 allowance
                        summary={"candidates": {"O2": {"option_trial_evaluation": {"allow_p90_regression_pct": 0.5}}}}),
        "O3": RoundInfo("O3", "c", "trial", [{"base_round": "O1"}], stability={"stable": True, "mean_ms": 9.0, "run_metrics": [9.0] * 5}),
    }
    base = {"round": "O3", "option_changes": [change, change3]}
    return SessionView(tmp_path, {"entries": []}, records, fold(records), rounds, None, base)


def test_gate_checks_values_limits_and_margins(tmp_path: Path) -> None:
    checks = ex.gate_checks(_view(tmp_path))
    o1 = {r["check"]: (r["value"], r["rule"], r["limit"], r["margin"], r["passed"]) for r in checks.filter(round="O1").to_dicts()}
    assert o1 == {
        "baseline_stable": (2.0, "<=", 5.0, 3.0, True),
        "baseline_min_runs": (5.0, "==", 5.0, 0.0, True),
        "candidate_min_runs": (3.0, ">=", 3.0, 0.0, True),
        "mean_improvement": (5.0, ">", 0.0, 5.0, True),
        "median_run_direction": (4.0, ">", 0.0, 4.0, True),
        "p90_no_material_regression": (-1.0, "<=", 0.0, 1.0, True),
        "stddev_no_material_regression": (-2.0, "<=", 0.0, 2.0, True),
    }
    o2 = checks.filter(round="O2")
    assert o2["check"].to_list()[3:] == list(ex.METRIC_CHECKS)
    assert o2.filter(pl.col("check").is_in(ex.METRIC_CHECKS)).select("limit", "margin", "passed").rows() == [
        (0.0, -0.5, False), (0.0, 0.0, False), (0.5, 0.0, True), (0.0, -3.0, False)]  # a zero margin fails '>', passes '<='
    assert o2.filter(check="baseline_stable")["value"].to_list() == [None]  # no summary file: unknown, not invented
    assert set(checks["baseline_round"].to_list()) == {O0, "O1"}


def test_a_recorded_check_the_api_does_not_know_is_kept_without_numbers(tmp_path: Path) -> None:
    view = _view(tmp_path)
    view.rounds["O1"].gate = {**view.rounds["O1"].gate, "checks": {"future_check": False, "mean_improvement": True}}
    rows = ex.gate_checks(view).filter(round="O1").select("check", "value", "rule", "limit", "margin", "passed").rows()
    assert rows == [("mean_improvement", 5.0, ">", 0.0, 5.0, True), ("future_check", None, None, None, None, False)]


def test_o0_runs_deviation_from_the_mean(tmp_path: Path) -> None:
    runs = ex.o0_runs(_view(tmp_path))
    assert runs.select("run", "worst_rank").rows() == [("run-1", 0), ("run-2", 1), ("run-3", 1), ("run-4", 0), ("run-5", 2)]
    assert runs["deviation_pct"].to_list() == pytest.approx([-1.0, 0.0, 1.0, 0.0, 0.0])


def test_accepted_path_from_o0_to_base(tmp_path: Path) -> None:
    path = ex.accepted_path(_view(tmp_path))
    assert path.select("step", "label", "round", "mean_ms").rows() == [
        (0, O0, O0, 10.0), (1, "a", "O1", 9.5), (2, "c", "O3", 9.0), (3, "Sbest-BASE", "O3", 9.0)]
    assert path["changes"].to_list() == [[], ["auto_op_parallel=1"], ['dcci_before_kernel_start=["a_.*"]'],
                                         ["auto_op_parallel=1", 'dcci_before_kernel_start=["a_.*"]']]
    assert path["step_improvement_pct"].to_list() == pytest.approx([None, 5.0, 100 / 19, 0.0], nan_ok=True)
    assert path["total_improvement_pct"].to_list() == pytest.approx([0.0, 5.0, 10.0, 10.0])


def test_rounds_outcomes_and_run_metrics(tmp_path: Path) -> None:
    frame = ex.rounds(_view(tmp_path))
    assert frame.select("round", "entry_id", "base_round", "outcome", "runs").rows() == [
        (O0, None, None, "incumbent", 5), ("O1", "a", O0, "accepted", 5), ("O2", "b", "O1", "rejected", 3),
        ("O3", "c", "O1", "accepted", 5)]
    assert frame.filter(round="O2")["run_metrics_ms"].to_list() == [[9.0, 9.1, 9.2]]  # the gate's runs without a stability file
    assert frame["mean_ms"].to_list() == pytest.approx([10.0, 9.5, 9.1, 9.0])
    assert frame.select("round_index", "run_set", "label").rows() == [
        (0, "all_clean", "5 clean runs"), (1, "all_clean", "5 after top-up"), (2, "gate", "3 gate runs"), (3, "all_clean", "5 after top-up")]


def test_empty_session_gives_empty_frames_with_columns(tmp_path: Path) -> None:
    view = SessionView(tmp_path, {"entries": []}, [], fold([]), {}, None, None)
    for frame in (ex.rounds(view), ex.gate_checks(view), ex.o0_runs(view), ex.accepted_path(view)):
        assert frame.height == 0 and frame.width >= 4
