"""SK occurrences and child-per-occurrence timings from ``sk_events`` (formats.md §3).

* An occurrence is one launch of an SK: consecutive launches of the same
  (process, device, modelId, skId) are separate occurrences. Events of one
  launch overlap in time, launches of the same SK do not, so an occurrence
  starts at an event that begins after every earlier event of that SK ended
  (the file order is by poll and core, never trusted).
* Occurrence wall time = envelope (earliest start to latest end) of the SK
  span events over all cores; the sum of span durations is kept only as a
  lane-workload diagnostic.
* Child wall span = envelope over cores of the child's events in that
  occurrence; max-lane = its longest single-core duration.
* An occurrence is *complete* when every (child or span, lane) unit that the SK
  shows in any occurrence has all its ``[i/n]`` blocks; a full per-core buffer
  or a truncated file leaves later occurrences incomplete.

Everything is one lazy pipeline: a single sort, window expressions and group-bys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import polars as pl

SK_KEYS: Final = ("process", "device_id", "model_id", "sk_id")
"""Identity of one launched SK inside one process (never compared across processes)."""

_SPAN_NODE: Final = -1


@dataclass(frozen=True)
class OccurrenceFrames:
    """Lazy results of :func:`derive`: one row per SK occurrence / per child per occurrence."""

    occurrences: pl.LazyFrame
    children: pl.LazyFrame


def tag_occurrences(events: pl.LazyFrame) -> pl.LazyFrame:
    """Add ``end_ns``, ``unit`` (node id, -1 for the span) and the 0-based ``occurrence`` per SK."""
    keys = list(SK_KEYS)
    end = pl.col("ts_ns") + pl.col("dur_ns")
    return (
        events.select(*keys, "ts_ns", "dur_ns", "node_id", "lane", "block_idx", "block_num", "is_span")
        .sort([*keys, "ts_ns"])
        .with_columns(end.alias("end_ns"), pl.col("node_id").fill_null(_SPAN_NODE).alias("unit"))
        .with_columns(
            (pl.col("ts_ns") > pl.col("end_ns").cum_max().shift(1).over(keys))
            .fill_null(True)
            .cum_sum()
            .over(keys)
            .cast(pl.Int32)
            .sub(1)
            .alias("occurrence")
        )
    )


def _completeness(tagged: pl.LazyFrame) -> pl.LazyFrame:
    """Per occurrence and unit: ``unit_complete``; per occurrence: ``complete``."""
    keys = list(SK_KEYS)
    units = tagged.group_by([*keys, "occurrence", "unit", "lane"]).agg(
        (pl.col("block_idx").n_unique() >= pl.col("block_num").max()).alias("_full")
    )
    expected = units.group_by(keys).agg(pl.struct("unit", "lane").n_unique().alias("_expected"))
    per_occurrence = (
        units.group_by([*keys, "occurrence"])
        .agg(pl.col("_full").sum().alias("_full_units"))
        .join(expected, on=keys, how="left")
        .select(*keys, "occurrence", (pl.col("_full_units") == pl.col("_expected")).alias("complete"))
    )
    return per_occurrence


def derive(events: pl.LazyFrame) -> OccurrenceFrames:
    """SK occurrences and child timings of an ``sk_events`` frame that has a ``process`` column.

    Times stay integer ns for envelopes; durations are reported in µs (Float64).
    """
    keys = list(SK_KEYS)
    tagged = tag_occurrences(events)
    complete = _completeness(tagged)
    envelope = [
        pl.col("ts_ns").min().alias("start_ns"),
        pl.col("end_ns").max().alias("end_ns"),
        pl.len().cast(pl.Int32).alias("events"),
        (pl.col("dur_ns").sum() / 1000.0).alias("lane_sum_us"),
    ]
    wall = ((pl.col("end_ns") - pl.col("start_ns")) / 1000.0).alias("wall_us")
    occurrences = (
        tagged.filter(pl.col("is_span"))
        .group_by([*keys, "occurrence"])
        .agg(envelope)
        .with_columns(wall)
        .join(complete, on=[*keys, "occurrence"], how="left")
    )
    children = (
        tagged.filter(~pl.col("is_span"))
        .group_by([*keys, "occurrence", "node_id"])
        .agg(*envelope, (pl.col("dur_ns").max() / 1000.0).alias("max_lane_us"))
        .with_columns(wall)
        .join(complete, on=[*keys, "occurrence"], how="left")
    )
    return OccurrenceFrames(occurrences=occurrences, children=children)
