"""torch_npu's DB export (``export_type=Db``) of the profiled rank:
``ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_<rank>.db`` (formats.md §2).

The same launches as ``kernel_details.csv`` (:func:`sk_runner.sim.profiler.kernel_rows`),
written in the real schema (table and column names and types of torch_npu's
``SCHEMA_VERSION`` 1.0.0, as in ``../shared/fixtures-real/msinsight-db-level0-rank0``):
compute launches in ``TASK`` + ``COMPUTE_TASK_INFO`` (joined on
``globalTaskId``, strings as ``STRING_IDS`` ids), communication launches in
``COMMUNICATION_OP``, the decode steps in ``STEP_TIME``. Unlike the sample,
``COMPUTE_TASK_INFO`` carries ``waitNs`` (newer builds write it), so the
wait time survives the round trip.

Written with the standard ``sqlite3`` module into a temp file that replaces
the target atomically.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterable, Sequence
from pathlib import Path

import polars as pl

from sk_analytics.files.atomic import atomic_path

SCHEMA_VERSION = (1, 0, 0)
NOT_IN_GRAPH = 4294967295
NA = "N/A"

TABLES: dict[str, str] = {
    "META_DATA": "name TEXT,value TEXT",
    "STRING_IDS": "id INTEGER PRIMARY KEY,value TEXT",
    "NPU_INFO": "id INTEGER,name TEXT",
    "RANK_DEVICE_MAP": "rankId INTEGER, deviceId INTEGER",
    "TASK": "startNs INTEGER,endNs INTEGER,deviceId INTEGER,connectionId INTEGER,globalTaskId INTEGER,globalPid INTEGER,"
            "taskType INTEGER,contextId INTEGER,streamId INTEGER,taskId INTEGER,modelId INTEGER",
    "COMPUTE_TASK_INFO": "name INTEGER,globalTaskId INTEGER PRIMARY KEY,blockDim INTEGER,mixBlockDim INTEGER,taskType INTEGER,"
                         "opType INTEGER,inputFormats INTEGER,inputDataTypes INTEGER,inputShapes INTEGER,outputFormats INTEGER,"
                         "outputDataTypes INTEGER,outputShapes INTEGER,attrInfo INTEGER,waitNs INTEGER",
    "COMMUNICATION_OP": "opName INTEGER,startNs INTEGER,endNs INTEGER,connectionId INTEGER,groupName INTEGER,opId INTEGER PRIMARY KEY,"
                        "relay INTEGER,retry INTEGER,dataType INTEGER,algType INTEGER,count NUMERIC,opType INTEGER",
    "STEP_TIME": "id INTEGER, startNs INTEGER, endNs INTEGER",
    "PYTORCH_API": "startNs TEXT, endNs TEXT, globalTid INTEGER, connectionId INTEGER, name INTEGER, sequenceNumber INTEGER, fwdThreadId INTEGER, "
                   "inputDtypes INTEGER, inputShapes INTEGER, callchainId INTEGER, type INTEGER",
    "CANN_API": "startNs INTEGER,endNs INTEGER,type INTEGER,globalTid INTEGER,connectionId INTEGER PRIMARY KEY,name INTEGER",
    "CONNECTION_IDS": "id INTEGER, connectionId INTEGER",
    "ENUM_API_TYPE": "id INTEGER PRIMARY KEY,name TEXT",
    "HOST_INFO": "hostUid TEXT,hostName TEXT",
}  # fmt: skip
"""Tables written (a subset of the real export), with the real column declarations. The host side
is the ``ProfilerStep#<n>`` marks alone (``PYTORCH_API``, type ``op``): the simulator models no
framework or CANN API calls, so ``CANN_API`` and ``CONNECTION_IDS`` are present and empty."""
ENUM_API_TYPE = ((5000, "runtime"), (5500, "hccl"), (10000, "node"), (15000, "model"), (20000, "acl"), (50001, "op"), (50002, "queue"),
                 (50003, "trace"), (50004, "mstx"))  # fmt: skip
"""torch_npu's API type enumeration (as in the public DB export sample)."""
API_OP = 50001

ANALYSIS_TABLES: dict[str, str] = {
    "StepTraceTime": "step TEXT, computing NUMERIC, communication_not_overlapped NUMERIC, overlapped NUMERIC, communication NUMERIC, "
                     "free NUMERIC, stage NUMERIC, bubble NUMERIC, communication_not_overlapped_and_exclude_receive NUMERIC, preparing NUMERIC",
    "CommAnalyzerTime": "hccl_op_name TEXT, group_name TEXT, start_timestamp NUMERIC, elapse_time NUMERIC, transit_time NUMERIC, "
                        "wait_time NUMERIC, synchronization_time NUMERIC, idle_time NUMERIC, step TEXT, type TEXT",
    "CommAnalyzerBandwidth": "hccl_op_name TEXT, group_name TEXT, transport_type TEXT, transit_size NUMERIC, transit_time NUMERIC, "
                             "bandwidth NUMERIC, large_packet_ratio NUMERIC, package_size NUMERIC, count NUMERIC, total_duration NUMERIC, "
                             "step TEXT, type TEXT",
    "CommAnalyzerMatrix": "hccl_op_name TEXT, group_name TEXT, src_rank TEXT, dst_rank TEXT, transport_type TEXT, transit_size NUMERIC, "
                          "transit_time NUMERIC, bandwidth NUMERIC, step TEXT, type TEXT, op_name TEXT",
}  # fmt: skip
"""``analysis.db`` (torch_npu's ``ASCEND_PROFILER_OUTPUT/analysis.db``), real column declarations."""


def db_name(rank: int) -> str:
    return f"ascend_pytorch_profiler_{rank}.db"


class _Strings:
    """The STRING_IDS dictionary, ids handed out in first-use order."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}

    def of(self, values: Iterable[str]) -> list[int]:
        return [self.ids.setdefault(v, len(self.ids)) for v in values]

    def rows(self) -> list[tuple[int, str]]:
        return [(i, v) for v, i in self.ids.items()]


def write_profiler_db(path: Path, rows: pl.DataFrame, *, rts_model_id: int, device_id: int = 0, rank: int = 0, pid: int = 0,
                      spans: pl.DataFrame | None = None, host: str = "") -> Path:
    """Write ``rows`` (:func:`~sk_runner.sim.profiler.kernel_rows` columns) as the DB export at ``path``; with
    ``spans`` (:func:`~sk_runner.sim.profiler.step_spans`) the steps are the profiler's step marks
    (``STEP_TIME`` and ``ProfilerStep#<n>``), else the envelope of each step's tasks."""
    rows = rows.sort("start_ns", maintain_order=True)
    is_comm = pl.col("core") == "COMMUNICATION"
    compute = rows.filter(~is_comm).with_row_index("gid")
    comm = rows.filter(is_comm)
    strings = _Strings()
    na = strings.of([NA])[0]
    shapes = strings.of(["8,7168"])[0]
    dtype = strings.of(["DT_BF16"])[0]
    fmt = strings.of(["ND"])[0]
    n = compute.height
    gid = compute["gid"].to_list()
    plain = (~compute["is_sk"]).to_list()
    names = strings.of(compute["name"].to_list())
    op_types = strings.of(compute["type"].to_list())
    cores = strings.of(compute["core"].to_list())
    rts_types = strings.of(["KERNEL_MIX_AIC" if sk else "KERNEL_AICORE" for sk in compute["is_sk"].to_list()])
    start, dur, wait = compute["start_ns"].to_list(), compute["dur_ns"].to_list(), compute["wait_ns"].to_list()
    end = [s + d for s, d in zip(start, dur, strict=True)]
    model = NOT_IN_GRAPH if rts_model_id is None else rts_model_id
    task = zip(start, end, [device_id] * n, gid, gid, [pid] * n, rts_types, [NOT_IN_GRAPH] * n,
               compute["stream_id"].to_list(), compute["task_id"].to_list(), [model] * n, strict=True)  # fmt: skip
    info = [
        (name, g, blocks, mix, core, op, fmt if p else na, dtype if p else na, shapes if p else na, fmt if p else na,
         dtype if p else na, shapes if p else na, na, w)
        for name, g, blocks, mix, core, op, p, w in zip(
            names, gid, compute["blocks"].to_list(), compute["mix_blocks"].to_list(), cores, op_types, plain, wait, strict=True
        )
    ]  # fmt: skip
    comm_names = strings.of(comm["name"].to_list())
    comm_type = strings.of(["hcom_allReduce_"])[0]
    comm_start = comm["start_ns"].to_list()
    comm_rows = [
        (name, s, s + d, n + i, 0, i, 0, 0, 0, 0, 0, comm_type)
        for i, (name, s, d) in enumerate(zip(comm_names, comm_start, comm["dur_ns"].to_list(), strict=True))
    ]
    if spans is None:
        steps = rows.group_by("step").agg(pl.col("start_ns").min().alias("s"), (pl.col("start_ns") + pl.col("dur_ns")).max().alias("e")).sort("step")
    else:
        steps = spans.select("step", pl.col("step_start_ns").alias("s"), pl.col("step_end_ns").alias("e")).sort("step")
    global_tid = (pid << 32) | pid
    step_names = strings.of([f"ProfilerStep#{s}" for s in steps["step"].to_list()])
    api = [(str(s), str(e), global_tid, None, name, -1, 0, None, None, None, API_OP)
           for s, e, name in zip(steps["s"].to_list(), steps["e"].to_list(), step_names, strict=True)]  # fmt: skip
    major, minor, micro = SCHEMA_VERSION
    meta = [("SCHEMA_VERSION_MICRO", str(micro)), ("SCHEMA_VERSION_MINOR", str(minor)), ("SCHEMA_VERSION_MAJOR", str(major)),
            ("SCHEMA_VERSION", f"{major}.{minor}.{micro}")]  # fmt: skip
    content: dict[str, Sequence[tuple[object, ...]] | Iterable[tuple[object, ...]]] = {
        "META_DATA": meta,
        "NPU_INFO": [(device_id, "Ascend910B")],
        "RANK_DEVICE_MAP": [(rank, device_id)],
        "TASK": task,
        "COMPUTE_TASK_INFO": info,
        "COMMUNICATION_OP": comm_rows,
        "STEP_TIME": list(steps.iter_rows()),
        "PYTORCH_API": api,
        "ENUM_API_TYPE": ENUM_API_TYPE,
        "HOST_INFO": [(str(int.from_bytes(hashlib.blake2b(host.encode(), digest_size=8).digest(), "big")), host)] if host else [],
        "STRING_IDS": strings.rows(),  # last: every string above has its id by now
    }
    return _write_sqlite(path, TABLES, content)


def write_analysis_db(path: Path, step_trace: pl.DataFrame, comm: pl.DataFrame, group: str) -> Path:
    """``analysis.db`` beside the DB export: torch_npu's step breakdown and communication analysis
    (the DB twins of ``step_trace_time.csv`` and ``communication*.json``), from
    :func:`~sk_runner.sim.profiler.step_trace_frame` and the hcom rows of ``kernel_rows``. As in the
    text export, an hcom op has no transit, wait or synchronization time and no link traffic, so the
    bandwidth and matrix tables have no rows."""
    f = step_trace.sort("step")
    trace = zip(
        [str(s) for s in f["step"].to_list()], f["computing"].round(3).to_list(), f["comm_not_overlapped"].round(3).to_list(),
        f["overlapped"].round(3).to_list(), f["communication"].round(3).to_list(), f["free"].round(3).to_list(),
        [0] * f.height, [0] * f.height, f["comm_not_overlapped"].round(3).to_list(), [0] * f.height, strict=True,
    )  # fmt: skip
    c = comm.sort("start_ns")
    elapse = (c["dur_ns"] / 1e6).to_list()
    times = zip(c["name"].to_list(), [group] * c.height, (c["start_ns"] / 1000.0).round(3).to_list(), elapse, [0] * c.height,
                [0] * c.height, [0] * c.height, elapse, [f"step{s}" for s in c["step"].to_list()], ["collective"] * c.height, strict=True)  # fmt: skip
    return _write_sqlite(path, ANALYSIS_TABLES, {"StepTraceTime": list(trace), "CommAnalyzerTime": list(times)})


def _write_sqlite(path: Path, tables: dict[str, str], content: dict[str, Sequence[tuple[object, ...]] | Iterable[tuple[object, ...]]]) -> Path:
    """Create ``tables`` and insert ``content`` into a temp file that replaces ``path``."""
    with atomic_path(path) as tmp:
        connection = sqlite3.connect(tmp)
        try:
            for table, columns in tables.items():
                connection.execute(f"CREATE TABLE {table} ({columns})")
            for table, values in content.items():
                width = tables[table].count(",") + 1
                connection.executemany(f"INSERT INTO {table} VALUES ({','.join('?' * width)})", values)
            connection.commit()
        finally:
            connection.close()
    return path
