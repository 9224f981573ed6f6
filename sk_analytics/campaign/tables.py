"""``open_campaign``: every session's tables as one lazy, hive-partitioned scan per table.

Layout: ``<root>/sessions/session=<name>/data/<table>/round=<r>/role=<x>/run=<k>/part-0.parquet``.
The ``session`` partition comes from the folder name, the others from the
session's own layout; the same files read with DuckDB
(``read_parquet(campaign_glob(root, "timings"), hive_partitioning = true)``) or
``pyarrow.dataset.dataset(campaign_files(root, "timings"), partitioning="hive", ...)``.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sk_analytics.campaign.layout import SESSION_KEY, SESSIONS_DIR
from sk_analytics.errors import InputError
from sk_analytics.schema import TABLES
from sk_analytics.tables import check_files


def session_folders(root: str | Path) -> dict[str, Path]:
    """Session name -> folder, for every ``sessions/session=<name>`` folder of the campaign."""
    folder = Path(root) / SESSIONS_DIR
    if not folder.is_dir():
        raise InputError(folder, "not a campaign root (no sessions folder)", expected="a folder written by sk-run campaign")
    return {p.name.split("=", 1)[1]: p for p in sorted(folder.glob(f"{SESSION_KEY}=*")) if p.is_dir()}


def campaign_glob(root: str | Path, table: str) -> str:
    """A glob over one table of every session (for DuckDB's ``read_parquet(..., hive_partitioning = true)``)."""
    return str(Path(root) / SESSIONS_DIR / f"{SESSION_KEY}=*" / "data" / table / "**" / "*.parquet")


def campaign_files(root: str | Path, table: str) -> list[Path]:
    """Every Parquet file of one table over all sessions, in session order."""
    files: list[Path] = []
    for folder in session_folders(root).values():
        data = folder / "data" / table
        if data.is_dir():
            files.extend(sorted(data.glob("**/*.parquet")))
    return files


def scan_campaign_table(root: str | Path, table: str) -> pl.LazyFrame:
    """One lazy scan of ``table`` across every session, with ``session`` and the table's partitions as string columns."""
    spec = TABLES[table]
    hive_schema = {SESSION_KEY: pl.Utf8, **{key: pl.Utf8 for key in spec.partition_by}}
    files = campaign_files(root, table)
    if not files:
        return pl.LazyFrame(schema={**spec.schema, **hive_schema})
    check_files(files, spec)
    return pl.scan_parquet([str(f) for f in files], hive_partitioning=True, hive_schema=hive_schema)


def open_campaign(root: str | Path) -> dict[str, pl.LazyFrame]:
    """Every known table of every session of a campaign, each as one LazyFrame with a ``session`` column."""
    session_folders(root)  # a clear error for a folder that is not a campaign
    return {name: scan_campaign_table(root, name) for name in TABLES}
