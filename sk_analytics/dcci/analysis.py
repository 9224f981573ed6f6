"""The pure DCCI diff: two sides' frames in, the decision JSON out (no I/O here).

Steps (protocol §6): SK occurrences per side -> structural alignment ->
per-SK robust statistics and classification of every identity -> child
decomposition of each significantly slower SK from an attributable trace ->
stable union of significant child op tokens -> verified narrow patterns ->
repair config and its two-pointer diff, or the reason no repair is proposed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import polars as pl

from sk_analytics.dcci import children as ch
from sk_analytics.dcci.align import ALIGNED, Alignment, align, map_side
from sk_analytics.dcci.classify import (
    ABS_FLOOR_US,
    CLASS_ZH,
    FASTER,
    INSUFFICIENT,
    MIN_NOISE_BAND_PCT,
    MIN_OCCURRENCES,
    NEUTRAL,
    SLOWER,
    STAT_COLUMNS,
    bh_qvalues,
    classify,
    expected_false_discoveries,
    mann_whitney,
    side_by_side,
)
from sk_analytics.dcci.coverage import coverage, mark_repair
from sk_analytics.dcci.explained import explained_fraction
from sk_analytics.dcci.occurrences import SK_KEYS, map_sides, occurrence_completeness
from sk_analytics.dcci.rank_events import child_timings_by_process, occurrences_by_process, process_events
from sk_analytics.dcci.ranks import across_ranks_json, deciding_ranks
from sk_analytics.dcci.repair import (
    AFTER,
    BEFORE,
    DISABLE,
    changed_pointers,
    choose_pattern,
    repair_config,
    repair_reason,
    symbol_inventory,
    union_tokens,
)
from sk_analytics.ingest.super_kernel_log import (
    buffer_full_cores,
    is_child_trace_complete,
)
from sk_analytics.messages import text

SCHEMA_VERSION: Final = "sk-tune-dcci-diff-v1"
ALIGNMENT_RULE: Final = (
    "graph dumps pair by shared structures, one to one, then a leftover dump continues a split or merge (one dump "
    "facing a consecutive run of dumps, aligned as one sequence in execution order); "
    "per rank and graph pair: anchors = structures occurring once on each side (longest order-consistent chain); "
    "runs between anchors aligned by exact LCS with structure equality; a pair every optimal alignment makes is "
    "paired, a gap of every optimal alignment is one-sided, anything else is ambiguous_alignment"
)


@dataclass(frozen=True)
class SideInput:
    """One diagnostic collection, already parsed: every frame carries a ``process`` column."""

    root: Path
    events: pl.LazyFrame
    structure: pl.DataFrame
    markers: pl.DataFrame
    symbols: pl.DataFrame
    truncated_processes: frozenset[str] = frozenset()
    warnings: tuple[str, ...] = ()
    identity: dict[str, Any] = field(default_factory=dict)
    spill: object | None = field(default=None, repr=False, compare=False)
    """Owner of the files ``events`` scans, when they were spilled to disk (kept alive with the side)."""
    by_process: Mapping[str, pl.LazyFrame] | None = field(default=None, repr=False, compare=False)
    """``events`` of each process, each scan reading that process's rows only (the loader knows where
    they lie); None: ``events`` filtered by process (:mod:`sk_analytics.dcci.rank_events`)."""


@dataclass(frozen=True)
class _Side:
    """Derived per-side frames: each process's events (lazy) and the SK occurrences."""

    name: str
    data: SideInput
    events: dict[str, pl.LazyFrame]
    occurrences: pl.DataFrame


def _sides(baseline: SideInput, candidate: SideInput) -> list[_Side]:
    """Both sides' events by process and their occurrences (cut side by side in two threads).

    The events stay lazy and are read a process (rank) at a time: each pass (span events here, child
    events of the slower SKs later) streams one rank's rows from the source with its filters pushed
    down, so the peak follows the largest rank, not the rank count (:mod:`sk_analytics.dcci.rank_events`).
    """
    inputs = {"baseline": baseline, "candidate": candidate}
    events = [process_events(data.events, data.by_process) for data in inputs.values()]
    occurrences = map_sides(occurrences_by_process, events)
    return [_Side(name, inputs[name], e, occ) for name, e, occ in zip(inputs, events, occurrences, strict=True)]


def _sk_samples(sides: list[_Side], alignment: Alignment, warmup: int) -> pl.DataFrame:
    """Post-warm-up SK occurrences of uniquely mapped SKs (uid, side, SK_KEYS, occurrence, wall, lane sum)."""
    frames = []
    for side in sides:
        usable = alignment.sk_map.filter((pl.col("side") == side.name) & pl.col("uid").is_not_null())
        frames.append(
            side.occurrences.filter(pl.col("occurrence") >= warmup)
            .join(usable.select(*SK_KEYS, "uid"), on=list(SK_KEYS), how="inner")
            .select("uid", pl.lit(side.name).alias("side"), *SK_KEYS, "occurrence",
                    pl.col("wall_us").alias("value_us"), "lane_sum_us")
        )
    return pl.concat(frames, how="vertical")


NO_OCCURRENCE_AFTER_WARMUP = "no_occurrence_after_warmup"
"""Reason of an aligned SK that was not launched after warm-up on either side (insufficient evidence)."""


def _stats_json(row: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {c: row[prefix + c] for c in STAT_COLUMNS}


def classify_sks(samples: pl.DataFrame, identities: pl.DataFrame) -> pl.DataFrame:
    """Every identity with per-side stats, class, reason and the advisory MWU p / BH q."""
    stats = classify(side_by_side(samples.lazy(), ["uid"])).collect()
    lane = samples.group_by("uid").agg(
        pl.col("lane_sum_us").filter(pl.col("side") == "baseline").median().alias("base_lane_sum_p50_us"),
        pl.col("lane_sum_us").filter(pl.col("side") == "candidate").median().alias("cand_lane_sum_p50_us"),
    )
    mwu = mann_whitney(samples.lazy(), ["uid"])
    mwu = mwu.with_columns(bh_qvalues(mwu["mwu_p"]))
    frame = identities.join(stats, on="uid", how="left").join(mwu, on="uid", how="left").join(lane, on="uid", how="left")
    frame = frame.with_columns(pl.col("base_count", "cand_count").fill_null(0))
    not_aligned = pl.col("align_status") != ALIGNED
    unlaunched = pl.col("class").is_null()  # aligned, but no launch after warm-up on either side: nothing to compare
    return frame.with_columns(
        pl.when(not_aligned | unlaunched).then(pl.lit(INSUFFICIENT)).otherwise(pl.col("class")).alias("class"),
        pl.when(not_aligned).then(pl.col("align_status"))
        .when(unlaunched).then(pl.lit(NO_OCCURRENCE_AFTER_WARMUP))
        .otherwise(pl.col("reason")).alias("reason"),
    ).sort("uid")


def _sk_json(row: dict[str, Any]) -> dict[str, Any]:
    keys = ("uid", "structure_hash", "occurrence_index", "structure_key", "scope_name", "boundary_first",
            "boundary_last", "child_ops", "align_status", "class", "reason", "noise_band_pct", "delta_p50_us",
            "delta_p50_pct", "delta_p90_us", "mwu_p", "mwu_q")
    out = {k: row.get(k) for k in keys}
    out["class_zh"] = CLASS_ZH[row["class"]]
    out["rank"] = row.get("rank")
    out["cross_rank_sk"] = row.get("cross_rank_sk")
    out["cross_rank_status"] = row.get("cross_rank_status")
    out["deciding_rank"] = row.get("deciding_rank")
    out["deciding"] = row.get("deciding")
    out["alignment"] = _alignment_json(row)
    out["baseline"] = _stats_json(row, "base_")
    out["candidate"] = _stats_json(row, "cand_")
    out["lane_workload_diagnostic"] = {
        "baseline_lane_sum_p50_us": row.get("base_lane_sum_p50_us"),
        "candidate_lane_sum_p50_us": row.get("cand_lane_sum_p50_us"),
        "note": "duration sums are lane-workload diagnostics only; they never decide a class",
    }
    return out


def _alignment_json(row: dict[str, Any]) -> dict[str, Any]:
    """Where the SK sits on each side and how it was placed (formats.md §4, graph context)."""
    def side(prefix: str) -> dict[str, Any] | None:
        if row.get(f"{prefix}_position") is None:
            return None
        return {"process": row[f"{prefix}_process"], "model_dir": row[f"{prefix}_model_dir"],
                "graph_position": row[f"{prefix}_position"], "sk_id": row[f"{prefix}_sk_id"],
                "occurrence_index": row[f"{prefix}_occurrence_index"]}

    def anchor(where: str) -> dict[str, Any] | None:
        base, cand = row.get(f"anchor_{where}_base"), row.get(f"anchor_{where}_cand")
        return None if base is None else {"baseline_position": base, "candidate_position": cand}

    return {"rank": row.get("rank"), "graph_pair": row.get("graph_pair"), "paired_by": row.get("paired_by"),
            "run": row.get("run"), "anchor_before": anchor("before"), "anchor_after": anchor("after"),
            "ambiguous_pairing": row.get("ambiguous_pairing"), "baseline": side("base"), "candidate": side("cand")}


def _child_json(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {k: row[k] for k in ("position", "child_index", "canonical_op", "func_name", "significant")}
    for prefix, name in (("wall_", "wall"), ("exec_", "max_lane")):
        out[name] = {
            "baseline": _stats_json(row, prefix + "base_"),
            "candidate": _stats_json(row, prefix + "cand_"),
            **{k: row[prefix + k] for k in ("noise_band_pct", "delta_p50_us", "delta_p50_pct", "delta_p90_us", "class", "reason")},
        }
    return out


def _markers_by_process(side: _Side) -> dict[str, pl.DataFrame]:
    markers = side.data.markers
    return {key[0]: frame for key, frame in markers.partition_by("process", as_dict=True).items()} if markers.height else {}


def _side_json(side: _Side) -> dict[str, Any]:
    full = [
        {"process": process, **row}
        for process, markers in sorted(_markers_by_process(side).items())
        for row in buffer_full_cores(markers).to_dicts()
    ]
    return {
        "path": str(side.data.root),
        **side.data.identity,
        "processes": sorted(side.occurrences.get_column("process").unique().to_list()),
        "sk_occurrences": side.occurrences.height,
        "truncated_sk_prof_processes": sorted(side.data.truncated_processes),
        "buffer_full": full,
        "warnings": list(side.data.warnings),
    }


def _buffer_full_pairs(sides: list[_Side]) -> set[tuple[str, str]]:
    """(side, process) whose sk_prof trace is child-incomplete (buffer-full line in its super_kernel.log)."""
    return {
        (side.name, process)
        for side in sides
        for process, markers in _markers_by_process(side).items()
        if not is_child_trace_complete(markers)
    }


def _children_of_slower(sides: list[_Side], alignment: Alignment, sk_samples: pl.DataFrame, slower: list[int],
                        warmup: int) -> tuple[pl.DataFrame, dict[int, list[str]]]:
    """Child decomposition rows of attributable slower SKs, and each slower SK's blockers.

    Child events are aggregated only for the slower SKs (all their occurrences,
    so that completeness compares every launch with the fullest one).
    """
    occurrences = {}
    for side in sides:
        usable = alignment.sk_map.filter((pl.col("side") == side.name) & pl.col("uid").is_in(slower))
        occurrences[side.name] = side.occurrences.join(usable.select(*SK_KEYS), on=list(SK_KEYS), how="semi", maintain_order="left")
    collected = map_sides(child_timings_by_process, [s.events for s in sides], [occurrences[s.name] for s in sides])
    timings = {side.name: frame for side, frame in zip(sides, collected, strict=True)}
    completeness = [
        occurrence_completeness(occurrences[name], frame).with_columns(side=pl.lit(name)) for name, frame in timings.items()
    ]
    samples = sk_samples.filter(pl.col("uid").is_in(slower)).join(
        pl.concat(completeness), on=["side", *SK_KEYS, "occurrence"], how="left"
    )
    truncated = {(s.name, p) for s in sides for p in s.data.truncated_processes}
    blockers = ch.attribution_blockers(samples, _buffer_full_pairs(sides), truncated)
    blocked = {row["uid"]: row["blockers"] for row in blockers.to_dicts()}
    clear = [u for u in slower if not blocked.get(u)]
    child_frames = []
    for side in sides:
        usable = alignment.sk_map.filter((pl.col("side") == side.name) & pl.col("uid").is_in(clear))
        positions = alignment.children.filter(pl.col("side") == side.name).drop("side")
        child_frames.append(
            ch.child_samples(timings[side.name].lazy(), usable, positions, warmup).with_columns(side=pl.lit(side.name))
        )
    child_samples = pl.concat(pl.collect_all(child_frames), how="vertical")
    for row in ch.unmapped_nodes(child_samples).to_dicts():
        blocked.setdefault(row["uid"], []).append(row["reason"])
    attributable = [u for u in clear if not blocked.get(u)]
    rows = ch.decompose(child_samples.filter(pl.col("uid").is_in(attributable)))
    return rows, {u: sorted(blocked.get(u, [])) for u in slower}


def _repair(children_rows: pl.DataFrame, order: list[int], blocked: dict[int, list[str]], symbols: pl.DataFrame,
            disable_all_config: dict[str, Any]) -> dict[str, Any]:
    """Token union, verified patterns, repair config + diff — or why no repair is proposed."""
    rank = {uid: i for i, uid in enumerate(order)}
    significant = children_rows.filter(pl.col("significant")).with_columns(
        pl.col("uid").replace_strict(rank, return_dtype=pl.Int64).alias("_rank")
    ).sort("_rank", "position")
    tokens = union_tokens(significant)
    inventory = symbol_inventory(symbols)
    choices = [choose_pattern(t, inventory) for t in tokens]
    result: dict[str, Any] = {
        "proposed": False,
        "tokens": tokens,
        "patterns": [c.to_json() for c in choices],
        "list": [],
        "config": None,
        "diff": None,
        "changed_pointers": [],
    }
    if not order:
        return _decided(result, "no_significantly_slower_sk")
    if any(blocked.values()):
        return _decided(result, "child_attribution_blocked")
    if not tokens:
        return _decided(result, "no_significant_child")
    failed = [c.token for c in choices if c.status != "verified"]
    if failed:
        return _decided({**result, "failed_tokens": failed}, "pattern_not_verified")
    patterns = list(dict.fromkeys(p for c in choices for p in c.patterns))
    config, patch = repair_config(disable_all_config, patterns)
    return {**_decided({**result, "proposed": True}, "repair_proposed"),
            "list": patterns, "config": config, "diff": patch, "changed_pointers": changed_pointers(patch)}


def _decided(result: dict[str, Any], code: str) -> dict[str, Any]:
    """``result`` with its decision code and the Chinese sentence the decision JSON records beside it (docs/dcci-diff.md)."""
    out = {**result, "reason": code}
    return {**out, "reason_zh": repair_reason(out, "zh")}


def analyze(baseline: SideInput, candidate: SideInput, *, warmup: int, disable_all_config: dict[str, Any],
            contract: dict[str, Any] | None = None) -> dict[str, Any]:
    """The DCCI diff JSON of two parsed diagnostic collections (see docs/dcci-diff.md)."""
    sides = _sides(baseline, candidate)
    structures = [
        map_side(s.data.structure, s.occurrences.group_by(SK_KEYS).agg(pl.col("start_ns").min().alias("first_ns")))
        for s in sides
    ]
    alignment = align(*structures)
    sk_samples = _sk_samples(sides, alignment, warmup)
    sks = classify_sks(sk_samples, alignment.identities)
    sks = sks.join(deciding_ranks(sks), on="uid", how="left")
    slower_any_rank = sks.filter(pl.col("class") == SLOWER).get_column("uid").to_list()
    # only the deciding rank's slot of a slower SK is decomposed and feeds the repair (dcci.ranks)
    slower = sks.filter((pl.col("class") == SLOWER) & pl.col("deciding")).get_column("uid").to_list()
    children_rows, blocked = _children_of_slower(sides, alignment, sk_samples, slower, warmup)
    # repair tokens in cross-rank SK order (the reference rank's graph order), then child position
    by_group = dict(zip(sks.get_column("uid").to_list(), sks.get_column("cross_rank_sk").to_list(), strict=True))
    repair = _repair(children_rows, sorted(slower, key=lambda u: (by_group[u], u)), blocked, candidate.symbols,
                     disable_all_config)
    cand_map = alignment.sk_map.filter((pl.col("side") == "candidate") & pl.col("uid").is_not_null())
    launches = sides[1].occurrences.join(cand_map.select(*SK_KEYS, "uid"), on=list(SK_KEYS)).group_by("uid").agg(
        pl.len().alias("launches"))
    repair["explained"] = explained_fraction(sks, slower, children_rows, launches)
    cov = coverage(sides[1].occurrences, sides[0].occurrences, alignment, sks, warmup)
    repair = mark_repair(repair, cov)
    flagged = sks.get_column("class").is_in([SLOWER, FASTER])
    counts = {c: int((sks.get_column("class") == c).sum()) for c in (SLOWER, FASTER, NEUTRAL, INSUFFICIENT)}
    unmapped = alignment.sk_map.filter(~pl.col("map_status").is_in(["ok", "no_events"]) & pl.col("device_id").is_not_null())
    return {
        "schema_version": SCHEMA_VERSION,
        "warmup": warmup,
        "contract": contract,
        "baseline": _side_json(sides[0]),
        "candidate": _side_json(sides[1]),
        "thresholds": {"min_occurrences": MIN_OCCURRENCES, "min_noise_band_pct": MIN_NOISE_BAND_PCT,
                       "abs_floor_us": ABS_FLOOR_US, "three_sample_tail": "max(3*MAD, 3% of P50, 1 us)",
                       "criterion": "P50 of SK wall time (envelope over cores)"},
        "summary": {"diagnosis": cov["diagnosis"], "compared_time_share": cov["time_share"],
                    "compared_sk_share": cov["sk_share"], "classes": counts, "sks": sks.height,
                    "expected_false_discoveries": expected_false_discoveries(sks["mwu_q"], flagged),
                    "significantly_slower_uids": slower_any_rank, "deciding_slower_uids": slower},
        "alignment": {"rule": ALIGNMENT_RULE, "graph_pairs": list(alignment.graphs)},
        "coverage": cov,
        "ranks": across_ranks_json(sks),
        "sks": [_sk_json(r) for r in sks.to_dicts()],
        "unmapped_launches": unmapped.select("side", *SK_KEYS, "model_dir", "map_status").to_dicts(),
        "children": [
            {"uid": uid, "attribution": "blocked" if blocked[uid] else "complete", "blockers": blocked[uid],
             "rows": [_child_json(r) for r in children_rows.filter(pl.col("uid") == uid).to_dicts()]}
            for uid in slower
        ],
        "repair": repair,
        "options": {"disable": DISABLE, "before": BEFORE, "after": AFTER},
        "note": text("dcci.note", "en"),
        "note_zh": text("dcci.note", "zh"),
    }
