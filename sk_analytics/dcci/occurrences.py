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

Hot path (millions of child events): every event gets its SK as a small
integer (:mod:`sk_analytics.dcci.sk_ordinal`) and a composite integer key =
that SK's band + the time since the earliest launch, so one sorted array of
launch starts serves all SKs (a sentinel start opens each SK's band and
collects the events before its first launch). Only the span events are
sorted. Child events are placed by two lookups in the bucket table of
:class:`~sk_analytics.dcci.kernels.LaunchIndex`, given a dense (launch, node)
cell, and stream from Polars in batches into
:class:`~sk_analytics.dcci.kernels.GridEnvelopes`; no column of all child
events is ever held, and no Python loop touches rows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Final, TypeVar

import numpy as np
import polars as pl

from sk_analytics.dcci.kernels import GridEnvelopes, LaunchIndex
from sk_analytics.dcci.sk_ordinal import ORDINAL, with_sk_ordinal
from sk_analytics.errors import InputError
from sk_analytics.schema import SK_CHILDREN, SK_OCCURRENCES

SK_KEYS: Final = ("process", "device_id", "model_id", "sk_id")
"""Identity of one launched SK inside one process (never compared across processes)."""

EVENT_COLUMNS: Final = (*SK_KEYS, "ts_ns", "dur_ns", "node_id", "is_span")
"""The sk_events columns this module reads."""

_T = TypeVar("_T")

_TIME_BITS_LIMIT: Final = 62
_MIN_BUCKETS: Final = 1 << 16
_BUCKETS_PER_LAUNCH: Final = 16
_BATCH_ROWS: Final = 1 << 16
"""Child events per batch folded into the grid (small enough to stay in cache, large enough to amortise)."""
_GRID_SLACK: Final = 4
"""The (launch, node) grid may hold at most this many cells per child event (plus a constant) before
the node ids are rejected as not being task-list indices."""


def sk_occurrences(events: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """One row per SK occurrence from the span events: the ``sk_occurrences`` table (schema.SK_OCCURRENCES)."""
    keys = list(SK_KEYS)
    spans = events.lazy().filter(pl.col("is_span")).select(*keys, "ts_ns", "dur_ns").collect(engine="streaming")
    if spans.height == 0:
        return pl.DataFrame(schema=SK_OCCURRENCES.schema)
    table = spans.select(keys).unique(maintain_order=True)
    sk, ts, dur = _arrays(with_sk_ordinal(spans.lazy(), table, keys).select(ORDINAL, "ts_ns", "dur_ns"))
    t0 = int(ts.min())
    bits = _band_bits(int((ts + dur).max()) - t0 + 1, table.height)
    key = (sk.astype(np.int64) << bits) + (ts - t0)
    order = np.argsort(key)  # ties (spans of one launch starting together) may come in any order
    key, dur = key[order], dur[order]
    end_key = key + dur
    # a launch opens where a span starts after every earlier span of its SK ended; each band is higher than
    # every end key of the band before it, so the running maximum never carries across SKs
    ends_so_far = np.maximum.accumulate(end_key)
    heads = np.flatnonzero(np.concatenate(([True], key[1:] > ends_so_far[:-1])))
    sk_of = key[heads] >> bits
    band = sk_of << bits
    occurrence = np.arange(heads.size) - np.searchsorted(sk_of, sk_of, side="left")
    start = key[heads] - band + t0
    end = np.maximum.reduceat(end_key, heads) - band + t0
    return (
        table.select(pl.all().gather(sk_of))
        .with_columns(
            pl.Series("occurrence", occurrence, dtype=pl.Int32),
            pl.Series("start_ns", start),
            pl.Series("end_ns", end),
            pl.Series("events", np.diff(heads, append=key.size), dtype=pl.Int32),
            pl.Series("lane_sum_us", np.add.reduceat(dur, heads) / 1000.0),
            pl.Series("wall_us", (end - start) / 1000.0),
        )
        .with_columns((pl.col("events") == pl.col("events").max().over(keys)).alias("span_complete"))
        .select(SK_OCCURRENCES.column_names)
        .sort([*keys, "occurrence"])
    )


def child_timings(events: pl.LazyFrame | pl.DataFrame, occurrences: pl.DataFrame) -> pl.DataFrame:
    """One row per (SK occurrence, child node): the ``sk_children`` table (schema.SK_CHILDREN).

    ``occurrences`` is :func:`sk_occurrences` of the same events (or a subset of
    its SKs: children of other SKs are dropped). Child events that precede every
    occurrence of their SK are dropped as unattributable.
    """
    keys = list(SK_KEYS)
    table = occurrences.select(keys).unique(maintain_order=True)
    if table.height == 0:
        return pl.DataFrame(schema=SK_CHILDREN.schema)
    launches = _Launches.of(occurrences, table)
    children = with_sk_ordinal(events.lazy().filter(~pl.col("is_span")), table, keys)
    grid = _Grid.of(events.lazy(), children, launches, table.height)
    if grid is None:
        return pl.DataFrame(schema=SK_CHILDREN.schema)
    # the events stream through in batches: Polars computes the next batches while this thread folds
    # the last one into the grid, and no column of all child events is ever held
    accumulator = GridEnvelopes(grid.size)
    placed = (
        children.with_columns(launches.key().alias("_key"))
        .with_columns(launches.index.rows_expr("_key").alias("_row"))
        .select(grid.cell(), "ts_ns", "dur_ns")
    )
    for batch in placed.collect_batches(chunk_size=_BATCH_ROWS, maintain_order=False, engine="streaming"):
        accumulator.add(*(column.to_numpy() for column in batch.get_columns()))
    cells = accumulator.envelopes()
    row, node = grid.decode(cells.group, launches)
    kept = launches.occurrence[row] >= 0  # the sentinels' cells: events before every launch of their SK
    row, start, end = row[kept], cells.start[kept], cells.end[kept]
    return (
        table.select(pl.all().gather(launches.sk[row]))
        .with_columns(
            pl.Series("occurrence", launches.occurrence[row], dtype=pl.Int32),
            pl.Series("node_id", node[kept]),
            pl.Series("start_ns", start),
            pl.Series("end_ns", end),
            pl.Series("wall_us", (end - start) / 1000.0),
            pl.Series("max_lane_us", cells.max_dur[kept] / 1000.0),
            pl.Series("lane_sum_us", cells.dur_sum[kept] / 1000.0),
            pl.Series("events", cells.count[kept], dtype=pl.Int32),
        )
        .with_columns((pl.col("events") == pl.col("events").max().over([*keys, "node_id"])).alias("complete"))
        .select(SK_CHILDREN.column_names)
    )


@dataclass(frozen=True)
class _Launches:
    """Every launch of a table of SKs and one sentinel per SK, sorted by composite key (SK band, time).

    One sorted array of starts serves all SKs: each band opens with a sentinel (occurrence -1) at offset 0,
    so an event before every launch of its SK finds that sentinel (and is dropped with it), never another
    SK's launch.
    """

    t0: int
    bits: int
    sk: np.ndarray
    occurrence: np.ndarray
    index: LaunchIndex

    @classmethod
    def of(cls, occurrences: pl.DataFrame, table: pl.DataFrame) -> _Launches:
        sk, occurrence, start = _arrays(
            with_sk_ordinal(occurrences.lazy(), table, list(SK_KEYS)).select(ORDINAL, "occurrence", "start_ns")
        )
        t0 = int(start.min())
        # Series.max() is typed as any Python literal or None; end_ns is a non-empty Int64 column here
        bits = _band_bits(int(occurrences.get_column("end_ns").max()) - t0 + 2, table.height)  # type: ignore[arg-type]
        sentinels = np.arange(table.height, dtype=np.int32)
        key = np.concatenate(((sk.astype(np.int64) << bits) + (start - t0 + 1), sentinels.astype(np.int64) << bits))
        sk = np.concatenate((sk, sentinels))
        occurrence = np.concatenate((occurrence, np.full(table.height, -1, np.int32)))
        order = np.argsort(key)  # keys are unique: launches of one SK never start together
        return cls(t0, bits, sk[order], occurrence[order],
                   LaunchIndex.build(key[order], max_buckets=max(_MIN_BUCKETS, _BUCKETS_PER_LAUNCH * key.size)))

    def key(self) -> pl.Expr:
        """Composite key of an event with :data:`ORDINAL`: its SK's band + (time since t0 + 1), clamped into the band."""
        offset = (pl.col("ts_ns") - (self.t0 - 1)).clip(0, (1 << self.bits) - 1)
        return pl.col(ORDINAL).cast(pl.Int64) * (1 << self.bits) + offset


@dataclass(frozen=True)
class _Grid:
    """Dense (launch row, node) cells: each launch row owns one cell per node id from the lowest to the
    highest of all SKs, or of its own SK where one SK's wide id range would make that grid too large."""

    base: np.ndarray
    """First cell of each launch row (sorted launch order), then the total."""
    low: np.ndarray
    """Lowest node id per SK ordinal."""
    uniform: bool

    @classmethod
    def of(cls, events: pl.LazyFrame, children: pl.LazyFrame, launches: _Launches, sks: int) -> _Grid | None:
        """The grid of ``children`` (the child events of ``events`` with :data:`ORDINAL`), or None when
        ``events`` has no child event. The node id range is first taken over every child event (one cheap
        column scan), per SK only where that grid would be too large."""
        low, high, events = events.select(
            pl.col("node_id").min().alias("low"), pl.col("node_id").max().alias("high"), pl.col("node_id").count()
        ).collect(engine="streaming").row(0)
        if not events:
            return None
        grid = cls._of(np.full(sks, low, dtype=np.int64), np.full(sks, high, dtype=np.int64), launches, uniform=True)
        if grid.size > _GRID_SLACK * events + _MIN_BUCKETS:
            per_sk = children.group_by(ORDINAL).agg(pl.col("node_id").min().alias("low"), pl.col("node_id").max().alias("high"))
            ordinal, sk_low, sk_high = _arrays(per_sk)
            lows, highs = np.zeros(sks, dtype=np.int64), np.full(sks, -1, dtype=np.int64)
            lows[ordinal], highs[ordinal] = sk_low, sk_high
            grid = cls._of(lows, highs, launches, uniform=False)
        if grid.size > _GRID_SLACK * events + _MIN_BUCKETS:
            raise InputError(None, f"child node ids span {grid.size:,} (launch, node) cells for {events:,} child events",
                             expected="args.nodeId = the child's index in its SK task list (small, dense integers)")
        return grid

    @classmethod
    def _of(cls, low: np.ndarray, high: np.ndarray, launches: _Launches, *, uniform: bool) -> _Grid:
        return cls(np.concatenate(([0], np.cumsum((high - low + 1)[launches.sk]))), low, uniform)

    @property
    def size(self) -> int:
        return int(self.base[-1])

    def cell(self) -> pl.Expr:
        """Cell of an event with ``_row`` (launch row), :data:`ORDINAL` and ``node_id``."""
        low = pl.lit(int(self.low[0])) if self.uniform else pl.lit(pl.Series(self.low)).gather(pl.col(ORDINAL))
        return pl.lit(pl.Series(self.base)).gather(pl.col("_row")) + (pl.col("node_id") - low)

    def decode(self, cells: np.ndarray, launches: _Launches) -> tuple[np.ndarray, np.ndarray]:
        """Launch row and node id of each cell."""
        row = np.searchsorted(self.base, cells, side="right") - 1
        return row, cells - self.base[row] + self.low[launches.sk[row]]


def _arrays(frame: pl.LazyFrame) -> list[np.ndarray]:
    """The columns of ``frame`` collected (in parallel batches) as NumPy arrays."""
    return [column.to_numpy() for column in frame.collect(engine="streaming").get_columns()]


def map_sides(function: Callable[..., _T], *per_side: Sequence[object]) -> list[_T]:
    """``function`` over the two sides' arguments in two threads: Polars releases the GIL while a query runs,
    so one side's queries overlap the other side's NumPy work on a multi-core machine."""
    with ThreadPoolExecutor(max_workers=max(len(per_side[0]), 1)) as pool:
        return list(pool.map(function, *per_side))


def _band_bits(span: int, sks: int) -> int:
    """Bits of the time offset inside one SK's key band, checked against the 63-bit composite key."""
    bits = max(span.bit_length(), 1)
    if bits + sks.bit_length() > _TIME_BITS_LIMIT:
        raise InputError(None, f"sk_prof time range of {span} ns over {sks} SKs is too large to index",
                         expected="a profile window shorter than a few days")
    return bits


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
