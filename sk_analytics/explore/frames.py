"""JSON evidence records as typed Polars frames, loud about fields they lack.

The ledger and the decision JSONs (gate summaries, dcci-diff) are lists of
nested dicts. :func:`records_frame` flattens them with ``pl.json_normalize``
and selects the wanted columns under fixed dtypes, so a notebook always gets
the same columns; a field that no record carries (an older or foreign file)
becomes a null column and a :class:`MissingColumnWarning`, never a silently
different table.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from sk_analytics.schema import round_index

__all__ = ["MissingColumnWarning", "records_frame", "round_index"]


class MissingColumnWarning(UserWarning):
    """A column the explore API promises is absent from the evidence it read."""


def records_frame(records: Sequence[Mapping[str, Any]], columns: Mapping[str, pl.DataType | type[pl.DataType]],
                  *, source: str) -> pl.DataFrame:
    """``records`` flattened (nested keys joined by ``.``) and cast to ``columns``.

    ``columns`` maps each output column to its flattened field name's dtype;
    a column no record has is filled with nulls and reported once as a
    :class:`MissingColumnWarning` naming ``source`` (unless every record
    sets one of its parents to null: then the nulls are the data). An empty ``records`` is an
    empty frame of that schema (nothing is missing from nothing).
    """
    schema = pl.Schema(columns)
    if not records:
        return pl.DataFrame(schema=schema)
    flat = pl.json_normalize(list(records), separator=".", infer_schema_length=None)
    # a field under a parent that every record sets to null (a side an SK is absent from) is null, not missing
    null_parents = {name for name in flat.columns if flat[name].dtype == pl.Null}
    missing = [name for name in schema if name not in flat.columns
               and not any(".".join(name.split(".")[:i]) in null_parents for i in range(1, name.count(".") + 1))]
    if missing:
        warnings.warn(MissingColumnWarning(f"{source}: no record has {', '.join(missing)}; filled with nulls"), stacklevel=3)
    return flat.select(
        [pl.col(name).cast(dtype, strict=False) if name in flat.columns else pl.lit(None, dtype).alias(name)
         for name, dtype in schema.items()]
    )

