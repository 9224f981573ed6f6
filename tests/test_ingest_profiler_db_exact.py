"""The DB export read to the last bit: durations equal to what the CSV's 3-decimal text parses to,
and msprof's own DB (``msprof_<n>.db``, no ``META_DATA``) read under its own name."""

from __future__ import annotations

import shutil
import sqlite3
from fractions import Fraction
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from real_samples import REAL_DB, needs_real

from sk_analytics.contract.roles import classify
from sk_analytics.errors import InputError
from sk_analytics.ingest import ingest_path
from sk_analytics.ingest.kernel_details import parse_kernel_details
from sk_analytics.ingest.profiler_db import exact_us, parse_profiler_db

REPO = Path(__file__).resolve().parents[1]


def us_text(ns: int) -> str:
    """The CSV export's µs text of integer ns, 3 decimals (integer arithmetic, sign kept)."""
    sign, magnitude = ("-" if ns < 0 else ""), abs(ns)
    return f"{sign}{magnitude // 1000}.{magnitude % 1000:03d}"


def test_exact_us_is_the_correctly_rounded_quotient_and_keeps_nulls() -> None:
    rng = np.random.default_rng(26)
    values = [*rng.integers(0, 10**7, 20_000).tolist(), *rng.integers(-(2**52), 2**52, 5_000).tolist(), 53181, 0, -1, 999, 1000]
    got = pl.Series("ns", [*values, None], dtype=pl.Int64).to_frame().select(exact_us(pl.col("ns"))).to_series().to_list()
    assert got[-1] is None
    assert got[:-1] == [float(us_text(v)) for v in values]  # what the 3-decimal text parses to
    for value, quotient in zip(values[:2_000], got, strict=False):  # and the nearest float to the exact quotient
        exact = Fraction(value, 1000)
        assert abs(Fraction(quotient) - exact) <= min(abs(Fraction(np.nextafter(quotient, side)) - exact) for side in (-np.inf, np.inf))
    # the constant division Polars does is not this (the bug the function exists for)
    naive = pl.Series("ns", values).to_frame().select(pl.col("ns") / 1000.0).to_series().to_list()
    assert naive != got[:-1]


def db_integers(path: Path) -> list[tuple[int, int]]:
    """(startNs, endNs) of every compute task and communication op, in start order, via sqlite3."""
    with sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True) as db:
        tasks = db.execute("SELECT t.startNs, t.endNs FROM TASK t JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId").fetchall()
        comm = db.execute("SELECT startNs, endNs FROM COMMUNICATION_OP").fetchall()
    return sorted(tasks + comm)


@needs_real
def test_real_db_durations_are_what_the_csv_text_parses_to() -> None:
    frame = parse_profiler_db(REAL_DB).frame
    spans = db_integers(REAL_DB)
    texts = [us_text(end - start) for start, end in spans]
    assert frame["duration_us"].to_list() == [float(t) for t in texts]  # bit for bit, every row
    assert all(repr(d) == t.rstrip("0").removesuffix(".") or float(repr(d)) == float(t) and len(repr(d).split(".")[1]) <= 3
               for d, t in zip(frame["duration_us"].to_list(), texts, strict=True))
    ratio = (frame.select((pl.col("duration_us") * 1000).round().cast(pl.Int64) / 1000.0 != pl.col("duration_us")).to_series().mean())
    assert ratio is not None and ratio > 0.05  # the real file does hold durations the naive division gets wrong


@needs_real
def test_real_db_and_its_text_export_agree_column_by_column(tmp_path: Path) -> None:
    """No two real samples are the same run (each has its own epoch: DB 1736407067…, Level0 CSV
    1736405443…, Level1 CSV 1736408883…), so the real DB's text export is written here as torch_npu
    writes it (µs with 3 decimals from the integers, N/A for null) and read back as a CSV."""
    db = parse_profiler_db(REAL_DB).frame
    spans = db_integers(REAL_DB)
    na = lambda column: pl.col(column).cast(pl.Utf8).fill_null("N/A")  # noqa: E731
    text = db.select(
        na("step_id").alias("Step Id"), na("device_id").alias("Device_id"), na("model_id").alias("Model ID"),
        na("task_id").alias("Task ID"), na("stream_id").alias("Stream ID"), pl.col("name").alias("Name"), na("type").alias("Type"),
        na("accelerator_core").alias("Accelerator Core"),
        pl.Series([us_text(s) + "\t" for s, _ in spans]).alias("Start Time(us)"),
        pl.Series([us_text(e - s) for s, e in spans]).alias("Duration(us)"), na("wait_us").alias("Wait Time(us)"),
        na("block_num").alias("Block Dim"), na("mix_block_num").alias("Mix Block Dim"),
        na("input_shapes").alias("Input Shapes"), na("input_data_types").alias("Input Data Types"), na("output_shapes").alias("Output Shapes"),
    )
    csv = tmp_path / "kernel_details.csv"
    text.write_csv(csv, line_terminator="\r\n")
    from_text = parse_kernel_details(csv).frame
    for column in db.columns:
        if column != "source_file":
            assert from_text[column].to_list() == db[column].to_list(), column


def msprof_copy(tmp_path: Path, *statements: str) -> Path:
    """The real DB as msprof names its own export, altered by SQL statements."""
    path = tmp_path / "PROF_000001_20241118061314_X" / "mindstudio_profiler_output" / "msprof_20241118061314.db"
    path.parent.mkdir(parents=True)
    shutil.copyfile(REAL_DB, path)
    path.chmod(0o644)
    with sqlite3.connect(path) as db:
        for statement in statements:
            db.execute(statement)
    return path


@needs_real
def test_msprof_db_without_meta_data_is_found_and_read_with_a_note(tmp_path: Path) -> None:
    path = msprof_copy(tmp_path, "DROP TABLE META_DATA")
    assert classify(path.relative_to(tmp_path).as_posix()) == "profiler_db"
    report = ingest_path(tmp_path / "PROF_000001_20241118061314_X", tmp_path / "data")
    assert [(f.kind, f.rows) for f in report.files] == [("profiler_db", 191)]
    assert report.warnings == [f"{path}: has no META_DATA table: schema version unknown (null), read by its tables "
                               "(STRING_IDS, TASK, COMPUTE_TASK_INFO with the columns of schema 1.x)"]
    original = parse_profiler_db(REAL_DB).frame.drop("source_file")
    assert pl.read_parquet(report.written[0]).select(original.columns).equals(original)


@needs_real
def test_meta_data_without_a_version_is_a_note_and_a_foreign_version_still_refused(tmp_path: Path) -> None:
    unversioned = msprof_copy(tmp_path, "DELETE FROM META_DATA WHERE name LIKE 'SCHEMA_VERSION%'")
    result = parse_profiler_db(unversioned)
    assert result.rows == 191 and "table META_DATA has no SCHEMA_VERSION: schema version unknown" in result.warnings[0]
    shutil.rmtree(tmp_path / "PROF_000001_20241118061314_X")
    foreign = msprof_copy(tmp_path, "UPDATE META_DATA SET value = '3' WHERE name = 'SCHEMA_VERSION_MAJOR'",
                          "UPDATE META_DATA SET value = '3.0.0' WHERE name = 'SCHEMA_VERSION'")
    with pytest.raises(Exception, match="unknown schema version '3.0.0'"):
        parse_profiler_db(foreign)


def test_other_db_names_are_not_profiler_exports() -> None:
    assert classify("ASCEND_PROFILER_OUTPUT/analysis.db") == "other"
    assert classify("x/msprof_.db") == "other"


@needs_real
def test_db_without_tasks_is_a_parser_warning_and_refused_by_ingest(tmp_path: Path) -> None:
    path = msprof_copy(tmp_path, "DELETE FROM COMPUTE_TASK_INFO", "DELETE FROM COMMUNICATION_OP")
    result = parse_profiler_db(path)
    assert result.rows == 0 and result.warnings == [f"{path}: no compute tasks or communication ops: the kernels table gets nothing from it"]
    with pytest.raises(InputError) as refused:  # a kernels table of no row would claim a profile without kernels
        ingest_path(path, tmp_path / "out")
    assert refused.value.path == str(path) and refused.value.message.startswith("no compute tasks or communication ops")
    assert not (tmp_path / "out").exists()
