"""Scale benchmark of ``sk-analyze dcci-diff`` on a multi-rank profile (issue 14, part 3).

Two sides of ``--ranks`` (8) ranks, each rank its own process and device with the one-rank profile of
``bench_dcci_diff.py`` (2,000,000 child events + 250,000 span events per rank, 3 regressed children):
16,000,000 child events a side. Each rank's events are one Parquet file (device id, process, shifted
clock); the metadata is replicated per process. ``analyze`` runs end to end (per-rank alignment and
classification, children of the deciding rank's slower SKs only, repair) in a fresh process, against
the same analysis of one rank in the same run, round robin.

Targets: peak RSS <= 2 GB; ``--ranks`` ranks <= 8x the one-rank time.

    python benchmarks/bench_dcci_ranks.py [--ranks 8] [--repeat 3] [--iterations 125]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_dcci_diff import SIDES, _load, _peak_kb, generate  # noqa: E402


def write_ranks(folder: Path, ranks: int, *, iterations: int) -> int:
    """Write ``ranks`` ranks a side under ``folder/<side>/``; returns child events per rank."""
    n_child = 0
    for i, side in enumerate(SIDES):
        parts = generate(side, iterations=iterations, sks=50, children=8, cores=40, seed=i + 1)
        process = SIDES[side][0]
        (folder / side).mkdir(parents=True)
        for r in range(ranks):
            name = f"{process}-{r}"
            parts["events"].with_columns(
                pl.lit(r, dtype=parts["events"].schema["device_id"]).alias("device_id"),
                (pl.col("ts_ns") + r * 1_000).alias("ts_ns"),
                pl.lit(name).alias("process"),
            ).write_parquet(folder / side / f"events-{r}.parquet")
            for table in ("structure", "symbols"):
                parts[table].with_columns(pl.lit(name).alias("process")).write_parquet(folder / side / f"{table}-{r}.parquet")
        n_child = int((~parts["events"]["is_span"]).sum())
    return n_child


def _timed(timings: dict[str, float], name: str, fn: Any) -> Any:
    """``fn`` accumulating its wall time under ``name`` (the stages whose cost the issue-25 section reports)."""
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        start = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            timings[name] = timings.get(name, 0.0) + time.perf_counter() - start
    return wrapper


def run(folder: Path, warmup: int) -> dict[str, Any]:
    from sk_analytics.dcci import analysis, ranks
    from sk_analytics.dcci.analysis import SideInput, analyze
    from sk_analytics.schema import SK_MARKERS

    timings: dict[str, float] = {}
    analysis.align = _timed(timings, "align_s", analysis.align)  # per-rank graph pairing + graph-context alignment
    ranks.correspond = _timed(timings, "cross_rank_s", ranks.correspond)  # ranks aligned to the reference rank
    analysis.coverage = _timed(timings, "coverage_s", analysis.coverage)

    sides = {
        side: SideInput(
            root=folder / side,
            events=pl.scan_parquet(sorted((folder / side).glob("events-*.parquet"))),
            structure=pl.concat([pl.read_parquet(p) for p in sorted((folder / side).glob("structure-*.parquet"))]),
            markers=pl.DataFrame(schema={**SK_MARKERS.schema, "process": pl.Utf8}),
            symbols=pl.concat([pl.read_parquet(p) for p in sorted((folder / side).glob("symbols-*.parquet"))]),
            by_process={  # each rank's own file, as the loaders give them (issue 34: the diff reads rank by rank)
                f"{SIDES[side][0]}-{p.stem.split('-')[1]}": pl.scan_parquet(p) for p in (folder / side).glob("events-*.parquet")
            },
        )
        for side in SIDES
    }
    config = {"super_kernel_optimize_options": {"dcci_disable_on_kernel": [".*"]}}
    result = analyze(sides["baseline"], sides["candidate"], warmup=warmup, disable_all_config=config)
    return {"slower_any_rank": len(result["summary"]["significantly_slower_uids"]),
            "decomposed": len(result["children"]), "repair": result["repair"]["list"],
            "diagnosis": result["summary"]["diagnosis"], "compared_time_share": result["summary"]["compared_time_share"],
            "cross_rank": result["ranks"]["correspondence"], **{k: round(v, 4) for k, v in timings.items()}}


def _child(folder: Path, warmup: int) -> None:
    import importlib

    for module in ("sk_analytics.dcci.analysis", "scipy.stats"):
        importlib.import_module(module)
    start, cpu = time.perf_counter(), time.process_time()
    result = run(folder, warmup)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(json.dumps({"seconds": elapsed, "cpu_seconds": cpu, "peak_mb": _peak_kb() / 1024, "result": result}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=8)
    parser.add_argument("--iterations", type=int, default=125)
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", metavar="DIR", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(Path(args.child), args.warmup)
        return
    with tempfile.TemporaryDirectory(prefix="bench-dcci-ranks-") as tmp:
        folders = {1: Path(tmp) / "one", args.ranks: Path(tmp) / "many"}
        start = time.perf_counter()
        per_rank = 0
        for ranks, folder in folders.items():
            per_rank = write_ranks(folder, ranks, iterations=args.iterations)
        print(f"generated: {per_rank:,} child events per rank, 1 and {args.ranks} ranks a side, "
              f"in {time.perf_counter() - start:.1f} s")
        print(f"load average before: {_load()}")
        runs: dict[int, list[dict[str, Any]]] = {r: [] for r in folders}
        for _ in range(args.repeat):
            for ranks, folder in folders.items():
                out = subprocess.run([sys.executable, __file__, "--warmup", str(args.warmup), "--child", str(folder)],
                                     check=True, capture_output=True, text=True)
                runs[ranks].append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"load average after:  {_load()}")
        best = {r: min(v, key=lambda x: x["seconds"]) for r, v in runs.items()}
        for ranks, b in best.items():
            cpu = min(x["cpu_seconds"] for x in runs[ranks])
            print(f"{ranks:>2} rank(s): {b['seconds']:7.2f} s  (CPU {cpu:5.2f} s)  peak RSS {b['peak_mb']:7.0f} MB  "
                  f"{per_rank * ranks:,} child events a side  {b['result']}")
        many = best[args.ranks]["result"]
        print(f"per-rank alignment cost ({args.ranks} ranks): graph pairing + graph-context alignment "
              f"{1000 * many['align_s'] / args.ranks:.1f} ms/rank, cross-rank alignment "
              f"{1000 * many['cross_rank_s'] / max(args.ranks - 1, 1):.1f} ms per rank aligned to the reference, "
              f"coverage {1000 * many['coverage_s']:.1f} ms in all")
        ratio = best[args.ranks]["seconds"] / best[1]["seconds"]
        peak = best[args.ranks]["peak_mb"]
        print(f"{args.ranks} ranks / 1 rank: {ratio:.2f}x")
        for ok, text in ((peak <= 2048.0, f"peak RSS <= 2 GB ({peak:.0f} MB)"),
                         (ratio <= 8.0, f"{args.ranks} ranks <= 8x the one-rank time ({ratio:.2f}x)")):
            print(f"  [{'ok' if ok else 'MISS'}] {text}")


if __name__ == "__main__":
    main()
