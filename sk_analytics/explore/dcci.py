"""The tables of a DCCI diagnosis (the ``dcci-diff`` JSON) as Polars frames.

Input is the decision JSON ``sk-analyze dcci-diff`` writes (and the sweep keeps
at ``experiments/Sbest/DCCI/dcci-diff.json``; ``load_session(s).dcci_diff``).
Every frame is a flat, typed view of one of its lists, with the nested
statistics spread into ``base_*``/``cand_*`` columns; a field the JSON lacks
becomes a null column and a :class:`~sk_analytics.explore.frames.MissingColumnWarning`.
:func:`dcci_structures` is :func:`sk_analytics.dcci.groups.group_sks` (the
grouping the reports and their ΔP50 figure use) as a frame.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from sk_analytics.dcci.groups import group_sks, occurrence_ranges
from sk_analytics.dcci.occurrences import SK_KEYS
from sk_analytics.explore.frames import records_frame
from sk_analytics.files.strict_json import load_json_file

_STATS = {"count": pl.Int64, "p50_us": pl.Float64, "p90_us": pl.Float64, "mad_us": pl.Float64}


def _flat(prefix: str) -> dict[str, pl.DataType | type[pl.DataType]]:
    """``<prefix>.<stat>`` fields of a nested statistics record."""
    return {f"{prefix}.{key}": dtype for key, dtype in _STATS.items()}


def _renamed(prefix: str, short: str) -> dict[str, str]:
    return {f"{prefix}.{key}": f"{short}_{key}" for key in _STATS}


def load_dcci_diff(path: str | Path) -> dict[str, Any]:
    """A ``dcci-diff.json`` file (strict JSON; bad input names the file)."""
    return dict(load_json_file(Path(path)))


def _pct(delta: str, base: str) -> pl.Expr:
    """``delta / base * 100`` (null when base is 0 or null)."""
    return pl.when(pl.col(base) != 0).then(pl.col(delta) / pl.col(base) * 100)


_SK = {
    "uid": pl.Int64, "rank": pl.Int32, "cross_rank_sk": pl.Int64, "deciding_rank": pl.Int32, "deciding": pl.Boolean, "structure_hash": pl.String,
    "occurrence_index": pl.Int64, "scope_name": pl.String,
    "child_ops": pl.List(pl.String), "align_status": pl.String, "class": pl.String, "reason": pl.String,
    **_flat("baseline"), **_flat("candidate"),
    "noise_band_pct": pl.Float64, "delta_p50_us": pl.Float64, "delta_p50_pct": pl.Float64, "delta_p90_us": pl.Float64,
    "mwu_p": pl.Float64, "mwu_q": pl.Float64,
}


def dcci_sks(diff: Mapping[str, Any]) -> pl.DataFrame:
    """One row per SK identity (structure + occurrence) with its class and ΔP50/ΔP90.

    Columns: uid, rank (the rank this slot was measured on), cross_rank_sk
    (the SK across ranks), deciding_rank, deciding (this slot's rank decides the
    SK: the largest candidate P50), structure_hash, occurrence_index, scope_name, child_ops,
    align_status, class, reason, base_/cand_ count, p50_us, p90_us, mad_us,
    noise_band_pct, delta_p50_us, delta_p50_pct, delta_p90_us,
    delta_p90_pct (``delta_p90_us / base_p90_us * 100``), mwu_p, mwu_q.
    Times are the SK wall time (envelope over cores) in µs; classes are
    formats.md §7's (significantly_slower, significantly_faster, neutral,
    insufficient_evidence). ``rank``/``deciding_rank`` are Int32, as in the
    Parquet tables. ``has_children``: :func:`dcci_children` has this slot's
    child table. The diagnosis times children only on the deciding slot of each
    significantly slower SK; to see them beside every rank's slot, join on
    ``cross_rank_sk`` (both frames carry it), not on ``uid``.
    """
    frame = records_frame(diff.get("sks") or [], _SK, source="dcci-diff sks").rename(
        _renamed("baseline", "base") | _renamed("candidate", "cand"))
    with_children = [entry.get("uid") for entry in diff.get("children") or []]
    return frame.with_columns(_pct("delta_p90_us", "base_p90_us").alias("delta_p90_pct"),
                              pl.col("uid").is_in(pl.Series(with_children, dtype=pl.Int64).implode()).alias("has_children")).select(
        pl.exclude("mwu_p", "mwu_q", "delta_p90_pct"), "delta_p90_pct", "mwu_p", "mwu_q")


def dcci_structures(diff: Mapping[str, Any]) -> pl.DataFrame:
    """Aligned SKs grouped by (structure, class), most slowed down first (the report's grouping).

    Columns: structure, short_name, class, occurrences (distinct occurrence
    indices), slots (SK rows: occurrences × the ranks each was measured on),
    occurrence_indices (``0–15`` ranges), median_delta_p50_pct,
    min_delta_p50_pct, max_delta_p50_pct, min_delta_p50_us, max_delta_p50_us, noise_band_pct.
    """
    groups = group_sks(diff.get("sks") or [])
    return pl.DataFrame(
        [{"structure": g.structure, "short_name": g.short_name, "class": g.cls, "occurrences": len(set(g.occurrences)), "slots": len(g.occurrences),
          "occurrence_indices": occurrence_ranges(g.occurrences), "median_delta_p50_pct": g.median_pct,
          "min_delta_p50_pct": min(g.delta_p50_pct), "max_delta_p50_pct": max(g.delta_p50_pct),
          "min_delta_p50_us": min(g.delta_p50_us), "max_delta_p50_us": max(g.delta_p50_us),
          "noise_band_pct": g.noise_band_pct} for g in groups],
        schema={"structure": pl.String, "short_name": pl.String, "class": pl.String, "occurrences": pl.Int64, "slots": pl.Int64,
                "occurrence_indices": pl.String, "median_delta_p50_pct": pl.Float64, "min_delta_p50_pct": pl.Float64,
                "max_delta_p50_pct": pl.Float64, "min_delta_p50_us": pl.Float64, "max_delta_p50_us": pl.Float64,
                "noise_band_pct": pl.Float64},
    )


_ALIGN = {
    "uid": pl.Int64, "structure_key": pl.String, "structure_hash": pl.String, "occurrence_index": pl.Int64,
    "scope_name": pl.String, "boundary_first": pl.String, "boundary_last": pl.String, "align_status": pl.String,
    "class": pl.String, "baseline.count": pl.Int64, "candidate.count": pl.Int64,
    "alignment.rank": pl.Int32, "alignment.graph_pair": pl.Int64, "alignment.paired_by": pl.String,
    "alignment.ambiguous_pairing": pl.Boolean, "alignment.baseline.graph_position": pl.Int64,
    "alignment.candidate.graph_position": pl.Int64,
}
_UNMAPPED = {"side": pl.String, **{key: pl.String for key in SK_KEYS}, "model_dir": pl.String, "map_status": pl.String}


def dcci_alignment(diff: Mapping[str, Any]) -> pl.DataFrame:
    """How each SK was matched across the two collections (structural identity and occurrence).

    One row per identity: uid, structure_key (scope + boundary ops + ordered
    child ops), structure_hash, occurrence_index (the n-th graph occurrence of
    that structure), scope_name, boundary_first, boundary_last, align_status
    (aligned, only_in_baseline, only_in_candidate, ambiguous_mapping), class,
    base_count, cand_count (post-warm-up launches on each side), and the
    graph context (formats.md §4): rank, graph_pair, paired_by (anchor: a
    structure occurring once on each side; run: the LCS between anchors),
    ambiguous_pairing, base_graph_position, cand_graph_position (null on the
    side the SK is absent from).
    """
    frame = records_frame(diff.get("sks") or [], _ALIGN, source="dcci-diff sks")
    return frame.rename({"baseline.count": "base_count", "candidate.count": "cand_count", "alignment.rank": "rank",
                         "alignment.graph_pair": "graph_pair", "alignment.paired_by": "paired_by",
                         "alignment.ambiguous_pairing": "ambiguous_pairing",
                         "alignment.baseline.graph_position": "base_graph_position",
                         "alignment.candidate.graph_position": "cand_graph_position"})


def dcci_unmapped(diff: Mapping[str, Any]) -> pl.DataFrame:
    """Launches that could not be mapped to one SK of their graph (side, model_dir, map_status; raw ids kept)."""
    return records_frame(diff.get("unmapped_launches") or [], _UNMAPPED, source="dcci-diff unmapped_launches")


def _child_side(kind: str) -> dict[str, Any]:
    return {f"{kind}.baseline.p50_us": pl.Float64, f"{kind}.candidate.p50_us": pl.Float64,
            f"{kind}.delta_p50_us": pl.Float64, f"{kind}.delta_p50_pct": pl.Float64, f"{kind}.class": pl.String}


_CHILD: dict[str, pl.DataType | type[pl.DataType]] = {
    "uid": pl.Int64, "attribution": pl.String, "blockers": pl.List(pl.String), "position": pl.Int64,
    "child_index": pl.Int64, "canonical_op": pl.String, "func_name": pl.String, "significant": pl.Boolean,
    **_child_side("wall"), **_child_side("max_lane"),
}


def dcci_children(diff: Mapping[str, Any]) -> pl.DataFrame:
    """The child timing table of every significantly slower SK, one row per child position.

    Columns: uid, attribution (complete/blocked), blockers, position,
    child_index, canonical_op, func_name, significant, and for the wall span
    (``wall_*``) and the longest single core (``lane_*``): base_p50_us,
    cand_p50_us, delta_p50_us, delta_p50_pct, class. A blocked SK has one row
    with its blockers and null child columns.

    Children are timed on the deciding slot only (``uid`` is that slot's; the
    SK's other ranks have ``has_children`` false in :func:`dcci_sks`).
    ``cross_rank_sk`` and ``rank`` (of that slot) come first after ``uid``:
    ``dcci_sks(d).join(dcci_children(d), on="cross_rank_sk")`` puts the
    children beside every rank's slot of the SK; ``on="uid"`` beside the
    deciding slot only.
    """
    rows = [{"uid": entry.get("uid"), "attribution": entry.get("attribution"), "blockers": entry.get("blockers") or [], **row}
            for entry in diff.get("children") or [] for row in (entry.get("rows") or [{}])]
    frame = records_frame(rows, _CHILD, source="dcci-diff children")
    names: dict[str, str] = {}
    for kind, short in (("wall", "wall"), ("max_lane", "lane")):
        names |= {f"{kind}.baseline.p50_us": f"{short}_base_p50_us", f"{kind}.candidate.p50_us": f"{short}_cand_p50_us",
                  f"{kind}.delta_p50_us": f"{short}_delta_p50_us", f"{kind}.delta_p50_pct": f"{short}_delta_p50_pct",
                  f"{kind}.class": f"{short}_class"}
    slots = records_frame(diff.get("sks") or [], {"uid": pl.Int64, "cross_rank_sk": pl.Int64, "rank": pl.Int32},
                          source="dcci-diff sks")
    frame = frame.rename(names).join(slots, on="uid", how="left", maintain_order="left")
    return frame.select("uid", "cross_rank_sk", "rank", pl.exclude("uid", "cross_rank_sk", "rank"))


_PATTERN: dict[str, pl.DataType | type[pl.DataType]] = {
    "token": pl.String, "status": pl.String, "pattern": pl.String, "patterns": pl.List(pl.String),
    "intended_symbols": pl.List(pl.String),
    "matched_symbols": pl.List(pl.String), "rejected_candidates": pl.List(pl.String),
}


def dcci_repair(diff: Mapping[str, Any]) -> pl.DataFrame:
    """The repair list: one row per child-op token with its verified pattern and the symbols it matched.

    Columns: token, status, pattern (the first of its set), patterns (every
    pattern the token needs, one per symbol prefix family), in_list (all of
    them are in the proposed list), intended_symbols, matched_symbols, rejected_candidates (the patterns
    tried first and refused because they over- or under-matched). Whether a repair was proposed at all,
    and why not, is ``diff["repair"]["proposed"]`` / ``["reason"]``.
    """
    repair = diff.get("repair") or {}
    chosen = list(repair.get("list") or [])
    rows = [dict(p, rejected_candidates=[str(c.get("pattern")) for c in p.get("rejected_candidates") or []],
                 patterns=[str(part.get("pattern")) for part in p["patterns"]] if "patterns" in p  # the token's pattern set
                 else ([p["pattern"]] if p.get("pattern") else []))  # older JSON: one pattern per token
            for p in repair.get("patterns") or []]
    frame = records_frame(rows, _PATTERN, source="dcci-diff repair.patterns")
    return frame.select(
        "token", "status", "pattern", "patterns",
        (pl.col("patterns").list.len().gt(0) & pl.col("patterns").list.eval(pl.element().is_in(chosen)).list.all()).alias("in_list"),
        "intended_symbols", "matched_symbols", "rejected_candidates",
    )
