"""SK occurrences, envelopes, max-lane and completeness from sk_events frames."""

from __future__ import annotations

import polars as pl
import pytest
from dcci_frames import launch, sk_events
from hypothesis import given, settings, strategies as st

from sk_analytics.dcci.occurrences import child_timings, occurrence_completeness, sk_occurrences


def _derive(rows: list[dict]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(occurrences with the full ``complete`` flag, child timings), sorted."""
    events = sk_events(rows)
    occ = sk_occurrences(events)
    ch = child_timings(events.lazy(), occ)
    occ = occ.join(occurrence_completeness(occ, ch), on=["process", "device_id", "model_id", "sk_id", "occurrence"])
    return occ.sort("process", "sk_id", "occurrence"), ch.sort("process", "sk_id", "occurrence", "node_id")


def _two_launches() -> list[dict]:
    first = launch(t0=1_000, sk_dur=500, children=[(0, 10, 100), (1, 120, 300)])
    # core 1 of the first launch starts its span 20 ns late and child 1 runs 50 ns longer there
    first[3]["ts_ns"] += 20
    first[5]["dur_ns"] += 50
    second = launch(t0=9_000, sk_dur=600, children=[(0, 10, 100), (1, 120, 400)])
    return first + second


def test_occurrence_wall_is_span_envelope_over_cores() -> None:
    occ, _ = _derive(_two_launches())
    assert occ["occurrence"].to_list() == [0, 1]
    assert occ["start_ns"].to_list() == [1_000, 9_000]
    # core 0 [1000, 1500], core 1 [1020, 1520] -> envelope 520 ns
    assert occ["wall_us"].to_list() == pytest.approx([0.52, 0.6])
    assert occ["lane_sum_us"].to_list() == pytest.approx([1.0, 1.2])  # duration sum: diagnostic only
    assert occ["complete"].to_list() == [True, True]


def test_child_wall_span_and_max_lane() -> None:
    _, ch = _derive(_two_launches())
    first = ch.filter(pl.col("occurrence") == 0)
    # child 1: core 0 [1120, 1420], core 1 [1120, 1470] -> wall 350 ns, max-lane 350 ns, sum 650 ns
    row = first.filter(pl.col("node_id") == 1).to_dicts()[0]
    assert (row["wall_us"], row["max_lane_us"], row["lane_sum_us"], row["events"]) == pytest.approx((0.35, 0.35, 0.65, 2))
    assert ch.filter(pl.col("occurrence") == 1)["wall_us"].to_list() == pytest.approx([0.1, 0.4])


def test_file_order_does_not_matter() -> None:
    rows = _two_launches()
    shuffled = rows[::-1][1::2] + rows[::-1][0::2]
    assert [f.to_dicts() for f in _derive(shuffled)] == [f.to_dicts() for f in _derive(rows)]


def test_interleaved_sks_and_processes_are_separate() -> None:
    rows = (
        launch(t0=0, sk_dur=100, children=[(0, 0, 50)], sk_id=1)
        + launch(t0=50, sk_dur=100, children=[(0, 0, 50)], sk_id=2)  # overlaps SK 1 in time
        + launch(t0=200, sk_dur=100, children=[(0, 0, 50)], sk_id=1)
        + launch(t0=0, sk_dur=70, children=[(0, 0, 50)], sk_id=1, process="200")
    )
    occ, _ = _derive(rows)
    counts = occ.group_by("process", "sk_id").len().sort("process", "sk_id").rows()
    assert counts == [("100", 1, 2), ("100", 2, 1), ("200", 1, 1)]


def test_missing_lane_marks_only_that_occurrence_incomplete() -> None:
    rows = launch(t0=0, sk_dur=100, children=[(0, 0, 50)]) + launch(t0=1_000, sk_dur=100, children=[(0, 0, 50)])
    # drop core 1 (block 1/2) events of the second launch, as a full buffer would
    rows = [r for r in rows if not (r["ts_ns"] >= 1_000 and r["core"] == 1)]
    occ, ch = _derive(rows)
    assert occ["complete"].to_list() == [True, False]
    assert ch["complete"].to_list() == [True, False]


def test_missing_child_event_on_one_core_is_incomplete() -> None:
    rows = launch(t0=0, sk_dur=100, children=[(0, 0, 50), (1, 50, 40)])
    rows += launch(t0=1_000, sk_dur=100, children=[(0, 0, 50), (1, 50, 40)])
    rows = [r for r in rows if not (r["ts_ns"] >= 1_000 and r["core"] == 1 and r.get("node_id") == 1)]
    occ, ch = _derive(rows)
    assert occ["complete"].to_list() == [True, False]
    assert ch.filter(pl.col("node_id") == 1)["complete"].to_list() == [True, False]


def test_missing_child_unit_is_incomplete() -> None:
    rows = launch(t0=0, sk_dur=100, children=[(0, 0, 50), (1, 50, 40)])
    rows += launch(t0=1_000, sk_dur=100, children=[(0, 0, 50)])
    occ, _ = _derive(rows)
    assert occ["complete"].to_list() == [True, False]


def test_child_events_before_any_occurrence_or_of_other_sks_are_dropped() -> None:
    rows = launch(t0=1_000, sk_dur=100, children=[(0, 0, 50)], sk_id=1)
    rows.append(dict(node_id=0, ts_ns=10, dur_ns=5, sk_id=1, core=0))  # before the first launch of SK 1
    rows.append(dict(node_id=0, ts_ns=1_010, dur_ns=5, sk_id=9, core=0))  # an SK without span events
    _, ch = _derive(rows)
    assert ch.select("sk_id", "occurrence", "node_id", "events").rows() == [(1, 0, 0, 2)]


def test_child_timings_of_a_subset_of_sks() -> None:
    rows = launch(t0=0, sk_dur=100, children=[(0, 0, 50)], sk_id=1) + launch(t0=0, sk_dur=100, children=[(0, 0, 60)], sk_id=2)
    events = sk_events(rows)
    occ = sk_occurrences(events)
    ch = child_timings(events, occ.filter(pl.col("sk_id") == 2))
    assert ch.select("sk_id", "max_lane_us").rows() == [(2, 0.06)]


def test_children_late_in_the_last_launch_stay_with_their_sk() -> None:
    # starts span 0..1000 (1001 ns): a child 1100 ns after t0 must not spill into the next SK's key band
    rows = (
        launch(t0=0, sk_dur=500, children=[(0, 0, 50)], sk_id=1)
        + launch(t0=1_000, sk_dur=500, children=[(0, 100, 50)], sk_id=1)
        + launch(t0=0, sk_dur=300, children=[(0, 0, 50)], sk_id=2)
    )
    _, ch = _derive(rows)
    assert ch.select("sk_id", "occurrence", "start_ns").rows() == [(1, 0, 0), (1, 1, 1_100), (2, 0, 0)]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 3), st.integers(0, 50), st.integers(1, 30), st.integers(0, 40)), min_size=1, max_size=12))
def test_child_assignment_matches_a_naive_reference(spec: list[tuple[int, int, int, int]]) -> None:
    """Random launches (sk, slot, span length, child offset): every child lands in the latest
    launch of its SK that started at or before it, whatever the other SKs do."""
    rows, expected = [], {}
    slots: dict[int, set[int]] = {}
    for sk, slot, length, child_off in spec:
        if slot in slots.setdefault(sk, set()):
            continue
        slots[sk].add(slot)
        t0 = slot * 100  # launches of one SK never overlap (length <= 30 < 100)
        rows += launch(t0=t0, sk_dur=length, children=[(0, min(child_off, length), 1)], sk_id=sk, cores=(0,))
    for sk, starts in slots.items():
        for k, slot in enumerate(sorted(starts)):
            expected[(sk, k)] = slot * 100
    _, ch = _derive(rows)
    got = {(r["sk_id"], r["occurrence"]): r["start_ns"] - (r["start_ns"] % 100) for r in ch.to_dicts()}
    assert got == expected


def test_derived_frames_have_exactly_the_schema_table_columns_and_dtypes() -> None:
    from sk_analytics.schema import SK_CHILDREN, SK_OCCURRENCES

    rows = launch(t0=0, sk_dur=100, children=[(0, 0, 50)]) + launch(t0=1_000, sk_dur=100, children=[(0, 0, 50)])
    events = sk_events(rows)
    occ = sk_occurrences(events)
    ch = child_timings(events, occ)
    assert occ.schema == SK_OCCURRENCES.schema
    assert ch.schema == SK_CHILDREN.schema
    assert child_timings(events, occ.clear()).schema == SK_CHILDREN.schema


def test_child_timings_keeps_an_sk_whose_key_has_a_null() -> None:
    # a frame not built by the parser may lack model ids: such an SK is still one SK (keys match null to null)
    rows = launch(t0=0, sk_dur=100, children=[(0, 0, 50)]) + launch(t0=1_000, sk_dur=100, children=[(0, 0, 60)])
    events = sk_events(rows).with_columns(pl.lit(None, dtype=pl.Utf8).alias("model_id"))
    ch = child_timings(events, sk_occurrences(events)).sort("occurrence")
    assert ch.select("occurrence", "node_id", "max_lane_us", "events").rows() == [(0, 0, 0.05, 2), (1, 0, 0.06, 2)]


def _reference_children(events: pl.DataFrame, occ: pl.DataFrame) -> pl.DataFrame:
    """Child timings the slow, obvious way: an as-of join of every child event on its SK's launch starts."""
    keys = ["process", "device_id", "model_id", "sk_id"]
    starts = occ.select(*keys, "occurrence", pl.col("start_ns").alias("ts_ns")).sort("ts_ns")
    children = events.filter(~pl.col("is_span")).select(*keys, "node_id", "ts_ns", "dur_ns").sort("ts_ns")
    placed = children.join_asof(starts, on="ts_ns", by=keys, strategy="backward", check_sortedness=False).drop_nulls("occurrence")
    return placed.group_by(*keys, "occurrence", "node_id").agg(
        pl.col("ts_ns").min().alias("start_ns"),
        (pl.col("ts_ns") + pl.col("dur_ns")).max().alias("end_ns"),
        pl.col("dur_ns").max().alias("max_dur"),
        pl.col("dur_ns").sum().alias("dur_sum"),
        pl.len().alias("events"),
    ).sort(*keys, "occurrence", "node_id")


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([("100", "1_0"), ("100", "2_0"), ("200", "1_0")]), st.integers(1, 4),
                  st.integers(0, 400), st.integers(1, 9), st.lists(st.tuples(st.integers(0, 5), st.integers(0, 12),
                                                                            st.integers(0, 6)), min_size=1, max_size=4)),
        min_size=1, max_size=16,
    ),
    st.integers(-50, 5_000),
)
def test_child_timings_match_an_as_of_join(launches: list, stray_ts: int) -> None:
    """Random launches of SKs in several contexts, launch starts from 1 ns to far apart (crowded and sparse
    buckets), node ids with gaps, and a stray child event anywhere: the same cells as an as-of join."""
    rows, taken = [], set()
    for (process, model), sk, slot, length, children in launches:
        if (process, model, sk, slot) in taken:
            continue
        taken.add((process, model, sk, slot))
        t0 = slot * 25 if slot % 3 else slot * 40_000  # launches of one SK never overlap (length + child <= 21 < 25)
        rows += launch(t0=t0, sk_dur=length, children=[(n, off % (length + 1), d) for n, off, d in children],
                       sk_id=sk, model_id=model, process=process)
    rows.append(dict(node_id=2, ts_ns=max(stray_ts, 0), dur_ns=3, sk_id=1, core=0))
    events = sk_events(rows)
    occ = sk_occurrences(events)
    got = child_timings(events, occ).sort("process", "device_id", "model_id", "sk_id", "occurrence", "node_id")
    want = _reference_children(events, occ)
    assert got.select("process", "sk_id", "occurrence", "node_id", "start_ns", "end_ns", "events").rows() == \
        want.select("process", "sk_id", "occurrence", "node_id", "start_ns", "end_ns", "events").rows()
    assert got["max_lane_us"].to_list() == pytest.approx((want["max_dur"] / 1000.0).to_list())
    assert got["lane_sum_us"].to_list() == pytest.approx((want["dur_sum"] / 1000.0).to_list())


def test_one_sk_with_wide_node_ids_gets_its_own_grid_width() -> None:
    # SK 1: 300 launches of node 0 only; SK 2: one launch with node ids 0 and 20000. A common width of 20001
    # cells per launch would be far larger than the events; per-SK widths keep the grid small.
    rows = [r for k in range(300) for r in launch(t0=k * 1_000, sk_dur=100, children=[(0, 0, 50)], sk_id=1, cores=(0,))]
    rows += launch(t0=0, sk_dur=900, children=[(0, 0, 10), (20_000, 100, 20)], sk_id=2, cores=(0,))
    events = sk_events(rows)
    ch = child_timings(events, sk_occurrences(events))
    assert ch.filter(pl.col("sk_id") == 2).select("node_id", "max_lane_us").rows() == [(0, 0.01), (20_000, 0.02)]
    assert ch.filter(pl.col("sk_id") == 1).height == 300


def test_node_ids_that_are_not_task_list_indices_are_refused() -> None:
    from sk_analytics.errors import InputError

    rows = [r for k in range(100) for r in launch(t0=k * 1_000, sk_dur=100, children=[(0, 0, 50), (10**12, 60, 5)], cores=(0,))]
    events = sk_events(rows)
    with pytest.raises(InputError, match="node ids"):
        child_timings(events, sk_occurrences(events))
