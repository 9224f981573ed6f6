"""Robust per-key statistics and the significance gate of formats.md §7.

Everything here is a vectorized Polars expression over *long* sample frames
(one row per occurrence: key columns, ``side`` and a value in µs), so the
same code classifies SKs (value = occurrence wall time) and children
(value = child wall span or max-lane time).

Protocol rules (formats.md §7, protocol §6):

* stats per key and side: count, P50, P90 (linear, position (n-1)*0.9),
  MAD = median |x - P50|, min, max (plus mean and the duration sum, which is
  only a lane-workload diagnostic and never decides anything);
* at least 3 occurrences per side; a side with exactly 3 whose tail
  max(P50-min, max-P50) exceeds max(3*MAD, 3 % of P50, 1 µs) is insufficient;
* noise band % = max(3.0, 2*MAD_b/P50_b*100, 2*MAD_c/P50_c*100);
* a P50 difference counts only when it is >= 1 µs and >= the noise band.

Advisory only (never changes a class): a two-sided Mann-Whitney U p-value
(normal approximation with tie and continuity correction, as
``scipy.stats.mannwhitneyu(method="asymptotic")``), Benjamini-Hochberg
q-values over all compared keys, and the BH bound on the expected number of
false discoveries among the keys the gate flags.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

import numpy as np
import polars as pl

from sk_analytics.lazy_module import lazy_module
from sk_analytics.messages import Messages, tables

special = lazy_module("scipy.special")
"""``ndtr`` for the Mann-Whitney tail: imported on first use, after the traces were read (0.16 s, ~30 MB)."""

SIDES: Final = ("baseline", "candidate")
SIDE_PREFIX: Final = {"baseline": "base_", "candidate": "cand_"}
STAT_COLUMNS: Final = ("count", "p50_us", "p90_us", "mad_us", "min_us", "max_us", "mean_us", "sum_us")

MIN_OCCURRENCES: Final = 3
MIN_NOISE_BAND_PCT: Final = 3.0
ABS_FLOOR_US: Final = 1.0
TAIL_MAD_FACTOR: Final = 3.0
TAIL_P50_PCT: Final = 3.0

SLOWER: Final = "significantly_slower"
FASTER: Final = "significantly_faster"
NEUTRAL: Final = "neutral"
INSUFFICIENT: Final = "insufficient_evidence"
CLASS_WORDS: Final[Mapping[str, Messages]] = tables("dcci.class.")
"""Each class in words, per language (``dcci.class.*`` of the catalogs, worded when read, not at import): what a
reader sees of a class code wherever it is rendered (the JSON and the one-line summary keep the code)."""
CLASS_ZH: Final[Mapping[str, str]] = CLASS_WORDS["zh"]
"""The Chinese name of each class (a diff's ``class_zh``)."""


def robust_stats(samples: pl.LazyFrame, keys: Sequence[str], value: str = "value_us") -> pl.LazyFrame:
    """Per ``keys`` (which should include ``side``): count, P50, P90, MAD, min, max, mean, sum."""
    v = pl.col(value)
    return samples.group_by(list(keys)).agg(
        pl.len().cast(pl.Int64).alias("count"),
        v.median().alias("p50_us"),
        v.quantile(0.9, interpolation="linear").alias("p90_us"),
        (v - v.median()).abs().median().alias("mad_us"),
        v.min().alias("min_us"),
        v.max().alias("max_us"),
        v.mean().alias("mean_us"),
        v.sum().alias("sum_us"),
    )


def side_by_side(samples: pl.LazyFrame, keys: Sequence[str], value: str = "value_us") -> pl.LazyFrame:
    """One row per key with ``base_<stat>`` and ``cand_<stat>`` columns (null where a side has no sample)."""
    per_side = robust_stats(samples, [*keys, "side"], value)
    frames = [
        per_side.filter(pl.col("side") == side)
        .drop("side")
        .rename({c: SIDE_PREFIX[side] + c for c in STAT_COLUMNS})
        for side in SIDES
    ]
    joined = frames[0].join(frames[1], on=list(keys), how="full", coalesce=True, nulls_equal=True)
    return joined.with_columns(pl.col(SIDE_PREFIX[s] + "count").fill_null(0) for s in SIDES)


def _tail_exceeds(prefix: str) -> pl.Expr:
    """The 3-sample tail rule for one side (true = that side's evidence is insufficient)."""
    p50, mn, mx, mad, n = (pl.col(prefix + c) for c in ("p50_us", "min_us", "max_us", "mad_us", "count"))
    tail = pl.max_horizontal(p50 - mn, mx - p50)
    allowed = pl.max_horizontal(TAIL_MAD_FACTOR * mad, TAIL_P50_PCT / 100.0 * p50, pl.lit(ABS_FLOOR_US))
    return (n == MIN_OCCURRENCES) & (tail > allowed)


def classify(compared: pl.LazyFrame, prefix: str = "") -> pl.LazyFrame:
    """Add ``<prefix>noise_band_pct``, deltas, ``<prefix>class`` and ``<prefix>reason``.

    ``compared`` carries ``<prefix>base_*``/``<prefix>cand_*`` stat columns
    (see :func:`side_by_side`). ``reason`` is null for a decided class and
    names the failed precondition for ``insufficient_evidence``.
    """
    def c(name: str) -> pl.Expr:  # short column accessor
        return pl.col(prefix + name)

    b50, c50 = c("base_p50_us"), c("cand_p50_us")
    band = pl.max_horizontal(
        pl.lit(MIN_NOISE_BAND_PCT),
        2.0 * c("base_mad_us") / b50 * 100.0,
        2.0 * c("cand_mad_us") / c50 * 100.0,
    )
    delta = c50 - b50
    delta_pct = delta / b50 * 100.0
    significant = (delta.abs() >= ABS_FLOOR_US) & (delta_pct.abs() >= c("noise_band_pct"))
    reason = (
        pl.when(c("base_count") == 0).then(pl.lit("absent_in_baseline"))
        .when(c("cand_count") == 0).then(pl.lit("absent_in_candidate"))
        .when(c("base_count") < MIN_OCCURRENCES).then(pl.lit("fewer_than_3_occurrences_baseline"))
        .when(c("cand_count") < MIN_OCCURRENCES).then(pl.lit("fewer_than_3_occurrences_candidate"))
        .when(~(b50 > 0) | ~(c50 > 0)).then(pl.lit("zero_p50"))
        .when(_tail_exceeds(prefix + "base_")).then(pl.lit("three_sample_tail_baseline"))
        .when(_tail_exceeds(prefix + "cand_")).then(pl.lit("three_sample_tail_candidate"))
        .otherwise(None)
        .cast(pl.Utf8)
    )
    return (
        compared.with_columns(
            reason.alias(prefix + "reason"),
            pl.when((b50 > 0) & (c50 > 0)).then(band).otherwise(None).alias(prefix + "noise_band_pct"),
            delta.alias(prefix + "delta_p50_us"),
            pl.when(b50 > 0).then(delta_pct).otherwise(None).alias(prefix + "delta_p50_pct"),
            (c("cand_p90_us") - c("base_p90_us")).alias(prefix + "delta_p90_us"),
        )
        .with_columns(
            pl.when(c("reason").is_not_null()).then(pl.lit(INSUFFICIENT))
            .when(significant & (delta > 0)).then(pl.lit(SLOWER))
            .when(significant & (delta < 0)).then(pl.lit(FASTER))
            .otherwise(pl.lit(NEUTRAL))
            .alias(prefix + "class")
        )
    )


def mann_whitney(samples: pl.LazyFrame, keys: Sequence[str], value: str = "value_us") -> pl.DataFrame:
    """Two-sided Mann-Whitney U p-value per key (candidate vs baseline samples).

    Ranks, rank sums and tie terms are computed in Polars; only the final
    normal tail probability goes through scipy. Keys with an empty side get a
    null p-value; keys whose samples are all equal get p = 1.
    """
    keys = list(keys)
    is_cand = pl.col("side") == "candidate"
    ranked = samples.select(*keys, "side", pl.col(value)).with_columns(
        pl.col(value).rank("average").over(keys).alias("_rank")
    )
    sums = ranked.group_by(keys).agg(
        is_cand.sum().cast(pl.Float64).alias("_n1"),
        (~is_cand).sum().cast(pl.Float64).alias("_n2"),
        pl.col("_rank").filter(is_cand).sum().alias("_r1"),
    )
    ties = (
        samples.group_by([*keys, value]).agg(pl.len().cast(pl.Float64).alias("_t"))
        .group_by(keys).agg((pl.col("_t") ** 3 - pl.col("_t")).sum().alias("_tie"))
    )
    n1, n2, n = pl.col("_n1"), pl.col("_n2"), pl.col("_n1") + pl.col("_n2")
    u1 = pl.col("_r1") - n1 * (n1 + 1) / 2
    u = pl.max_horizontal(u1, n1 * n2 - u1)
    sigma = (n1 * n2 / 12.0 * ((n + 1) - pl.col("_tie") / (n * (n - 1)))).sqrt()
    frame = (
        sums.join(ties, on=keys, how="left", nulls_equal=True)
        .with_columns(
            pl.when((n1 > 0) & (n2 > 0) & (sigma > 0)).then((u - n1 * n2 / 2 - 0.5) / sigma).otherwise(None).alias("_z"),
            ((n1 > 0) & (n2 > 0)).alias("_valid"),
            (sigma > 0).alias("_spread"),
        )
        .collect()
    )
    z = frame["_z"].to_numpy(allow_copy=True).astype(float)
    p = np.where(np.isnan(z), 1.0, np.clip(2.0 * special.ndtr(-z), 0.0, 1.0))
    p_series = pl.Series("mwu_p", p).scatter(np.flatnonzero(~frame["_valid"].to_numpy()), None)
    return frame.select(keys).with_columns(p_series)


def bh_qvalues(p: pl.Series) -> pl.Series:
    """Benjamini-Hochberg q-values (nulls stay null)."""
    values = p.to_numpy(allow_copy=True).astype(float)
    ok = ~np.isnan(values)
    out = np.full(values.shape, np.nan)
    if ok.any():
        out[ok] = _false_discovery_control_bh(values[ok])
    return pl.Series("mwu_q", out).fill_nan(None)


def _false_discovery_control_bh(ps: np.ndarray) -> np.ndarray:
    """``scipy.stats.false_discovery_control(ps, method="bh")`` of a 1-D array, the same NumPy operations
    in the same order (so the same bits; ``tests/test_dcci_classify.py`` compares them). Importing
    ``scipy.stats`` for this one function cost dcci-diff 0.55 s and ~50 MB (issue 47)."""
    if ps.size <= 1:
        return ps
    m = ps.shape[-1]
    order = np.argsort(ps, axis=-1)
    adjusted = np.take_along_axis(ps, order, axis=-1)
    adjusted *= m / np.arange(1, m + 1, dtype=adjusted.dtype)
    np.minimum.accumulate(adjusted[..., ::-1], out=adjusted[..., ::-1], axis=-1)
    restored = np.empty_like(adjusted)
    np.put_along_axis(restored, order, adjusted, axis=-1)
    clipped: np.ndarray = np.clip(restored, 0.0, 1.0)
    return clipped


def expected_false_discoveries(q: pl.Series, flagged: pl.Series) -> float:
    """BH bound on the expected false discoveries among flagged keys: max q * count."""
    chosen = q.filter(flagged & q.is_not_null())
    return 0.0 if chosen.is_empty() else float(chosen.max()) * chosen.len()
