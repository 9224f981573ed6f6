"""torch_npu profiler folder of one profiled rank (formats.md §2 and §6, docs/simulator.md).

Text export (``data_simplification=False``, so msprof's intermediate folder stays):
``ASCEND_PROFILER_OUTPUT/{kernel_details.csv, trace_view.json, step_trace_time.csv,
communication.json, communication_matrix.json}``, ``profiler_info_<rank>.json`` and
``profiler_metadata.json`` at the top, and the complete
``PROF_<n>_<ts>_<letters>/`` folder: ``host/`` and ``device_<id>/`` collection
files (:mod:`.profiler_layout`) and ``mindstudio_profiler_output/{op_summary,
task_time, step_trace}_<stamp>.csv`` (no ``analyze/``: msprof's own communication
analysis and its ``msprof_<stamp>.json`` timeline are not simulated, so msprof-analyze
reads this rank through ``ASCEND_PROFILER_OUTPUT/``, as it does whenever
``profiler_info_<rank>.json`` is present).
With ``export_type="db"`` instead the SQLite export
``ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_<rank>.db`` (:mod:`.profiler_db`)
and ``profiler_info_<rank>.json``, as the public DB export sample holds (no
``PROF_*`` folder). Every rank writes its own ``<host>_<pid>_<ts>_ascend_pt/``
folder (its own pid and ids; its device id in every row), built in a temp
folder and published by one rename: complete or not at all.

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

from sk_analytics.files.atomic import atomic_dir
from sk_runner.sim.identity import ProcessIds
from sk_runner.sim.model import StepModel
from sk_runner.sim.naming import GraphNames
from sk_runner.sim.profiler_comm import communication_matrix_text, communication_text
from sk_runner.sim.profiler_db import db_name, write_analysis_db, write_profiler_db
from sk_runner.sim.profiler_layout import CORE_MHZ, collection, export_stamp, prof_collection_files, profiler_info, profiler_metadata
from sk_runner.sim.profiler_overlap import THREADS, overlap_segments
from sk_runner.sim.timeline import Timeline, step_starts

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
OP_SUMMARY_HEADER = (
    "Device_id,Model ID,Task ID,Stream ID,Op Name,OP Type,OP State,Task Type,Task Start Time(us),Task Duration(us),Task Wait Time(us),"
    + KERNEL_DETAILS_HEADER.split(",Wait Time(us),", 1)[1]
)
"""msprof's ``op_summary`` header: its base columns, then the tensor and metric columns of kernel_details."""
MSPROF_STEP_TRACE_HEADER = ("Device_id,Iteration ID,FP Start(us),BP End(us),Iteration End(us),Iteration Time(us),FP to BP Time(us),"
                            "Iteration Refresh(us),Data Aug Bound(us),Model ID")  # fmt: skip
UNFUSED_CORE = {"AI_CORE": "AI_CORE", "AI_VECTOR_CORE": "AI_VECTOR_CORE", "AI_CPU": "AI_CPU", "COMMUNICATION": "COMMUNICATION"}


@dataclass(frozen=True)
class ProfilerPaths:
    root: Path
    kernel_details: Path
    trace_view: Path
    step_trace: Path
    prof: Path
    """The ``PROF_<n>_<ts>_<letters>/`` folder (text export)."""
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
    return ProfilerPaths(root, out / "kernel_details.csv", out / "trace_view.json", out / "step_trace_time.csv", root / f"PROF_000001_{stamp}_{letters}",
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
    return _task_table(rows, rts_model_id, device_id, KERNEL_DETAILS_HEADER, step_column=True)


def op_summary_text(rows: pl.DataFrame, rts_model_id: int, device_id: int = 0) -> str:
    """msprof's ``op_summary_<stamp>.csv``: kernel_details' rows without the step column, under msprof's
    column names; an hcom row has no task or stream id and waits ``0`` (as msprof writes them)."""
    return _task_table(rows, rts_model_id, device_id, OP_SUMMARY_HEADER, step_column=False)


def _task_table(rows: pl.DataFrame, rts_model_id: int, device_id: int, header: str, *, step_column: bool) -> str:
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
    task_id, stream_id, wait = pl.col("task_id").cast(pl.Utf8), pl.col("stream_id").cast(pl.Utf8), _us3(pl.col("wait_ns"))
    if not step_column:  # msprof: hcom rows carry N/A ids and a 0 wait
        task_id, stream_id = (pl.when(is_comm).then(pl.lit("N/A")).otherwise(e) for e in (task_id, stream_id))
        wait = pl.when(is_comm).then(pl.lit("0")).otherwise(wait)
    cells = [
        *([pl.col("step").cast(pl.Utf8)] if step_column else []), pl.lit(str(device_id)), pl.lit(str(rts_model_id)), task_id, stream_id,
        pl.col("name"), pl.col("type"), pl.when(is_comm).then(pl.lit("N/A")).otherwise(pl.lit("static")), pl.col("core"),
        pl.concat_str([_us3(pl.col("start_ns")), pl.lit("\t")]), _us3(pl.col("dur_ns")), wait,
        pl.col("blocks").cast(pl.Utf8), pl.col("mix_blocks").cast(pl.Utf8), pl.lit("NO"),
        shape, dtype, fmt, shape, dtype, fmt, pl.lit("N/A"),
        *[pl.when(is_comm).then(na).otherwise(m) for m, na in zip(metrics, na_metrics, strict=True)],
    ]
    lines = rows.select(pl.concat_str(cells, separator=",").alias("line")).get_column("line")
    return header + "\n" + "\n".join(lines.to_list()) + "\n"


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


def step_spans(decode_ms: np.ndarray, first_iteration: int, steps: int, host_base_ns: int) -> pl.DataFrame:
    """``step``, ``step_start_ns``, ``step_end_ns`` of the profiled decode steps (host clock; steps are back to back)."""
    starts = host_base_ns + np.round(step_starts(decode_ms) * 1000.0).astype(np.int64)
    ends = starts + np.round(decode_ms * 1e6).astype(np.int64)
    idx = np.arange(first_iteration, first_iteration + steps)
    return pl.DataFrame({"step": idx + 1, "step_start_ns": starts[idx], "step_end_ns": ends[idx]})


def step_tasks(rows: pl.DataFrame, spans: pl.DataFrame) -> pl.DataFrame:
    """``step, comm, s, e``: every task clipped to its step (host ns); ``comm`` for the hcom tasks."""
    return rows.join(spans, on="step").select(
        "step",
        (pl.col("core") == "COMMUNICATION").alias("comm"),
        pl.max_horizontal("start_ns", "step_start_ns").alias("s"),
        pl.min_horizontal(pl.col("start_ns") + pl.col("dur_ns"), "step_end_ns").alias("e"),
    )


def step_trace_frame(rows: pl.DataFrame, spans: pl.DataFrame, overlap: pl.DataFrame | None = None) -> pl.DataFrame:
    """torch_npu's step breakdown (µs), the sums of the Overlap Analysis segments
    (:func:`~sk_runner.sim.profiler_overlap.overlap_segments`): Computing = time some compute task
    runs, Communication = time some hcom task runs, Overlapped = both, Free = neither, so Computing +
    Communication(Not Overlapped) + Free is the step's wall time."""
    if overlap is None:
        overlap = overlap_segments(step_tasks(rows, spans), spans)
    sums = overlap.group_by("step").agg(
        *[((pl.col("e") - pl.col("s")).filter(pl.col("name") == name).sum() / 1000.0).alias(alias)
          for name, alias in (("Computing", "computing"), ("Communication(Not Overlapped)", "comm_not_overlapped"),
                              ("Communication", "communication"), ("Free", "free"))]
    )  # fmt: skip
    return (
        spans.join(sums, on="step", how="left")
        .with_columns(pl.col("computing", "comm_not_overlapped", "communication", "free").fill_null(0.0))
        .select(
            "step", "computing", "comm_not_overlapped", (pl.col("communication") - pl.col("comm_not_overlapped")).alias("overlapped"),
            "communication", "free", ((pl.col("step_end_ns") - pl.col("step_start_ns")) / 1000.0).alias("wall"),
        )
        .sort("step")
    )


def step_trace_text(rows: pl.DataFrame, spans: pl.DataFrame, overlap: pl.DataFrame | None = None) -> str:
    """``step_trace_time.csv``: one row per decode step (µs, 3 decimals); no pipeline stages, so Stage,
    Bubble and Preparing are 0 and nothing is received apart from the collective ops."""
    def f3(c: str) -> pl.Expr:
        return pl.col(c).round(3).cast(pl.Utf8)

    lines = step_trace_frame(rows, spans, overlap).select(
        pl.concat_str([pl.col("step").cast(pl.Utf8), f3("computing"), f3("comm_not_overlapped"), f3("overlapped"), f3("communication"),
                       f3("free"), pl.lit("0"), pl.lit("0"), f3("comm_not_overlapped"), pl.lit("0")], separator=",")  # fmt: skip
    ).to_series()
    return STEP_TRACE_HEADER + "\n" + "\n".join(lines.to_list()) + "\n"


def msprof_step_trace_text(spans: pl.DataFrame, rts_model_id: int, device_id: int) -> str:
    """msprof's ``step_trace_<stamp>.csv``: per iteration its end and time; an inference graph has no
    forward/backward marks (``N/A``) and its steps follow each other without a data gap (``0``)."""
    lines = spans.select(
        pl.concat_str([pl.lit(str(device_id)), pl.col("step").cast(pl.Utf8), pl.lit("N/A"), pl.lit("N/A"),
                       pl.concat_str([_us3(pl.col("step_end_ns")), pl.lit("\t")]), _us3(pl.col("step_end_ns") - pl.col("step_start_ns")),
                       pl.lit("N/A"), pl.lit("N/A"), pl.lit("0"), pl.lit(str(rts_model_id))], separator=",")  # fmt: skip
    ).to_series()
    return MSPROF_STEP_TRACE_HEADER + "\n" + "\n".join(lines.to_list()) + "\n"


def trace_view_text(rows: pl.DataFrame, rts_model_id: int, device_pid: int, spans: pl.DataFrame | None = None, host_pid: int = 0,
                    overlap: pl.DataFrame | None = None) -> str:
    """Chrome trace of the device tasks (host clock, ``ts`` as text with 3 decimals, as torch_npu writes it);
    with ``spans`` also the host process ``Python`` with one ``ProfilerStep#<n>`` (``cpu_op``) per decode step,
    the marks by which tools cut the timeline into steps; with ``overlap``
    (:func:`~sk_runner.sim.profiler_overlap.overlap_segments`) the ``Overlap Analysis`` process
    (pid ``device_pid + 1``) whose segments tools sum into computing, communication and free time.

    Kernel and SK names are ``[A-Za-z0-9_]`` only, so they need no JSON escaping."""
    meta: list[dict[str, object]] = []
    steps: list[str] = []
    if spans is not None:
        meta += [{"ph": "M", "name": "process_name", "pid": host_pid, "tid": 0, "args": {"name": "Python"}},
                 {"ph": "M", "name": "process_labels", "pid": host_pid, "tid": 0, "args": {"labels": "CPU"}},
                 {"ph": "M", "name": "process_sort_index", "pid": host_pid, "tid": 0, "args": {"sort_index": 0}},
                 {"ph": "M", "name": "thread_name", "pid": host_pid, "tid": host_pid, "args": {"name": f"Thread {host_pid}"}}]  # fmt: skip
        steps = spans.select(
            pl.concat_str([pl.lit('{"ph":"X","name":"ProfilerStep#'), pl.col("step").cast(pl.Utf8), pl.lit(f'","pid":{host_pid},"tid":{host_pid},"ts":"'),
                           _us3(pl.col("step_start_ns")), pl.lit('","dur":'), _us3(pl.col("step_end_ns") - pl.col("step_start_ns")),
                           pl.lit(',"cat":"cpu_op","args":{"Sequence number":-1,"Fwd thread id":0}}')])  # fmt: skip
        ).to_series().to_list()
    meta += [{"name": "process_name", "ph": "M", "pid": device_pid, "tid": 0, "args": {"name": "Ascend Hardware"}}]
    meta += [
        {"name": "thread_name", "ph": "M", "pid": device_pid, "tid": int(s), "args": {"name": f"Stream {int(s)}"}}
        for s in rows.get_column("stream_id").unique().sort().to_list()
    ]
    segments: list[str] = []
    if overlap is not None:
        opid = device_pid + 1
        meta += [{"ph": "M", "name": "process_name", "pid": opid, "tid": 0, "args": {"name": "Overlap Analysis"}}]
        meta += [{"ph": "M", "name": "thread_name", "pid": opid, "tid": tid, "args": {"name": name}} for name, tid in THREADS.items()]
        segments = overlap.select(
            pl.concat_str([pl.lit('{"name":"'), pl.col("name"), pl.lit(f'","pid":{opid},"tid":'), pl.col("name").replace_strict(THREADS).cast(pl.Utf8),
                           pl.lit(',"ts":"'), _us3(pl.col("s")), pl.lit('","dur":'), _us3(pl.col("e") - pl.col("s")), pl.lit(',"ph":"X"}')])  # fmt: skip
        ).to_series().to_list()
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
    return "[\n" + head + ",\n" + ",\n".join(steps + events.to_list() + segments) + "\n]\n"


def profiler_files(ids: ProcessIds, paths: ProfilerPaths, rows: pl.DataFrame, spans: pl.DataFrame, *, group: str,
                   env: dict[str, str], export_type: str) -> dict[str, str]:
    """Every text file of the rank's ``*_ascend_pt/`` folder, by path relative to it (the DB is written apart)."""
    last_end = spans.get_column("step_end_ns").max()
    end_ns = int(last_end) if isinstance(last_end, (int, float)) and last_end else ids.started_ns
    c = collection(ids, end_ns, spans.height, export_type)
    files = {f"profiler_info_{ids.rank}.json": json.dumps(profiler_info(ids.rank, c), indent=4)}
    if export_type == "db":
        return files
    comm, matrix = communication_text(rows, group), communication_matrix_text(rows)
    out = paths.kernel_details.parent.name
    prof = paths.prof.name
    stamp = export_stamp(c)
    overlap = overlap_segments(step_tasks(rows, spans), spans)
    files |= {
        "profiler_metadata.json": json.dumps(profiler_metadata(env), indent=4),
        f"{out}/kernel_details.csv": kernel_details_text(rows, ids.rts_model_id, ids.device_id),
        f"{out}/trace_view.json": trace_view_text(rows, ids.rts_model_id, device_pid=2, spans=spans, host_pid=ids.pid, overlap=overlap),
        f"{out}/step_trace_time.csv": step_trace_text(rows, spans, overlap),
        f"{out}/communication.json": comm,
        f"{out}/communication_matrix.json": matrix,
        **{f"{prof}/{name}": text for name, text in prof_collection_files(ids, c, prof).items()},
        f"{prof}/mindstudio_profiler_output/task_time_{stamp}.csv": task_time_text(rows, ids.device_id),
        f"{prof}/mindstudio_profiler_output/op_summary_{stamp}.csv": op_summary_text(rows, ids.rts_model_id, ids.device_id),
        f"{prof}/mindstudio_profiler_output/step_trace_{stamp}.csv": msprof_step_trace_text(spans, ids.rts_model_id, ids.device_id),
    }
    return files


def write_profiler_output(run_dir: Path, ids: ProcessIds, model: StepModel, names: GraphNames, timeline: Timeline,
                          decode_ms: np.ndarray, host_base_ns: int, *, export_type: str = "text", group: str = "0",
                          env: dict[str, str] | None = None) -> ProfilerPaths:
    """Write the rank's whole profiler folder at once (temp folder, one rename): complete or absent."""
    paths = profiler_paths(run_dir, ids)
    rows = kernel_rows(model, names, timeline, ids, host_base_ns)
    spans = step_spans(decode_ms, timeline.first_iteration, timeline.iterations, host_base_ns)
    files = profiler_files(ids, paths, rows, spans, group=group, env=env or {}, export_type=export_type)
    with atomic_dir(paths.root) as tmp:
        for rel, text in files.items():
            target = tmp / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            with open(target, "w", encoding="utf-8", newline="\n") as fh:
                fh.write(text)
        if export_type == "db":
            db = tmp / paths.db.relative_to(paths.root)
            write_profiler_db(db, rows, rts_model_id=ids.rts_model_id, device_id=ids.device_id, rank=ids.rank, pid=ids.pid, spans=spans,
                              host=ids.host)
            write_analysis_db(db.parent / "analysis.db", step_trace_frame(rows, spans), rows.filter(pl.col("core") == "COMMUNICATION"), group)
    return paths
