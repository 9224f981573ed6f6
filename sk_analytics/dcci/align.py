"""Structural alignment of fused SKs between the baseline and the candidate profile.

Inside one process, an sk_prof launch (modelId, skId) maps to the SK of
``model_<modelId>/sk_fused_nodes.log`` whose scope id is skId, and a child
event's nodeId to the member ``[nodeId]`` of that SK. Across processes the
only identity is structural (formats.md §4): ``structure_key`` (scope name,
boundary ops, ordered canonical child ops, from
:func:`sk_analytics.canonical.sk_identity`) plus the graph ``occurrence_index``.
Raw sk/scope/node/stream ids, hashes and timestamps never cross a process.

The mapping must be unique: a scope id listed twice in one graph, or one
identity found in two graphs of the same process, is ambiguous and that SK is
insufficient evidence (never guessed). An identity seen on one side only is
unaligned.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import polars as pl

from sk_analytics.canonical import sk_identity
from sk_analytics.dcci.occurrences import SK_KEYS

GRAPH_KEYS: Final = ("process", "model_dir")
IDENTITY: Final = ("structure_key", "occurrence_index")

MAP_OK: Final = "ok"
MAP_NO_METADATA: Final = "no_metadata"
MAP_AMBIGUOUS_SCOPE: Final = "ambiguous_scope_id"
MAP_AMBIGUOUS_STRUCTURE: Final = "ambiguous_structure"
MAP_NO_EVENTS: Final = "no_events"
_PRESENT: Final = (MAP_OK, MAP_NO_EVENTS)

ALIGNED: Final = "aligned"


@dataclass(frozen=True)
class SideStructure:
    """One side's launched SKs mapped to structural identities, and its child positions."""

    sk_map: pl.DataFrame
    """SK_KEYS + model_dir, scope/boundary/ops and identity columns, ``map_status``."""
    children: pl.DataFrame
    """process, model_dir, scope_id, node_id (= child_index), position, func_name, canonical_op."""


@dataclass(frozen=True)
class Alignment:
    """Both sides mapped to one integer ``uid`` per structural identity."""

    identities: pl.DataFrame
    """uid (= report order: candidate graph order first), identity columns, scope_name,
    boundary ops, child_ops, structure_hash, align_status."""
    sk_map: pl.DataFrame
    """side + SK_KEYS + model_dir + identity + uid (null unless uniquely mapped) + map_status."""
    children: pl.DataFrame
    """side, process, model_dir, scope_id, node_id, position, func_name, canonical_op."""


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
    too (``no_metadata``); ``graph_order`` is the SK's order in its graph.
    """
    ident = (
        sk_identity(structure, graph_keys=list(GRAPH_KEYS))
        .with_row_index("graph_order")
        .with_columns(
            (pl.len().over([*GRAPH_KEYS, "scope_id"]) > 1).alias("_dup_scope"),
            (pl.col("model_dir").n_unique().over(["process", *IDENTITY]) > 1).alias("_dup_identity"),
            pl.lit(True).alias("_meta"),
        )
        .rename({"scope_id": "sk_id"})
    )
    launched = (
        launched.select(*SK_KEYS).unique()
        .join(model_dirs(launched, structure), on=["process", "model_id"], how="left")
        .with_columns(pl.lit(True).alias("_launched"))
    )
    joined = ident.join(launched, on=[*GRAPH_KEYS, "sk_id"], how="full", coalesce=True)
    status = (
        pl.when(pl.col("_meta").is_null()).then(pl.lit(MAP_NO_METADATA))
        .when(pl.col("_dup_scope")).then(pl.lit(MAP_AMBIGUOUS_SCOPE))
        .when(pl.col("_dup_identity")).then(pl.lit(MAP_AMBIGUOUS_STRUCTURE))
        .when(pl.col("_launched").is_null()).then(pl.lit(MAP_NO_EVENTS))
        .otherwise(pl.lit(MAP_OK))
    )
    sk_map = (
        joined.with_columns(status.alias("map_status"))
        .sort(pl.col("graph_order"), nulls_last=True)
        .select(*SK_KEYS, "model_dir", "graph_order", "scope_name", "boundary_first", "boundary_last", "child_ops",
                "structure_key", "structure_hash", "occurrence_index", "map_status")
    )
    return SideStructure(sk_map=sk_map, children=child_positions(structure))


def align(baseline: SideStructure, candidate: SideStructure) -> Alignment:
    """Give every structural identity a ``uid``; aligned iff uniquely mapped on both sides."""
    sides = {"baseline": baseline, "candidate": candidate}
    maps = pl.concat([s.sk_map.with_columns(side=pl.lit(name)) for name, s in sides.items()], how="vertical")
    known = maps.filter(pl.col("structure_key").is_not_null())
    present = pl.col("map_status").is_in(_PRESENT)
    per_identity = known.group_by(IDENTITY).agg(
        pl.col("scope_name", "boundary_first", "boundary_last", "child_ops", "structure_hash").first(),
        ((pl.col("side") == "baseline") & present).any().alias("_in_base"),
        ((pl.col("side") == "candidate") & present).any().alias("_in_cand"),
        (~present).any().alias("_ambiguous"),
        pl.col("graph_order").filter(pl.col("side") == "candidate").min().alias("_cand_order"),
        pl.col("graph_order").filter(pl.col("side") == "baseline").min().alias("_base_order"),
    )
    status = (
        pl.when(pl.col("_ambiguous")).then(pl.lit("ambiguous_mapping"))
        .when(pl.col("_in_base") & pl.col("_in_cand")).then(pl.lit(ALIGNED))
        .when(pl.col("_in_base")).then(pl.lit("only_in_baseline"))
        .otherwise(pl.lit("only_in_candidate"))
    )
    identities = (
        per_identity.with_columns(status.alias("align_status"))
        .sort(pl.col("_cand_order").is_null(), "_cand_order", "_base_order", *IDENTITY)
        .with_row_index("uid")
        .with_columns(pl.col("uid").cast(pl.Int32))
        .drop("_in_base", "_in_cand", "_ambiguous", "_cand_order", "_base_order")
    )
    usable = pl.col("map_status") == MAP_OK
    sk_map = maps.join(
        identities.select(*IDENTITY, "uid", "align_status"), on=list(IDENTITY), how="left", nulls_equal=False
    ).select(
        "side", *SK_KEYS, "model_dir", "structure_key", "occurrence_index",
        pl.when(usable).then(pl.col("uid")).otherwise(None).alias("uid"), "map_status",
    )
    children = pl.concat([s.children.with_columns(side=pl.lit(name)) for name, s in sides.items()], how="vertical")
    return Alignment(identities=identities, sk_map=sk_map, children=children)
