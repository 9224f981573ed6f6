"""The exact SK ordinal of event rows, on every path (one context, a few, many; dense or sparse ids)."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings, strategies as st

from sk_analytics.dcci import sk_ordinal
from sk_analytics.dcci.sk_ordinal import ORDINAL, with_sk_ordinal

KEYS = ("process", "device_id", "model_id", "sk_id")


def _frame(rows: list[tuple[str, int, str | None, int]]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"process": pl.Utf8, "device_id": pl.Int32, "model_id": pl.Utf8, "sk_id": pl.Int64},
                        orient="row").with_row_index("row")


def _ordinals(events: pl.DataFrame, table: pl.DataFrame) -> dict[int, int]:
    out = with_sk_ordinal(events.lazy(), table, KEYS).select("row", ORDINAL).collect()
    return dict(out.iter_rows())


def _reference(events: pl.DataFrame, table: pl.DataFrame) -> dict[int, int]:
    """Row index of each event's key in the table, by plain Python equality (None == None)."""
    index = {tuple(r): i for i, r in enumerate(table.select(KEYS).iter_rows())}
    return {r[0]: index[tuple(r[1:])] for r in events.select("row", *KEYS).iter_rows() if tuple(r[1:]) in index}


CONTEXTS = [("100", 0, "1_0"), ("100", 0, "2_0"), ("100", 1, "1_0"), ("200", 0, "1_0"), ("100", 0, None), ("300", 2, "9_9")]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(CONTEXTS), st.integers(0, 12)), min_size=1, max_size=40),
    st.lists(st.tuples(st.sampled_from(CONTEXTS), st.integers(0, 12)), min_size=1, max_size=12, unique=True),
    st.booleans(),
)
def test_matches_a_plain_key_lookup(events: list, table: list, sparse: bool) -> None:
    """Any mix of contexts (1 to 6: dense lookups or the join) and ids (a range or a subset)."""
    spread = 10**15 if sparse else 1  # sparse ids take the join

    def to_row(c: tuple, i: int) -> tuple:
        return (*c, i * spread)

    frame = _frame([to_row(c, i) for c, i in events])
    table_frame = _frame([to_row(c, i) for c, i in table]).drop("row")
    assert _ordinals(frame, table_frame) == _reference(frame, table_frame)


def test_ids_of_another_context_are_dropped() -> None:
    table = _frame([("100", 0, "1_0", 1), ("100", 0, "2_0", 2)]).drop("row")
    events = _frame([("100", 0, "1_0", 1), ("100", 0, "1_0", 2), ("100", 0, "2_0", 2), ("100", 0, "2_0", 1)])
    assert _ordinals(events, table) == {0: 0, 2: 1}


def test_null_model_matches_only_null() -> None:
    table = _frame([("100", 0, None, 5)]).drop("row")
    events = _frame([("100", 0, None, 5), ("100", 0, "1_0", 5)])
    assert _ordinals(events, table) == {0: 0}


@pytest.mark.parametrize(("ids", "expected"), [([3, 4, 5], {0: 0, 1: 1, 2: 2}), ([3, 5], {0: 0, 2: 1})])
def test_contiguous_ids_and_a_subset_of_ids(ids: list[int], expected: dict[int, int]) -> None:
    table = _frame([("100", 0, "1_0", i) for i in ids]).drop("row")
    events = _frame([("100", 0, "1_0", 3), ("100", 0, "1_0", 4), ("100", 0, "1_0", 5), ("100", 0, "1_0", 6)])
    assert _ordinals(events, table) == expected


def test_many_contexts_take_the_join(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = [(str(p), 0, "1_0", 1) for p in range(sk_ordinal.MAX_CONTEXTS + 1)]
    table = _frame(rows).drop("row")
    events = _frame(rows[::-1])
    joined: list[bool] = []
    original = pl.LazyFrame.join
    monkeypatch.setattr(pl.LazyFrame, "join", lambda self, *a, **k: joined.append(True) or original(self, *a, **k))
    assert _ordinals(events, table) == _reference(events, table)
    assert joined
