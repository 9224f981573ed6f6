"""Generated artifacts in the real formats: kernel_details.csv variants and rank logs.

Used by the demo, the tests (fixtures written to ``tmp_path`` or ``fixtures/``)
and the benchmarks. Everything is vectorized so that a 2,000,000-row CSV is
written in seconds, and deterministic for a given seed. The logical frame of a
sample (:func:`kernel_rows`) carries the exact values (``start_ns``) that a
parser must get back from the encoded file.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from sk_analytics.files.atomic import atomic_path, write_text

START_NS = 1_736_405_443_881_410_320
"""First kernel start of a generated sample (host clock, ns): the first row of
the real Level0 sample, ``1736405443881410.320``."""

NAMES = (
    "trans_TransData_0",
    "static_kernel_RmsNorm_5f3c0a9e1b2d4c6f8a7e9d0c1b2a3f4e_9_d0",
    "aclnnMatmul_MatMulCommon_MatMulV2",
    "sk_3_layer0_start_RmsNorm_end_MatMulV2",
    "MatMulV3_FP16_ND_high_performance_1",
    "sk_7_none_start_AddRmsNorm_end_FlashAttentionScore",
    "hcom_allReduce__520_0_1",
    "FlashAttentionScore_0x7fe3a1_kernel0",
)
"""Kernel names of generated samples, SK rows (``sk_`` prefix) among them."""

TYPES = ("TransData", "RmsNorm", "MatMulV2", "SuperKernel", "MatMulV3", "N/A", "hcom_allReduce_", "FlashAttentionScore")
CORES = ("AI_VECTOR_CORE", "AI_VECTOR_CORE", "AI_CORE", "MIX_AIC", "AI_CORE", "MIX_AIV", "HCCL", "MIX_AIC")
SHAPES = ('"32,3,224,224"', '"4096,512;8192,512"', "N/A", '""', '"1"')
DTYPES = ("FLOAT", "DT_BF16;DT_BF16", "N/A", "FLOAT16", "INT8")

METRICS = (
    "aicore_time(us)", "aic_total_cycles", "aic_mac_time(us)", "aic_mac_ratio",
    "aic_scalar_time(us)", "aic_scalar_ratio", "aic_mte1_time(us)", "aic_mte1_ratio",
    "aic_mte2_time(us)", "aic_mte2_ratio", "aic_fixpipe_time(us)", "aic_fixpipe_ratio",
    "aic_icache_miss_rate", "aiv_time(us)", "aiv_total_cycles", "aiv_vec_time(us)",
    "aiv_vec_ratio", "aiv_scalar_time(us)", "aiv_scalar_ratio", "aiv_mte2_time(us)",
    "aiv_mte2_ratio", "aiv_mte3_time(us)", "aiv_mte3_ratio", "aiv_icache_miss_rate",
    "cube_utilization(%)",
)  # fmt: skip
"""PipeUtilization metric columns of a Level1 file (formats.md §2: 10-25 of them)."""


@dataclass(frozen=True)
class KernelDetailsVariant:
    """One header/encoding variant of kernel_details.csv (formats.md §2)."""

    level: int = 1
    """0: minimal header (Type/Accelerator Core are N/A for compute kernels); 1: full."""
    device_id: bool = True
    step_header: str | None = "Step Id"
    """``Step Id``, MindSpore's ``Step ID`` or None (column absent)."""
    block_word: str = "Dim"
    """``Dim`` (before 2026) or ``Num``: ``Block Dim``/``Block Num``."""
    metrics: int = 13
    crlf: bool = False
    start_tab: bool = True
    """``Start Time(us)`` ends with a TAB (``1736405443881410.320\\t``)."""
    quote_start: bool = False
    """``Start Time(us)`` quoted (``"1736413971558972.912\\t"``)."""

    def header(self) -> list[str]:
        head: list[str] = [self.step_header] if self.step_header else []
        if self.device_id:
            head.append("Device_id")
        block = f"Block {self.block_word}"
        if self.level == 0:
            return head + ["Name", "Type", "Accelerator Core", "Start Time(us)", "Duration(us)", "Wait Time(us)", block]
        return head + [
            "Model ID", "Task ID", "Stream ID", "Name", "Type", "OP State", "Accelerator Core",
            "Start Time(us)", "Duration(us)", "Wait Time(us)", block, f"Mix {block}", "HF32 Eligible",
            "Input Shapes", "Input Data Types", "Input Formats", "Output Shapes", "Output Data Types",
            "Output Formats", "Context ID", *METRICS[: self.metrics],
        ]  # fmt: skip


VARIANTS: dict[str, KernelDetailsVariant] = {
    "level0_minimal": KernelDetailsVariant(level=0, device_id=False, crlf=True),
    "level0_device_block_num": KernelDetailsVariant(level=0, block_word="Num", start_tab=False),
    "level1_full": KernelDetailsVariant(level=1, metrics=25),
    "level1_block_num_crlf": KernelDetailsVariant(level=1, block_word="Num", crlf=True, metrics=10),
    "level1_no_device_quoted_start": KernelDetailsVariant(level=1, device_id=False, quote_start=True),
    "level1_mindspore_step_id": KernelDetailsVariant(level=1, step_header="Step ID", start_tab=False),
    "level1_no_step": KernelDetailsVariant(level=1, step_header=None, metrics=0),
}
"""Every variant that real files show; the generated fixtures cover each."""


def kernel_rows(n: int, seed: int = 0, *, start_ns: int = START_NS) -> pl.DataFrame:
    """The logical content of an ``n``-row sample: exact values, text as written.

    ``start_ns`` is increasing with random gaps; ``start_text`` is its exact
    microsecond text with 3 decimals. Type/core are N/A at Level0 for every
    non-SK kernel (the encoder handles that).
    """
    rng = np.random.default_rng(seed)
    pick = rng.integers(0, len(NAMES), n)
    gaps = rng.integers(1_000, 400_000, n, dtype=np.int64)
    starts = start_ns + np.cumsum(gaps) - gaps[0]
    frame = pl.DataFrame(
        {
            "step_id": (np.arange(n) // 1000 + 1).astype(np.int64),
            "device_id": np.zeros(n, dtype=np.int64) + seed % 8,
            "model_id": np.where(pick % 3 == 0, 4294967295, 7),
            "task_id": np.arange(n, dtype=np.int64) + 11051,
            "stream_id": pick % 4 + 2,
            "pick": pick,
            "start_ns": starts,
            "duration_ns": rng.integers(100, 900_000, n, dtype=np.int64),
            "wait_ns": rng.integers(0, 120_000, n, dtype=np.int64),
            "block": rng.integers(1, 49, n, dtype=np.int64),
        }
    )
    return frame.select(
        "step_id", "device_id", "model_id", "task_id", "stream_id",
        _pick(NAMES).alias("name"),
        _pick(TYPES).alias("type"),
        pl.when(pl.col("pick") % 2 == 0).then(pl.lit("dynamic")).otherwise(pl.lit("N/A")).alias("op_state"),
        _pick(CORES).alias("accelerator_core"),
        "start_ns",
        _us_text(pl.col("start_ns")).alias("start_text"),
        _us_text(pl.col("duration_ns")).alias("duration_text"),
        _us_text(pl.col("wait_ns")).alias("wait_text"),
        pl.col("block").alias("block_num"),
        (pl.col("block") % 3).alias("mix_block_num"),
        _pick(SHAPES, modulo=len(SHAPES)).alias("input_shapes"),
        _pick(DTYPES, modulo=len(DTYPES)).alias("input_data_types"),
        _pick(SHAPES[::-1], modulo=len(SHAPES)).alias("output_shapes"),
    )  # fmt: skip


def _pick(values: Sequence[str], *, modulo: int | None = None) -> pl.Expr:
    index = pl.col("pick") if modulo is None else (pl.col("pick") + pl.col("task_id")) % modulo
    return pl.lit(pl.Series(list(values), dtype=pl.Utf8)).gather(index)


def _us_text(ns: pl.Expr) -> pl.Expr:
    """Exact microsecond text with 3 decimals of an integer ns value."""
    return pl.concat_str((ns // 1000).cast(pl.Utf8), pl.lit("."), (ns % 1000).cast(pl.Utf8).str.zfill(3))


def _csv_field(expr: pl.Expr) -> pl.Expr:
    """CSV-quote a text column where needed (separator, quote or newline inside)."""
    needs = expr.str.contains(r'[,"\n\r]')
    quoted = pl.concat_str(pl.lit('"'), expr.str.replace_all('"', '""', literal=True), pl.lit('"'))
    return pl.when(needs).then(quoted).otherwise(expr)


def encode_kernel_details(rows: pl.DataFrame, variant: KernelDetailsVariant) -> pl.Series:
    """The data lines (no terminator) of ``rows`` written as ``variant``."""
    na = pl.lit("N/A")
    is_sk = pl.col("name").str.starts_with("sk_")
    start = pl.col("start_text") + ("\t" if variant.start_tab else "")
    if variant.quote_start:
        start = pl.concat_str(pl.lit('"'), start, pl.lit('"'))
    text = {
        "Step Id": pl.col("step_id").cast(pl.Utf8),
        "Step ID": pl.col("step_id").cast(pl.Utf8),
        "Device_id": pl.col("device_id").cast(pl.Utf8),
        "Model ID": pl.col("model_id").cast(pl.Utf8),
        "Task ID": pl.col("task_id").cast(pl.Utf8),
        "Stream ID": pl.col("stream_id").cast(pl.Utf8),
        "Name": _csv_field(pl.col("name")),
        "Type": pl.col("type") if variant.level else pl.when(is_sk).then(pl.col("type")).otherwise(na),
        "OP State": pl.col("op_state"),
        "Accelerator Core": pl.col("accelerator_core") if variant.level else pl.when(is_sk).then(pl.col("accelerator_core")).otherwise(na),
        "Start Time(us)": start,
        "Duration(us)": pl.col("duration_text"),
        "Wait Time(us)": pl.col("wait_text"),
        f"Block {variant.block_word}": pl.col("block_num").cast(pl.Utf8),
        f"Mix Block {variant.block_word}": pl.col("mix_block_num").cast(pl.Utf8),
        "HF32 Eligible": pl.lit("NO"),
        "Input Shapes": _csv_field(pl.col("input_shapes")),
        "Input Data Types": _csv_field(pl.col("input_data_types")),
        "Input Formats": pl.lit("ND"),
        "Output Shapes": _csv_field(pl.col("output_shapes")),
        "Output Data Types": pl.lit("FLOAT"),
        "Output Formats": pl.lit("ND"),
        "Context ID": na,
    }  # fmt: skip
    fields = [text.get(column, pl.col("wait_text")) for column in variant.header()]
    return rows.select(pl.concat_str(fields, separator=",").alias("line")).to_series()


def write_kernel_details(path: Path, rows: pl.DataFrame, variant: KernelDetailsVariant) -> Path:
    """Write ``rows`` as a kernel_details.csv of ``variant`` (atomically)."""
    eol = "\r\n" if variant.crlf else "\n"
    lines = encode_kernel_details(rows, variant)
    path.parent.mkdir(parents=True, exist_ok=True)
    if rows.height > 100_000:  # large benchmark files: stream through polars' writer
        with atomic_path(path) as tmp:
            pl.DataFrame({",".join(variant.header()): lines}).write_csv(tmp, quote_style="never", line_terminator=eol)
        return path
    write_text(path, eol.join([",".join(variant.header()), *lines.to_list()]) + eol)
    return path


def write_rank_logs(run_dir: Path, ranks: int, decode_ms: Sequence[Sequence[str]], prefill_ms: str | None = None) -> list[Path]:
    """Write ``log_<rank>.log`` files with the timing lines of formats.md §1.

    ``decode_ms[rank]`` are the decimal texts of that rank's decode samples;
    noise lines between them are ignored by the parser (as in real logs).
    """
    paths = []
    for rank in range(ranks):
        lines = [f"[rank {rank}] loading model", "warm-up"]
        if prefill_ms is not None:
            lines.append(f"Inference time (prefill): {prefill_ms} ms")
        lines += [f"Inference time (decode): {value} ms" for value in decode_ms[rank]]
        paths.append(write_text(run_dir / f"log_{rank}.log", "\n".join(lines) + "\n"))
    return paths
