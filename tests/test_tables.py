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


def test_open_session_says_which_tables_were_not_written_and_why(tmp_path: Path) -> None:
    """A sweep writes no sk_occurrences/sk_children: open_session says so instead of an unexplained empty frame."""
    import sk_analytics as ska
    from sk_analytics.schema import TIMINGS
    from sk_analytics.tables import DERIVED_BY_DCCI_DIFF

    rows = pl.DataFrame({"run_index": [1], "rank": [0], "phase": ["decode"], "sample_index": [0], "value_ms": [1.0],
                         "value_text": ["1.0"], "line": [1], "source_file": ["log_0.log"]})
    write_table(rows, TIMINGS, tmp_path / "data", {"round": "O1", "role": "trial", "run": "run-1"})
    tables = ska.open_session(tmp_path)
    assert "timings" not in tables.absent and tables["timings"].collect().height == 1
    for name in DERIVED_BY_DCCI_DIFF:
        assert tables[name].collect().height == 0 and "--tables-out" in tables.absent[name]
    assert tables.absent["kernels"].startswith("not written: no Parquet file under")


def test_written_files_mark_every_not_nullable_column_required(tmp_path: Path) -> None:
    """docs/schema.md's nullability is the files' own: a required Parquet field per `nullable: no` column."""
    import pyarrow.parquet as pq

    from sk_analytics.schema import TIMINGS

    rows = pl.DataFrame({"run_index": [None], "rank": [0], "phase": ["decode"], "sample_index": [0], "value_ms": [1.0],
                         "value_text": ["1.0"], "line": [1], "source_file": ["log_0.log"]})
    path = write_table(rows, TIMINGS, tmp_path, {"round": "O1", "role": "trial", "run": "run-1"})
    fields = {f.name: f.nullable for f in pq.read_schema(path)}
    assert fields == {c.name: c.nullable for c in TIMINGS.columns}
    with pytest.raises(ValueError, match="null values in column\\(s\\) rank"):
        write_table(rows.with_columns(pl.lit(None, pl.Int32).alias("rank")), TIMINGS, tmp_path, {"round": "O1", "role": "trial", "run": "run-2"})


def test_open_session_tables_carry_a_numeric_round_index(tmp_path: Path) -> None:
    import sk_analytics as ska

    rows = pl.DataFrame({"run_index": [1], "rank": [0], "phase": ["decode"], "sample_index": [0], "value_ms": [1.0],
                         "value_text": ["1.0"], "line": [1], "source_file": ["log_0.log"]})
    for round_ in ("O10", "O2", "O0-INCUMBENT", "DCCI"):
        write_table(rows, TIMINGS, tmp_path / "data", {"round": round_, "role": "trial", "run": "run-1"})
    frame = ska.open_session(tmp_path)["timings"].sort("round_index", nulls_last=True).collect()
    assert frame.select("round", "round_index").rows() == [("O0-INCUMBENT", 0), ("O2", 2), ("O10", 10), ("DCCI", None)]
    assert frame.schema["round_index"] == pl.Int32 and frame.schema["rank"] == pl.Int32
    assert "round_index" in ska.open_session(tmp_path)["kernels"].collect_schema()  # an absent table too
