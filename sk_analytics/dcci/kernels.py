"""Array kernels of the occurrence cut and child placement (millions of events per side).

Two operations dominate the DCCI diff on large profiles, and neither maps onto
a cheap Polars expression: placing each child event in the latest launch of
its SK that started at or before it (a search among sorted launch starts), and
aggregating the events per (launch, child node). Both run here on NumPy arrays,
vectorised, with no Python loop over rows:

* :class:`LaunchIndex` answers "row of the last sorted start <= key" through a
  bucket table: the key space is cut into power-of-two buckets about as wide as
  the usual gap between starts, so a bucket holds at most one start and the
  answer is one table lookup and one comparison. Buckets that hold two or more
  starts fall back to a binary search for their keys only; the answer is the
  same for any data, the table only makes the usual case cheap.
* :func:`grid_envelopes` aggregates by a dense integer group id (scatter
  min/max/sum/count), which is several times cheaper than a hash group-by
  when the ids are dense, as (launch row, node) ids are.

``benchmarks/bench_dcci_diff.py`` measures both against the search and hash
group-by they replaced.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

import numpy as np
import polars as pl

_INT64_MAX: Final = np.iinfo(np.int64).max
_INT64_MIN: Final = np.iinfo(np.int64).min
_GAP_QUANTILE: Final = 0.1
"""Buckets are as wide as this quantile of the gaps between starts: at most a tenth of the starts
share a bucket (and have their keys searched)."""


@dataclass(frozen=True)
class LaunchIndex:
    """Sorted starts and a bucket table over them; :meth:`rows` is ``searchsorted(starts, keys, "right") - 1``."""

    starts: np.ndarray
    shift: int
    first: np.ndarray
    """Per bucket: row of the last start at or before the bucket's first key."""
    inner: np.ndarray
    """Per bucket: the one start strictly inside it, or int64 max (none, or several)."""
    crowded: np.ndarray | None
    """Per bucket: two or more starts strictly inside it (its keys are searched); None when no bucket is."""

    @classmethod
    def build(cls, starts: np.ndarray, *, max_buckets: int) -> LaunchIndex:
        """Index of ``starts`` (sorted, non-negative int64, first <= every key to be asked) with at most
        about ``max_buckets`` buckets."""
        starts = np.ascontiguousarray(starts, dtype=np.int64)
        top = int(starts[-1]) + 1
        gaps = np.diff(starts)
        gaps = gaps[gaps > 0]
        typical_gap = int(np.quantile(gaps, _GAP_QUANTILE)) if gaps.size else top
        shift = max(typical_gap.bit_length() - 1, (top // max(max_buckets, 1)).bit_length(), 0)
        edges = np.arange((top >> shift) + 1, dtype=np.int64) << shift
        first = np.searchsorted(starts, edges, side="right") - 1
        last = np.searchsorted(starts, edges + ((1 << shift) - 1), side="right") - 1
        inside = last - first
        inner = np.where(inside == 1, starts[np.minimum(first + 1, starts.size - 1)], _INT64_MAX)
        crowded = inside > 1
        return cls(starts, shift, first.astype(np.int32), inner, crowded if crowded.any() else None)

    def rows_expr(self, key: str) -> pl.Expr:
        """:meth:`rows` of the Int64 column ``key`` as a Polars expression: two table lookups per key, which
        Polars runs in parallel batches without the GIL; while some bucket is crowded, :meth:`rows` itself
        as a batch function."""
        keys = pl.col(key)
        if self.crowded is not None:
            return keys.map_batches(self._rows_of, return_dtype=pl.Int32, is_elementwise=True)
        bucket = (keys // (1 << self.shift)).clip(upper_bound=self.first.size - 1)
        after_inner = (pl.lit(pl.Series(self.inner)).gather(bucket) <= keys).cast(pl.Int32)
        return pl.lit(pl.Series(self.first)).gather(bucket) + after_inner

    def _rows_of(self, keys: pl.Series) -> pl.Series:
        return pl.Series(self.rows(keys.to_numpy()))

    def rows(self, keys: np.ndarray) -> np.ndarray:
        """Int32 row of the last start <= each key (keys >= the first start; larger keys use the last bucket)."""
        bucket = np.right_shift(keys, self.shift)
        np.minimum(bucket, self.first.size - 1, out=bucket)
        rows = np.take(self.first, bucket)
        rows += np.take(self.inner, bucket) <= keys
        if self.crowded is not None:
            searched = np.flatnonzero(np.take(self.crowded, bucket))
            rows[searched] = np.searchsorted(self.starts, keys[searched], side="right") - 1
        found: np.ndarray = rows
        return found


@dataclass(frozen=True)
class Envelopes:
    """Per non-empty group of a dense id grid: its id and the envelope of its events."""

    group: np.ndarray
    start: np.ndarray
    end: np.ndarray
    max_dur: np.ndarray
    dur_sum: np.ndarray
    count: np.ndarray


class GridEnvelopes:
    """Accumulates, batch by batch, the earliest start, latest end, longest and summed duration and event
    count per group id in ``[0, size)`` (scatter min/max/sum: no sort, no hash)."""

    def __init__(self, size: int) -> None:
        self.count = np.zeros(size, dtype=np.int64)
        self.first = np.full(size, _INT64_MAX)
        self.last = np.full(size, _INT64_MIN)
        self.longest = np.full(size, _INT64_MIN)
        self.total = np.zeros(size, dtype=np.int64)

    def add(self, group: np.ndarray, start: np.ndarray, dur: np.ndarray) -> None:
        """Fold one batch of events (group ids, starts, durations) in."""
        np.add.at(self.count, group, 1)
        np.minimum.at(self.first, group, start)
        np.maximum.at(self.last, group, start + dur)
        np.maximum.at(self.longest, group, dur)
        np.add.at(self.total, group, dur)

    def envelopes(self) -> Envelopes:
        """The non-empty groups."""
        used = np.flatnonzero(self.count)
        return Envelopes(used, self.first[used], self.last[used], self.longest[used], self.total[used], self.count[used])


def grid_envelopes(group: np.ndarray, start: np.ndarray, dur: np.ndarray, size: int) -> Envelopes:
    """:class:`GridEnvelopes` of one batch."""
    grid = GridEnvelopes(size)
    grid.add(group, start, dur)
    return grid.envelopes()
