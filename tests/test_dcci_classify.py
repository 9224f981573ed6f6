"""Robust stats and the formats.md §7 gate, with hand-computed expectations."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from scipy.stats import mannwhitneyu

from sk_analytics.dcci.classify import (
    FASTER,
    INSUFFICIENT,
    NEUTRAL,
    SLOWER,
    bh_qvalues,
    classify,
    expected_false_discoveries,
    mann_whitney,
    robust_stats,
    side_by_side,
)


def _samples(per_key: dict[str, tuple[list[float], list[float]]]) -> pl.LazyFrame:
    rows = []
    for key, (base, cand) in per_key.items():
        rows += [{"key": key, "side": "baseline", "value_us": v} for v in base]
        rows += [{"key": key, "side": "candidate", "value_us": v} for v in cand]
    return pl.LazyFrame(rows, schema={"key": pl.Utf8, "side": pl.Utf8, "value_us": pl.Float64})


def _classified(per_key: dict[str, tuple[list[float], list[float]]]) -> dict[str, dict]:
    frame = classify(side_by_side(_samples(per_key), ["key"])).collect()
    return {row["key"]: row for row in frame.to_dicts()}


def test_robust_stats_hand_computed() -> None:
    frame = pl.LazyFrame({"k": [1] * 5, "value_us": [10.0, 1.0, 3.0, 2.0, 4.0]})
    row = robust_stats(frame, ["k"]).collect().to_dicts()[0]
    # sorted 1,2,3,4,10: p50 3; p90 at (5-1)*0.9 = 3.6 -> 4 + 0.6*6 = 7.6; |x-3| = 2,1,0,1,7 -> MAD 1
    assert row == {"k": 1, "count": 5, "p50_us": 3.0, "p90_us": pytest.approx(7.6), "mad_us": 1.0,
                   "min_us": 1.0, "max_us": 10.0, "mean_us": 4.0, "sum_us": 20.0}


def test_classes_and_noise_band() -> None:
    got = _classified(
        {
            "slower": ([100.0] * 5, [104.0] * 5),  # band 3 %, +4 µs = +4 % -> slower
            "faster": ([100.0] * 5, [96.0] * 5),
            "wide_band": ([99.0, 100.0, 101.0, 100.0, 100.0], [102.0, 105.0, 108.0, 105.0, 105.0]),
            "under_1us": ([10.0] * 5, [10.9] * 5),  # +9 % but only 0.9 µs
            "exactly_band": ([100.0] * 4, [103.0] * 4),  # +3 µs = 3 % = band -> counts (>=)
        }
    )
    assert got["slower"]["class"] == SLOWER and got["slower"]["noise_band_pct"] == 3.0
    assert got["slower"]["delta_p50_us"] == 4.0 and got["slower"]["delta_p50_pct"] == pytest.approx(4.0)
    assert got["faster"]["class"] == FASTER
    # base |x-100| = 1,0,1,0,0 -> MAD 0; cand |x-105| = 3,0,3,0,0 -> MAD 0; band 3 %, delta +5 %
    assert got["wide_band"]["noise_band_pct"] == 3.0 and got["wide_band"]["class"] == SLOWER
    assert got["under_1us"]["class"] == NEUTRAL
    assert got["exactly_band"]["class"] == SLOWER
    assert all(r["reason"] is None for r in got.values())


def test_mad_widens_the_band() -> None:
    got = _classified({"k": ([96.0, 100.0, 104.0, 100.0, 100.0, 96.0, 104.0], [105.0] * 7)})
    # base |x-100| = 4,0,4,0,0,4,4 -> MAD 4 -> band max(3, 8 %) = 8 %; delta 5 % < 8 % -> neutral
    assert got["k"]["base_mad_us"] == 4.0
    assert got["k"]["noise_band_pct"] == pytest.approx(8.0)
    assert got["k"]["class"] == NEUTRAL


def test_insufficient_evidence_reasons() -> None:
    got = _classified(
        {
            "two": ([100.0, 100.0], [200.0, 200.0, 200.0]),
            "tail": ([100.0, 100.0, 110.0], [200.0, 200.0, 200.0]),  # tail 10 > max(0, 3, 1)
            "tail_ok": ([100.0, 100.0, 102.0], [200.0, 200.0, 200.0]),  # tail 2 <= 3
            "cand_tail": ([100.0] * 4, [200.0, 200.0, 150.0]),
            "absent": ([100.0] * 4, []),
            "zero": ([100.0] * 4, [0.0] * 4),
        }
    )
    assert (got["zero"]["class"], got["zero"]["reason"], got["zero"]["noise_band_pct"]) == (INSUFFICIENT, "zero_p50", None)
    assert (got["two"]["class"], got["two"]["reason"]) == (INSUFFICIENT, "fewer_than_3_occurrences_baseline")
    assert (got["tail"]["class"], got["tail"]["reason"]) == (INSUFFICIENT, "three_sample_tail_baseline")
    assert got["tail_ok"]["class"] == SLOWER
    assert got["cand_tail"]["reason"] == "three_sample_tail_candidate"
    assert (got["absent"]["class"], got["absent"]["reason"]) == (INSUFFICIENT, "absent_in_candidate")
    assert got["absent"]["cand_count"] == 0


def test_mann_whitney_matches_scipy_asymptotic() -> None:
    rng = np.random.default_rng(7)
    per_key = {f"k{i}": (list(np.round(rng.normal(100, 2, 9))), list(np.round(rng.normal(100 + i, 2, 11)))) for i in range(4)}
    per_key["same"] = ([5.0] * 3, [5.0] * 4)
    per_key["one_side"] = ([5.0] * 3, [])
    got = dict(mann_whitney(_samples(per_key), ["key"]).iter_rows())
    for key in ("k0", "k1", "k2", "k3"):
        base, cand = per_key[key]
        assert got[key] == pytest.approx(mannwhitneyu(cand, base, method="asymptotic").pvalue, rel=1e-12)
    assert got["same"] == 1.0
    assert got["one_side"] is None


def test_bh_qvalues_and_expected_false_discoveries() -> None:
    q = bh_qvalues(pl.Series([0.01, 0.04, 0.03, None]))
    # ranks 1,3,2 of 3: 0.03, min(0.04*3/3, ...)=0.04, min(0.03*3/2=0.045, 0.04)=0.04
    assert q.to_list()[:3] == pytest.approx([0.03, 0.04, 0.04])
    assert q.to_list()[3] is None
    assert expected_false_discoveries(q, pl.Series([True, False, True, True])) == pytest.approx(0.08)
    assert expected_false_discoveries(q, pl.Series([False] * 4)) == 0.0


@pytest.mark.parametrize("seed", range(5))
def test_bh_qvalues_are_scipys_bit_for_bit(seed: int) -> None:
    """The q-values no longer import scipy.stats (issue 47) and must be its false_discovery_control's exactly."""
    from scipy.stats import false_discovery_control

    rng = np.random.default_rng(seed)
    p = rng.choice([0.0, 1.0, *rng.uniform(0, 1, 40), *rng.uniform(0, 1e-6, 5)], size=200)  # ties, 0, 1, tiny
    with_nulls = pl.Series(p).scatter(rng.choice(200, 7, replace=False), None)
    q = bh_qvalues(with_nulls)
    ok = with_nulls.is_not_null().to_numpy()
    assert q.is_null().to_numpy().tolist() == (~ok).tolist()
    expected = false_discovery_control(p[ok], method="bh")
    assert q.filter(pl.Series(ok)).to_numpy().tobytes() == expected.tobytes()
    assert bh_qvalues(pl.Series([0.3])).to_list() == [0.3]
