"""Benchmark of the simulated SK device (``sk-run sim``).

Prints, best of ``--rounds``:
* a clean 8-rank, 200-iteration process: CPU seconds of the whole process
  (interpreter start and imports included) and of the simulation itself;
* a profiling process of the default network (profiler + sk_prof 1024 KB +
  SK metadata, 40 iterations): wall/CPU seconds, sk_prof events and bytes.

Run: ``.venv/bin/python benchmarks/bench_sim.py [--rounds 3] [--iterations 40]``
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROFILE_ENV = {"ASCEND_PROF_SK_ON": "1024", "ASCEND_OP_COMPILE_SAVE_KERNEL_META": "1", "SK_RUN_PROFILE": "1"}


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def process_run(config: Path, run_dir: Path, env: dict[str, str], iterations: int) -> tuple[float, float]:
    """(wall s, CPU s) of one ``python -m sk_runner.sim`` process."""
    cmd = [sys.executable, "-m", "sk_runner.sim", "--config", str(config), "--run-dir", str(run_dir),
           "--ranks", "8", "--iterations", str(iterations), "--seed", "1"]
    before, start = _child_cpu(), time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start, _child_cpu() - before


def in_process_clean(config: Path, run_dir: Path) -> float:
    """CPU seconds of the simulation itself (imports already done)."""
    from sk_runner.sim.runner import SimRequest, run

    start = time.process_time()
    with contextlib.redirect_stdout(io.StringIO()):
        run(SimRequest(config=config, run_dir=run_dir, ranks=8, iterations=200, seed=1, env={}))
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=40, help="decode steps of the profiling run")
    args = parser.parse_args()
    clean_env = {k: v for k, v in os.environ.items() if not k.startswith(("ASCEND_", "SK_RUN_"))}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        config = root / "config.json"
        config.write_text(json.dumps({"super_kernel_optimize_options": {}}))
        clean = [process_run(config, root / f"clean-{i}", clean_env, 200) for i in range(args.rounds)]
        inner = min(in_process_clean(config, root / f"inner-{i}") for i in range(args.rounds))
        prof = [process_run(config, root / f"prof-{i}", {**clean_env, **PROFILE_ENV}, args.iterations) for i in range(args.rounds)]
        trace = next((root / "prof-0").glob("sk_meta/*/sk_prof_device_0.json"))
        events = trace.read_text().count("\n") - 3  # "[", "{}", "]"
        trace_mb = trace.stat().st_size / 1e6
        details_mb = next((root / "prof-0").glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv")).stat().st_size / 1e6
        total_mb = sum(p.stat().st_size for p in (root / "prof-0").rglob("*") if p.is_file()) / 1e6
    print(f"clean process, 8 ranks x 200 decode steps, best of {args.rounds}")
    print(f"  whole process : wall {min(w for w, _ in clean):6.3f} s   CPU {min(c for _, c in clean):6.3f} s")
    print(f"  simulation    :                 CPU {inner:6.3f} s (imports excluded)")
    print(f"profiling process, default network, {args.iterations} decode steps, profiler + sk_prof 1024 KB + SK metadata")
    print(f"  whole process : wall {min(w for w, _ in prof):6.3f} s   CPU {min(c for _, c in prof):6.3f} s")
    print(f"  sk_prof       : {events:,} events, {trace_mb:.1f} MB;  kernel_details {details_mb:.1f} MB;  all artifacts {total_mb:.1f} MB")


if __name__ == "__main__":
    main()
