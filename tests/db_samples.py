"""Launch rows in the simulator's ``kernel_rows`` shape, any number of them (vectorized), for the
DB-export tests and ``benchmarks/bench_profiler_db.py``."""

from __future__ import annotations

import numpy as np
import polars as pl

NAMES = ("sk_3_layer0_start_RmsNorm_end_MatMulV2", "MatMulV3_FP16_ND_high_performance_1", "hcom_allReduce__520_0_1",
         "trans_TransData_0", "FlashAttentionScore_0x7fe3a1_kernel0", "static_kernel_RmsNorm_5f3c0a9e1b2d4c6f8a7e9d0c1b2a3f4e_9_d0")
TYPES = ("SuperKernel", "MatMulV3", "hcom_allReduce_", "TransData", "FlashAttentionScore", "RmsNorm")
CORES = ("MIX_AIC", "AI_CORE", "COMMUNICATION", "AI_VECTOR_CORE", "MIX_AIC", "AI_VECTOR_CORE")


def launch_rows(n: int, seed: int = 0, *, per_step: int = 60) -> pl.DataFrame:
    """``n`` launches, ``per_step`` per decode step, one communication launch in six."""
    rng = np.random.default_rng(seed)
    kind = np.arange(n) % len(NAMES)
    dur = rng.integers(1_000, 90_000, n)
    gap = rng.integers(1, 3_000, n)
    start = 1_736_405_443_881_410_320 + np.concatenate(([0], np.cumsum(dur + gap)[:-1]))
    names = np.array(NAMES, dtype=object)[kind]
    names = np.where(kind == 1, np.char.add("MatMulV3_FP16_ND_", (np.arange(n) % 997).astype(str)).astype(object), names)
    return pl.DataFrame({
        "step": np.arange(n) // per_step + 1, "launch": np.arange(n) % per_step, "task_id": np.arange(n) % 65535,
        "stream_id": np.where(kind == 2, 9, 2), "name": names.astype(str), "type": np.array(TYPES)[kind],
        "core": np.array(CORES)[kind], "is_sk": kind == 0, "blocks": np.where(kind == 0, 24, 8), "mix_blocks": np.where(kind == 0, 24, 0),
        "start_ns": start, "dur_ns": dur, "wait_ns": gap,
    })  # fmt: skip
