"""Ingest benchmark: kernel_details.csv (2,000,000 rows) and sk_prof JSON (1,000,000 events).

Prints, measured in the same run, each in its own fresh Python process:

* CSV ingest (``parse_kernel_details``) vs a bare ``polars.read_csv`` and
  ``pandas.read_csv`` of the same file;
* sk_prof ingest (``parse_sk_prof``) vs a plain ``json.load`` of the same file;
* peak memory (``ru_maxrss``) of the sk_prof ingest vs the file size.

Targets (issue 2): CSV ingest <= 1.5x bare polars and faster than pandas;
sk_prof ingest faster than json.load; sk_prof peak memory <= 3x the file size.
Times are the best of ``--rounds`` runs (imports excluded); the rounds
interleave the tasks, each run in a fresh process, so that load from other
processes hits the compared tasks alike.
Data is generated once under ``benchmarks/.data/`` (git-ignored).

    python benchmarks/bench_ingest.py [--rows 2000000] [--events 1000000] [--rounds 3] [--strict]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent / ".data"
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # test-data generators live with the tests

MEASURE = textwrap.dedent(
    """
    import gc, json, resource, sys, time
    from pathlib import Path
    task, path, repeat = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    if task == "csv_ingest":
        from sk_analytics.ingest.kernel_details import parse_kernel_details as run
    elif task == "csv_polars":
        import polars as pl
        run = pl.read_csv
    elif task == "csv_pandas":
        import pandas as pd
        run = pd.read_csv
    elif task == "json_ingest":
        from sk_analytics.ingest.sk_prof import parse_sk_prof as run
    elif task == "json_load":
        def run(p):
            with open(p, "rb") as fh:
                return json.load(fh)
    def high_water() -> int:
        # VmHWM is reset by exec (ru_maxrss may carry the parent's peak over)
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    base = high_water()
    best = float("inf")
    rows = None
    for _ in range(repeat):
        gc.collect()
        start = time.perf_counter()
        result = run(path)
        best = min(best, time.perf_counter() - start)
        rows = result.rows if hasattr(result, "frame") else len(result) if isinstance(result, list) else result.shape[0]
        del result
    print(json.dumps({"seconds": best, "rows": rows, "peak_bytes": high_water(), "base_bytes": base}))
    """
)


@dataclass(frozen=True)
class Measured:
    seconds: float
    rows: int | None
    peak_bytes: int
    base_bytes: int


def measure(task: str, path: Path, repeat: int) -> Measured:
    """Run ``task`` on ``path`` in a fresh interpreter; best time and peak RSS."""
    done = subprocess.run([sys.executable, "-c", MEASURE, task, str(path), str(repeat)], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"bench_ingest: {task} failed:\n{done.stderr.strip()}")
    return Measured(**json.loads(done.stdout.strip().splitlines()[-1]))


def ensure_csv(rows: int) -> Path:
    from sk_runner.demo.samples import VARIANTS, kernel_rows, write_kernel_details

    path = DATA / f"kernel_details_{rows}.csv"
    if not path.exists():
        print(f"generating {path.name} ...", flush=True)
        write_kernel_details(path, kernel_rows(rows, 0), VARIANTS["level1_full"])
    return path


def ensure_json(events: int) -> Path:
    from sk_samples import CHILD_FUNCS, sk_prof_events, write_sk_prof_large

    path = DATA / f"sk_prof_{events}" / "sk_prof_device_0.json"
    if not path.exists():
        print(f"generating {path.parent.name}/{path.name} ...", flush=True)
        json_safe = [f for f in CHILD_FUNCS if '"' not in f and "\\" not in f]  # json.load must read it too
        write_sk_prof_large(path, sk_prof_events(events, 0, funcs=json_safe))
    return path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)

    csv_path, json_path = ensure_csv(args.rows), ensure_json(args.events)
    csv_mb, json_mb = csv_path.stat().st_size / 1e6, json_path.stat().st_size / 1e6
    tasks = {"csv_ingest": csv_path, "csv_polars": csv_path, "csv_pandas": csv_path, "json_ingest": json_path, "json_load": json_path}
    runs: dict[str, list[Measured]] = {task: [] for task in tasks}
    for round_index in range(args.rounds):
        for task, path in tasks.items():
            if task == "csv_pandas" and round_index >= 2:
                continue  # slow and far from the target: two runs are enough
            runs[task].append(measure(task, path, 1))
    best = {task: min(found, key=lambda m: m.seconds) for task, found in runs.items()}
    ingest, bare, pandas, prof, loaded = (best[t] for t in tasks)
    prof_peak = max(runs["json_ingest"], key=lambda m: m.peak_bytes)

    checks = {
        "csv ingest <= 1.5x bare polars.read_csv": ingest.seconds <= 1.5 * bare.seconds,
        "csv ingest faster than pandas.read_csv": ingest.seconds < pandas.seconds,
        "sk_prof ingest faster than json.load": prof.seconds < loaded.seconds,
        "sk_prof ingest peak RSS <= 3x file size": prof_peak.peak_bytes <= 3 * json_path.stat().st_size,
    }
    print(f"kernel_details.csv: {args.rows:,} rows, {csv_mb:,.0f} MB")
    print(f"  ingest (parse_kernel_details)   {ingest.seconds:8.3f} s  ({ingest.seconds / bare.seconds:.2f}x bare polars)")
    print(f"  bare polars.read_csv            {bare.seconds:8.3f} s")
    print(f"  pandas.read_csv                 {pandas.seconds:8.3f} s  (ingest is {pandas.seconds / ingest.seconds:.1f}x faster)")
    print(f"sk_prof JSON: {args.events:,} events, {json_mb:,.0f} MB")
    print(f"  ingest (parse_sk_prof)          {prof.seconds:8.3f} s  ({loaded.seconds / prof.seconds:.2f}x faster than json.load)")
    print(f"  json.load                       {loaded.seconds:8.3f} s")
    print(
        f"  ingest peak RSS                 {prof_peak.peak_bytes / 1e6:8.0f} MB  ({prof_peak.peak_bytes / json_path.stat().st_size:.2f}x file; "
        f"{(prof_peak.peak_bytes - prof_peak.base_bytes) / 1e6:.0f} MB above the {prof_peak.base_bytes / 1e6:.0f} MB interpreter+imports)"
    )
    print(f"  json.load peak RSS              {loaded.peak_bytes / 1e6:8.0f} MB")
    for name, ok in checks.items():
        print(f"  [{'ok' if ok else 'MISSED'}] {name}")
    return 1 if args.strict and not all(checks.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
