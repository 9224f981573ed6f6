"""Property: the Polars pipeline equals the pure-Python reference formulas
(tests/ot_reference.py) on random inputs, number for number."""

from __future__ import annotations

import ot_reference as ref
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from sk_analytics.option_trial import evaluate_option_trial
from sk_analytics.schema import TIMINGS

WARMUP = 2


@st.composite
def decimal_text(draw: st.DrawFn) -> str:
    """Timing texts as logs write them: '12', '12.5', '12.50', '.5', '12.'."""
    digits = draw(st.integers(0, 3))
    units = draw(st.integers(1, 300_000 // 10 ** (3 - digits)))
    whole, frac = divmod(units, 10**digits)
    if digits == 0:
        return draw(st.sampled_from([str(whole), f"{whole}."]))
    text = f"{whole}.{frac:0{digits}d}"
    return text[1:] if whole == 0 and draw(st.booleans()) else text


@st.composite
def candidate(draw: st.DrawFn, ranks: int, runs: tuple[int, int]) -> ref.Data:
    pool = draw(st.lists(decimal_text(), min_size=1, max_size=6))  # shared values make ties likely
    value = st.one_of(st.sampled_from(pool), decimal_text())
    data: ref.Data = {}
    for k in range(1, draw(st.integers(*runs)) + 1):
        data[f"run-{k}"] = {
            r: {
                "decode": draw(st.lists(value, min_size=WARMUP + 1, max_size=WARMUP + 7)),
                "prefill": draw(st.lists(value, max_size=2)),
            }
            for r in range(ranks)
        }
    return data


def to_frame(data: ref.Data) -> pl.DataFrame:
    rows = [
        {
            "run_index": int(run.split("-")[1]), "rank": rank, "phase": phase, "sample_index": i,
            "value_ms": float(text), "value_text": text, "line": i + 1, "source_file": f"{run}/log_{rank}.log",
        }
        for run, ranks in data.items()
        for rank, phases in ranks.items()
        for phase in ("prefill", "decode")
        for i, text in enumerate(phases[phase])
    ]
    return TIMINGS.conform(pl.DataFrame(rows, schema=TIMINGS.schema)).with_columns(
        pl.col("source_file").str.extract(r"^(run-\d+)", 1).alias("run")
    )


def assert_stats_equal(ours: dict, theirs: dict) -> None:
    for key in ("count", "mean_ms", "p50_ms", "p90_ms", "min_ms", "max_ms"):
        assert ours[key] == theirs[key], key
    assert ours["stddev_ms"] == pytest.approx(theirs["stddev_ms"], rel=1e-13, abs=1e-13)


def assert_optional_stats_equal(ours: dict | None, theirs: dict | None) -> None:
    if theirs is None:
        assert ours is None
    else:
        assert ours is not None
        assert_stats_equal(ours, theirs)


def assert_summary_equal(ours: dict, theirs: dict) -> None:
    assert ours["run_count"] == theirs["run_count"]
    assert [r["worst_rank"] for r in ours["runs"]] == theirs["worst_ranks"]
    for key in ("run_worst_rank_means_ms", "run_worst_rank_means_exact_ms", "worst_rank_mean_ms", "median_run_worst_rank_mean_ms"):
        assert ours[key] == theirs[key], key
    assert_stats_equal(ours["decode"], theirs["decode"])
    assert_optional_stats_equal(ours["prefill"], theirs["prefill"])
    for run, ref_run in zip(ours["runs"], theirs["runs"], strict=True):
        assert_stats_equal(run["decode"], ref_run["decode"])
        assert_optional_stats_equal(run["prefill"], ref_run["prefill"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_pipeline_equals_reference(data: st.DataObject) -> None:
    ranks = data.draw(st.integers(1, 3))
    base = data.draw(candidate(ranks, (1, 6)))
    cand = data.draw(candidate(ranks, (1, 4)))
    result = evaluate_option_trial(to_frame(base), {"C": to_frame(cand)}, warmup=WARMUP, expected_ranks=ranks)
    rb, rc = ref.summarize(base, WARMUP), ref.summarize(cand, WARMUP)
    assert_summary_equal(result["baseline"], rb)
    assert_summary_equal(result["candidates"]["C"], rc)
    assert result["baseline_stability"]["spread_pct"] == ref.spread_pct(rb["run_worst_rank_means_exact_ms"])
    checks = result["candidates"]["C"]["option_trial_evaluation"]["checks"]
    assert checks == ref.gate(rb, rc)
