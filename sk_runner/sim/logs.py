"""Rank logs (``log_<rank>.log``, formats.md §1) and the correctness result of a simulated run."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sk_analytics.files.atomic import write_json, write_text

RELATIVE_TOLERANCE = 1e-4
WRONG_OUTPUT_ERROR = 0.031
"""Relative output error of a run whose output is wrong (early_start without adaptation)."""


@dataclass(frozen=True)
class Correctness:
    """The output checksum against the reference output (``correctness.json``)."""

    passed: bool
    checksum: float
    reference: float
    tolerance: float
    detail_zh: str

    def as_json(self) -> dict[str, object]:
        return {"passed": self.passed, "checksum": self.checksum, "reference": self.reference, "tolerance": self.tolerance, "detail_zh": self.detail_zh}


def reference_checksum(build_id: str) -> float:
    """Checksum of the reference output of this network build (deterministic)."""
    digest = int(hashlib.sha256(build_id.encode()).hexdigest()[:12], 16)
    return round(1000.0 + digest % 9_000_000 / 1000.0, 6)


def correctness(build_id: str, wrong: bool, rng: np.random.Generator, why: str = "") -> Correctness:
    """Checksum of this run's output: within tolerance unless the output is wrong."""
    reference = reference_checksum(build_id)
    tolerance = round(reference * RELATIVE_TOLERANCE, 6)
    error = WRONG_OUTPUT_ERROR if wrong else float(rng.normal(0.0, RELATIVE_TOLERANCE / 20))
    checksum = round(reference * (1.0 + error), 6)
    passed = abs(checksum - reference) <= tolerance
    if passed:
        detail = f"输出校验和 {checksum} 与参考值 {reference} 之差在容差 {tolerance} 以内，精度校验通过。"
    else:
        detail = f"输出校验和 {checksum} 与参考值 {reference} 之差超过容差 {tolerance}，精度校验失败。{why}"
    return Correctness(passed, checksum, reference, tolerance, detail)


def _stamp() -> str:
    now = time.time()
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(now)) + f".{int(now * 1000) % 1000:03d}"


def rank_log_text(rank: int, ranks: int, header: list[str], prefill_ms: float, decode_ms: np.ndarray, footer: list[str]) -> str:
    """One rank's log: realistic chatter, one prefill line, then one line per decode step."""
    stamp = _stamp()
    lines = [f"[INFO] {stamp} [rank {rank}/{ranks}] {text}" for text in header]
    lines.append(f"Inference time (prefill): {prefill_ms:.3f} ms")
    lines.extend(f"Inference time (decode): {v:.3f} ms" for v in decode_ms)
    lines.extend(f"[INFO] {stamp} [rank {rank}/{ranks}] {text}" for text in footer)
    return "\n".join(lines) + "\n"


def write_rank_logs(run_dir: Path, header: list[str], prefill_ms: np.ndarray, decode_ms: np.ndarray, footer: list[str],
                    only: Sequence[int] | None = None) -> None:
    """``log_<rank>.log`` for every rank (``only``: the ranks of this host's group); ``decode_ms`` is ranks x samples."""
    ranks = decode_ms.shape[0]
    for rank in range(ranks) if only is None else only:
        write_text(run_dir / f"log_{rank}.log", rank_log_text(rank, ranks, header, float(prefill_ms[rank]), decode_ms[rank], footer))


def write_correctness(run_dir: Path, result: Correctness) -> None:
    write_json(run_dir / "correctness.json", result.as_json())
