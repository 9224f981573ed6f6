"""`sk-analyze ingest` in bounded memory (issue 29): rank logs parsed a batch at a time, a
partition's rows past one row group streamed into a temp Parquet file that only lands once
every artifact parsed. Small constants stand in for the 2 MB batches and 1 Mi-row groups."""

from __future__ import annotations

import errno
import random
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest

from sk_analytics import tables
from sk_analytics.cli import cli
from sk_analytics.cli._base import run_cli
from sk_analytics.errors import InputError
from sk_analytics.files.io_seam import Fault, inject
from sk_analytics.ingest import collect, ingest_path, ingest_run_dir, text_stream, timings
from sk_analytics.ingest.timings import parse_rank_logs, stream_rank_log
from sk_analytics.schema import TIMINGS
from sk_analytics.tables import TableStream

PARTITION = {"round": "O1", "role": "clean", "run": "run-1"}


def _write_log(path: Path, samples: int, seed: int) -> None:
    """A rank log of ``samples`` decode/prefill lines with other output between them."""
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(samples):
        phase = "prefill" if i % 9 == 0 else "decode"
        lines.append(f"Inference time ({phase}): {10 + rng.random() * 5:.{1 + i % 4}f} ms\n")
        if i % 5 == 0:
            lines.append(f"step {i} done\n")
    path.write_text("".join(lines), encoding="utf-8")


def _run(root: Path) -> Path:
    """run-1 with two logs of several batches each and one log of a single (prefill) sample."""
    run = root / "O1" / "run-1"
    _write_log(run / "log_0.log", 3000, 1)
    _write_log(run / "log_1.log", 1700, 2)
    (run / "log_2.log").write_text("no samples here\nInference time (prefill): 3.5 ms\n", encoding="utf-8")
    return run


@pytest.fixture
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Reads and batches of ~4 KB of text (a hundred lines), 300 rows held, row groups of 1000 rows."""
    monkeypatch.setattr(text_stream, "READ_BYTES", 4096)
    monkeypatch.setattr(timings, "BATCH_BYTES", 4096)
    monkeypatch.setattr(collect, "HOLD_ROWS", 300)
    monkeypatch.setattr(tables, "ROW_GROUP_ROWS", 1000)


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file()) if folder.exists() else []


def test_stream_rank_log_gives_parse_rank_log_rows(tmp_path: Path, small: None) -> None:
    run = _run(tmp_path)
    (run / "log_3.log").write_text("no samples here\n", encoding="utf-8")
    for name in ("log_0.log", "log_2.log", "log_3.log"):
        whole = parse_rank_logs([run / name], root=run)[0]
        parts = list(stream_rank_log(run / name, root=run))
        assert len(parts) > 1 or whole.rows <= 1
        assert pl.concat([p.frame for p in parts]).equals(whole.frame)
        assert [w for p in parts for w in p.warnings] == whole.warnings


def test_streamed_ingest_writes_the_in_memory_table(tmp_path: Path, small: None, monkeypatch: pytest.MonkeyPatch) -> None:
    run = _run(tmp_path / "src")
    logs = sorted(run.glob("log_*.log"))
    with monkeypatch.context() as held_rows:
        held_rows.setattr(collect, "HOLD_ROWS", 1 << 20)  # the runner's parsed frames, held and written whole
        held = ingest_run_dir(run, tmp_path / "held", **PARTITION, parsed=dict(zip(logs, parse_rank_logs(logs, root=run), strict=True)))
    streamed = ingest_run_dir(run, tmp_path / "streamed", **PARTITION)
    old, new = held.written[0], streamed.written[0]
    assert pq.ParquetFile(old).metadata.num_row_groups == 1  # write_table's one row group
    groups = pq.ParquetFile(new).metadata
    assert [groups.row_group(i).num_rows for i in range(groups.num_row_groups)] == [1000] * 4 + [4701 - 4000]
    assert pl.read_parquet(new).equals(pl.read_parquet(old)) and pl.read_parquet(new).height == 4701
    assert pq.read_schema(new) == pq.read_schema(old) and pq.read_schema(new).metadata == pq.read_schema(old).metadata
    assert [(f.path, f.rows, f.warnings) for f in streamed.files] == [(f.path, f.rows, f.warnings) for f in held.files]
    assert not streamed.files[2].warnings and streamed.files[2].rows == 1
    assert _files(tmp_path / "streamed") == [new]  # no temp file left beside it
    # streamed into one row group, the file is byte for byte write_table's
    monkeypatch.setattr(tables, "ROW_GROUP_ROWS", 10_000)
    assert ingest_run_dir(run, tmp_path / "whole", **PARTITION).written[0].read_bytes() == old.read_bytes()


def test_bad_later_log_leaves_no_output_and_no_temp(tmp_path: Path, small: None) -> None:
    run = _run(tmp_path / "src")
    bad = run / "log_3.log"
    _write_log(bad, 2000, 3)
    with bad.open("a", encoding="utf-8") as fh:
        fh.write("Inference time (decode): 12.5x ms\n")
    out = tmp_path / "out"
    with pytest.raises(InputError, match=r"log_3\.log:2401: malformed timing line"):
        ingest_path(tmp_path / "src", out)
    assert not out.exists()  # the spilled temp file and the folders made for it are gone
    # an output folder that exists keeps exactly what it held
    (out / "timings" / "round=O1").mkdir(parents=True)
    keep = out / "timings" / "round=O1" / "note.txt"
    keep.write_text("mine")
    with pytest.raises(InputError):
        ingest_path(tmp_path / "src", out)
    assert _files(out) == [keep] and keep.read_text() == "mine"
    assert sorted(p.name for p in out.rglob("*")) == ["note.txt", "round=O1", "timings"]


def test_a_log_without_timing_lines_after_streamed_ones_is_refused_and_leaves_nothing(tmp_path: Path, small: None,
                                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """A rank log without a timing line (log_3) beside logs whose rows were already streamed into a temp
    file: no run short of one rank is written; the refusal names the log and the format (exit 2)."""
    run = _run(tmp_path / "src")
    (run / "log_3.log").write_text("[default3]:loading weights\r\n[default3]:warm-up done\r\n", encoding="utf-8")  # torchrun, CRLF
    out = tmp_path / "out"
    assert run_cli(cli, "sk-analyze", ["ingest", str(tmp_path / "src"), "--out", str(out)]) == 2
    said = capsys.readouterr()
    [line] = said.err.splitlines()
    assert line.startswith(f"sk-analyze: error: {run / 'log_3.log'}: no timing line: the log holds no sample of its rank; "
                           "nothing was written (expected at least one 'Inference time (decode|prefill): <value> ms' line, "
                           "formats.md §1"), line
    assert said.out == "" and not out.exists()  # the spilled temp file and the folders made for it are gone


def test_bad_log_after_two_streamed_runs_removes_every_folder(tmp_path: Path, small: None) -> None:
    for run in ("run-1", "run-2"):
        _write_log(tmp_path / "src" / "O1" / run / "log_0.log", 800, 5)  # both streamed, one folder tree
    (tmp_path / "src" / "O1" / "run-3").mkdir()
    (tmp_path / "src" / "O1" / "run-3" / "log_0.log").write_bytes(b"Inference time (decode): 1 ms\n\xff\n")
    with pytest.raises(InputError, match=r"run-3/log_0\.log:2: .*not UTF-8"):
        ingest_path(tmp_path / "src", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_table_stream_that_cannot_open_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise OSError(errno.EROFS, "read-only file system")

    monkeypatch.setattr(tables.pq, "ParquetWriter", refuse)
    with pytest.raises(OSError, match="read-only"):
        TableStream(TIMINGS, tmp_path / "d", PARTITION)
    assert not (tmp_path / "d").exists()


def test_bad_log_is_exit_2_in_the_cli(tmp_path: Path, small: None, capsys: pytest.CaptureFixture[str]) -> None:
    run = _run(tmp_path / "src")
    (run / "log_3.log").write_text("Inference time (decode): 1 ms\n" + "x\n" * 10 + "Inference time (decode): inf ms\n", encoding="utf-8")
    assert run_cli(cli, "sk-analyze", ["ingest", str(tmp_path / "src"), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"sk-analyze: error: {run / 'log_3.log'}:12: timing value 'inf'")
    assert not (tmp_path / "out").exists()


def test_write_fault_at_commit_removes_the_temp(tmp_path: Path, small: None) -> None:
    _run(tmp_path / "src")
    out = tmp_path / "out"
    with inject(Fault(errno.ENOSPC, "parquet")), pytest.raises(OSError):
        ingest_path(tmp_path / "src", out)
    assert not list(out.rglob("*.tmp")) and not list(out.rglob("*.parquet"))


def test_reingest_replaces_a_streamed_partition_whole(tmp_path: Path, small: None) -> None:
    run = _run(tmp_path / "src")
    target = ingest_run_dir(run, tmp_path / "d", **PARTITION).written[0]
    (run / "log_0.log").write_text("Inference time (decode): 1.5 ms\n", encoding="utf-8")
    assert ingest_run_dir(run, tmp_path / "d", **PARTITION).written[0] == target
    assert pl.read_parquet(target).height == 1 + 1700 + 1
    assert _files(tmp_path / "d") == [target]


def test_table_stream_discard_keeps_folders_it_did_not_make(tmp_path: Path) -> None:
    (tmp_path / "timings").mkdir()
    stream = TableStream(TIMINGS, tmp_path, PARTITION)
    stream.write(parse_rank_logs([_log(tmp_path / "src" / "run-1" / "log_0.log")])[0].frame)
    stream.discard()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src", "timings"] and not list((tmp_path / "timings").iterdir())
    with pytest.raises(ValueError, match="already committed or discarded"):
        stream.commit()


def test_table_stream_refuses_a_null_in_a_required_column(tmp_path: Path) -> None:
    frame = parse_rank_logs([_log(tmp_path / "src" / "run-1" / "log_0.log")])[0].frame
    stream = TableStream(TIMINGS, tmp_path / "d", PARTITION)
    with pytest.raises(ValueError, match="null values in column"):
        stream.write(frame.with_columns(pl.lit(None, dtype=pl.Int32).alias("rank")))
    stream.discard()
    assert not (tmp_path / "d").exists()


def _log(path: Path) -> Path:
    _write_log(path, 50, 4)
    return path
