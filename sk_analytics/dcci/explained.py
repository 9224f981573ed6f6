"""How much of the regression the repair's children explain (issue: a repair proposed when most slower
SKs have no significant child would mislead).

* **SKs**: a significantly slower SK is explained when at least one of its
  children is significant (the repair's tokens are exactly the union of those
  children's ops).
* **Slowdown per step**: an SK's slowdown is its ΔP50 (µs) times its launches
  per step; a graph run several times per step counts that often. Launches per
  step = the SK's post-warm-up candidate occurrences / the steps, and the steps
  are the most common post-warm-up occurrence count over the candidate's SKs
  (most SKs launch once per step; ties take the smaller). The explained part of
  an SK is the sum of its significant children's wall ΔP50, at most the SK's
  ΔP50, times the same launches per step.

Under half on either count is a warning (the repair may be the smaller part of
the story): the JSON and the report say so.
"""

from __future__ import annotations

from typing import Any, Final

import polars as pl

from sk_analytics.messages import text

WARN_BELOW: Final = 0.5


def explained_fraction(sks: pl.DataFrame, slower: list[int], children_rows: pl.DataFrame,
                       launches: pl.DataFrame) -> dict[str, Any]:
    """The ``repair.explained`` record. ``sks``: uid, delta_p50_us of every SK; ``children_rows``: uid,
    significant, wall_delta_p50_us of the decomposed slower SKs; ``launches``: uid, launches (every candidate
    occurrence of the SK)."""
    counts = launches.get_column("launches")
    steps = None
    if counts.len():
        modes = counts.value_counts(sort=True)
        top = modes.get_column("count").max()
        # Series.min() is typed as any Python literal or None; launches is a non-empty integer column here
        steps = int(modes.filter(pl.col("count") == top).get_column("launches").min())  # type: ignore[arg-type]
    child_delta = (
        children_rows.filter(pl.col("significant"))
        .group_by("uid").agg(pl.col("wall_delta_p50_us").clip(lower_bound=0).sum().alias("_child_us"))
        if children_rows.height else pl.DataFrame(schema={"uid": pl.Int32, "_child_us": pl.Float64})
    )
    rows = (
        sks.filter(pl.col("uid").is_in(slower))
        .join(child_delta.with_columns(pl.col("uid").cast(sks.schema["uid"])), on="uid", how="left")
        .join(launches.with_columns(pl.col("uid").cast(sks.schema["uid"])), on="uid", how="left")
        .with_columns(
            (pl.col("launches").fill_null(0) / (steps or 1)).alias("launches_per_step"),
            pl.col("_child_us").is_not_null().alias("explained"),
        )
        .with_columns(
            (pl.col("delta_p50_us") * pl.col("launches_per_step")).alias("slowdown_us_per_step"),
            (pl.min_horizontal(pl.col("_child_us").fill_null(0.0), pl.col("delta_p50_us")) * pl.col("launches_per_step"))
            .alias("explained_us_per_step"),
        )
        .sort("uid")
    )
    total = float(rows.get_column("slowdown_us_per_step").sum()) if rows.height else 0.0
    covered = float(rows.get_column("explained_us_per_step").sum()) if rows.height else 0.0
    explained_sks = int(rows.get_column("explained").sum()) if rows.height else 0
    sk_fraction = explained_sks / len(slower) if slower else None
    us_fraction = covered / total if total > 0 else None
    warn = bool(slower) and ((sk_fraction or 0.0) < WARN_BELOW or (us_fraction or 0.0) < WARN_BELOW)
    out: dict[str, Any] = {
        "slower_sks": len(slower),
        "explained_sks": explained_sks,
        "sk_fraction": sk_fraction,
        "steps": steps,
        "slowdown_us_per_step": total,
        "explained_us_per_step": covered,
        "us_fraction": us_fraction,
        "per_sk": rows.select("uid", "launches_per_step", "slowdown_us_per_step", "explained_us_per_step", "explained")
        .to_dicts(),
        "warning": warn,
    }
    if warn:
        facts = {"explained": explained_sks, "slower": len(slower), "covered": covered, "total": total}
        out["warning_en"], out["warning_zh"] = text("dcci.explained_warning", "en", **facts), text("dcci.explained_warning", "zh", **facts)
    return out
