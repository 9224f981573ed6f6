"""Benchmark of the notebook API's run metrics (``sk_analytics.explore.run_metrics``) on a session-sized
``timings`` table, against the README's float-mean Polars snippet and the notebook's DuckDB SQL, measured
in the same run.

Data: ``--rounds`` rounds x ``--runs`` runs x ``--ranks`` ranks x ``--samples`` decode samples (3-decimal
values, 8 warm-up samples, one prefill sample per rank) as hive-partitioned Parquet in a temp dir.

    .venv/bin/python benchmarks/bench_explore.py [--rounds 12] [--runs 5] [--ranks 8] [--samples 2000] [--repeat 3]

``run_metrics`` sums exact decimal units (the gate's code, bit-identical to the recorded gate metrics);
the snippet and DuckDB average floats. Times are the best of ``--repeat``.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl

from sk_analytics import explore as ex
from sk_analytics.schema import TIMINGS
from sk_analytics.tables import scan_table, write_table

WARMUP = 8
SQL = """
WITH rank_means AS (
    SELECT round, role, run, rank, avg(value_ms) AS mean_ms
    FROM read_parquet($glob, hive_partitioning = true)
    WHERE phase = 'decode' AND sample_index >= $warmup
    GROUP BY round, role, run, rank
)
SELECT round, role, run, rank AS worst_rank, mean_ms AS worst_rank_mean_ms
FROM rank_means
QUALIFY row_number() OVER (PARTITION BY round, role, run ORDER BY mean_ms DESC, rank ASC) = 1
"""


def write_session(data: Path, rounds: int, runs: int, ranks: int, samples: int) -> int:
    """Timings partitions of a synthetic session; returns the number of rows."""
    rng = np.random.default_rng(7)
    total = 0
    for r in range(rounds):
        round_ = "O0-INCUMBENT" if r == 0 else f"O{r}"
        for k in range(1, runs + 1):
            values = np.round(rng.gamma(50, 12.0 / 50, (ranks, samples)), 3)
            frame = pl.DataFrame({
                "run_index": np.full(ranks * (samples + 1), k, dtype=np.int32),
                "rank": np.repeat(np.arange(ranks, dtype=np.int32), samples + 1),
                "phase": np.tile(np.array(["prefill"] + ["decode"] * samples), ranks),
                "sample_index": np.tile(np.concatenate([[0], np.arange(samples)]).astype(np.int32), ranks),
                "value_ms": np.concatenate([np.concatenate([[300.0], row]) for row in values]),
            }).with_columns(pl.col("value_ms").round(3).cast(pl.Utf8).alias("value_text"),
                            pl.lit(1, pl.Int32).alias("line"), pl.lit("log").alias("source_file"))
            write_table(frame, TIMINGS, data, {"round": round_, "role": "trial", "run": f"run-{k}"})
            total += frame.height
    return total


def readme_snippet(timings: pl.LazyFrame) -> pl.DataFrame:
    decode = timings.filter((pl.col("phase") == "decode") & (pl.col("sample_index") >= WARMUP))
    return (decode.group_by("round", "role", "run", "rank").agg(pl.col("value_ms").mean())
            .group_by("round", "role", "run").agg(pl.col("value_ms").max()).collect())


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        times.append(time.perf_counter() - start)
    return min(times), result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        rows = write_session(data, args.rounds, args.runs, args.ranks, args.samples)
        print(f"timings: {args.rounds} rounds x {args.runs} runs x {args.ranks} ranks x {args.samples} decode samples"
              f" = {rows:,} rows, best of {args.repeat}")
        t_ours, ours = best(lambda: ex.run_metrics(scan_table(data, TIMINGS), WARMUP), args.repeat)
        t_snip, snip = best(lambda: readme_snippet(scan_table(data, TIMINGS)), args.repeat)
        glob = str(data / "timings" / "**" / "*.parquet")
        t_duck, duck = best(lambda: duckdb.sql(SQL, params={"glob": glob, "warmup": WARMUP}).pl(), args.repeat)
        keys = ["round", "role", "run"]
        both = ours.join(duck, on=keys, suffix="_sql").join(snip, on=keys)
        assert both.height == ours.height == args.rounds * args.runs
        diff = max((both["worst_rank_mean_ms"] - both["worst_rank_mean_ms_sql"]).abs().max(),
                   (both["worst_rank_mean_ms"] - both["value_ms"]).abs().max())
        print(f"README float snippet (baseline) : {t_snip:7.3f} s")
        print(f"explore.run_metrics (exact)     : {t_ours:7.3f} s  ({t_ours / t_snip:.2f}x the snippet)")
        print(f"DuckDB SQL of the notebook      : {t_duck:7.3f} s  ({t_duck / t_snip:.2f}x the snippet)")
        print(f"largest difference of a run metric between the three: {diff:.2e} ms")


if __name__ == "__main__":
    main()
