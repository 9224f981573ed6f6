"""Child decomposition of significantly slower SKs (protocol §6, per-SK attribution step 3).

Only a complete, attributable trace may attribute a regression to children:
a process whose ``super_kernel.log`` carries the buffer-full line, a truncated
sk_prof, an occurrence with missing lanes, or a child event whose nodeId is no
kernel member of that SK blocks child attribution for the SKs it touches (the
per-SK classification still stands). Per ordered child position and side the
child's wall span (envelope over cores) and max-lane time get the robust
statistics of :mod:`sk_analytics.dcci.classify`; a child is significant when
the formats.md §7 gate says "significantly slower" on wall **or** max-lane.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Final

import polars as pl

from sk_analytics.dcci.classify import SLOWER, classify, side_by_side
from sk_analytics.dcci.occurrences import SK_KEYS

METRICS: Final = {"wall_": "wall_us", "exec_": "max_lane_us"}
"""Prefix in the result -> child timing column (exec = longest single-core duration)."""

BLOCK_BUFFER_FULL: Final = "buffer_full"
BLOCK_TRUNCATED: Final = "truncated_sk_prof"
BLOCK_MISSING_LANES: Final = "missing_lanes"
BLOCK_UNMAPPED_NODE: Final = "child_node_not_a_kernel_member"


def attribution_blockers(
    sk_samples: pl.DataFrame,
    buffer_full_processes: Collection[tuple[str, str]],
    truncated_processes: Collection[tuple[str, str]],
) -> pl.DataFrame:
    """Per uid: the sorted list of ``<reason>:<side>`` that block child attribution (empty = attributable).

    ``sk_samples`` are the post-warm-up SK occurrences (uid, side, process, complete);
    the process sets hold (side, process) pairs.
    """
    def flagged(pairs: Collection[tuple[str, str]]) -> pl.Expr:
        keys = [f"{side}\x00{proc}" for side, proc in pairs]
        return pl.concat_str(pl.col("side"), pl.lit("\x00"), pl.col("process")).is_in(keys)

    tagged = sk_samples.with_columns(
        pl.when(flagged(buffer_full_processes)).then(pl.lit(BLOCK_BUFFER_FULL)).alias("_bf"),
        pl.when(flagged(truncated_processes)).then(pl.lit(BLOCK_TRUNCATED)).alias("_tr"),
        pl.when(~pl.col("complete").fill_null(False)).then(pl.lit(BLOCK_MISSING_LANES)).alias("_ml"),
    )
    reasons = tagged.unpivot(index=["uid", "side"], on=["_bf", "_tr", "_ml"], value_name="reason").drop_nulls("reason")
    labelled = reasons.select("uid", pl.concat_str(pl.col("reason"), pl.lit(":"), pl.col("side")).alias("reason"))
    return (
        sk_samples.select("uid").unique()
        .join(labelled.unique(), on="uid", how="left")
        .group_by("uid")
        .agg(pl.col("reason").drop_nulls().unique().sort().alias("blockers"))
    )


def child_samples(children: pl.LazyFrame, usable_map: pl.DataFrame, positions: pl.DataFrame, warmup: int) -> pl.LazyFrame:
    """Post-warm-up child rows of the SKs in ``usable_map`` with their ordered position.

    ``children`` is one side's child-per-occurrence frame; ``usable_map`` the
    (SK_KEYS, uid) rows to keep (an inner join, so only those SKs' rows are
    aggregated); ``positions`` maps (process, model_dir, scope_id, node_id) to
    position and canonical op. ``position`` is null for an unmapped node.
    """
    return (
        children.filter(pl.col("occurrence") >= warmup)
        .join(usable_map.lazy().select(*SK_KEYS, "model_dir", "uid"), on=list(SK_KEYS), how="inner")
        .join(
            positions.lazy().rename({"scope_id": "sk_id"}),
            on=["process", "model_dir", "sk_id", "node_id"],
            how="left",
        )
        .select("uid", "process", "occurrence", "node_id", "position", "canonical_op", "func_name",
                "wall_us", "max_lane_us", "lane_sum_us")
    )


def unmapped_nodes(samples: pl.DataFrame) -> pl.DataFrame:
    """uid -> ``child_node_not_a_kernel_member:<side>`` for child events without a kernel member."""
    return (
        samples.filter(pl.col("position").is_null())
        .select("uid", pl.concat_str(pl.lit(BLOCK_UNMAPPED_NODE + ":"), pl.col("side")).alias("reason"))
        .unique()
    )


def decompose(samples: pl.DataFrame) -> pl.DataFrame:
    """Per (uid, position): wall and max-lane stats per side, their classes and ``significant``.

    ``samples`` is the concatenation of both sides' :func:`child_samples`
    (with a ``side`` column) for attributable SKs only. The op token, symbol and
    ``child_index`` (task-list index ``[i]`` = sk_prof nodeId) are the candidate
    build's (the repair patterns target the candidate's symbols).
    """
    lazy = samples.lazy().filter(pl.col("position").is_not_null())
    keys = ["uid", "position"]
    result = None
    for prefix, column in METRICS.items():
        stats = side_by_side(lazy, keys, column)
        stats = stats.rename({c: prefix + c for c in stats.collect_schema().names() if c not in keys})
        stats = classify(stats, prefix)
        result = stats if result is None else result.join(stats, on=keys, how="full", coalesce=True)
    assert result is not None
    ops = (
        lazy.sort("side", descending=True)  # candidate rows first
        .group_by(keys)
        .agg(pl.col("canonical_op").first(), pl.col("func_name").first(), pl.col("node_id").first().alias("child_index"))
    )
    significant = (pl.col("wall_class") == SLOWER) | (pl.col("exec_class") == SLOWER)
    return (
        result.join(ops, on=keys, how="left")
        .with_columns(significant.alias("significant"))
        .sort(keys)
        .collect()
    )
