"""Runner benchmark: what `run_trial` adds on top of the workload processes themselves.

Prints, measured in the same run:

* bare: the same workload started N+1 times with ``subprocess.run`` (correctness
  + N clean runs), nothing else;
* trial: ``run_trial`` of an incumbent copy with N clean runs (process groups,
  output capture, log validation, Parquet ingest of timings and RUNS,
  meta.json, fingerprints);
* the overhead per clean run = (trial - bare) / (N + 1).

The workload writes 8 rank logs of 1 prefill + 200 decode lines each (the
default Stage O shape) and exits; it is a plain Python script so that the
figure isolates the runner, not the simulator.

    python benchmarks/bench_runner.py [--runs 5] [--rounds 3]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

WORKLOAD = r'''
import os
run = os.environ["SK_RUN_DIR"]
for r in range(int(os.environ["SK_RUN_RANKS"])):
    with open(os.path.join(run, f"log_{r}.log"), "w") as fh:
        fh.write(f"Inference time (prefill): {50 + r}.125 ms\n")
        fh.writelines(f"Inference time (decode): {10 + i % 7 * 0.01:.3f} ms\n" for i in range(200))
open(os.path.join(run, "correctness.json"), "w").write('{"passed": true}')
'''


def bare(script: Path, runs: int, tmp: Path) -> float:
    """Seconds to start the workload runs+1 times with nothing around it."""
    start = time.perf_counter()
    for k in range(runs + 1):
        run_dir = tmp / f"bare-{k}"
        run_dir.mkdir()
        env = {**os.environ, "SK_RUN_DIR": str(run_dir), "SK_RUN_RANKS": "8", "SK_RUN_SEED": "0", "SK_RUN_CONFIG": "x"}
        subprocess.run([sys.executable, str(script)], env=env, check=True)
    return time.perf_counter() - start


def trial(script: Path, runs: int, tmp: Path) -> float:
    """Seconds of run_trial (incumbent copy: correctness + runs clean runs)."""
    from sk_runner.backends.base import Control
    from sk_runner.backends.command import CommandBackend
    from sk_runner.trial import TrialSpec, run_trial

    session = tmp / "session"
    session.mkdir()
    base = tmp / "base.json"
    base.write_text(json.dumps({"super_kernel_optimize_options": {}}))
    spec = TrialSpec(session=session, round="O0-INCUMBENT", base_config=base, backend=CommandBackend([sys.executable, str(script)]),
                     incumbent=True, runs=runs, control=Control(ranks=8, warmup=8, timeout_s=60), cwd=tmp)
    start = time.perf_counter()
    result = run_trial(spec)
    elapsed = time.perf_counter() - start
    assert result.status == "ok" and len(result.runs_completed) == runs
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    import sk_runner.trial  # noqa: F401 - import cost excluded from the timings

    best_bare = best_trial = float("inf")
    for _ in range(args.rounds):
        with tempfile.TemporaryDirectory() as name:
            tmp = Path(name)
            script = tmp / "workload.py"
            script.write_text(WORKLOAD)
            best_bare = min(best_bare, bare(script, args.runs, tmp))
            best_trial = min(best_trial, trial(script, args.runs, tmp))
    per_run = (best_trial - best_bare) / (args.runs + 1)
    print(f"workload: 8 ranks x (1 prefill + 200 decode) lines, correctness + {args.runs} clean runs, best of {args.rounds}")
    print(f"bare processes : {best_bare:7.3f} s")
    print(f"run_trial      : {best_trial:7.3f} s")
    print(f"overhead / run : {per_run * 1000:7.1f} ms")


if __name__ == "__main__":
    main()
