"""One candidate's (or the baseline's) summary: per-rank, per-run and pooled
statistics and the run metrics, in the legacy JSON shape (formats.md §1).

Run metric: the **worst rank's** post-warm-up mean decode time of a run
(largest ``mean_ms``; on a tie the lowest rank, as the legacy ``max``).
Its exact decimal text comes from the rank's exact sum (see
:mod:`sk_analytics.option_trial.stats`). Mean and median over runs are taken
of the runs' exact rational metrics (the rank's integer sum over its count) and
rounded to a float once, so two sides whose decimal samples average the same
get bit-equal means (a tie, never a gain of one binary digit), independent of
run order. The legacy tool averages the runs' binary floats, which can differ
in the last binary digit.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import polars as pl

from sk_analytics.errors import InputError
from sk_analytics.option_trial.stats import (
    Samples,
    collect_stats,
    exact_mean_text,
    split_samples,
    stat_record,
    stats_query,
)


@dataclass(frozen=True)
class RunMetric:
    """The metric of one run: its worst rank and that rank's mean."""

    run: str
    worst_rank: int
    mean_ms: float
    mean_exact_ms: str


def run_order(frame: pl.DataFrame) -> pl.DataFrame:
    """Runs in natural order (``run-2`` before ``run-10``) with a ``run_pos``."""
    return (
        frame.lazy()
        .select(pl.col("run").unique())
        .with_columns(pl.col("run").cast(pl.Utf8).str.extract(r"([0-9]+)$", 1).cast(pl.Int64).alias("run_number"))
        .sort(["run_number", "run"], nulls_last=True)
        .with_row_index("run_pos")
        .select("run", "run_pos")
        .collect()
    )


def worst_ranks(rank_stats: pl.DataFrame) -> pl.DataFrame:
    """One row per run: the rank with the largest mean (ties -> lowest rank)."""
    return (
        rank_stats.sort(["run_pos", "mean_ms", "rank"], descending=[False, True, False])
        .group_by("run_pos", maintain_order=True)
        .first()
    )


def _records_by_run(stats: pl.DataFrame) -> dict[str, dict[str, Any]]:
    return {row["run"]: stat_record(row) for row in stats.iter_rows(named=True)}


def summarize(frame: pl.DataFrame, *, warmup: int, path: str) -> tuple[dict[str, Any], list[RunMetric]]:
    """The legacy candidate summary of a validated timings frame (with ``run``).

    Returns the JSON-ready summary and the run metrics (in run order).
    """
    return summarize_samples(split_samples(frame, warmup), warmup=warmup, path=path)


def summarize_samples(samples: Samples, *, warmup: int, path: str) -> tuple[dict[str, Any], list[RunMetric]]:
    """:func:`summarize` from the compact samples of :func:`split_samples` (made
    with the same ``warmup``): the timings frame itself may be gone already.

    Per-rank and per-run statistics are grouped one run at a time (the
    transient memory of a group-by is a run's samples, not the side's); the
    pooled ones take every sample of the side. All are collected together.
    """
    order = run_order(pl.concat([samples.decode.select("run"), samples.prefill.select("run")]).collect())
    if not order.height:
        raise InputError(path, "no timing samples", expected="run-*/log_<rank>.log with timing lines")
    scale = samples.scale
    wide = samples.wide
    run_names = order.get_column("run")
    per_run: list[pl.LazyFrame] = []
    for run in run_names:
        decode, prefill = (part.filter(pl.col("run") == run) for part in (samples.decode, samples.prefill))
        per_run += [
            stats_query(decode, ["run", "rank"], scale, wide=wide),
            stats_query(decode, ["run"], scale, wide=wide),
            stats_query(prefill, ["run"], scale, wide=wide),
        ]
    frames = collect_stats(
        [*per_run, stats_query(samples.decode, [], scale, wide=wide), stats_query(samples.prefill, [], scale, wide=wide)],
        scale=scale,
    )
    pooled_decode, pooled_prefill = frames[-2:]
    rank_stats, run_decode_stats, run_prefill_stats = (
        pl.concat(frames[kind:-2:3]) for kind in range(3)
    )
    rank_stats = rank_stats.join(order, on="run").sort("run_pos", "rank")
    run_decode = _records_by_run(run_decode_stats)
    run_prefill = _records_by_run(run_prefill_stats)

    worst = worst_ranks(rank_stats)
    metrics = [
        RunMetric(
            row["run"],
            int(row["rank"]),
            row["mean_ms"],
            exact_mean_text(int(row["sum_units"]), row["count"], row["frac_digits"], scale),
        )
        for row in worst.iter_rows(named=True)
    ]
    ranks_by_run: dict[str, dict[str, Any]] = {m.run: {} for m in metrics}
    for row in rank_stats.iter_rows(named=True):
        record = stat_record(row)
        record["mean_exact_ms"] = exact_mean_text(int(row["sum_units"]), row["count"], row["frac_digits"], scale)
        ranks_by_run[row["run"]][str(row["rank"])] = record

    runs = [
        {
            "path": f"{path}/{m.run}",
            "run": m.run,
            "rank_count": len(ranks_by_run[m.run]),
            "warmup": warmup,
            "ranks": ranks_by_run[m.run],
            "decode": run_decode[m.run],
            "prefill": run_prefill.get(m.run),
            "worst_rank": m.worst_rank,
            "worst_rank_mean_ms": m.mean_ms,
            "worst_rank_mean_exact_ms": m.mean_exact_ms,
        }
        for m in metrics
    ]
    values = [m.mean_ms for m in metrics]
    exact = [Fraction(int(row["sum_units"]), row["count"] * 10**scale) for row in worst.iter_rows(named=True)]
    summary = {
        "path": path,
        "run_count": len(metrics),
        "runs": runs,
        "decode": stat_record(pooled_decode.row(0, named=True)),
        "prefill": stat_record(pooled_prefill.row(0, named=True)) if pooled_prefill.height else None,
        "run_worst_rank_means_ms": values,
        "run_worst_rank_means_exact_ms": [m.mean_exact_ms for m in metrics],
        "median_run_worst_rank_mean_ms": float(statistics.median(exact)),
        "worst_rank_mean_ms": float(sum(exact) / len(exact)),
        "warmup": warmup,
    }
    return summary, metrics
