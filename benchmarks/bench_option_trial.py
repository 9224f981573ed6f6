"""Benchmark of ``sk-analyze option-trial``: our Polars pipeline vs the pure-Python
reference formulas (tests/ot_reference.py), measured in the same run.

Data: baseline and candidate, 5 runs each x 8 ranks x 20,000 decode samples
(plus 8 prefill samples per rank), written as real rank logs into a temp dir.

    .venv/bin/python benchmarks/bench_option_trial.py [--samples 20000] [--runs 5] [--ranks 8] [--repeat 3]

Times are the best of ``--repeat`` runs of each side (the machine is shared;
the minimum is the least disturbed measurement), measured in the same process.

Memory: the real ``sk-analyze option-trial`` command and the reference tool
each run as a child process on the same logs; the peak resident set of each
(``wait4`` rusage, imports included) is printed with its ratio to the size
of the logs read (issue 18 target: <= 3x), with their end-to-end wall times.
"""

from __future__ import annotations

import argparse
import subprocess
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


REFERENCE_CHILD = """
import sys
from pathlib import Path
sys.path.insert(0, {tests!r})
import ot_reference as ref
rb = ref.summarize(ref.read_folder(Path({base!r})), {warmup})
rc = ref.summarize(ref.read_folder(Path({cand!r})), {warmup})
print(ref.gate(rb, rc))
"""


PEAK_REPORTER = """
import atexit, sys
def _report_peak():
    with open("/proc/self/status") as status:
        peak = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    sys.stderr.write(f"\\nVMHWM_KB {peak}\\n")
atexit.register(_report_peak)
"""
"""Prefix of every child: it reports its own high-water mark at exit. (Linux
``VmHWM`` of the child's own address space: ``wait4``'s ``ru_maxrss`` would
start from this process's size at fork, which exec does not reset.)"""


def child_peak(code: str) -> tuple[float, float]:
    """Wall seconds and peak RSS (bytes) of one ``python -c code`` child."""
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", PEAK_REPORTER + code], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    if done.returncode not in (0, 1):  # 1: the option was rejected, still a full run
        raise SystemExit(f"child failed with exit {done.returncode}: {done.stderr[-800:]}")
    return wall, float(done.stderr.rsplit("VMHWM_KB ", 1)[1].split()[0]) * 1024.0


def memory_table(base: Path, cand: Path, ranks: int, log_bytes: int, repeat: int) -> list[str]:
    """Lines reporting the peak RSS and wall time of the CLI and of the reference,
    each in its own process (best of ``repeat``)."""
    argv = ["option-trial", "--baseline", str(base), "--candidate", f"O1={cand}", "--expected-ranks", str(ranks), "--warmup", str(WARMUP)]
    cli = f"from sk_analytics.cli import main\nmain({argv!r})\n"
    reference = REFERENCE_CHILD.format(tests=str(ROOT / "tests"), base=str(base), cand=str(cand), warmup=WARMUP)
    rows = {}
    for name, code in (("sk-analyze option-trial", cli), ("reference tool", reference)):
        runs = [child_peak(code) for _ in range(repeat)]
        rows[name] = (min(w for w, _ in runs), min(m for _, m in runs))
    lines = [f"processes (best of {repeat}):         wall    peak RSS  RSS / logs read ({log_bytes / 1e6:.1f} MB)"]
    for name, (wall, peak) in rows.items():
        lines.append(f"{name:26s} {wall:8.3f} s  {peak / 1e6:7.1f} MB  {peak / log_bytes:6.2f}x")
    (ours_wall, ours_peak), (ref_wall, ref_peak) = rows.values()
    lines.append(f"process speed-up:          {ref_wall / ours_wall:7.1f}x   peak RSS ours/reference {ours_peak / ref_peak:.2f}"
                 f"   ours/logs {ours_peak / log_bytes:.2f}x (target <= 3x)")
    return lines


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
    parser.add_argument("--memory-repeat", type=int, default=2, help="child runs per side for the memory table")
    args = parser.parse_args()
    rng = np.random.default_rng(7)
    with tempfile.TemporaryDirectory() as tmp:
        base, cand = Path(tmp) / "base", Path(tmp) / "cand"
        t0 = time.perf_counter()
        write_side(base, args.runs, args.ranks, args.samples, 25.0, rng)
        write_side(cand, args.runs, args.ranks, args.samples, 24.8, rng)
        size = sum(p.stat().st_size for p in Path(tmp).rglob("*.log"))
        print(f"data: {2 * args.runs} runs x {args.ranks} ranks x {args.samples} samples, {size / 1e6:.1f} MB of logs, generated in "
              f"{time.perf_counter() - t0:.1f} s")

        ours(base, cand, args.ranks)  # warm imports and caches once
        t_ours, c_ours, result = best_of(args.repeat, lambda: ours(base, cand, args.ranks))
        t_read, _, frames = best_of(
            args.repeat, lambda: [read_candidate(p, expected_ranks=args.ranks, warmup=WARMUP) for p in (base, cand)]
        )
        t_eval, _, _ = best_of(
            args.repeat, lambda frames=frames: evaluate_option_trial(frames[0], {"O1": frames[1]}, warmup=WARMUP, expected_ranks=None)
        )
        t_ref, c_ref, (rb, rc, checks) = best_of(args.repeat, lambda: reference(base, cand))
        del frames  # the children do not see this process's memory; free it anyway while they run
        memory = memory_table(base, cand, args.ranks, size, args.memory_repeat)

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
    print("\n".join(memory))


if __name__ == "__main__":
    main()
