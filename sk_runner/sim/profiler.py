"""torch_npu profiler output of one profiled rank: ``kernel_details.csv``, ``trace_view.json``,
``step_trace_time.csv`` (``ASCEND_PROFILER_OUTPUT/``) and the msprof task-time summary
``task_time_<ts>.csv`` (``PROF_*/mindstudio_profiler_output/``), formats.md §2 and §6;
with ``export_type="db"`` instead the SQLite export
``ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_<rank>.db`` (:mod:`.profiler_db`) alone,
as torch_npu writes it. Every rank writes its own ``<host>_<pid>_<ts>_ascend_pt/``
folder (its own pid and ids; its device id in every row).

One row per SK launch and unfused op per decode step, host clock, µs with 3
decimals; ``Start Time(us)`` carries the trailing TAB of real files.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from sk_analytics.atomic import write_text
from sk_runner.sim.identity import ProcessIds
from sk_runner.sim.model import StepModel
from sk_runner.sim.profiler_db import db_name, write_profiler_db
from sk_runner.sim.naming import GraphNames
from sk_runner.sim.timeline import Timeline

KERNEL_DETAILS_HEADER = (
    "Step Id,Device_id,Model ID,Task ID,Stream ID,Name,Type,OP State,Accelerator Core,Start Time(us),Duration(us),"
    "Wait Time(us),Block Num,Mix Block Num,HF32 Eligible,Input Shapes,Input Data Types,Input Formats,Output Shapes,"
    "Output Data Types,Output Formats,Context ID,aicore_time(us),aic_total_cycles,aic_mac_time(us),aic_mac_ratio,"
    "aic_scalar_time(us),aic_scalar_ratio,aic_mte1_time(us),aic_mte1_ratio,aic_mte2_time(us),aic_mte2_ratio,"
    "aic_fixpipe_time(us),aic_fixpipe_ratio,aic_icache_miss_rate,aiv_time(us),aiv_total_cycles,aiv_vec_time(us),"
    "aiv_vec_ratio,aiv_scalar_time(us),aiv_scalar_ratio,aiv_mte2_time(us),aiv_mte2_ratio,aiv_mte3_time(us),"
    "aiv_mte3_ratio,aiv_icache_miss_rate,cube_utilization(%)"
)
"""The full (Level1, PipeUtilization) header of the 2026 builds: ``Device_id``, ``Block Num``."""
TASK_TIME_HEADER = "Device_id,kernel_name,kernel_type,stream_id,task_id,task_time(us),task_start(us),task_stop(us)"
STEP_TRACE_HEADER = (
    "Step,Computing,Communication(Not Overlapped),Overlapped,Communication,Free,Stage,Bubble,"
    "Communication(Not Overlapped and Exclude Receive),Preparing"
)
CORE_MHZ = 1800
UNFUSED_CORE = {"AI_CORE": "AI_CORE", "AI_VECTOR_CORE": "AI_VECTOR_CORE", "AI_CPU": "AI_CPU", "COMMUNICATION": "COMMUNICATION"}


@dataclass(frozen=True)
class ProfilerPaths:
    root: Path
    kernel_details: Path
    trace_view: Path
    step_trace: Path
    task_time: Path
    db: Path


def profiler_paths(run_dir: Path, ids: ProcessIds) -> ProfilerPaths:
    """``<host>_<pid>_<ts>_ascend_pt/`` with its two output folders (torch_npu layout).

    ``<ts>`` is local time to the millisecond, truncated as torch_npu does
    (``strftime("%Y%m%d%H%M%S%f")[:-3]``); whole seconds are taken in integers,
    since the float ``started_ns / 1e9`` rounds to the next second in the last
    ~100 ns before one (tests/test_torch_npu_api.py checks the rule).
    """
    seconds, rest_ns = divmod(ids.started_ns, 1_000_000_000)
    stamp = time.strftime("%Y%m%d%H%M%S", time.localtime(seconds)) + f"{rest_ns // 1_000_000:03d}"
    root = run_dir / f"{ids.host}_{ids.pid}_{stamp}_ascend_pt"
    letters = "".join(chr(65 + int(c, 16) % 26) for c in f"{ids.rng_seed:016x}"[:16])
    out = root / "ASCEND_PROFILER_OUTPUT"
    prof = root / f"PROF_000001_{stamp}_{letters}" / "mindstudio_profiler_output"
    return ProfilerPaths(root, out / "kernel_details.csv", out / "trace_view.json", out / "step_trace_time.csv", prof / f"task_time_{stamp}.csv",
                         out / db_name(ids.rank))


def kernel_rows(model: StepModel, names: GraphNames, timeline: Timeline, ids: ProcessIds, host_base_ns: int) -> pl.DataFrame:
    """One row per launch per decode step: ids, names, exact host start (ns) and duration (µs)."""
    graph = model.graph
    n_it, n_l = timeline.launch_start.shape
    first_m = graph.launch_first
    kt = np.array(graph.member_kernel_type, dtype=object)[first_m]
    op = np.array(graph.member_op, dtype=object)[first_m]
    is_sk = graph.launch_is_sk
    type_ = np.where(is_sk, "SuperKernel", op)
    core = np.where(is_sk, np.where(names.sk_has_cube, "MIX_AIC", "MIX_AIV"), [UNFUSED_CORE.get(k, "AI_CORE") for k in kt])
    blocks = np.where(is_sk, names.sk_block_num, graph.member_blocks[first_m])
    mix = np.where(is_sk, names.sk_mix_block_num, 0)
    start_ns = host_base_ns + np.round(timeline.launch_start * 1000.0).astype(np.int64)
    dur_ns = np.round(timeline.launch_dur * 1000.0).astype(np.int64)
    stream = names.stream_id
    frame = pl.DataFrame(
        {
            "step": np.repeat(np.arange(timeline.first_iteration, timeline.first_iteration + n_it) + 1, n_l),
            "launch": np.tile(np.arange(n_l), n_it),
            "task_id": (ids.task_id_base + np.arange(n_it * n_l)) % 65535,
            "stream_id": np.tile(stream, n_it),
            "name": np.tile(np.array(names.sk_name, dtype=object), n_it).astype(str),
            "type": np.tile(type_, n_it).astype(str),
            "core": np.tile(core, n_it).astype(str),
            "is_sk": np.tile(is_sk, n_it),
            "blocks": np.tile(blocks, n_it),
            "mix_blocks": np.tile(mix, n_it),
            "start_ns": start_ns.ravel(),
            "dur_ns": dur_ns.ravel(),
        }
    )
    prev_end = (pl.col("start_ns") + pl.col("dur_ns")).shift(1).over("stream_id", order_by="start_ns")
    return frame.with_columns(((pl.col("start_ns") - prev_end).clip(lower_bound=0).fill_null(0)).alias("wait_ns"))


def _us3(ns: pl.Expr) -> pl.Expr:
    return pl.concat_str([(ns // 1000).cast(pl.Utf8), pl.lit("."), (ns % 1000).cast(pl.Utf8).str.zfill(3)])


def _fixed(expr: pl.Expr, decimals: int = 3) -> pl.Expr:
    return expr.round(decimals).cast(pl.Utf8)


def kernel_details_text(rows: pl.DataFrame, rts_model_id: int, device_id: int = 0) -> str:
    """CSV text of kernel_details.csv (full header, SK rows and unfused ops)."""
    dur = pl.col("dur_ns") / 1000.0
    is_comm = pl.col("core") == "COMMUNICATION"
    cube = pl.col("core").is_in(["MIX_AIC", "AI_CORE"])
    vec = pl.col("core").is_in(["MIX_AIC", "MIX_AIV", "AI_VECTOR_CORE"])
    aic = pl.when(cube).then(dur * 0.93).otherwise(0.0)
    aiv = pl.when(vec).then(dur * 0.88).otherwise(0.0)
    shape = pl.when(pl.col("is_sk") | is_comm).then(pl.lit("N/A")).otherwise(pl.lit('"""8,7168"""'))
    dtype = pl.when(pl.col("is_sk") | is_comm).then(pl.lit("N/A")).otherwise(pl.lit("DT_BF16"))
    fmt = pl.when(pl.col("is_sk") | is_comm).then(pl.lit("N/A")).otherwise(pl.lit("ND"))
    metrics = [
        _fixed(aic), (aic * CORE_MHZ).round(0).cast(pl.Int64).cast(pl.Utf8), _fixed(aic * 0.61), _fixed(pl.when(cube).then(0.61).otherwise(0.0)),
        _fixed(aic * 0.18), _fixed(pl.when(cube).then(0.18).otherwise(0.0)), _fixed(aic * 0.22), _fixed(pl.when(cube).then(0.22).otherwise(0.0)),
        _fixed(aic * 0.74), _fixed(pl.when(cube).then(0.74).otherwise(0.0)), _fixed(aic * 0.09), _fixed(pl.when(cube).then(0.09).otherwise(0.0)),
        _fixed(pl.when(cube).then(0.004).otherwise(0.0)),
        _fixed(aiv), (aiv * CORE_MHZ).round(0).cast(pl.Int64).cast(pl.Utf8), _fixed(aiv * 0.35), _fixed(pl.when(vec).then(0.35).otherwise(0.0)),
        _fixed(aiv * 0.21), _fixed(pl.when(vec).then(0.21).otherwise(0.0)), _fixed(aiv * 0.57), _fixed(pl.when(vec).then(0.57).otherwise(0.0)),
        _fixed(aiv * 0.33), _fixed(pl.when(vec).then(0.33).otherwise(0.0)), _fixed(pl.when(vec).then(0.011).otherwise(0.0)),
        _fixed(pl.when(cube).then(61.0).otherwise(0.0)),
    ]
    na_metrics = [pl.lit("N/A")] * len(metrics)
    cells = [
        pl.col("step").cast(pl.Utf8), pl.lit(str(device_id)), pl.lit(str(rts_model_id)), pl.col("task_id").cast(pl.Utf8), pl.col("stream_id").cast(pl.Utf8),
        pl.col("name"), pl.col("type"), pl.when(is_comm).then(pl.lit("N/A")).otherwise(pl.lit("static")), pl.col("core"),
        pl.concat_str([_us3(pl.col("start_ns")), pl.lit("\t")]), _us3(pl.col("dur_ns")), _us3(pl.col("wait_ns")),
        pl.col("blocks").cast(pl.Utf8), pl.col("mix_blocks").cast(pl.Utf8), pl.lit("NO"),
        shape, dtype, fmt, shape, dtype, fmt, pl.lit("N/A"),
        *[pl.when(is_comm).then(na).otherwise(m) for m, na in zip(metrics, na_metrics)],
    ]
    lines = rows.select(pl.concat_str(cells, separator=",").alias("line")).get_column("line")
    return KERNEL_DETAILS_HEADER + "\n" + "\n".join(lines.to_list()) + "\n"


def task_time_text(rows: pl.DataFrame, device_id: int = 0) -> str:
    start = _us3(pl.col("start_ns"))
    lines = rows.select(
        pl.concat_str(
            [pl.lit(str(device_id)), pl.col("name"), pl.when(pl.col("is_sk")).then(pl.lit("KERNEL_MIX_AIC")).otherwise(pl.col("core")),
             pl.col("stream_id").cast(pl.Utf8), pl.col("task_id").cast(pl.Utf8), _us3(pl.col("dur_ns")), start, _us3(pl.col("start_ns") + pl.col("dur_ns"))],
            separator=",",
        ).alias("line")
    ).get_column("line")
    return TASK_TIME_HEADER + "\n" + "\n".join(lines.to_list()) + "\n"


def step_trace_text(rows: pl.DataFrame, decode_ms: np.ndarray, first_iteration: int) -> str:
    """One row per decode step: computing / communication / free time (µs)."""
    per_step = (
        rows.group_by("step", maintain_order=True)
        .agg(
            (pl.col("dur_ns").filter(pl.col("core") != "COMMUNICATION").sum() / 1000.0).alias("computing"),
            (pl.col("dur_ns").filter(pl.col("core") == "COMMUNICATION").sum() / 1000.0).alias("comm"),
        )
        .sort("step")
    )
    total = decode_ms[first_iteration : first_iteration + per_step.height] * 1000.0
    free = np.maximum(total - per_step["computing"].to_numpy() - per_step["comm"].to_numpy(), 0.0)
    lines = [
        f"{s},{c:.3f},{m:.3f},0.000,{m:.3f},{f:.3f},0.000,0.000,{m:.3f},0.000"
        for s, c, m, f in zip(per_step["step"].to_list(), per_step["computing"].to_list(), per_step["comm"].to_list(), free.tolist())
    ]
    return STEP_TRACE_HEADER + "\n" + "\n".join(lines) + "\n"


def trace_view_text(rows: pl.DataFrame, rts_model_id: int, device_pid: int) -> str:
    """Chrome trace of the device tasks (host clock, ``ts`` as text with 3 decimals, as torch_npu writes it).

    Kernel and SK names are ``[A-Za-z0-9_]`` only, so they need no JSON escaping."""
    meta = [{"name": "process_name", "ph": "M", "pid": device_pid, "tid": 0, "args": {"name": "Ascend Hardware"}}]
    meta += [
        {"name": "thread_name", "ph": "M", "pid": device_pid, "tid": int(s), "args": {"name": f"Stream {int(s)}"}}
        for s in rows.get_column("stream_id").unique().sort().to_list()
    ]
    head = ",\n".join(json.dumps(m, separators=(",", ":")) for m in meta)
    events = rows.select(
        pl.concat_str(
            [
                pl.lit('{"name":"'), pl.col("name"), pl.lit(f'","ph":"X","pid":{device_pid},"tid":'),
                pl.col("stream_id").cast(pl.Utf8), pl.lit(',"ts":"'), _us3(pl.col("start_ns")), pl.lit('","dur":'), _us3(pl.col("dur_ns")),
                pl.lit(f',"args":{{"Model Id":{rts_model_id},"Task Id":'), pl.col("task_id").cast(pl.Utf8), pl.lit(',"Stream Id":'),
                pl.col("stream_id").cast(pl.Utf8), pl.lit(',"Task Type":"'), pl.col("core"), pl.lit('"}}'),
            ]
        ).alias("line")
    ).get_column("line")
    return "[\n" + head + ",\n" + ",\n".join(events.to_list()) + "\n]\n"




def write_profiler_output(run_dir: Path, ids: ProcessIds, model: StepModel, names: GraphNames, timeline: Timeline,
                          decode_ms: np.ndarray, host_base_ns: int, *, export_type: str = "text") -> ProfilerPaths:
    paths = profiler_paths(run_dir, ids)
    rows = kernel_rows(model, names, timeline, ids, host_base_ns)
    if export_type == "db":
        write_profiler_db(paths.db, rows, rts_model_id=ids.rts_model_id, device_id=ids.device_id, rank=ids.rank, pid=ids.pid)
        return paths
    write_text(paths.kernel_details, kernel_details_text(rows, ids.rts_model_id, ids.device_id))
    write_text(paths.task_time, task_time_text(rows, ids.device_id))
    write_text(paths.step_trace, step_trace_text(rows, decode_ms, timeline.first_iteration))
    write_text(paths.trace_view, trace_view_text(rows, ids.rts_model_id, device_pid=2))
    return paths
