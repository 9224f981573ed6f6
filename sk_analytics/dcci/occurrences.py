"""SK occurrences and child-per-occurrence timings from ``sk_events`` (formats.md §3).

* An occurrence is one launch of an SK: consecutive launches of the same
  (process, device, modelId, skId) are separate occurrences. The span events
  of one launch (one per participating core) overlap in time, launches of the
  same SK do not, so an occurrence starts at a span event that begins after
  every earlier span event of that SK ended. File order is never trusted.
* Occurrence wall time = envelope (earliest start to latest end) of the SK
  span events over all cores; the sum of span durations is kept only as a
  lane-workload diagnostic.
* A child event belongs to the latest occurrence of its SK that started at or
  before it. Child wall span = envelope over cores of the child's events in
  that occurrence; max-lane = its longest single-core duration.
* Completeness: a (span or child) unit of an occurrence is complete when it
  has as many core events as the most any occurrence of that SK has for that
  unit; a full per-core buffer or a truncated file leaves later occurrences
  short.

Hot path (millions of child events): only the span events are sorted; child
events get their SK ordinal by an exact join on the SK keys (with the small
ordinal table), are assigned with one binary search over the sorted occurrence
starts (a composite integer key = SK ordinal and start time; a sentinel start
opens each SK's band and collects the events before its first launch), searched
batch by batch in parallel, and aggregated with one hash group-by on two
integer keys (occurrence row, node). No Python loop touches rows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

import polars as pl

from sk_analytics.errors import InputError
from sk_analytics.schema import SK_CHILDREN, SK_OCCURRENCES

SK_KEYS: Final = ("process", "device_id", "model_id", "sk_id")
"""Identity of one launched SK inside one process (never compared across processes)."""

EVENT_COLUMNS: Final = (*SK_KEYS, "ts_ns", "dur_ns", "node_id", "is_span")
"""The sk_events columns this module reads."""

_TIME_BITS_LIMIT: Final = 62


def _key_hash() -> pl.Expr:
    return pl.struct(list(SK_KEYS)).hash(seed=0).alias("_sk")


def sk_occurrences_plan(events: pl.LazyFrame | pl.DataFrame) -> pl.LazyFrame:
    """Lazy plan of :func:`sk_occurrences` (collect several sides together with ``pl.collect_all``).

    The SK keys are folded into one 64-bit hash for the windows; the span
    events are sorted by start time only.
    """
    keys = list(SK_KEYS)
    spans = (
        events.lazy()
        .filter(pl.col("is_span"))
        .select(*keys, "ts_ns", "dur_ns", _key_hash())
        .sort("ts_ns")  # one integer sort key; the windows below keep this order inside each SK
        .with_columns((pl.col("ts_ns") + pl.col("dur_ns")).alias("end_ns"))
        .with_columns(
            (pl.col("ts_ns") > pl.col("end_ns").cum_max().shift(1).over("_sk"))
            .fill_null(True)
            .cum_sum()
            .over("_sk")
            .cast(pl.Int32)
            .sub(1)
            .alias("occurrence")
        )
    )
    return (
        spans.group_by("_sk", "occurrence")
        .agg(
            pl.col(keys).first(),
            pl.col("ts_ns").min().alias("start_ns"),
            pl.col("end_ns").max(),
            pl.len().cast(pl.Int32).alias("events"),
            (pl.col("dur_ns").sum() / 1000.0).alias("lane_sum_us"),
        )
        .with_columns(
            ((pl.col("end_ns") - pl.col("start_ns")) / 1000.0).alias("wall_us"),
            (pl.col("events") == pl.col("events").max().over("_sk")).alias("span_complete"),
        )
        .select(SK_OCCURRENCES.column_names)
        .sort([*keys, "occurrence"])
    )


def sk_occurrences(events: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """One row per SK occurrence from the span events: the ``sk_occurrences`` table (schema.SK_OCCURRENCES)."""
    return sk_occurrences_plan(events).collect()


def child_timings(events: pl.LazyFrame | pl.DataFrame, occurrences: pl.DataFrame) -> pl.LazyFrame:
    """One row per (SK occurrence, child node): the ``sk_children`` table (schema.SK_CHILDREN).

    ``occurrences`` is :func:`sk_occurrences` of the same events (or a subset of
    its SKs: children of other SKs are dropped). Child events that precede every
    occurrence of their SK are dropped as unattributable.
    """
    keys = list(SK_KEYS)
    ordinals = occurrences.select(keys).unique(maintain_order=True).with_row_index("_g")
    if ordinals.height == 0:
        return _empty_children()
    # Key band of one SK: ordinal << bits | (1 + offset from t0), the offset clamped into the band. Each band
    # opens with a sentinel start at 0, so a child before every launch of its SK finds that sentinel (and is
    # dropped with it), never a start of another SK's band.
    t0 = int(occurrences.get_column("start_ns").min())  # type: ignore[arg-type]
    span = int(occurrences.get_column("end_ns").max()) - t0 + 2  # type: ignore[operator]
    bits = max(span.bit_length(), 1)
    if bits + ordinals.height.bit_length() > _TIME_BITS_LIMIT:
        raise InputError(None, f"sk_prof time range of {span} ns over {ordinals.height} SKs is too large to index",
                         expected="a profile window shorter than a few days")
    band = pl.col("_g").cast(pl.Int64) * (1 << bits)
    composite = band + (pl.col("ts_ns") - t0 + 1).clip(0, (1 << bits) - 1)
    launches = occurrences.select(*keys, "occurrence", pl.col("start_ns").alias("ts_ns")).join(
        ordinals, on=keys, nulls_equal=True
    )
    starts = (
        pl.concat(
            [
                launches.select(*keys, "occurrence", composite.alias("_c")),
                ordinals.select(*keys, pl.lit(None, dtype=pl.Int32).alias("occurrence"), band.alias("_c")),
            ]
        )
        .sort("_c")
        .with_row_index("_row")
    )
    lookup = starts.filter(pl.col("occurrence").is_not_null()).select("_row", *keys, "occurrence")
    per_child = (
        events.lazy()
        .filter(~pl.col("is_span") & pl.col("sk_id").is_in(ordinals.get_column("sk_id").unique().implode()))
        .select(*keys, "node_id", "ts_ns", "dur_ns")
        .join(ordinals.lazy(), on=keys, how="inner", nulls_equal=True)  # exact SK identity; other SKs drop out
        .with_columns(
            composite.map_batches(_start_row(starts.get_column("_c")), return_dtype=pl.UInt32, is_elementwise=True)
            .alias("_row")
        )
        .group_by("_row", "node_id")
        .agg(
            pl.col("ts_ns").min().alias("start_ns"),
            (pl.col("ts_ns") + pl.col("dur_ns")).max().alias("end_ns"),
            (pl.col("dur_ns").max() / 1000.0).alias("max_lane_us"),
            (pl.col("dur_ns").sum() / 1000.0).alias("lane_sum_us"),
            pl.len().cast(pl.Int32).alias("events"),
        )
        .join(lookup.lazy(), on="_row", how="inner")  # drops the sentinels' groups: unattributable events
    )
    return per_child.with_columns(
        ((pl.col("end_ns") - pl.col("start_ns")) / 1000.0).alias("wall_us"),
        (pl.col("events") == pl.col("events").max().over([*keys, "node_id"])).alias("complete"),
    ).select(SK_CHILDREN.column_names)


def _start_row(sorted_starts: pl.Series) -> Callable[[pl.Series], pl.Series]:
    """Per batch of composite keys: the row of the last start at or before each (a sentinel opens every band,
    so there is one). A batch function marked elementwise: the streaming engine searches its batches in
    parallel, where a search against a literal series runs once, single-threaded, over the whole column."""

    def rows(keys: pl.Series) -> pl.Series:
        return (sorted_starts.search_sorted(keys, side="right") - 1).cast(pl.UInt32)

    return rows


def _empty_children() -> pl.LazyFrame:
    return pl.LazyFrame(schema=SK_CHILDREN.schema)


def occurrence_completeness(occurrences: pl.DataFrame, children: pl.DataFrame) -> pl.DataFrame:
    """SK_KEYS, occurrence, complete: the span and every child unit have all their core
    events, and the occurrence has as many child units as the SK's fullest occurrence."""
    keys = list(SK_KEYS)
    per_occ = children.group_by([*keys, "occurrence"]).agg(
        pl.col("complete").all().alias("_children_complete"), pl.len().alias("_units")
    )
    return (
        occurrences.select(*keys, "occurrence", "span_complete")
        .join(per_occ, on=[*keys, "occurrence"], how="left")
        .with_columns(pl.col("_units").fill_null(0), pl.col("_children_complete").fill_null(True))
        .select(
            *keys,
            "occurrence",
            (
                pl.col("span_complete")
                & pl.col("_children_complete")
                & (pl.col("_units") == pl.col("_units").max().over(keys))
            ).alias("complete"),
        )
    )
