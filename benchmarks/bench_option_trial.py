"""Benchmark of ``sk-analyze option-trial``: our Polars pipeline vs the pure-Python
reference formulas (tests/ot_reference.py), measured in the same run.

Data: baseline and candidate, 5 runs each x 8 ranks x 20,000 decode samples
(plus 8 prefill samples per rank), written as real rank logs into a temp dir.

    .venv/bin/python benchmarks/bench_option_trial.py [--samples 20000] [--runs 5] [--ranks 8] [--repeat 3]

Times are the best of ``--repeat`` runs of each side (the machine is shared;
the minimum is the least disturbed measurement), measured in the same process.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import ot_reference as ref  # noqa: E402

from sk_analytics.ingest.timings import read_candidate  # noqa: E402
from sk_analytics.option_trial import evaluate_option_trial  # noqa: E402

WARMUP = 8


def write_side(folder: Path, runs: int, ranks: int, samples: int, mean_ms: float, rng: np.random.Generator) -> None:
    """Rank logs with 3-decimal values around ``mean_ms`` and chatter lines."""
    for k in range(1, runs + 1):
        run_dir = folder / f"run-{k}"
        run_dir.mkdir(parents=True)
        run_offset = rng.normal(0, 0.01 * mean_ms)
        for rank in range(ranks):
            values = np.round(rng.gamma(50, (mean_ms + run_offset) / 50, samples), 3)
            lines = [f"[INFO] rank {rank} start"]
            lines += [f"Inference time (prefill): {v:.3f} ms" for v in rng.normal(300, 5, 8)]
            lines += [f"step {i} Inference time (decode): {v:.3f} ms" for i, v in enumerate(values)]
            (run_dir / f"log_{rank}.log").write_text("\n".join(lines) + "\n")


def ours(base: Path, cand: Path, ranks: int) -> dict:
    frames = [read_candidate(p, expected_ranks=ranks, warmup=WARMUP) for p in (base, cand)]
    return evaluate_option_trial(frames[0], {"O1": frames[1]}, warmup=WARMUP, expected_ranks=None)


def reference(base: Path, cand: Path) -> tuple[dict, dict, dict]:
    rb = ref.summarize(ref.read_folder(base), WARMUP)
    rc = ref.summarize(ref.read_folder(cand), WARMUP)
    return rb, rc, ref.gate(rb, rc)


def best_of(repeat: int, func: Callable[[], Any]) -> tuple[float, float, Any]:
    """Smallest wall time and smallest CPU time (all threads) of ``repeat``
    calls, and the last result."""
    wall, cpu, result = float("inf"), float("inf"), None
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        result = func()
        wall, cpu = min(wall, time.perf_counter() - t0), min(cpu, time.process_time() - c0)
    return wall, cpu, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--samples", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        base, cand = Path(tmp) / "base", Path(tmp) / "cand"
        t0 = time.perf_counter()
        write_side(base, args.runs, args.ranks, args.samples, 25.0, rng)
        write_side(cand, args.runs, args.ranks, args.samples, 24.8, rng)
        size = sum(p.stat().st_size for p in Path(tmp).rglob("*.log"))
        print(f"data: {2 * args.runs} runs x {args.ranks} ranks x {args.samples} samples, {size / 1e6:.1f} MB of logs, generated in {time.perf_counter() - t0:.1f} s")

        ours(base, cand, args.ranks)  # warm imports and caches once
        t_ours, c_ours, result = best_of(args.repeat, lambda: ours(base, cand, args.ranks))
        t_read, _, frames = best_of(
            args.repeat, lambda: [read_candidate(p, expected_ranks=args.ranks, warmup=WARMUP) for p in (base, cand)]
        )
        t_eval, _, _ = best_of(
            args.repeat, lambda: evaluate_option_trial(frames[0], {"O1": frames[1]}, warmup=WARMUP, expected_ranks=None)
        )
        t_ref, c_ref, (rb, rc, checks) = best_of(args.repeat, lambda: reference(base, cand))

    same = (
        result["baseline"]["run_worst_rank_means_exact_ms"] == rb["run_worst_rank_means_exact_ms"]
        and result["candidates"]["O1"]["run_worst_rank_means_ms"] == rc["run_worst_rank_means_ms"]
        and result["candidates"]["O1"]["decode"]["p90_ms"] == rc["decode"]["p90_ms"]
        and result["candidates"]["O1"]["option_trial_evaluation"]["checks"] == checks
    )
    print(f"best of {args.repeat}:                       wall       CPU")
    print(f"ours (logs -> summary JSON):   {t_ours:7.3f} s  {c_ours:7.3f} s  (read logs {t_read:.3f} s, statistics+gate {t_eval:.3f} s wall)")
    print(f"pure-Python reference:         {t_ref:7.3f} s  {c_ref:7.3f} s")
    print(f"speed-up:                      {t_ref / t_ours:7.1f}x  {c_ref / c_ours:7.1f}x  (target >= 5x)")
    print(f"same numbers and decision:     {same}")


if __name__ == "__main__":
    main()
