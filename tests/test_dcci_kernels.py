"""The array kernels of the child placement: the bucketed launch search and the dense-grid envelopes."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings, strategies as st

from sk_analytics.dcci.kernels import GridEnvelopes, LaunchIndex, grid_envelopes


def _starts(draw_gaps: list[int]) -> np.ndarray:
    return np.concatenate(([0], np.cumsum(np.asarray(draw_gaps, dtype=np.int64))))


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 5_000), min_size=0, max_size=60),
    st.lists(st.integers(0, 400_000), min_size=1, max_size=200),
    st.sampled_from([1, 4, 64, 1 << 16]),
)
def test_rows_is_the_last_start_at_or_before_each_key(gaps: list[int], keys: list[int], max_buckets: int) -> None:
    """Whatever the spacing of the starts (crowded buckets included) and the table size."""
    starts = _starts(gaps)
    index = LaunchIndex.build(starts, max_buckets=max_buckets)
    asked = np.asarray(keys, dtype=np.int64)
    expected = np.searchsorted(starts, asked, side="right") - 1
    assert np.array_equal(index.rows(asked), expected)
    got = pl.DataFrame({"k": asked}).select(index.rows_expr("k")).to_series().to_numpy()
    assert np.array_equal(got, expected)


def test_evenly_spaced_starts_need_no_search() -> None:
    starts = np.arange(0, 1_000_000, 1_000, dtype=np.int64)
    index = LaunchIndex.build(starts, max_buckets=1 << 16)
    assert index.crowded is None  # every bucket holds at most one start: two lookups per key
    keys = np.array([0, 999, 1_000, 1_001, 999_999, 5_000_000], dtype=np.int64)
    assert index.rows(keys).tolist() == [0, 0, 1, 1, 999, 999]


def test_clustered_starts_are_searched_in_their_crowded_buckets() -> None:
    # most launches 10 us apart, a burst of three 1 ns apart: the burst shares a bucket
    starts = np.concatenate((np.arange(0, 100_000, 10_000), [100_000, 100_001, 100_002], np.arange(110_000, 200_000, 10_000)))
    index = LaunchIndex.build(starts.astype(np.int64), max_buckets=1 << 16)
    assert index.crowded is not None and index.crowded.any()
    keys = np.array([100_000, 100_001, 100_002, 100_003, 109_999], dtype=np.int64)
    assert index.rows(keys).tolist() == [10, 11, 12, 12, 12]
    expr = pl.DataFrame({"k": keys}).select(index.rows_expr("k")).to_series().to_list()
    assert expr == [10, 11, 12, 12, 12]


def _naive(group: np.ndarray, start: np.ndarray, dur: np.ndarray) -> dict[int, tuple[int, int, int, int, int]]:
    out: dict[int, list[int]] = {}
    for g, s, d in zip(group.tolist(), start.tolist(), dur.tolist(), strict=True):
        first, last, longest, total, count = out.get(g, [s, s + d, d, 0, 0])
        out[g] = [min(first, s), max(last, s + d), max(longest, d), total + d, count + 1]
    return {g: tuple(v) for g, v in out.items()}  # type: ignore[misc]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 10**12), st.integers(0, 10**6)), min_size=1, max_size=80),
       st.integers(1, 7))
def test_grid_envelopes_batched_equal_a_naive_fold(events: list[tuple[int, int, int]], batches: int) -> None:
    group, start, dur = (np.asarray(column, dtype=np.int64) for column in zip(*events, strict=True))
    grid = GridEnvelopes(31)
    for part in np.array_split(np.arange(group.size), batches):
        grid.add(group[part], start[part], dur[part])
    got = grid.envelopes()
    rows = zip(got.group.tolist(), got.start.tolist(), got.end.tolist(), got.max_dur.tolist(), got.dur_sum.tolist(),
               got.count.tolist(), strict=True)
    assert {g: rest for g, *rest in rows} == {g: list(v) for g, v in _naive(group, start, dur).items()}
    one = grid_envelopes(group, start, dur, 31)
    assert np.array_equal(one.group, got.group) and np.array_equal(one.count, got.count)


def test_empty_grid_has_no_groups() -> None:
    assert GridEnvelopes(5).envelopes().group.size == 0


@pytest.mark.parametrize("keys", [[0], [7, 7, 7]])
def test_single_start_answers_row_zero(keys: list[int]) -> None:
    index = LaunchIndex.build(np.array([0], dtype=np.int64), max_buckets=16)
    assert index.rows(np.asarray(keys, dtype=np.int64)).tolist() == [0] * len(keys)
