"""One side's events read one process (one rank) at a time: the diff's memory follows the largest rank.

A 16- or 32-rank diagnostic collection holds millions of sk_prof events a side.
Read at once, the span pass of every rank and its scratch (the streaming scan's
buffers, the sort keys) were alive together, so the peak grew with the rank count
(issue 34: 1.19 GB at 32 ranks against 0.63 GB at 8 on the demo network). Nothing of the
cut crosses a process: an SK is (process, device, model, SK id), an occurrence
is a launch of one SK, a child event belongs to a launch of its own SK. So
:func:`~sk_analytics.dcci.occurrences.sk_occurrences` and
:func:`~sk_analytics.dcci.occurrences.child_timings` run on each process's events
in turn, each rank's scratch released before the next, and the per-process
results, concatenated in the order the whole-side call yields its rows, are its
rows exactly (``tests/test_dcci_rank_events.py``).

What is checked per process, not over the side: the time span a key band must
hold (each rank's device clock on its own, never compared across ranks) and the
size of the (launch, node) grid the child events of one rank fill.
"""

from __future__ import annotations

from collections.abc import Mapping

import polars as pl

from sk_analytics.dcci.occurrences import EVENT_COLUMNS, SK_KEYS, child_timings, sk_occurrences
from sk_analytics.schema import SK_CHILDREN, SK_OCCURRENCES, Table

ProcessEvents = Mapping[str, pl.LazyFrame]
"""process -> that process's events (every column of :data:`EVENT_COLUMNS`), in process order."""


def process_events(events: pl.LazyFrame, by_process: ProcessEvents | None = None) -> dict[str, pl.LazyFrame]:
    """Each process's events, sorted by process: ``by_process`` (scans that read one process's rows
    only) when the loader built them, else ``events`` filtered to each process it holds."""
    if by_process is not None:
        return {process: by_process[process] for process in sorted(by_process)}
    names = events.select(pl.col("process").unique()).collect().get_column("process").sort().to_list()
    return {process: events.filter(pl.col("process") == process) for process in names}


def occurrences_by_process(parts: ProcessEvents) -> pl.DataFrame:
    """:func:`sk_occurrences` of all ``parts`` together (the same rows and order), computed a process at a time."""
    frames = [sk_occurrences(events.select(EVENT_COLUMNS)) for events in parts.values()]
    return _concat(frames, SK_OCCURRENCES).sort([*SK_KEYS, "occurrence"])


def child_timings_by_process(parts: ProcessEvents, occurrences: pl.DataFrame) -> pl.DataFrame:
    """:func:`child_timings` of all ``parts`` for ``occurrences`` (the same rows and order), a process at a time.

    The whole-side call yields its rows SK by SK in the order the SKs first appear in
    ``occurrences``. ``occurrences`` must hold each process's rows together (as
    :func:`sk_occurrences` sorts them, and any filter of that keeps them): then the
    processes, taken in the order they appear, yield the rows in that order too."""
    processes = occurrences.get_column("process")
    order = processes.unique(maintain_order=True).to_list()
    if len(order) != int((processes != processes.shift(1)).fill_null(True).sum()):
        raise ValueError("occurrences must hold the rows of each process together (sorted by SK keys)")
    frames = [
        child_timings(parts[process].select(EVENT_COLUMNS), occurrences.filter(pl.col("process") == process))
        for process in order
    ]
    return _concat(frames, SK_CHILDREN)


def _concat(frames: list[pl.DataFrame], table: Table) -> pl.DataFrame:
    """The rows of ``frames`` (those without rows may be typed by the table schema, not by the computation)."""
    filled = [frame for frame in frames if frame.height]
    if filled:
        return pl.concat(filled, how="vertical")
    return frames[0] if frames else pl.DataFrame(schema=table.schema)
