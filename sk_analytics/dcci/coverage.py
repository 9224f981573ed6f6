"""How much of the candidate was actually compared (issue 25): coverage per rank and overall.

A class, a repair and its "explains N %" speak only for the SKs that were
compared, i.e. put in an aligned pair with a baseline SK. One-sided SKs,
ambiguous ones, SKs of an unpaired graph dump and launches without metadata
were not. Coverage is the compared share of the candidate's post-warm-up SK
wall time and of its SK count (SKs launched after warm-up), per rank and
overall. Below :data:`PARTIAL_BELOW` of SK time compared — overall or on any
rank, since the worst rank decides — the diagnosis is ``partial``: the
summary says so first and a repair is never proposed without saying that part
of the graph was not compared. Graph dumps that could not be paired are
listed with their SK count and their share of their side's SK time on their
rank.
"""

from __future__ import annotations

from typing import Any, Final

import polars as pl

from sk_analytics.dcci.align import ALIGNED, Alignment
from sk_analytics.dcci.occurrences import SK_KEYS
from sk_analytics.messages import coded, render, text

PARTIAL_BELOW: Final = 0.90
"""Compared share of the candidate's SK time below which the diagnosis is ``partial``."""
COMPLETE: Final = "complete"
PARTIAL: Final = "partial"


def _side_time(occurrences: pl.DataFrame, alignment: Alignment, side: str, warmup: int,
               compared_uids: pl.Series) -> pl.DataFrame:
    """Per SK launched after warm-up on ``side``: rank, process, model_dir, time_us, compared.

    Sorted by SK key, so the float sums over these rows are the same from run to run (a group_by's order is not)."""
    sk_map = alignment.sk_map.filter(pl.col("side") == side).select(*SK_KEYS, "model_dir", "uid").unique(subset=list(SK_KEYS))
    ranks = (alignment.process_rank if alignment.process_rank is not None
             else pl.DataFrame(schema={"side": pl.Utf8, "process": pl.Utf8, "rank": pl.Int64}))
    return (
        occurrences.filter(pl.col("occurrence") >= warmup)
        .group_by(SK_KEYS).agg(pl.col("wall_us").sum().alias("time_us"))
        .join(sk_map, on=list(SK_KEYS), how="left")
        .join(ranks.filter(pl.col("side") == side).select("process", "rank"), on="process", how="left")
        .with_columns(pl.col("uid").is_in(compared_uids.implode()).fill_null(False).alias("compared"))
        .sort(list(SK_KEYS))
    )


def _shares(frame: pl.DataFrame) -> dict[str, Any]:
    time = float(frame.get_column("time_us").sum()) if frame.height else 0.0
    compared = float(frame.filter(pl.col("compared")).get_column("time_us").sum()) if frame.height else 0.0
    n_compared = int(frame.get_column("compared").sum()) if frame.height else 0
    return {
        "sks": frame.height, "sks_compared": n_compared, "sk_share": n_compared / frame.height if frame.height else None,
        "time_us": time, "compared_time_us": compared, "time_share": compared / time if time > 0 else None,
    }


def coverage(candidate_occ: pl.DataFrame, baseline_occ: pl.DataFrame, alignment: Alignment, sks: pl.DataFrame,
             warmup: int) -> dict[str, Any]:
    """The ``coverage`` record: overall and per-rank compared shares, the diagnosis, the unpaired dumps."""
    compared_uids = sks.filter(pl.col("align_status") == ALIGNED).get_column("uid")
    cand = _side_time(candidate_occ, alignment, "candidate", warmup, compared_uids)
    base = _side_time(baseline_occ, alignment, "baseline", warmup, compared_uids)
    per_rank = [{"rank": rank, **_shares(frame)}
                for (rank,), frame in sorted(cand.partition_by("rank", as_dict=True).items(),
                                             key=lambda kv: (kv[0][0] is None, kv[0][0] or 0))]
    overall = _shares(cand)
    lowest = [s["time_share"] for s in (overall, *per_rank)]
    diagnosis = PARTIAL if any(s is None or s < PARTIAL_BELOW for s in lowest) else COMPLETE
    return {
        "rule": (f"compared = candidate SKs in an aligned pair; shares of the candidate's post-warm-up SK wall time and "
                 f"SK count; partial when under {PARTIAL_BELOW:.0%} of SK time is compared overall or on any rank"),
        "threshold": PARTIAL_BELOW,
        "diagnosis": diagnosis,
        **overall,
        "per_rank": per_rank,
        "unpaired_graphs": _unpaired(alignment, {"baseline": base, "candidate": cand}),
    }


def _unpaired(alignment: Alignment, times: dict[str, pl.DataFrame]) -> list[dict[str, Any]]:
    """Graph dumps with no partner: rank, side, process, model_dir, SK count, time and share of the rank's side."""
    out = []
    for pair in alignment.graphs:
        for side in ("baseline", "candidate"):
            graph, other = pair[side], pair["candidate" if side == "baseline" else "baseline"]
            if graph is None or other is not None:
                continue
            frame = times[side].filter(pl.col("rank") == pair["rank"])
            time = float(frame.filter(pl.col("model_dir") == graph["model_dir"]).get_column("time_us").sum())
            total = float(frame.get_column("time_us").sum())
            out.append({"rank": pair["rank"], "side": side, "process": graph["process"], "model_dir": graph["model_dir"],
                        "sks": pair["sks"][side], "time_us": time, "time_share": time / total if total > 0 else None})
    return out


def percent(share: float | None) -> str:
    """A share as a whole percentage (``—`` when unknown)."""
    return "—" if share is None else f"{share:.0%}"


def partial_note(cov: dict[str, Any]) -> dict[str, Any]:
    """The statement that part of the candidate was not compared, as a message (``dcci.partial_note``) and its facts."""
    worst = min((r for r in cov["per_rank"] if r["time_share"] is not None), key=lambda r: r["time_share"], default=None)
    rank = coded("dcci.partial_rank", rank=worst["rank"], share=percent(worst["time_share"])) if worst and len(cov["per_rank"]) > 1 else ""
    unpaired = len(cov["unpaired_graphs"])
    return coded("dcci.partial_note", time=percent(cov["time_share"]), count=percent(cov["sk_share"]), rank=rank,
                 unpaired=coded("dcci.partial_unpaired", n=unpaired) if unpaired else "")


def mark_repair(repair: dict[str, Any], cov: dict[str, Any]) -> dict[str, Any]:
    """The repair with its coverage: the compared shares next to "explains N %", and under a partial diagnosis
    ``partial`` plus the statement (prefixed to the decision) that part of the graph was not compared."""
    explained = repair.get("explained")
    if explained is not None:
        explained["compared_time_share"] = cov["time_share"]
        explained["compared_sk_share"] = cov["sk_share"]
    out = {**repair, "partial": cov["diagnosis"] == PARTIAL}
    if out["partial"]:
        note = partial_note(cov)
        out["partial_note"] = note
        out["partial_note_en"], out["partial_note_zh"] = render(note, "en"), render(note, "zh")
        zh = out["partial_note_zh"]
        out["reason_zh"] = text("format.sentences", "zh", first=zh, second=repair["reason_zh"])
    return out
