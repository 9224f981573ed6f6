"""Parquet table I/O: a damaged or foreign file under a data folder is bad input naming the file."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from sk_analytics.errors import InputError
from sk_analytics.schema import SCHEMA_VERSION, TIMINGS
from sk_analytics.tables import read_schema_version, scan_table, write_table


def _timings() -> pl.DataFrame:
    return pl.DataFrame(
        {
            "run_index": [1, 1],
            "rank": [0, 0],
            "phase": ["decode", "decode"],
            "sample_index": [0, 1],
            "value_ms": [10.5, 10.25],
            "value_text": ["10.5", "10.25"],
            "line": [3, 4],
            "source_file": ["run-1/log_0.log"] * 2,
        }
    )


def _part(data: Path) -> Path:
    return data / "timings" / "round=O1" / "role=clean" / "run=1" / "part-0.parquet"


def test_roundtrip_keeps_version_and_partitions(tmp_path: Path) -> None:
    written = write_table(_timings(), TIMINGS, tmp_path, {"round": "O1", "role": "clean", "run": "1"})
    assert written == _part(tmp_path)
    assert read_schema_version(written) == SCHEMA_VERSION
    frame = scan_table(tmp_path, "timings").collect()
    assert frame["value_text"].to_list() == ["10.5", "10.25"] and frame["run"].to_list() == ["1", "1"]


def test_garbage_parquet_is_input_error_naming_the_file(tmp_path: Path) -> None:
    part = _part(tmp_path)
    part.parent.mkdir(parents=True)
    part.write_text("not parquet")
    with pytest.raises(InputError, match=r"part-0\.parquet: not a readable Parquet file") as info:
        scan_table(tmp_path, "timings")
    assert info.value.path == str(part)


def test_parquet_lacking_a_column_is_input_error(tmp_path: Path) -> None:
    part = _part(tmp_path)
    part.parent.mkdir(parents=True)
    table = pa.table({"rank": [0]}).replace_schema_metadata({b"schema_version": SCHEMA_VERSION.encode()})
    pq.write_table(table, part)
    with pytest.raises(InputError, match="lacks column"):
        scan_table(tmp_path, "timings")
