"""Sample statistics of a timings frame: vectorized Polars, exact where gates need it.

Input: a ``timings`` frame (schema.TIMINGS columns) with a ``run`` column.
Everything that touches samples is one Polars group-by; no Python loop runs
over samples. Definitions (formats.md §1, identical to the legacy
``analyze_performance`` tool):

* warm-up: the first ``warmup`` decode samples of every rank log are dropped
  (``sample_index < warmup``); prefill keeps every sample;
* ``count``, ``min_ms``, ``max_ms``: plain;
* ``p50_ms``: the median (mean of the two middle order statistics when the
  count is even, ``(a + b) / 2`` in float64 as ``statistics.median``);
* ``p90_ms``: linear interpolation at position ``(n - 1) * 0.9`` between
  order statistics, evaluated with exactly the legacy float formula
  ``x[lo] + (x[lo + 1] - x[lo]) * (pos - lo)``;
* ``mean_ms`` and ``stddev_ms`` (population) are computed from **exact
  integer sums**: each value's decimal text becomes an integer count of
  ``10**-scale`` ms (Int64 where every sum of squares fits, else Int128),
  sums and sums of squares are exact, so the result does not depend on
  sample order (equal samples give bit-equal statistics) and floats are
  rounded only at the end.

Values printed as Python float repr (15-17 significant digits, so 10**15 or
more units each) would overflow those Int128 sums or round twice in float64.
Such inputs take the *wide* path: each unit count is cut into base-10**12
limbs, the sums of limbs and of limb products are exact Int128 aggregates,
and the few group rows are finished in Python integers and fractions
(``float(Fraction(S1, n * 10**scale))``, correctly rounded), so they are
computed exactly rather than refused.

Exact decimal text of a rank mean (``mean_exact_ms``) is ``sum / count`` in
Python decimal with 28 significant digits, ROUND_HALF_EVEN, the sum carrying
the rank's own number of decimals: the same text the legacy tool writes as
``mean_exact_ms``/``worst_rank_mean_exact_ms``.
"""

from __future__ import annotations

import decimal
import math
from dataclasses import dataclass
from fractions import Fraction
from typing import Literal

import polars as pl

from sk_analytics.errors import InputError
from sk_analytics.schema import IN_WARMUP, WEIGHT

DECIMAL_CONTEXT = decimal.Context(prec=28, rounding=decimal.ROUND_HALF_EVEN)
"""The context of every decimal run metric (Python's default, pinned)."""

_INT128_SAFE = 2**62
"""``count * max units`` must stay below this so that ``count * sum of
squares`` (``<= count**2 * max**2``) cannot overflow Int128."""

STAT_KEYS = ("count", "mean_ms", "p50_ms", "p90_ms", "stddev_ms", "min_ms", "max_ms")
"""Keys of one statistics record in the summary JSON, in legacy order."""


@dataclass(frozen=True)
class Samples:
    """Post-warm-up decode and all prefill samples of one candidate, with units: one row a sample, or
    (counted) one row per group key and distinct value with its ``weight``, sorted by ``value_ms``."""

    decode: pl.LazyFrame
    prefill: pl.LazyFrame
    scale: int
    wide: bool = False
    """Exact limb sums and a Python finish (module docstring) instead of plain Int128 sums."""


def _frac_digits() -> pl.Expr:
    """Number of decimals of ``value_text`` (0 without a '.')."""
    dot = pl.col("value_text").str.find(".", literal=True)
    return (pl.col("value_text").str.len_bytes().cast(pl.Int32) - dot.cast(pl.Int32) - 1).fill_null(0)


_FLOAT_EXACT_SUM = 2**53
"""Sums and divisors below this are exact in float64, so ``S1 / (n * unit)``
is correctly rounded; at or above it the wide path is taken."""

_LIMB = 10**12
_LIMBS = 3
_MAX_UNITS = _LIMB**_LIMBS
"""The wide path holds values of up to 36 digits (scale included)."""

_FLOAT_EXACT_UNITS = 2**50
"""Below this many units, ``round(value_ms * 10**scale)`` is the exact integer
(two float roundings err by < |units| * 2**-52 < 0.25 units)."""


def decimal_scale(frame: pl.DataFrame | pl.LazyFrame) -> int:
    """Largest number of decimals in ``value_text`` (the scale of the units)."""
    return int(frame.lazy().select(_frac_digits().max()).collect().item() or 0)


def with_units(frame: pl.LazyFrame, scale: int, *, max_ms: float | None = None, dtype: pl.DataType = pl.Int128()) -> pl.LazyFrame:
    """Add ``frac_digits`` and ``units`` (exact value * 10**scale).

    Fast path (every realistic log): units from the float view, exact by the
    bound of :data:`_FLOAT_EXACT_UNITS`, as ``dtype`` (Int64 where
    :func:`narrow_units` allows it). Otherwise the digits of the text
    (without its '.') are scaled by ``10**(scale - frac_digits)`` in Int128.
    """
    if "frac_digits" not in frame.collect_schema().names():
        frame = frame.with_columns(_frac_digits().alias("frac_digits"))
    if max_ms is not None and max_ms * 10**scale < _FLOAT_EXACT_UNITS and scale <= 15:
        return frame.with_columns((pl.col("value_ms") * float(10**scale)).round().cast(dtype).alias("units"))
    powers = {k: 10 ** (scale - k) for k in range(scale + 1)}
    digits = pl.concat_str(pl.lit("0"), pl.col("value_text").str.replace(".", "", literal=True)).cast(pl.Int128)
    return frame.with_columns((digits * pl.col("frac_digits").replace_strict(powers, return_dtype=pl.Int128)).alias("units"))


def narrow_units(rows: int, max_ms: float | None, scale: int) -> bool:
    """Whether Int64 holds every unit count and every group's sum of squares
    (``rows * max_units**2 < 2**62``, a bit of margin): then the samples carry Int64 units,
    half the memory of Int128, with the same exact sums."""
    if max_ms is None or not rows:
        return True
    top: float = (max_ms + 1.0) * 10**scale
    return top < _FLOAT_EXACT_UNITS and rows * top * top < 2.0**62


SAMPLE_KEYS = ("run", "rank")
"""Group keys the option-trial statistics use; :func:`split_samples` keeps them."""


def split_samples(frame: pl.DataFrame | pl.LazyFrame, warmup: int, *, keys: tuple[str, ...] = SAMPLE_KEYS) -> Samples:
    """Decode samples after warm-up and prefill samples, both with exact units.

    ``frame`` is a timings frame (one row a sample, warm-up by ``sample_index``)
    or a counted one (one row per distinct value of a log, with :data:`WEIGHT`
    and :data:`IN_WARMUP`, :func:`sk_analytics.ingest.timings.read_candidate_counts`).
    Both are materialised once, compact: the group ``keys`` present in
    ``frame``, ``value_ms``, ``frac_digits`` (Int8) and ``units`` (Int64 when
    :func:`narrow_units`), so the grouped queries run on a fraction of the
    input's size and never touch the decimal text again. A counted frame stays
    counted (one row per key and distinct value with its ``weight``, sorted
    by value: :func:`_stat_exprs` weighs each row); one row a sample stays so. The input is first scanned only for its bounds
    (scale, largest value, widest integer part), warm-up samples included.
    """
    lazy = frame.lazy()
    counted = WEIGHT in lazy.collect_schema().names()
    if not counted:
        lazy = lazy.with_columns(((pl.col("phase") == "decode") & (pl.col("sample_index") < warmup)).alias(IN_WARMUP))
    lazy = lazy.with_columns(_frac_digits().alias("frac_digits"))
    digits = pl.col("value_text").str.replace(".", "", literal=True).str.len_bytes().cast(pl.Int32)
    bounds = lazy.select(
        pl.col("frac_digits").max().alias("scale"),
        pl.col("value_ms").max().alias("max_ms"),
        (digits - pl.col("frac_digits")).max().alias("whole"),
        (pl.col(WEIGHT).sum() if counted else pl.len()).alias("rows"),
    ).collect().row(0, named=True)
    scale, max_ms, whole, rows = int(bounds["scale"] or 0), bounds["max_ms"], int(bounds["whole"] or 0), bounds["rows"]
    if whole + scale > 36:
        raise InputError(None, f"timing values carry too many digits for exact statistics ({whole + scale} at scale {scale})",
                         expected="at most 36 digits per value, decimals of the most precise value included")
    dtype = pl.Int64() if narrow_units(rows, max_ms, scale) else pl.Int128()
    kept = [key for key in keys if key in lazy.collect_schema().names()]
    units = with_units(lazy.filter(~pl.col(IN_WARMUP)), scale, max_ms=max_ms, dtype=dtype)
    columns: list[str | pl.Expr] = [*kept, "phase", pl.col("frac_digits").cast(pl.Int8), "units"]
    if counted:  # merged across batches, sorted by value: every group of a stats query sees its values in order
        compact = units.group_by(columns).agg(pl.col("value_ms").first(), pl.col(WEIGHT).sum().cast(pl.Int64)).sort("value_ms")
    else:
        compact = units.select(*columns, "value_ms")
    decode, prefill = pl.collect_all([
        compact.filter(pl.col("phase") == "decode").drop("phase"),
        compact.filter(pl.col("phase") == "prefill").drop("phase"),
    ])
    return Samples(decode.lazy(), prefill.lazy(), scale, wide=needs_wide(rows, max_ms, scale))


def needs_wide(rows: int, max_ms: float | None, scale: int) -> bool:
    """Whether plain Int128/float64 sums could overflow or round twice for ``rows`` samples."""
    if max_ms is None or not rows:
        return False
    unit: int = 10**scale  # typeshed types int ** int as Any (a negative exponent gives a float)
    top = (max_ms + 1.0) * unit
    return rows * top >= _FLOAT_EXACT_SUM or rows * unit >= _FLOAT_EXACT_SUM


def _limbs(units: pl.Expr) -> list[pl.Expr]:
    """Base-10**12 digits of ``units`` (least significant first), each < 10**12."""
    return [(units // _LIMB**k) % _LIMB for k in range(_LIMBS)]


def _weight(weighted: bool) -> pl.Expr:
    return pl.col(WEIGHT) if weighted else pl.lit(1, pl.Int64)


def _wide_sums(weighted: bool = False) -> list[pl.Expr]:
    """Exact Int128 sums of every limb and every limb product (each < 10**24 per sample), weighted."""
    limbs = _limbs(pl.col("units").cast(pl.Int128))
    weight = _weight(weighted)
    sums = [(limbs[i] * weight).sum().alias(f"s_{i}") for i in range(_LIMBS)]
    products = [(limbs[i] * limbs[j] * weight).sum().alias(f"q_{i}_{j}") for i in range(_LIMBS) for j in range(i, _LIMBS)]
    return [*sums, *products]


def _order_stat(q: float, method: Literal["lower", "higher"], weighted: bool = False) -> pl.Expr:
    """The sample at the ``lower`` (floor) or ``higher`` (ceil) position ``(n - 1) * q`` of a group of
    weighted distinct values: the first value whose running weight passes the position (the selection
    Polars' own ``quantile`` makes on one row a sample). The rows must come sorted by ``value_ms``
    (:func:`split_samples` sorts them; a group keeps the order of its rows), so no group is sorted here.
    Unweighted (one row a sample): Polars' ``lower``/``higher`` quantile itself (selection, no sort)."""
    if not weighted:
        return pl.col("value_ms").quantile(q, interpolation=method)
    n = pl.col(WEIGHT).sum().cast(pl.Float64)
    position = (n - 1.0) * q
    index = position.floor() if method == "lower" else position.ceil()
    return pl.col("value_ms").filter(pl.col(WEIGHT).cum_sum() > index).first()


def _stat_exprs(wide: bool = False, weighted: bool = False) -> list[pl.Expr]:
    """Aggregations of one group of weighted samples (exact sums + order statistics).

    P50/P90 take the order statistics around their position (a running sum of
    the weights over the group's distinct values, sorted) and combine them
    with the legacy float formulas, so results are bit-identical to them.
    """
    n = pl.col(WEIGHT).sum() if weighted else pl.len()
    pos = (n - 1).cast(pl.Float64) * 0.9
    p90_lo, p90_hi = _order_stat(0.9, "lower", weighted), _order_stat(0.9, "higher", weighted)
    units = pl.col("units")
    if wide:
        sums = _wide_sums(weighted)
    elif weighted:
        sums = [(units * pl.col(WEIGHT)).sum().alias("sum_units"), (units * units * pl.col(WEIGHT)).sum().alias("sumsq_units")]
    else:
        sums = [units.sum().alias("sum_units"), (units * units).sum().alias("sumsq_units")]
    return [
        n.cast(pl.Int64).alias("count"),
        *sums,
        units.max().alias("max_units"),
        pl.col("frac_digits").max().alias("frac_digits"),
        ((_order_stat(0.5, "lower", weighted) + _order_stat(0.5, "higher", weighted)) / 2).alias("p50_ms"),
        (p90_lo + (p90_hi - p90_lo) * (pos - pos.floor())).alias("p90_ms"),
        pl.col("value_ms").min().alias("min_ms"),
        pl.col("value_ms").max().alias("max_ms"),
    ]


def _finish(aggregated: pl.LazyFrame, scale: int) -> pl.LazyFrame:
    """Exact sums -> ``mean_ms``, ``stddev_ms``.

    Variance is ``(n * S2 - S1**2) / n**2`` in exact Int128; the float
    rounding happens only in the last steps.
    """
    unit = float(10**scale)
    n128 = pl.col("count").cast(pl.Int128)
    s1 = pl.col("sum_units").cast(pl.Int128)  # the sums of Int64 units are Int64: widen before squaring
    numerator = n128 * pl.col("sumsq_units").cast(pl.Int128) - s1 * s1
    n_float = pl.col("count").cast(pl.Float64)
    return aggregated.with_columns(
        pl.col("sum_units").cast(pl.Int128),
        pl.col("sumsq_units").cast(pl.Int128),
        (pl.col("sum_units").cast(pl.Float64) / (n_float * unit)).alias("mean_ms"),
        (numerator.cast(pl.Float64).sqrt() / (n_float * unit)).alias("stddev_ms"),
    )


def stats_query(samples: pl.LazyFrame, by: list[str], scale: int, *, wide: bool = False) -> pl.LazyFrame:
    """Statistics per group ``by`` (all samples as one group when ``by`` is
    empty; no row when there is no sample), as a lazy query.

    With ``wide`` the query yields limb sums; :func:`collect_stats` finishes them."""
    if not by:
        samples = samples.with_columns(pl.lit(0).alias("_all"))
    weighted = WEIGHT in samples.collect_schema().names()
    aggregated = samples.group_by(by or ["_all"]).agg(_stat_exprs(wide, weighted))
    if not by:
        aggregated = aggregated.drop("_all")
    return aggregated if wide else _finish(aggregated, scale)


def _finish_wide(frame: pl.DataFrame, scale: int) -> pl.DataFrame:
    """Exact ``sum_units``, ``mean_ms`` and ``stddev_ms`` of limb-sum rows (one per group: few rows)."""
    if frame.filter(pl.col("max_units") >= _MAX_UNITS).height:
        raise InputError(None, "timing values carry too many digits for exact statistics", expected="at most 36 digits per value")
    sums, means, stddevs = [], [], []
    unit = 10**scale
    for row in frame.iter_rows(named=True):
        n = row["count"]
        s1 = sum(int(row[f"s_{i}"]) * _LIMB**i for i in range(_LIMBS))
        s2 = sum((1 if i == j else 2) * int(row[f"q_{i}_{j}"]) * _LIMB ** (i + j) for i in range(_LIMBS) for j in range(i, _LIMBS))
        sums.append(s1)
        means.append(float(Fraction(s1, n * unit)))
        stddevs.append(math.sqrt(float(Fraction(n * s2 - s1 * s1, n * n * unit * unit))))
    if any(s >= 2**127 for s in sums):
        raise InputError(None, "timing sums exceed 128 bits", expected="fewer samples or fewer digits per value")
    limb_columns = [c for c in frame.columns if c.startswith(("s_", "q_"))]
    return frame.drop(limb_columns).with_columns(
        pl.Series("sum_units", sums, dtype=pl.Int128),
        pl.Series("mean_ms", means, dtype=pl.Float64),
        pl.Series("stddev_ms", stddevs, dtype=pl.Float64),
    )


def collect_stats(queries: list[pl.LazyFrame], *, scale: int = 0) -> list[pl.DataFrame]:
    """Run several :func:`stats_query` at once (Polars shares and parallelises
    the scans); wide queries (limb sums) are finished exactly at ``scale``.

    Raises :class:`InputError` only when a value has more than 36 digits or
    a plain query's Int128 sums could overflow (callers with such values
    pass ``wide``).
    """
    frames = [_finish_wide(f, scale) if "s_0" in f.columns else f for f in pl.collect_all(queries)]
    for frame in frames:
        if "sumsq_units" not in frame.columns:
            continue
        if frame.filter(pl.col("count").cast(pl.Int128) * pl.col("max_units") >= _INT128_SAFE).height:
            raise InputError(None, "timing values carry too many digits for exact statistics", expected="at most ~15 significant digits")
    return frames


def exact_mean_text(sum_units: int, count: int, frac_digits: int, scale: int) -> str:
    """``sum / count`` as the legacy tool's decimal text (28 digits, half-even).

    ``sum_units`` is at ``scale`` decimals; the decimal sum is rebuilt with the
    group's own ``frac_digits`` (its exponent in the legacy running sum).
    """
    sign = 1 if sum_units < 0 else 0
    coefficient = abs(sum_units) // 10 ** (scale - frac_digits)
    total = decimal.Decimal((sign, tuple(int(d) for d in str(coefficient)), -frac_digits))
    return str(DECIMAL_CONTEXT.divide(total, decimal.Decimal(count)))


def stat_record(row: dict[str, object]) -> dict[str, object]:
    """One statistics JSON record (legacy keys) from a stats row."""
    return {key: row[key] for key in STAT_KEYS}
