"""Rank-log values printed as Python float repr (15-17 significant digits) over
hundreds of samples: computed exactly (the wide path of
``sk_analytics.option_trial.stats``) and equal to the pure-Python reference,
where they used to be refused with "too many digits"."""

from __future__ import annotations

import random
from pathlib import Path

import ot_reference as ref
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from ot_logs import write_candidate
from test_option_trial_property import WARMUP, assert_summary_equal, to_frame

from sk_analytics.errors import InputError
from sk_analytics.ingest.timings import read_candidate
from sk_analytics.option_trial import evaluate_option_trial
from sk_analytics.option_trial.stats import collect_stats, needs_wide, split_samples, stats_query


def repr_values(rng: random.Random, pool: list[str], count: int) -> list[str]:
    """``count`` timing values as ``print(float)`` writes them (15-17 significant digits, no
    exponent), half of them from ``pool`` so that equal values and mean ties occur."""
    out = []
    for _ in range(count):
        text = rng.choice(pool) if rng.random() < 0.5 else repr(rng.uniform(1e-3, 9.9e4) if rng.random() < 0.2 else rng.uniform(40.0, 60.0))
        out.append(text if "e" not in text else "0.5")
    return out


def repr_candidate(rng: random.Random, ranks: int, runs: int, samples: int) -> ref.Data:
    pool = [repr(rng.uniform(40.0, 60.0)) for _ in range(rng.randint(3, 8))]
    return {
        f"run-{k}": {r: {"decode": repr_values(rng, pool, samples), "prefill": repr_values(rng, pool, rng.randint(0, 3))} for r in range(ranks)}
        for k in range(1, runs + 1)
    }


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_float_repr_values_equal_the_reference(data: st.DataObject) -> None:
    ranks = data.draw(st.integers(1, 2))
    rng = random.Random(data.draw(st.integers(0, 2**32)))
    base = repr_candidate(rng, ranks, 5, data.draw(st.integers(WARMUP + 150, WARMUP + 300)))
    cand = repr_candidate(rng, ranks, 3, WARMUP + 120)
    result = evaluate_option_trial(to_frame(base), {"C": to_frame(cand)}, warmup=WARMUP, expected_ranks=ranks)
    rb, rc = ref.summarize(base, WARMUP), ref.summarize(cand, WARMUP)
    assert_summary_equal(result["baseline"], rb)
    assert_summary_equal(result["candidates"]["C"], rc)
    assert result["baseline_stability"]["spread_pct"] == ref.spread_pct(rb["run_worst_rank_means_exact_ms"])
    assert result["candidates"]["C"]["option_trial_evaluation"]["checks"] == ref.gate(rb, rc)


def test_hundreds_of_repr_samples_from_logs(tmp_path: Path) -> None:
    """From files: 400 samples of 17 significant digits per rank used to hit "too many digits"."""
    values = [repr(50.0 + k * 0.1 + 1e-13 * k) for k in range(400)]
    assert max(len(v.replace(".", "")) for v in values) >= 16
    folder = write_candidate(tmp_path / "cand", [{0: values, 1: values[::-1]}])
    frame = read_candidate(folder, expected_ranks=2, warmup=WARMUP)
    samples = split_samples(frame, WARMUP)
    assert samples.wide and samples.scale >= 13
    (stats,) = collect_stats([stats_query(samples.decode, [], samples.scale, wide=True)], scale=samples.scale)
    expected = ref.stats(values[WARMUP:] + values[::-1][WARMUP:])
    assert stats.row(0, named=True)["mean_ms"] == expected["mean_ms"]
    assert stats.row(0, named=True)["stddev_ms"] == expected["stddev_ms"]


def test_short_values_stay_on_the_plain_path() -> None:
    assert not needs_wide(10_000, 120.5, 3)
    assert needs_wide(300, 60.0, 15)


def test_more_than_36_digits_is_still_refused() -> None:
    import polars as pl

    from sk_analytics.option_trial.stats import Samples

    text = "1" * 20 + "." + "1" * 20
    frame = pl.DataFrame({"value_text": [text] * 3, "value_ms": [float(text)] * 3, "phase": ["decode"] * 3,
                          "sample_index": [0, 1, 2], "frac_digits": [20] * 3})
    with pytest.raises(InputError, match="too many digits"):
        split_samples(frame.drop("frac_digits"), 0)
    samples = split_samples(frame.drop("frac_digits").with_columns(pl.lit("1" * 16 + "." + "1" * 20).alias("value_text")), 0)
    assert isinstance(samples, Samples) and samples.wide  # 36 digits: still exact
