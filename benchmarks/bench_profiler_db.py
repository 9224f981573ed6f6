"""DB-export ingest benchmark: ``ascend_pytorch_profiler_0.db`` with 2,000,000 compute tasks.

Prints, measured in the same run, each in its own fresh Python process:

* ingest (``parse_profiler_db``: ADBC Arrow batches, integer joins, strings
  attached in Polars) vs ``pandas.read_sql`` of the same join (``TASK`` ⋈
  ``COMPUTE_TASK_INFO`` with the six ``STRING_IDS`` look-ups) over the
  standard ``sqlite3`` connection;
* peak memory (``VmHWM``) of the ingest vs the file size.

Targets (issue 14): ingest >= 3x faster than pandas.read_sql; ingest peak
memory <= 2x the file. Times are the best of ``--rounds`` runs (imports
excluded), the tasks interleaved so that load from other processes hits both
alike. Data is generated once under ``benchmarks/.data/`` (git-ignored).

    python benchmarks/bench_profiler_db.py [--tasks 2000000] [--rounds 2] [--strict]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

DATA = Path(__file__).resolve().parent / ".data"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # test-data generators live with the tests

PANDAS_SQL = """
SELECT n.value AS name, o.value AS type, k.value AS accelerator_core, t.startNs, t.endNs, t.deviceId, t.streamId,
       t.taskId, t.modelId, c.blockDim, c.mixBlockDim, i.value AS input_shapes, d.value AS input_data_types,
       s.value AS output_shapes
FROM COMPUTE_TASK_INFO c JOIN TASK t ON t.globalTaskId = c.globalTaskId
LEFT JOIN STRING_IDS n ON n.id = c.name LEFT JOIN STRING_IDS o ON o.id = c.opType
LEFT JOIN STRING_IDS k ON k.id = c.taskType LEFT JOIN STRING_IDS i ON i.id = c.inputShapes
LEFT JOIN STRING_IDS d ON d.id = c.inputDataTypes LEFT JOIN STRING_IDS s ON s.id = c.outputShapes
"""

MEASURE = textwrap.dedent(
    """
    import gc, json, resource, sys, time
    from pathlib import Path
    task, path, sql = sys.argv[1], Path(sys.argv[2]), sys.argv[3]
    if task == "ingest":
        import adbc_driver_sqlite.dbapi  # imported on first use by the parser: kept out of the clock like pandas
        from sk_analytics.ingest.profiler_db import parse_profiler_db
        def run(p):
            return parse_profiler_db(p).frame
    else:
        import sqlite3
        import pandas as pd
        def run(p):
            with sqlite3.connect(f"file:{p}?mode=ro&immutable=1", uri=True) as connection:
                return pd.read_sql(sql, connection)
    def high_water() -> int:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    base = high_water()
    gc.collect()
    start = time.perf_counter()
    result = run(path)
    seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "rows": len(result), "peak_bytes": high_water(), "base_bytes": base}))
    """
)


def measure(task: str, path: Path) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", MEASURE, task, str(path), PANDAS_SQL], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench_profiler_db: {task} failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def ensure_db(tasks: int) -> Path:
    from db_samples import launch_rows

    from sk_runner.sim.profiler_db import write_profiler_db

    path = DATA / f"db_{tasks}" / "ascend_pytorch_profiler_0.db"
    if not path.exists():
        print(f"generating {path.parent.name}/{path.name} ...", flush=True)
        rows = launch_rows(tasks * 6 // 5)  # one launch in six is a communication op
        write_profiler_db(path, rows, rts_model_id=7)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=2_000_000, help="compute tasks in the DB")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)

    path = ensure_db(args.tasks)
    size = path.stat().st_size
    runs: dict[str, list[dict[str, float]]] = {"ingest": [], "pandas": []}
    for _ in range(args.rounds):
        for task in runs:
            runs[task].append(measure(task, path))
    ingest = min(runs["ingest"], key=lambda m: m["seconds"])
    pandas = min(runs["pandas"], key=lambda m: m["seconds"])
    peak = max(m["peak_bytes"] for m in runs["ingest"])
    checks = {
        "DB ingest >= 3x faster than pandas.read_sql of the join": pandas["seconds"] >= 3 * ingest["seconds"],
        "DB ingest peak RSS <= 2x file size": peak <= 2 * size,
    }
    print(f"ascend_pytorch_profiler_0.db: {args.tasks:,} compute tasks, {size / 1e6:,.0f} MB; load average {os.getloadavg()[0]:.1f}")
    print(f"  ingest (parse_profiler_db)      {ingest['seconds']:8.3f} s  ({ingest['rows']:,.0f} kernels rows, communication ops included)")
    print(f"  pandas.read_sql of the join     {pandas['seconds']:8.3f} s  ({pandas['rows']:,.0f} rows; ingest is "
          f"{pandas['seconds'] / ingest['seconds']:.1f}x faster)")
    print(f"  ingest peak RSS                 {peak / 1e6:8.0f} MB  ({peak / size:.2f}x file; "
          f"{(peak - ingest['base_bytes']) / 1e6:.0f} MB above the {ingest['base_bytes'] / 1e6:.0f} MB interpreter+imports)")
    print(f"  pandas peak RSS                 {max(m['peak_bytes'] for m in runs['pandas']) / 1e6:8.0f} MB")
    for name, ok in checks.items():
        print(f"  [{'ok' if ok else 'MISSED'}] {name}")
    return 1 if args.strict and not all(checks.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
