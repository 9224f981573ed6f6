"""One SK across ranks: which rank decides its class (issue 14, a multi-rank profile).

Each rank (device) is aligned and classified on its own, so one fused SK of a
tensor-parallel graph is one slot per rank. The Stage O gate decides on the
**worst-rank** metric (per trial, the slowest rank's mean step time), because
the ranks of a TP step wait for each other. The per-SK rule follows it: the
SK's class is the class on the rank where its candidate P50 is the largest
(the rank that sets the SK's critical path under disable-all; ties take the
lowest rank; a rank without candidate samples never decides unless none has
any). Only the deciding rank's slot of a significantly slower SK is decomposed
into children and feeds the repair; every rank's delta is reported.

Slots of different ranks are the same SK when they share the graph ordinal in
their rank (graph pairs in pairing order), the structure and its occurrence
index on each side.
"""

from __future__ import annotations

from typing import Any, Final

import polars as pl

RULE: Final = (
    "per SK (same graph ordinal, structure and occurrence on every rank): the class of the rank with the largest "
    "candidate P50 decides (the worst-rank metric of the gate); ties take the lowest rank; only that rank's slot is "
    "decomposed into children and feeds the repair"
)
KEY: Final = ("_graph_ordinal", "structure_key", "base_occurrence_index", "cand_occurrence_index")


def deciding_ranks(sks: pl.DataFrame) -> pl.DataFrame:
    """uid, cross_rank_sk (group id), deciding (bool), deciding_uid, deciding_rank for every classified slot."""
    keyed = sks.with_columns(
        (pl.col("graph_pair").rank("dense").over("rank") - 1).cast(pl.Int32).alias("_graph_ordinal")
    )
    order = keyed.sort(pl.col("cand_p50_us").is_null(), pl.col("cand_p50_us"), "rank", descending=[False, True, False])
    first = order.group_by(list(KEY), maintain_order=True).agg(
        pl.col("uid").first().alias("deciding_uid"), pl.col("rank").first().alias("deciding_rank")
    ).with_row_index("cross_rank_sk")
    out = keyed.join(first, on=list(KEY), how="left", nulls_equal=True)
    return out.select("uid", pl.col("cross_rank_sk").cast(pl.Int32), (pl.col("uid") == pl.col("deciding_uid")).alias("deciding"),
                      "deciding_uid", "deciding_rank")


def across_ranks_json(sks: pl.DataFrame, decided: pl.DataFrame) -> dict[str, Any]:
    """The ``ranks`` record: the rule, the ranks, and per cross-rank SK the per-rank deltas and the deciding rank."""
    joined = sks.join(decided, on="uid").sort("cross_rank_sk", "rank")
    entries = []
    for (group,), frame in joined.partition_by("cross_rank_sk", as_dict=True, maintain_order=True).items():
        deciding = frame.filter(pl.col("deciding")).row(0, named=True)
        entries.append({
            "cross_rank_sk": group,
            "structure_key": deciding["structure_key"],
            "structure_hash": deciding["structure_hash"],
            "occurrence_index": deciding["occurrence_index"],
            "deciding_rank": deciding["rank"],
            "deciding_uid": deciding["uid"],
            "class": deciding["class"],
            "per_rank": [
                {"rank": r["rank"], "uid": r["uid"], "class": r["class"], "delta_p50_us": r["delta_p50_us"],
                 "delta_p50_pct": r["delta_p50_pct"], "baseline_p50_us": r["base_p50_us"], "candidate_p50_us": r["cand_p50_us"]}
                for r in frame.iter_rows(named=True)
            ],
        })
    return {"rule": RULE, "ranks": sorted(sks.get_column("rank").drop_nulls().unique().to_list()), "sks": entries}
