"""Structural alignment of fused SKs between the baseline and the candidate profile.

Inside one process, an sk_prof launch (modelId, skId) maps to the SK of
``model_<modelId>/sk_fused_nodes.log`` whose scope id is skId, and a child
event's nodeId to the member ``[nodeId]`` of that SK. Across processes the
only identity is structural (formats.md §4): ``structure_key`` (scope name,
boundary ops, ordered canonical child ops, from
:func:`sk_analytics.ingest.canonical.sk_identity`) plus its **graph context**: ranks
and graphs of the two sides are paired (:mod:`sk_analytics.dcci.pairing`),
then each graph pair's ordered sequences of structural identities are aligned
(:mod:`sk_analytics.dcci.seqalign`: anchored on structures that occur once,
exact LCS inside the runs between anchors). Every aligned slot gets one
``uid``; an SK in a gap is present on one side only, an SK the alignment
cannot place uniquely is ``ambiguous_alignment`` — never paired with a
look-alike. Raw sk/scope/node/stream ids, hashes and timestamps never cross
a process.

The mapping must be unique too: a scope id listed twice in one graph is
ambiguous and that SK is insufficient evidence (never guessed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

import numpy as np
import polars as pl

from sk_analytics.dcci import seqalign
from sk_analytics.dcci.occurrences import SK_KEYS
from sk_analytics.dcci.pairing import GraphPair, pair_graphs, pair_ranks
from sk_analytics.ingest.canonical import sk_identity

GRAPH_KEYS: Final = ("process", "model_dir")
IDENTITY: Final = ("structure_key", "occurrence_index")

MAP_OK: Final = "ok"
MAP_NO_METADATA: Final = "no_metadata"
MAP_AMBIGUOUS_SCOPE: Final = "ambiguous_scope_id"
MAP_NO_EVENTS: Final = "no_events"
_PRESENT: Final = (MAP_OK, MAP_NO_EVENTS)

ALIGNED: Final = "aligned"
ONLY_BASELINE: Final = "only_in_baseline"
ONLY_CANDIDATE: Final = "only_in_candidate"
AMBIGUOUS_ALIGNMENT: Final = "ambiguous_alignment"
AMBIGUOUS_MAPPING: Final = "ambiguous_mapping"

_SIDES: Final = ("baseline", "candidate")
_DESCRIBE: Final = ("structure_key", "scope_name", "boundary_first", "boundary_last", "child_ops", "structure_hash")
SLOT_COLUMNS: Final = (
    "rank", "graph_pair", "paired_by", "run", "ambiguous_pairing",
    *(f"{side}_{c}" for side in ("base", "cand") for c in ("process", "model_dir", "position", "sk_id", "occurrence_index")),
    "anchor_before_base", "anchor_before_cand", "anchor_after_base", "anchor_after_cand",
)
"""Per slot: where each side's SK sits (graph, position, scope id, occurrence of its structure) and how it was placed."""
_SIDE_SCHEMA: Final = {
    f"{side}_{c}": dtype for side in ("base", "cand")
    for c, dtype in (("process", pl.Utf8), ("model_dir", pl.Utf8), ("position", pl.Int32), ("sk_id", pl.Int64),
                     ("occurrence_index", pl.Int32))
}
"""Types of the slot columns of one side (null when the slot has no SK on that side)."""


@dataclass(frozen=True)
class SideStructure:
    """One side's launched SKs mapped to structural identities, and its child positions."""

    sk_map: pl.DataFrame
    """SK_KEYS + model_dir, scope/boundary/ops and identity columns, ``map_status``."""
    children: pl.DataFrame
    """process, model_dir, scope_id, node_id (= child_index), position, func_name, canonical_op."""


@dataclass(frozen=True)
class Alignment:
    """Both sides mapped to one integer ``uid`` per aligned slot (a pair, or one side's SK in a gap)."""

    identities: pl.DataFrame
    """uid (= report order: rank, graph pair, merged graph order), identity columns, scope_name,
    boundary ops, child_ops, structure_hash, align_status, and the alignment columns of :data:`SLOT_COLUMNS`."""
    sk_map: pl.DataFrame
    """side + SK_KEYS + model_dir + identity + uid (null unless uniquely mapped) + map_status."""
    children: pl.DataFrame
    """side, process, model_dir, scope_id, node_id, position, func_name, canonical_op."""
    graphs: tuple[dict[str, Any], ...] = ()
    """Per graph pair: the pairing and the alignment counts (JSON)."""
    process_rank: pl.DataFrame | None = None
    """side, process, rank: the rank of every process of both sides (for coverage of unmapped launches)."""


def model_dirs(launched: pl.DataFrame, structure: pl.DataFrame) -> pl.DataFrame:
    """process, model_id -> model_dir: the metadata folder of each launched modelId in its process.

    ``args.modelId`` ``<rtsModelId>_<callCount>`` names ``model_<rtsModelId>_<callCount>/``.
    A legacy trace carries only ``args.modelRI`` (the rtsModelId): it maps to the one folder
    ``model_<rtsModelId>_<n>/`` of that process; with several such folders it stays unmapped
    (null) rather than guessed.
    """
    models = launched.select("process", "model_id").unique()
    dirs = structure.select("process", "model_dir").unique().with_columns(
        pl.col("model_dir").str.strip_prefix("model_").alias("_full"),
        pl.col("model_dir").str.extract(r"^model_([0-9]+)_[0-9]+$", 1).alias("_rts"),
    )
    exact = models.join(dirs.select("process", "_full", "model_dir"), left_on=["process", "model_id"],
                        right_on=["process", "_full"], how="inner")
    legacy = (
        models.filter(~pl.col("model_id").str.contains("_"))
        .join(dirs.select("process", "_rts", "model_dir"), left_on=["process", "model_id"], right_on=["process", "_rts"])
        .filter(pl.len().over("process", "model_id") == 1)
    )
    found = pl.concat([exact, legacy.join(exact, on=["process", "model_id"], how="anti")], how="vertical")
    return models.join(found, on=["process", "model_id"], how="left")


def child_positions(structure: pl.DataFrame) -> pl.DataFrame:
    """Ordinal position of every kernel member of every SK (events/memory members produce no timing)."""
    return (
        structure.filter(pl.col("member_kind") == "kernel")
        .sort([*GRAPH_KEYS, "scope_id", "child_index"])
        .select(
            *GRAPH_KEYS,
            "scope_id",
            pl.col("child_index").cast(pl.Int64).alias("node_id"),
            pl.int_range(pl.len()).over([*GRAPH_KEYS, "scope_id"]).cast(pl.Int32).alias("position"),
            "func_name",
            "canonical_op",
        )
    )


def map_side(structure: pl.DataFrame, launched: pl.DataFrame) -> SideStructure:
    """Map one side's launched SKs (unique SK_KEYS) to structural identities.

    ``structure`` is an sk_structure frame with a ``process`` column. Metadata
    SKs that never launched are kept (``no_events``), launches without metadata
    too (``no_metadata``); ``graph_order`` is the SK's order in its graph. A
    ``first_ns`` column of ``launched`` (first launch time) is kept: it orders
    the graphs of a process in execution order.
    """
    ident = (
        sk_identity(structure, graph_keys=list(GRAPH_KEYS))
        .with_row_index("graph_order")
        .with_columns(
            (pl.len().over([*GRAPH_KEYS, "scope_id"]) > 1).alias("_dup_scope"),
            pl.lit(True).alias("_meta"),
        )
        .rename({"scope_id": "sk_id"})
    )
    extra = ["first_ns"] if "first_ns" in launched.columns else []
    launched = (
        launched.select(*SK_KEYS, *extra).unique(subset=list(SK_KEYS), keep="first")
        .join(model_dirs(launched, structure), on=["process", "model_id"], how="left")
        .with_columns(pl.lit(True).alias("_launched"))
    )
    joined = ident.join(launched, on=[*GRAPH_KEYS, "sk_id"], how="full", coalesce=True)
    status = (
        pl.when(pl.col("_meta").is_null()).then(pl.lit(MAP_NO_METADATA))
        .when(pl.col("_dup_scope")).then(pl.lit(MAP_AMBIGUOUS_SCOPE))
        .when(pl.col("_launched").is_null()).then(pl.lit(MAP_NO_EVENTS))
        .otherwise(pl.lit(MAP_OK))
    )
    sk_map = (
        joined.with_columns(status.alias("map_status"))
        .sort(pl.col("graph_order"), nulls_last=True)
        .with_columns(
            pl.when(pl.col("graph_order").is_not_null())
            .then(pl.col("graph_order").rank("dense").over("process", "model_dir") - 1)
            .cast(pl.Int32).alias("graph_position")
        )
        .select(*SK_KEYS, "model_dir", "graph_order", "graph_position", "scope_name", "boundary_first", "boundary_last", "child_ops",
                "structure_key", "structure_hash", "occurrence_index", "map_status", *extra)
    )
    return SideStructure(sk_map=sk_map, children=child_positions(structure))


def align(baseline: SideStructure, candidate: SideStructure) -> Alignment:
    """Pair ranks and graphs, align each graph pair's structure sequences, one ``uid`` per slot."""
    maps = pl.concat([s.sk_map.with_columns(side=pl.lit(name)) for name, s in zip(_SIDES, (baseline, candidate), strict=True)],
                     how="vertical")
    placed = maps.filter(pl.col("graph_position").is_not_null())
    elements = (
        placed.unique(subset=["side", "process", "model_dir", "graph_position"], keep="first")
        .with_columns(pl.col("structure_key").rank("dense").cast(pl.Int64).alias("_token"),
                      (~pl.col("map_status").is_in(_PRESENT)).alias("_bad_map"))
        .sort("side", "process", "model_dir", "graph_position")
    )
    counts = elements.group_by("side", "process", "model_dir", "structure_key").agg(pl.len().alias("n"))
    graphs = {key: frame for key, frame in elements.partition_by(["side", "process", "model_dir"], as_dict=True).items()}
    first_launch = _first_launch(maps)
    slots: list[pl.DataFrame] = []
    summaries: list[dict[str, Any]] = []
    ranks: list[tuple[str, str, int]] = []
    for rank in pair_ranks(baseline.sk_map, candidate.sk_map):
        ranks += [(side, process, rank.rank) for side, process in (("baseline", rank.baseline), ("candidate", rank.candidate))
                  if process is not None]
        for pair in pair_graphs(rank, counts, first_launch):
            index = len(summaries)
            base = _concat([graphs[key] for key in (("baseline", *g) for g in pair.baseline) if key in graphs])
            cand = _concat([graphs[key] for key in (("candidate", *g) for g in pair.candidate) if key in graphs])
            frame, summary = _slots(pair, index, base, cand)
            slots.append(frame)
            summaries.append(summary)
    slot_frame = pl.concat(slots, how="diagonal_relaxed") if slots else _empty_slots()
    identities = slot_frame.sort("rank", "graph_pair", "_order", "base_position", nulls_last=True).with_row_index("uid")
    identities = identities.with_columns(pl.col("uid").cast(pl.Int32))
    usable = pl.col("map_status") == MAP_OK
    keyed = pl.concat([
        identities.select("uid", pl.lit(side).alias("side"), pl.col(f"{p}_process").alias("process"),
                          pl.col(f"{p}_model_dir").alias("model_dir"), pl.col(f"{p}_position").alias("graph_position"))
        .drop_nulls("graph_position")
        for side, p in (("baseline", "base"), ("candidate", "cand"))
    ])
    sk_map = maps.join(keyed, on=["side", "process", "model_dir", "graph_position"], how="left").select(
        "side", *SK_KEYS, "model_dir", "structure_key", "occurrence_index",
        pl.when(usable).then(pl.col("uid")).otherwise(None).alias("uid"), "map_status",
    )
    children = pl.concat([s.children.with_columns(side=pl.lit(name)) for name, s in zip(_SIDES, (baseline, candidate), strict=True)],
                         how="vertical")
    process_rank = pl.DataFrame(ranks, schema={"side": pl.Utf8, "process": pl.Utf8, "rank": pl.Int64}, orient="row")
    return Alignment(identities=identities.drop("_order"), sk_map=sk_map, children=children, graphs=tuple(summaries),
                     process_rank=process_rank)


def _first_launch(maps: pl.DataFrame) -> dict[tuple[str, str, str], int]:
    """(side, process, model_dir) -> first launch time of the graph (execution order; absent when unknown)."""
    if "first_ns" not in maps.columns:
        return {}
    first = maps.drop_nulls(["model_dir", "first_ns"]).group_by("side", "process", "model_dir").agg(pl.col("first_ns").min())
    return {(side, process, graph): int(t) for side, process, graph, t in first.iter_rows()}


def _concat(frames: list[pl.DataFrame]) -> pl.DataFrame | None:
    """One side of a graph pair: its graphs' elements as one sequence (graphs in execution order)."""
    return pl.concat(frames, how="vertical") if frames else None


def _slots(pair: GraphPair, index: int, base: pl.DataFrame | None, cand: pl.DataFrame | None
           ) -> tuple[pl.DataFrame, dict[str, Any]]:
    """The slots of one graph pair (pairs and one-sided SKs) and its JSON summary."""
    empty = pl.DataFrame(schema={"_token": pl.Int64})
    base_f, cand_f = (base if base is not None else empty), (cand if cand is not None else empty)
    result = seqalign.align_sequences(base_f.get_column("_token").to_numpy(), cand_f.get_column("_token").to_numpy())
    if pair.ambiguous:
        result = seqalign.SequenceAlignment(
            np.full(base_f.height, -1), np.full(base_f.height, seqalign.AMBIGUOUS, np.int8), result.segment_a,
            np.full(cand_f.height, -1), np.full(cand_f.height, seqalign.AMBIGUOUS, np.int8), result.segment_b,
            result.anchors[:0],
        )
    anchors = result.anchors
    # a one-sided baseline SK sorts after the candidate SK paired with the nearest paired baseline SK before it
    prev_partner = np.maximum.accumulate(np.where(result.partner_a >= 0, result.partner_a, -1)) if base_f.height else result.partner_a
    cand_part = _side_slots(cand_f, "cand", result.status_b, result.segment_b, anchors,
                            order=np.arange(cand_f.height, dtype=np.float64))
    base_part = _side_slots(base_f, "base", result.status_a, result.segment_a, anchors,
                            order=prev_partner.astype(np.float64) + 0.5)
    partner = pl.Series("_partner", result.partner_b)
    parts = [base_part.filter(pl.Series(result.partner_a < 0))] if base_f.height else []
    if cand_f.height:
        cand_part = cand_part.with_columns(partner)
        parts.append(cand_part.filter(pl.col("_partner") < 0).drop("_partner"))
        if base_f.height:
            base_cols = [c for c in base_part.columns if c.startswith("base_")]
            paired = cand_part.filter(pl.col("_partner") >= 0).join(
                base_part.select(pl.col("_seq").alias("_partner"), *base_cols, pl.col("_bad").alias("_bad_b")),
                on="_partner", how="left",
            )
            parts.insert(0, paired.with_columns(pl.col("_bad") | pl.col("_bad_b")).drop("_partner", "_bad_b"))
    frame = pl.concat(parts, how="diagonal_relaxed").drop("_seq", strict=False)
    frame = frame.with_columns(
        pl.lit(None, dtype=dtype).alias(name) for name, dtype in _SIDE_SCHEMA.items() if name not in frame.columns
    ).with_columns(
        pl.lit(pair.rank, dtype=pl.Int64).alias("rank"),
        pl.lit(index, dtype=pl.Int32).alias("graph_pair"),
        pl.lit(pair.ambiguous).alias("ambiguous_pairing"),
    )
    status = (
        pl.when(pl.col("_status") == seqalign.AMBIGUOUS).then(pl.lit(AMBIGUOUS_ALIGNMENT))
        .when(pl.col("_bad")).then(pl.lit(AMBIGUOUS_MAPPING))
        .when(pl.col("base_position").is_not_null() & pl.col("cand_position").is_not_null()).then(pl.lit(ALIGNED))
        .when(pl.col("base_position").is_not_null()).then(pl.lit(ONLY_BASELINE))
        .otherwise(pl.lit(ONLY_CANDIDATE))
    )
    paired_by = pl.when(pl.col("_status") == seqalign.PAIRED_ANCHOR).then(pl.lit("anchor")).when(
        pl.col("_status") == seqalign.PAIRED_RUN).then(pl.lit("run")).otherwise(None)
    frame = frame.with_columns(status.alias("align_status"), paired_by.alias("paired_by"),
                               pl.coalesce("cand_occurrence_index", "base_occurrence_index").alias("occurrence_index"),
                               ).drop("_status", "_bad")
    codes = {name: int(np.sum(result.status_a == code) + np.sum(result.status_b == code))
             for code, name in enumerate(seqalign.STATUS_NAMES)}
    summary = {
        **pair.to_json(),
        "graph_pair": index,
        "sks": {"baseline": base_f.height, "candidate": cand_f.height},
        "anchors": int(anchors.shape[0]),
        "paired_by_anchor": codes["anchor"] // 2,
        "paired_in_runs": codes["run"] // 2,
        "only_in_baseline": int(np.sum(result.status_a == seqalign.GAP)),
        "only_in_candidate": int(np.sum(result.status_b == seqalign.GAP)),
        "ambiguous": {"baseline": int(np.sum(result.status_a == seqalign.AMBIGUOUS)),
                      "candidate": int(np.sum(result.status_b == seqalign.AMBIGUOUS))},
    }
    return frame, summary


def _side_slots(frame: pl.DataFrame, prefix: str, status: np.ndarray, segment: np.ndarray, anchors: np.ndarray,
                order: np.ndarray) -> pl.DataFrame:
    """One side's elements of a graph pair as slot columns (``<prefix>_…``), the run they lie in and its anchors."""
    if frame.height == 0:
        return pl.DataFrame(schema={"_token": pl.Int64})
    seg = segment.astype(np.int64)
    before = np.where(seg > 0, seg - 1, -1)
    after = np.where(seg < anchors.shape[0], seg, -1)

    def anchor(which: np.ndarray, col: int) -> pl.Series:
        values = anchors[np.maximum(which, 0), col] if anchors.shape[0] else np.zeros(which.size, np.int64)
        return _nullable(np.where(which >= 0, values, -1))

    is_anchor = status == seqalign.PAIRED_ANCHOR
    # an anchor is its own placement: no surrounding run
    before, after = np.where(is_anchor, -1, before), np.where(is_anchor, -1, after)
    return frame.select(
        *_DESCRIBE,
        pl.col("process").alias(f"{prefix}_process"),
        pl.col("model_dir").alias(f"{prefix}_model_dir"),
        pl.col("graph_position").alias(f"{prefix}_position"),
        pl.col("sk_id").alias(f"{prefix}_sk_id"),
        pl.col("occurrence_index").alias(f"{prefix}_occurrence_index"),
        pl.col("_bad_map").alias("_bad"),
    ).with_columns(
        pl.Series("_status", status),
        _nullable(np.where(is_anchor, -1, seg)).alias("run"),
        anchor(before, 0).alias("anchor_before_base"), anchor(before, 1).alias("anchor_before_cand"),
        anchor(after, 0).alias("anchor_after_base"), anchor(after, 1).alias("anchor_after_cand"),
        pl.Series("_order", order),
        pl.int_range(pl.len(), dtype=pl.Int64).alias("_seq"),
    )


def _nullable(values: np.ndarray) -> pl.Series:
    """Int32 series of non-negative ``values``, null where negative."""
    return pl.select(pl.when(pl.lit(pl.Series(values)) >= 0).then(pl.lit(pl.Series(values))).cast(pl.Int32)).to_series()


def _empty_slots() -> pl.DataFrame:
    return pl.DataFrame(schema={"rank": pl.Int64, "graph_pair": pl.Int32, "_order": pl.Float64,
                                "base_position": pl.Int32, "align_status": pl.Utf8,
                                **{c: pl.Utf8 for c in _DESCRIBE}})
