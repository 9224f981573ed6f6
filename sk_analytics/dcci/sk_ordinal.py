"""The exact SK identity of event rows as a small integer: the row of the event's key in a table of SK keys.

An SK inside one process is the key (process, device, model, SK id). The hot
path needs it as one small integer per event (to band search keys and to index
dense grids), exactly: a hash of the key could collide. A join on four columns
(two of them strings) costs more than the rest of the child placement, so the
usual shape of a trace is used instead: a side has a handful of *contexts*
(process, device, model) and SK ids in a small range. Rows are kept when their
id is one of the table's and their context columns equal one context's
constants; the (context, id) pair then indexes a dense lookup table. All of it
is one Polars expression, evaluated in parallel batches. Many contexts or
sparse ids fall back to a join.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

import numpy as np
import polars as pl

MAX_CONTEXTS: Final = 4
"""Above this many contexts the per-context comparisons cost more than one join."""

MAX_LOOKUP_CELLS: Final = 1 << 20
"""Largest dense (context x SK id range) lookup table; sparser ids are joined."""

ORDINAL: Final = "_sk_ordinal"


def with_sk_ordinal(frame: pl.LazyFrame, table: pl.DataFrame, keys: Sequence[str]) -> pl.LazyFrame:
    """The rows of ``frame`` whose key is in ``table``, with their Int32 row in ``table`` as :data:`ORDINAL`.

    ``table`` holds unique ``keys`` rows; the last key is the integer SK id (never null, as in sk_events).
    Nulls in the other keys match nulls. Row order is not kept.
    """
    *context_keys, id_key = keys
    indexed = table.select(keys).with_row_index(ORDINAL).with_columns(pl.col(ORDINAL).cast(pl.Int32))
    contexts = indexed.select(context_keys).unique(maintain_order=True).with_row_index("_context")
    ids = indexed.get_column(id_key)
    # Series.min()/max() are typed as any Python literal or None; the id column is a non-empty integer column here
    low, span = int(ids.min()), int(ids.max()) - int(ids.min()) + 1  # type: ignore[arg-type]
    if contexts.height > MAX_CONTEXTS or contexts.height * span > MAX_LOOKUP_CELLS:
        return frame.join(indexed.lazy(), on=list(keys), how="inner", nulls_equal=True)
    cells = indexed.join(contexts, on=context_keys, nulls_equal=True).select(
        pl.col("_context").cast(pl.Int64) * span + (pl.col(id_key) - low), ORDINAL
    )
    lookup = np.full(contexts.height * span, -1, dtype=np.int32)
    lookup[cells.to_series(0).to_numpy()] = cells.get_column(ORDINAL).to_numpy()
    context_rows = list(contexts.drop("_context").iter_rows(named=True))
    distinct = ids.unique()
    # a contiguous id range (every SK of a trace) is a range test; a subset of ids is a set lookup
    in_table = (
        pl.col(id_key).is_between(low, low + span - 1) if distinct.len() == span else pl.col(id_key).is_in(distinct.implode())
    )
    ordinal = pl.lit(pl.Series(lookup))
    if len(context_rows) == 1:  # every id of the table is this context's: each kept row has an ordinal
        return frame.filter(in_table & _matches(context_rows[0])).with_columns(
            ordinal.gather(pl.col(id_key) - low).alias(ORDINAL)
        )
    number = pl.lit(None, dtype=pl.Int64)
    for index, context in reversed(list(enumerate(context_rows))):
        number = pl.when(_matches(context)).then(pl.lit(index, dtype=pl.Int64)).otherwise(number)
    return (
        frame.filter(in_table & number.is_not_null())
        .with_columns(ordinal.gather(number * span + (pl.col(id_key) - low)).alias(ORDINAL))
        .filter(pl.col(ORDINAL) >= 0)  # an id of another context
    )


def _matches(context: dict[str, object]) -> pl.Expr:
    """Every context column equals the context's value (null equals null)."""
    return pl.all_horizontal(
        pl.col(name).is_null() if value is None else pl.col(name) == value for name, value in context.items()
    )
