"""Reuse the ``sk_events`` table an ingest already wrote for a collection, instead of parsing its traces again.

A sweep ingests each diagnostic collection into ``<session>/data`` right after
sealing it, then diffs the pair: without this the same ~40 MB sk_prof file of
every rank was parsed twice. The table is used only when its recorded sources
(:mod:`sk_analytics.ingest.sources`) are exactly the collection's sk_prof
files, in the order the parser would read them, each with the SHA-256 the
re-verified manifest vouches for; anything else (another schema version, a
stale or foreign table, a file missing from the record) falls back to parsing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from sk_analytics.dcci.occurrences import EVENT_COLUMNS
from sk_analytics.ingest.sources import read_sources
from sk_analytics.schema import SCHEMA_VERSION, SK_EVENTS


@dataclass(frozen=True)
class IngestedEvents:
    """A collection's events from an ingested table, with each file's parser warnings as the ingest recorded them."""

    events: pl.LazyFrame
    """The columns the diff reads (:data:`~sk_analytics.dcci.occurrences.EVENT_COLUMNS`), as the raw-trace load keeps them."""
    warnings: dict[str, list[str]]
    """source_file -> the warnings of parsing it."""
    path: Path
    by_process: dict[str, pl.LazyFrame]
    """process -> its events: the rows of its own source files, the other row groups skipped by their statistics."""


def ingested_events(
    data_dir: Path, root: Path, files: Sequence[tuple[str, str]], vouched: Mapping[str, str]
) -> IngestedEvents | None:
    """The ingested events of ``files`` ((source_file, process) in parse order) under ``data_dir``, or None.

    ``vouched`` maps each source_file to the SHA-256 its verified manifest records."""
    # pyarrow only where a session's table is read
    from sk_analytics.tables import read_schema_version

    wanted = [rel for rel, _ in files]
    if not wanted or any(rel not in vouched for rel in wanted):
        return None
    folder = Path(data_dir) / SK_EVENTS.name
    candidates = sorted(folder.glob(f"**/run={root.name}/*.parquet")) if folder.is_dir() else []
    for part in candidates:
        records = read_sources(part)
        if records is None or list(records) != wanted:
            continue
        if any(not isinstance(records[rel], dict) or records[rel].get("sha256") != vouched[rel] for rel in wanted):
            continue
        if read_schema_version(part) != SCHEMA_VERSION:
            continue
        process_of = dict(files)
        events = pl.scan_parquet(part, hive_partitioning=False).with_columns(
            pl.col("source_file").replace_strict(process_of, return_dtype=pl.Utf8).alias("process")
        ).select(EVENT_COLUMNS)
        warnings = {rel: list(records[rel].get("warnings", [])) for rel in wanted}
        return IngestedEvents(events, warnings, part, _by_process(part, files))
    return None


def _by_process(part: Path, files: Sequence[tuple[str, str]]) -> dict[str, pl.LazyFrame]:
    """Each process's rows of ``part``: a filter on its source files that Parquet statistics can answer
    (the ingest writes one row group per source file), the process as a constant column."""
    sources: dict[str, list[str]] = {}
    for rel, process in files:
        sources.setdefault(process, []).append(rel)
    scan = pl.scan_parquet(part, hive_partitioning=False)
    return {
        process: scan.filter(pl.col("source_file") == rels[0] if len(rels) == 1 else pl.col("source_file").is_in(rels))
        .with_columns(pl.lit(process, dtype=pl.Utf8).alias("process")).select(EVENT_COLUMNS)
        for process, rels in sources.items()
    }
