"""Schema constants of every Parquet table: the contract between ingestion and analysis.

``docs/schema.md`` is generated from these constants (``sk-analyze schema``)
and a test fails when the two drift. Partition columns are not stored inside
the files: they come back from the hive path (``round=O1/role=trial/run=run-1``).
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

SCHEMA_VERSION = "sk-tune-parquet-v1"
"""Written into the key/value metadata of every Parquet file as ``schema_version``."""


@dataclass(frozen=True)
class Column:
    name: str
    dtype: pl.DataType | type[pl.DataType]
    doc: str
    nullable: bool = True


@dataclass(frozen=True)
class Table:
    """One table: its columns (file content) and its hive partition keys (path)."""

    name: str
    doc: str
    columns: tuple[Column, ...]
    partition_by: tuple[str, ...] = ()

    @property
    def schema(self) -> pl.Schema:
        return pl.Schema({c.name: c.dtype for c in self.columns})

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def conform(self, frame: pl.DataFrame | pl.LazyFrame) -> pl.DataFrame:
        """Select and cast ``frame`` to exactly this table's columns and dtypes."""
        lazy = frame.lazy()
        missing = [c.name for c in self.columns if c.name not in lazy.collect_schema().names()]
        if missing:
            raise ValueError(f"table {self.name}: frame lacks columns {missing}")
        return lazy.select([pl.col(c.name).cast(c.dtype) for c in self.columns]).collect()


def round_index(column: str = "round") -> pl.Expr:
    """Numeric order of Stage O round names: ``O0-INCUMBENT`` → 0, ``O1`` → 1, … ``O10`` → 10 (Int32).

    Null for a name that is no Stage O round (``DCCI``, an ad-hoc ingest's
    folder name, ``Sbest-BASE``). Sort by it instead of by name, where ``O10``
    comes before ``O2``.
    """
    return pl.col(column).str.extract(r"^O(\d+)(?:-|$)", 1).cast(pl.Int32).alias("round_index")


PARTITION_DOC = {
    "round": "Stage O round as a sweep writes it: `O0-INCUMBENT`, `O1`, `O2`, … (sort by the number, not the text: "
             "the explore frames carry `round_index`), `DCCI` for the diagnostic collections; "
             "the folder name for an ad-hoc `sk-analyze ingest`",
    "role": "what the data is in that round: `baseline` (O0's clean runs), `trial` (a candidate's clean runs), "
            "`baseline_profile`/`candidate_profile` (DCCI's collections, round `DCCI`); an ad-hoc ingest: `clean` "
            "inside `run-<k>` folders, else `profile` (or its `--role`)",
    "run": "run folder name (`run-1`, …) or the profile root name (`attempt-1`, …)",
}

TIMINGS = Table(
    "timings",
    "One row per timing sample of a rank log (`Inference time (decode|prefill): X ms`).",
    (
        Column("run_index", pl.Int32, "k of the `run-k` folder (null when the folder has no number)"),
        Column("rank", pl.Int32, "rank of `log_<rank>.log`", nullable=False),
        Column("phase", pl.Utf8, "`decode` or `prefill`", nullable=False),
        Column("sample_index", pl.Int32, "0-based index of the sample among this rank's samples of the same phase", nullable=False),
        Column("value_ms", pl.Float64, "sample value in ms (float view of value_text)", nullable=False),
        Column("value_text", pl.Utf8, "the exact decimal text of the sample as logged", nullable=False),
        Column("line", pl.Int32, "1-based line number in the log", nullable=False),
        Column("source_file", pl.Utf8, "log path relative to the ingested root", nullable=False),
    ),
    partition_by=("round", "role", "run"),
)

WEIGHT = "weight"
"""How many samples one row of a counted timings frame (or of the option trial's samples) stands for."""
IN_WARMUP = "in_warmup"
"""A counted timings frame's flag of decode samples inside the warm-up (kept for the bounds, left out of the statistics)."""

RUNS = Table(
    "runs",
    "One row per clean process started by the runner.",
    (
        Column("run_index", pl.Int32, "k of `run-k`", nullable=False),
        Column("status", pl.Utf8, "`ok`, `crash`, `timeout`, `wrong_output`, `bad_logs`", nullable=False),
        Column("exit_code", pl.Int32, "process exit code (null when killed by a signal)"),
        Column("signal", pl.Int32, "terminating signal number, if any"),
        Column("timed_out", pl.Boolean, "killed at the timeout", nullable=False),
        Column("started_ns", pl.Int64, "wall clock at start, ns since epoch", nullable=False),
        Column("ended_ns", pl.Int64, "wall clock at end, ns since epoch", nullable=False),
        Column("duration_s", pl.Float64, "wall time in seconds", nullable=False),
        Column("config_sha256", pl.Utf8, "SHA-256 of the exact execution config file", nullable=False),
        Column("env_hash", pl.Utf8, "SHA-256 of the canonical environment of the process", nullable=False),
        Column("fingerprint", pl.Utf8, "SHA-256 of the run's meta.json identity", nullable=False),
        Column("command", pl.Utf8, "the exact argv, JSON-encoded", nullable=False),
    ),
    partition_by=("round", "role", "run"),
)

KERNELS = Table(
    "kernels",
    "One row per kernel_details.csv row, columns normalised over all header variants; "
    "the DB export (ascend_pytorch_profiler_<rank>.db) gives the same rows and columns (docs/ingest.md).",
    (
        Column("row", pl.Int64, "1-based data row number (line number minus the header)", nullable=False),
        Column("step_id", pl.Int64, "`Step Id`/`Step ID` (null when absent or N/A)"),
        Column("device_id", pl.Int32, "`Device_id` (null in older builds)"),
        Column("model_id", pl.Int64, "`Model ID` (4294967295 = not in a graph; null at Level0)"),
        Column("task_id", pl.Int64, "`Task ID` (unstable across processes)"),
        Column("stream_id", pl.Int64, "`Stream ID` (unstable across processes)"),
        Column("name", pl.Utf8, "kernel name as written", nullable=False),
        Column("type", pl.Utf8, "`Type` (null for N/A)"),
        Column("op_state", pl.Utf8, "`OP State` (null for N/A or absent)"),
        Column("accelerator_core", pl.Utf8, "`Accelerator Core` (null for N/A)"),
        Column("start_ns", pl.Int64, "`Start Time(us)` as exact integer nanoseconds (host clock)", nullable=False),
        Column("start_text", pl.Utf8, "`Start Time(us)` text, trimmed", nullable=False),
        Column("duration_us", pl.Float64, "`Duration(us)`", nullable=False),
        Column("wait_us", pl.Float64, "`Wait Time(us)`"),
        Column("block_num", pl.Int64, "`Block Dim`/`Block Num`"),
        Column("mix_block_num", pl.Int64, "`Mix Block Dim`/`Mix Block Num`"),
        Column("input_shapes", pl.Utf8, "`Input Shapes` with the literal quotes removed"),
        Column("input_data_types", pl.Utf8, "`Input Data Types`"),
        Column("output_shapes", pl.Utf8, "`Output Shapes` with the literal quotes removed"),
        Column("is_sk", pl.Boolean, "SuperKernel row: Type == SuperKernel or name starts with `sk_`", nullable=False),
        Column("canonical_op", pl.Utf8, "canonical op token of the name (formats.md §4)"),
        Column("source_file", pl.Utf8, "csv path relative to the ingested root", nullable=False),
    ),
    partition_by=("round", "role", "run"),
)

SK_EVENTS = Table(
    "sk_events",
    "One row per complete event of sk_prof_device_<id>.json (legacy sk_event_dev_device_<id>.json). Device clock.",
    (
        Column("record", pl.Int64, "0-based index of the event in the file", nullable=False),
        Column("device_id", pl.Int32, "device id from the file name", nullable=False),
        Column("lane", pl.Utf8, "`AIC` or `AIV` (the event's pid)", nullable=False),
        Column("core", pl.Int32, "physical core id (the event's tid)", nullable=False),
        Column("ts_ns", pl.Int64, "start, device clock, integer ns", nullable=False),
        Column("dur_ns", pl.Int64, "duration, integer ns", nullable=False),
        Column("model_id", pl.Utf8, "`args.modelId` (`<rtsModelId>_<callCount>`), or legacy `args.modelRI` as text", nullable=False),
        Column("sk_id", pl.Int64, "`args.skId`", nullable=False),
        Column("node_id", pl.Int64, "`args.nodeId` = child index in the SK task list; null for the SK span event"),
        Column("block_idx", pl.Int32, "i of the `[i/n]` prefix", nullable=False),
        Column("block_num", pl.Int32, "n of the `[i/n]` prefix", nullable=False),
        Column("is_span", pl.Boolean, "true for the SK span event (no nodeId)", nullable=False),
        Column("name", pl.Utf8, "raw event name", nullable=False),
        Column("func_name", pl.Utf8, "name without the `[i/n]` prefix", nullable=False),
        Column("canonical_op", pl.Utf8, "canonical op token of func_name (null for span events)"),
        Column("source_file", pl.Utf8, "json path relative to the ingested root", nullable=False),
    ),
    partition_by=("round", "role", "run"),
)

SK_STRUCTURE = Table(
    "sk_structure",
    "One row per member of a fused SK in sk_fused_nodes.log.",
    (
        Column("model_dir", pl.Utf8, "`model_<rtsModelId>_<callCount>` folder of the log", nullable=False),
        Column("sk_func_name", pl.Utf8, "`SK Function:` name", nullable=False),
        Column("scope_id", pl.Int64, "`scope id:` (unstable across processes)", nullable=False),
        Column("scope_name", pl.Utf8, "scope-name part of the SK name (`none` when unnamed)", nullable=False),
        Column("node_count", pl.Int32, "`Node Count:` of the header", nullable=False),
        Column("child_index", pl.Int32, "`[i]` = index in the SK task list (= sk_prof nodeId)", nullable=False),
        Column("node_id", pl.Int64, "graph nodeId (unstable)", nullable=False),
        Column("stream_id", pl.Int64, "streamId (unstable)", nullable=False),
        Column("member_kind", pl.Utf8, "`kernel`, `event`, `memory` or `default`", nullable=False),
        Column("member_detail", pl.Utf8, "event/memory payload text (e.g. `EventWait(eventId:0x…)`)"),
        Column("func_name", pl.Utf8, "kernel funcName (kernel members only)"),
        Column("canonical_op", pl.Utf8, "canonical op token of func_name"),
        Column("kernel_type", pl.Utf8, "kernelType (AIC_ONLY, AIV_ONLY, MIX_…)"),
        Column("num_blocks", pl.Int64, "numBlocks"),
        Column("line", pl.Int32, "1-based line of the member in the log", nullable=False),
        Column("source_file", pl.Utf8, "log path relative to the ingested root", nullable=False),
    ),
    partition_by=("round", "role", "run"),
)

SK_MARKERS = Table(
    "sk_markers",
    "Markers of super_kernel.log: phase markers, option lines, buffer-full lines.",
    (
        Column("kind", pl.Utf8, "`phase`, `option_set`, `option_invalid`, `buffer_full`, `sk_time_profiling`", nullable=False),
        Column("device", pl.Int32, "device of a buffer-full line"),
        Column("core", pl.Int32, "core of a buffer-full line"),
        Column("option_name", pl.Utf8, "option of an option line"),
        Column("value_text", pl.Utf8, "value set (or the invalid value)"),
        Column("valid_range", pl.Utf8, "`[a, b]` of an invalid-value line"),
        Column("default_text", pl.Utf8, "default used after an invalid value"),
        Column("text", pl.Utf8, "the line's payload", nullable=False),
        Column("line", pl.Int32, "1-based line", nullable=False),
        Column("source_file", pl.Utf8, "log path relative to the ingested root", nullable=False),
    ),
    partition_by=("round", "role", "run"),
)

SYMBOLS = Table(
    "symbols",
    "Symbol inventory: every kernel funcName of sk_graph_origin.json / sk_graph_updated.json.",
    (
        Column("graph", pl.Utf8, "`origin` or `updated`", nullable=False),
        Column("model_dir", pl.Utf8, "`model_<id>_<n>` folder", nullable=False),
        Column("stream_idx", pl.Int32, "streamIdxInGraph"),
        Column("node_id", pl.Int64, "nodeId (unstable)"),
        Column("node_type", pl.Utf8, "nodeType"),
        Column("func_name", pl.Utf8, "kernelParams.funcName", nullable=False),
        Column("canonical_op", pl.Utf8, "canonical op token of func_name"),
        Column("kernel_type", pl.Utf8, "kernelParams.kernelType"),
        Column("source_file", pl.Utf8, "json path relative to the ingested root", nullable=False),
    ),
    partition_by=("round", "role", "run"),
)

_SK_LAUNCH = (
    Column("process", pl.Utf8, "`sk_meta/<pid>` folder of the trace (launches map to metadata only inside it)", nullable=False),
    Column("device_id", pl.Int32, "device id of the trace", nullable=False),
    Column("model_id", pl.Utf8, "`args.modelId` (or legacy `modelRI`)", nullable=False),
    Column("sk_id", pl.Int64, "`args.skId` (= scope id in that process; unstable across processes)", nullable=False),
    Column("occurrence", pl.Int32, "0-based launch index of this SK in its process (derived, dcci-diff)", nullable=False),
    Column("start_ns", pl.Int64, "earliest start over cores, device clock ns", nullable=False),
    Column("end_ns", pl.Int64, "latest end over cores, device clock ns", nullable=False),
    Column("wall_us", pl.Float64, "envelope end - start in µs (the timing that is compared)", nullable=False),
)

SK_OCCURRENCES = Table(
    "sk_occurrences",
    "Derived by dcci-diff: one row per SK launch, from its span events (envelope over cores).",
    (
        *_SK_LAUNCH,
        Column("events", pl.Int32, "span events (one per participating core)", nullable=False),
        Column("lane_sum_us", pl.Float64, "sum of span durations: lane-workload diagnostic only", nullable=False),
        Column("span_complete", pl.Boolean, "as many core events as the SK's fullest launch", nullable=False),
    ),
    partition_by=("round", "role", "run"),
)

SK_CHILDREN = Table(
    "sk_children",
    "Derived by dcci-diff: one row per child node per SK launch (envelope and max-lane over cores).",
    (
        *_SK_LAUNCH,
        Column("node_id", pl.Int64, "`args.nodeId` = child index `[i]` in the SK task list", nullable=False),
        Column("max_lane_us", pl.Float64, "longest single-core duration of the child in this launch", nullable=False),
        Column("lane_sum_us", pl.Float64, "sum of the child's core durations: diagnostic only", nullable=False),
        Column("events", pl.Int32, "core events of the child in this launch", nullable=False),
        Column("complete", pl.Boolean, "as many core events as the child has in the SK's fullest launch", nullable=False),
    ),
    partition_by=("round", "role", "run"),
)

TABLES: dict[str, Table] = {
    t.name: t for t in (TIMINGS, RUNS, KERNELS, SK_EVENTS, SK_STRUCTURE, SK_MARKERS, SYMBOLS, SK_OCCURRENCES, SK_CHILDREN)
}
