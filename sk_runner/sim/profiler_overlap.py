"""torch_npu's "Overlap Analysis" of one rank: the step timeline cut into Computing, Communication,
Communication(Not Overlapped) and Free segments (the ``Overlap Analysis`` process of
``trace_view.json``, threads 0-3 as the real export numbers them).

Pure and vectorized: every step's task intervals become their union segments per kind; the
step is cut at every segment boundary into elementary pieces, each piece is classed by the
union segments covering it (an as-of join), and equal neighbours merge. Computing + Communication
(Not Overlapped) + Free tile the step exactly, so their sums are the columns of
``step_trace_time.csv``.
"""

from __future__ import annotations

import polars as pl

THREADS = {"Computing": 0, "Communication": 1, "Communication(Not Overlapped)": 2, "Free": 3}


def union_segments(intervals: pl.DataFrame) -> pl.DataFrame:
    """``step, s, e`` intervals -> their union as disjoint ``step, s, e`` segments (sorted)."""
    if intervals.height == 0:
        return intervals.select("step", "s", "e")
    reach = pl.col("e").cum_max().shift(1).over("step", order_by="s")
    return (
        intervals.sort("step", "s")
        .with_columns((reach.is_null() | (pl.col("s") > reach)).cast(pl.Int64).cum_sum().alias("seg"))
        .group_by("step", "seg")
        .agg(pl.col("s").min(), pl.col("e").max())
        .drop("seg")
        .sort("step", "s")
    )


def _covered(pieces: pl.DataFrame, segments: pl.DataFrame, name: str) -> pl.DataFrame:
    """``pieces`` with a boolean ``name``: whether a segment covers the piece's start."""
    hit = segments.rename({"s": "seg_s", "e": "seg_e"}).sort("seg_s")
    return (
        pieces.sort("p")
        .join_asof(hit, left_on="p", right_on="seg_s", by="step", strategy="backward", check_sortedness=False)  # both sorted by p
        .with_columns((pl.col("seg_e").is_not_null() & (pl.col("seg_e") > pl.col("p"))).alias(name))
        .drop("seg_s", "seg_e")
    )


def overlap_segments(tasks: pl.DataFrame, spans: pl.DataFrame) -> pl.DataFrame:
    """``name, step, s, e`` (ns) of the Overlap Analysis. ``tasks``: ``step, comm, s, e`` clipped to their
    step; ``spans``: ``step, step_start_ns, step_end_ns``."""
    compute = union_segments(tasks.filter(~pl.col("comm")))
    comm = union_segments(tasks.filter(pl.col("comm")))
    edges = pl.concat(
        [compute.select("step", pl.col("s").alias("p")), compute.select("step", pl.col("e").alias("p")),
         comm.select("step", pl.col("s").alias("p")), comm.select("step", pl.col("e").alias("p")),
         spans.select("step", pl.col("step_start_ns").alias("p")), spans.select("step", pl.col("step_end_ns").alias("p"))]
    ).unique().sort("step", "p")  # fmt: skip
    pieces = edges.with_columns(pl.col("p").shift(-1).over("step", order_by="p").alias("q")).drop_nulls("q")
    pieces = _covered(_covered(pieces, compute, "in_compute"), comm, "in_comm")
    kind = (
        pl.when(pl.col("in_compute")).then(pl.lit("Computing"))
        .when(pl.col("in_comm")).then(pl.lit("Communication(Not Overlapped)"))
        .otherwise(pl.lit("Free"))
    )  # fmt: skip
    classed = pieces.with_columns(kind.alias("name")).sort("step", "p")
    runs = (
        classed.with_columns((pl.col("name") != pl.col("name").shift(1).over("step", order_by="p")).fill_null(True).cast(pl.Int64)
                             .cum_sum().alias("run"))
        .group_by("step", "run", "name")
        .agg(pl.col("p").min().alias("s"), pl.col("q").max().alias("e"))
        .drop("run")
    )  # fmt: skip
    return pl.concat([runs.select("name", "step", "s", "e"), comm.select(pl.lit("Communication").alias("name"), "step", "s", "e")]).sort("s", "name")
