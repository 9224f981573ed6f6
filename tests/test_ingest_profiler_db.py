"""torch_npu's DB export (ascend_pytorch_profiler_<rank>.db) -> the same kernels table as kernel_details.csv."""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from real_samples import REAL, REAL_DB, needs_real

from sk_analytics.cli import cli
from sk_analytics.cli._base import run_cli
from sk_analytics.contract.roles import classify, missing_kinds
from sk_analytics.errors import InputError
from sk_analytics.ingest import ingest_path
from sk_analytics.ingest.kernel_details import parse_kernel_details
from sk_analytics.ingest.profiler_db import parse_profiler_db
from sk_analytics.schema import KERNELS
from sk_runner.sim.profiler import kernel_details_text
from sk_runner.sim.profiler_db import write_profiler_db

REPO = Path(__file__).resolve().parents[1]


def sim_rows(n_steps: int = 3, seed: int = 0) -> pl.DataFrame:
    """Launch rows in the simulator's shape: SKs, plain ops and one allReduce per step."""
    rng = np.random.default_rng(seed)
    names = ["sk_3_layer0_start_RmsNorm_end_MatMulV2", "MatMulV3_FP16_ND_high_performance_1", "hcom_allReduce__520_0_1", "trans_TransData_0"]
    types = ["SuperKernel", "MatMulV3", "hcom_allReduce_", "TransData"]
    cores = ["MIX_AIC", "AI_CORE", "COMMUNICATION", "AI_VECTOR_CORE"]
    rows = []
    start = 1_736_405_443_881_410_320
    for step in range(1, n_steps + 1):
        for launch, (name, type_, core) in enumerate(zip(names, types, cores, strict=True)):
            dur = int(rng.integers(1_000, 90_000))
            rows.append({"step": step, "launch": launch, "task_id": 100 + len(rows), "stream_id": 2 if core != "COMMUNICATION" else 9,
                         "name": name, "type": type_, "core": core, "is_sk": name.startswith("sk_"), "blocks": 24 if launch == 0 else 8,
                         "mix_blocks": 24 if launch == 0 else 0, "start_ns": start, "dur_ns": dur, "wait_ns": int(rng.integers(0, 500))})
            start += dur + int(rng.integers(1, 3_000))
    return pl.DataFrame(rows)


def write_both(tmp_path: Path, rows: pl.DataFrame) -> tuple[Path, Path]:
    csv = tmp_path / "text" / "kernel_details.csv"
    csv.parent.mkdir(parents=True)
    csv.write_text(kernel_details_text(rows, 7))
    db = write_profiler_db(tmp_path / "db" / "ascend_pytorch_profiler_0.db", rows, rts_model_id=7)
    return csv, db


COMMON = ["row", "step_id", "device_id", "name", "type", "accelerator_core", "start_ns", "start_text", "duration_us", "wait_us",
          "input_shapes", "input_data_types", "output_shapes", "is_sk", "canonical_op"]


def test_db_and_csv_of_the_same_launches_give_the_same_kernels(tmp_path: Path) -> None:
    rows = sim_rows()
    csv, db = write_both(tmp_path, rows)
    from_csv = parse_kernel_details(csv).frame
    from_db = parse_profiler_db(db).frame
    assert from_db.schema == KERNELS.schema
    comm = pl.col("accelerator_core") == "HCCL"
    # the CSV writes COMMUNICATION as its core; the DB knows communication ops only as such (HCCL, as torch_npu's CSV)
    assert from_db.filter(~comm).select(COMMON).equals(from_csv.filter(pl.col("accelerator_core") != "COMMUNICATION").select(COMMON))
    assert from_db.filter(comm)["name"].to_list() == ["hcom_allReduce__520_0_1"] * 3
    compute = from_db.filter(~comm)
    assert compute.select("model_id", "task_id", "stream_id", "block_num", "mix_block_num").equals(
        from_csv.filter(pl.col("accelerator_core") != "COMMUNICATION").select("model_id", "task_id", "stream_id", "block_num", "mix_block_num"))
    assert from_db["start_ns"].to_list() == sorted(rows["start_ns"].to_list())  # exact, Int64 end to end
    assert from_db["duration_us"].to_list() == [d / 1000 for d in rows.sort("start_ns")["dur_ns"].to_list()]


@needs_real
def test_real_db_export_is_read_exactly() -> None:
    result = parse_profiler_db(REAL_DB, root=REAL)
    frame = result.frame
    assert frame.height == 191 and result.warnings == []  # 187 compute tasks + 4 communication ops
    with sqlite3.connect(f"file:{REAL_DB}?mode=ro&immutable=1", uri=True) as db:
        tasks = db.execute(
            "SELECT t.startNs, t.endNs, t.streamId, t.taskId FROM TASK t JOIN COMPUTE_TASK_INFO c ON c.globalTaskId = t.globalTaskId"
        ).fetchall()
        comm = db.execute("SELECT startNs, endNs FROM COMMUNICATION_OP").fetchall()
    expected = sorted([(s, e) for s, e, _, _ in tasks] + comm)
    assert list(zip(frame["start_ns"].to_list(), (frame["start_ns"] + (frame["duration_us"] * 1000).round().cast(pl.Int64)).to_list(), strict=True)) == expected
    assert all(Decimal(t) * 1000 == s for t, s in zip(frame["start_text"].to_list(), frame["start_ns"].to_list(), strict=True))
    first = frame.row(0, named=True)
    assert (first["name"], first["start_ns"], first["start_text"], first["step_id"], first["device_id"], first["model_id"]) == (
        "trans_TransData_0", 1736407067950342548, "1736407067950342.548", 50, 0, 4294967295)
    assert (first["type"], first["accelerator_core"], first["wait_us"], first["op_state"]) == (None, None, None, None)
    assert frame.filter(pl.col("accelerator_core") == "HCCL")["name"].to_list() == [f"hcom_allReduce__576_{i}_1" for i in range(4)]
    assert frame["source_file"][0] == "msinsight-db-level0-rank0/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"


@needs_real
def test_real_db_has_the_same_kernels_as_the_real_csv_of_the_same_run_kind() -> None:
    """Same model, same profiler level, another run: the kernel sequence (names in start order,
    steps, Level0's N/A columns) is the CSV's; only the allReduce group number differs."""
    db = parse_profiler_db(REAL_DB).frame
    csv = parse_kernel_details(REAL / "msinsight-level0-rank0" / "kernel_details.csv").frame
    group = pl.col("name").str.replace(r"^hcom_allReduce__\d+_", "hcom_allReduce__N_")
    assert db.select(group)["name"].to_list() == csv.select(group)["name"].to_list()
    assert db["step_id"].to_list() == csv["step_id"].to_list()
    assert db["canonical_op"].to_list() == csv["canonical_op"].to_list()
    assert (db["type"].null_count(), csv["type"].null_count()) == (191, 191)
    assert db["row"].to_list() == csv["row"].to_list() == list(range(1, 192))


def copy_db(tmp_path: Path, *statements: str) -> Path:
    """The sim's DB export, altered by SQL statements."""
    db = write_profiler_db(tmp_path / "p" / "ascend_pytorch_profiler_0.db", sim_rows(1), rts_model_id=7)
    with sqlite3.connect(db) as connection:
        for statement in statements:
            connection.execute(statement)
    return db


@pytest.mark.parametrize(
    ("statements", "message"),
    [
        (["UPDATE META_DATA SET value = '2' WHERE name = 'SCHEMA_VERSION_MAJOR'", "UPDATE META_DATA SET value = '2.0.0' WHERE name = 'SCHEMA_VERSION'"],
         "table META_DATA: unknown schema version '2.0.0'"),
        (["DROP TABLE COMPUTE_TASK_INFO"], "no table COMPUTE_TASK_INFO"),
        (["DROP TABLE STRING_IDS"], "no table STRING_IDS"),
        (["ALTER TABLE TASK DROP COLUMN streamId"], "table TASK lacks column(s) streamId"),
        (["ALTER TABLE COMPUTE_TASK_INFO DROP COLUMN blockDim"], "table COMPUTE_TASK_INFO lacks column(s) blockDim"),
        (["ALTER TABLE STEP_TIME DROP COLUMN endNs"], "table STEP_TIME lacks column(s) endNs"),
        (["DELETE FROM STRING_IDS WHERE value = 'MatMulV3_FP16_ND_high_performance_1'"], "table STRING_IDS lacks id"),
        (["UPDATE TASK SET startNs = startNs / 1e9 + 0.25"], "table TASK: start_ns is Float64, not integer ns"),
        (["UPDATE TASK SET startNs = 1.5 WHERE globalTaskId = 1"], "table TASK"),
        (["UPDATE TASK SET endNs = startNs - 1"], "endNs"),
        # the bad record is named by its table and ids (it named 'TASK/COMMUNICATION_OP' and two numbers only)
        (["UPDATE TASK SET endNs = startNs - 5 WHERE globalTaskId = (SELECT MAX(globalTaskId) FROM COMPUTE_TASK_INFO)"],
         "table TASK: the compute task with streamId"),
        (["UPDATE COMMUNICATION_OP SET endNs = startNs - 5"], "table COMMUNICATION_OP: the communication op at kernels row"),
    ],
)
def test_bad_db_is_exit_2_naming_file_and_table(tmp_path: Path, statements: list[str], message: str,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    db = copy_db(tmp_path, *statements)
    with pytest.raises(InputError, match=None) as caught:
        parse_profiler_db(db)
    assert caught.value.path == str(db) and message in caught.value.one_line()
    assert run_cli(cli, "sk-analyze", ["ingest", str(db.parent), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert str(db) in err and message in err and "Traceback" not in err


def test_not_an_sqlite_file_is_exit_2(tmp_path: Path) -> None:
    path = tmp_path / "ascend_pytorch_profiler_3.db"
    path.write_text("Step Id,Name\n")
    with pytest.raises(InputError, match="not an SQLite database"):
        parse_profiler_db(path)
    truncated = copy_db(tmp_path)
    truncated.write_bytes(truncated.read_bytes()[:2048])
    with pytest.raises(InputError) as caught:
        parse_profiler_db(truncated)
    assert caught.value.path == str(truncated)


def test_optional_tables_may_be_absent(tmp_path: Path) -> None:
    db = copy_db(tmp_path, "DROP TABLE COMMUNICATION_OP", "DROP TABLE STEP_TIME", "ALTER TABLE COMPUTE_TASK_INFO DROP COLUMN waitNs")
    frame = parse_profiler_db(db).frame
    assert frame.height == 3 and frame["step_id"].null_count() == 3 and frame["wait_us"].null_count() == 3
    assert "HCCL" not in frame["accelerator_core"].to_list()


def test_the_db_file_is_never_written(tmp_path: Path) -> None:
    db = copy_db(tmp_path)
    before = db.read_bytes()
    db.chmod(0o444)
    db.parent.chmod(0o555)
    try:
        assert parse_profiler_db(db).rows == 4
    finally:
        db.parent.chmod(0o755)
    assert db.read_bytes() == before and sorted(p.name for p in db.parent.iterdir()) == [db.name]


def test_ingest_discovers_every_rank_db(tmp_path: Path) -> None:
    """One DB per rank folder (per-rank layout): all in the kernels table, device ids kept."""
    profile = tmp_path / "prof"
    for rank in (0, 1):
        write_profiler_db(profile / f"host_{100 + rank}_20261201000000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / f"ascend_pytorch_profiler_{rank}.db",
                          sim_rows(2, seed=rank), rts_model_id=7, device_id=rank, rank=rank)
    (profile / "host_100_20261201000000000_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "analysis.db").write_bytes(b"SQLite format 3\x00")
    report = ingest_path(profile, tmp_path / "data")
    assert [(f.kind, f.table, f.rows) for f in report.files] == [("profiler_db", "kernels", 8), ("profiler_db", "kernels", 8)]
    kernels = pl.read_parquet(report.written[0])
    assert kernels.group_by("device_id").len().sort("device_id").rows() == [(0, 8), (1, 8)]
    import sk_analytics as ska

    tables = ska.open_profile(tmp_path / "data")
    assert tables["kernels"].select(pl.len()).collect().item() == 16


def test_contract_file_role_and_required_kinds() -> None:
    assert classify("x_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db") == "profiler_db"
    assert classify("ASCEND_PROFILER_OUTPUT/analysis.db") == "other"
    assert missing_kinds("baseline_profile", ["profiler_db"]) == []
    assert missing_kinds("candidate_profile", ["profiler_db", "sk_prof"], require_sk_prof=True) == [
        "sk_graph_origin", "sk_graph_updated", "sk_fused_nodes", "sk_scope_split", "super_kernel"]
    assert missing_kinds("baseline_profile", ["kernel_details"]) == ["task_time", "trace_view"]
