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

Slots of different ranks are the same SK when the alignment of their ranks'
slot sequences pairs them (:mod:`sk_analytics.dcci.crossrank`); an SK on some
ranks only, or one whose correspondence is ambiguous, is its own group and is
reported so.
"""

from __future__ import annotations

from typing import Any, Final

import polars as pl

from sk_analytics.dcci.crossrank import AMBIGUOUS, correspond

RULE: Final = (
    "per SK across ranks (each rank's slot sequence aligned to the reference rank's, the rank with the most common "
    "sequence; slots the alignment pairs are one SK, an SK on some ranks only or with an ambiguous correspondence is "
    "its own): the class of the rank with the largest candidate P50 decides (the worst-rank metric of the gate); ties "
    "take the lowest rank; only that rank's slot is decomposed into children and feeds the repair"
)


def deciding_ranks(sks: pl.DataFrame) -> pl.DataFrame:
    """uid, cross_rank_sk (group id), cross_rank_status, reference_rank, ambiguous_ranks, deciding (bool),
    deciding_uid, deciding_rank for every classified slot."""
    keyed = sks.select("uid", "rank", "cand_p50_us").with_columns(pl.col("uid").cast(pl.Int32)).join(
        correspond(sks), on="uid", how="left")
    order = keyed.sort(pl.col("cand_p50_us").is_null(), pl.col("cand_p50_us"), "rank", descending=[False, True, False])
    first = order.group_by("cross_rank_sk", maintain_order=True).agg(
        pl.col("uid").first().alias("deciding_uid"), pl.col("rank").first().alias("deciding_rank"))
    out = keyed.join(first, on="cross_rank_sk", how="left")
    return out.select("uid", "cross_rank_sk", "cross_rank_status", "reference_rank", "ambiguous_ranks",
                      (pl.col("uid") == pl.col("deciding_uid")).alias("deciding"), "deciding_uid", "deciding_rank"
                      ).with_columns(pl.col("uid").cast(sks.schema["uid"]))


def _correspondence(present: list[int], ranks: list[int], ambiguous: list[int], statuses: set[str]) -> str:
    """all_ranks / some_ranks / ambiguous of one cross-rank group."""
    if ambiguous or AMBIGUOUS in statuses:
        return "ambiguous"
    return "all_ranks" if present == ranks else "some_ranks"


def across_ranks_json(sks: pl.DataFrame) -> dict[str, Any]:
    """The ``ranks`` record of classified slots joined with :func:`deciding_ranks`: the rule, the ranks, the
    reference rank, and per cross-rank SK the ranks it is on, its correspondence, the per-rank deltas and the
    deciding rank."""
    joined = sks.sort("cross_rank_sk", "rank")
    ranks = sorted(sks.get_column("rank").drop_nulls().unique().to_list())
    entries = []
    for (group,), frame in joined.partition_by("cross_rank_sk", as_dict=True, maintain_order=True).items():
        deciding = frame.filter(pl.col("deciding")).row(0, named=True)
        present = sorted(frame.get_column("rank").unique().to_list())
        ambiguous = sorted({r for rs in frame.get_column("ambiguous_ranks").to_list() for r in rs})
        statuses = set(frame.get_column("cross_rank_status").to_list())
        entries.append({
            "cross_rank_sk": group,
            "structure_key": deciding["structure_key"],
            "structure_hash": deciding["structure_hash"],
            "occurrence_index": deciding["occurrence_index"],
            "correspondence": _correspondence(present, ranks, ambiguous, statuses),
            "ranks_present": present,
            "missing_ranks": [r for r in ranks if r not in present],
            "ambiguous_ranks": sorted(set(ambiguous) | set(frame.filter(pl.col("cross_rank_status") == AMBIGUOUS)
                                                           .get_column("rank").to_list())),
            "deciding_rank": deciding["rank"],
            "deciding_uid": deciding["uid"],
            "class": deciding["class"],
            "per_rank": [
                {"rank": r["rank"], "uid": r["uid"], "class": r["class"], "cross_rank_status": r["cross_rank_status"],
                 "delta_p50_us": r["delta_p50_us"], "delta_p50_pct": r["delta_p50_pct"],
                 "baseline_p50_us": r["base_p50_us"], "candidate_p50_us": r["cand_p50_us"]}
                for r in frame.iter_rows(named=True)
            ],
        })
    counts = {c: sum(e["correspondence"] == c for e in entries) for c in ("all_ranks", "some_ranks", "ambiguous")}
    reference = sks.get_column("reference_rank").drop_nulls()
    return {"rule": RULE, "ranks": ranks, "reference_rank": int(reference[0]) if reference.len() else None,
            "correspondence": counts, "sks": entries}
