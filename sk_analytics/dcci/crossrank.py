"""Which slots of different ranks are the same SK (issue 25): alignment, never a counter.

Each rank is aligned and classified on its own (one slot per aligned pair or
one-sided SK, in the rank's graph order: graph pairs in execution order, then
the merged graph order). A rank's graph may differ from the others' (one SK
more where an expert placement or a communication op fused differently), so
the k-th look-alike of one rank is not the k-th of another. Instead:

1. Every slot is a token: its structure and which sides hold it (a pair, a
   baseline-only or a candidate-only SK are different tokens).
2. The **reference rank** is the rank whose token sequence is the most common
   one (ties: the lowest rank), so one odd rank never becomes the reference.
3. Every other rank's sequence is aligned to the reference's with the
   graph-context sequence alignment used between the two sides
   (:func:`sk_analytics.dcci.seqalign.align_sequences`: anchors, exact LCS in
   the runs between them). A slot the alignment pairs joins the reference
   slot's group (``paired``).
4. A slot in a gap of every optimal alignment exists on some ranks only
   (``only_some_ranks``): such slots of several ranks form one group when they
   follow the same reference slot and are the same token and its same
   repetition in that gap; otherwise they are their own group.
5. A slot that optimal alignments place differently is ``ambiguous``: its own
   group, never merged with a look-alike; the reference slot it could have
   joined lists that rank under ``ambiguous_ranks``.

Groups are numbered in the reference rank's order (a gap group right after the
reference slot it follows).
"""

from __future__ import annotations

from collections import Counter
from typing import Final

import numpy as np
import polars as pl

from sk_analytics.dcci import seqalign

REFERENCE: Final = "reference"
PAIRED: Final = "paired"
SOME_RANKS: Final = "only_some_ranks"
AMBIGUOUS: Final = "ambiguous"

_STATUSES: Final = (REFERENCE, PAIRED, SOME_RANKS, AMBIGUOUS)
"""Status codes 0-3 of the per-rank arrays."""
_KIND: Final = (0, 0, 1, 2)
"""Per status code: the tie-break kind in the reference order (a group, a some-ranks group, an ambiguous slot)."""

CORRESPONDENCE_SCHEMA: Final[dict[str, pl.DataType | type[pl.DataType]]] = {
    "uid": pl.Int32, "cross_rank_sk": pl.Int32, "cross_rank_status": pl.Utf8, "reference_rank": pl.Int64,
    "ambiguous_ranks": pl.List(pl.Int64),
}


def _tokens(sks: pl.DataFrame) -> pl.DataFrame:
    """uid, rank, _token (structure + sides present) in uid order (= each rank's graph order)."""
    present = pl.col("base_position").is_not_null().cast(pl.Utf8) + pl.col("cand_position").is_not_null().cast(pl.Utf8)
    return sks.select(
        pl.col("uid").cast(pl.Int32), "rank",
        (pl.col("structure_key").fill_null("") + "|" + present).rank("dense").cast(pl.Int64).alias("_token"),
    ).sort("uid")


def reference_rank(sequences: dict[int, np.ndarray]) -> int:
    """The rank whose token sequence is the most common (ties: the lowest rank)."""
    counts = Counter(seq.tobytes() for seq in sequences.values())
    return min(sequences, key=lambda r: (-counts[sequences[r].tobytes()], r))


def correspond(sks: pl.DataFrame) -> pl.DataFrame:
    """Per slot: uid, cross_rank_sk (group), cross_rank_status, reference_rank, ambiguous_ranks (see module)."""
    tokens = _tokens(sks)
    if tokens.height == 0:
        return pl.DataFrame(schema=CORRESPONDENCE_SCHEMA)
    per_rank = {int(key[0]): frame for key, frame in tokens.partition_by("rank", as_dict=True, maintain_order=True).items()}
    sequences = {r: f.get_column("_token").to_numpy() for r, f in per_rank.items()}
    ref = reference_rank(sequences)
    n_ref = sequences[ref].size
    ambiguous_on: list[list[int]] = [[] for _ in range(n_ref)]
    parts = []
    for rank in sorted(per_rank):
        frame, seq = per_rank[rank], sequences[rank]
        if rank == ref:
            group = np.arange(n_ref, dtype=np.int64)
            status = np.zeros(n_ref, dtype=np.int8)
        else:
            result = seqalign.align_sequences(sequences[ref], seq)
            group = result.partner_b
            status = np.where(group >= 0, 1, np.where(result.status_b == seqalign.AMBIGUOUS, 3, 2)).astype(np.int8)
            for i in np.flatnonzero(result.status_a == seqalign.AMBIGUOUS).tolist():
                ambiguous_on[i].append(rank)
        follows = np.maximum.accumulate(np.where(group >= 0, group, -1)) if group.size else group
        parts.append(frame.with_columns(pl.Series("_group", group), pl.Series("_status", status), pl.Series("_follows", follows)))
    slots = pl.concat(parts, how="vertical").with_columns(
        pl.col("_status").replace_strict(dict(enumerate(_STATUSES)), return_dtype=pl.Utf8).alias("cross_rank_status"),
        pl.col("_status").replace_strict(dict(enumerate(_KIND)), return_dtype=pl.Int32).alias("_kind"),
    )
    gap = pl.col("cross_rank_status") == SOME_RANKS
    slots = slots.with_columns(
        # reference order: a group right after the reference slot it follows; ties by kind, then repetition / rank
        pl.when(pl.col("_group") >= 0).then(pl.col("_group").cast(pl.Float64))
        .otherwise(pl.col("_follows").cast(pl.Float64) + 0.5).alias("_pos"),
        pl.when(gap).then(pl.int_range(pl.len()).over("rank", "_follows", "_token", "cross_rank_status"))
        .when(pl.col("_group") >= 0).then(0).otherwise(pl.col("rank")).cast(pl.Int64).alias("_a"),
        pl.when(gap).then(pl.col("_token")).when(pl.col("_group") >= 0).then(0)
        .otherwise(pl.col("uid").cast(pl.Int64)).alias("_b"),
    )
    keys = ["_pos", "_kind", "_a", "_b"]
    numbered = slots.select(keys).unique().sort(keys).with_row_index("cross_rank_sk")
    ambiguous = pl.DataFrame({"_group": np.arange(n_ref, dtype=np.int64), "ambiguous_ranks": ambiguous_on},
                             schema={"_group": pl.Int64, "ambiguous_ranks": pl.List(pl.Int64)})
    out = (
        slots.join(numbered, on=keys, how="left")
        .join(ambiguous, on="_group", how="left")
        .with_columns(pl.col("ambiguous_ranks").fill_null(pl.lit([], dtype=pl.List(pl.Int64))))
    )
    return out.select(
        "uid", pl.col("cross_rank_sk").cast(pl.Int32), "cross_rank_status",
        pl.lit(ref, dtype=pl.Int64).alias("reference_rank"), "ambiguous_ranks",
    ).sort("uid")
