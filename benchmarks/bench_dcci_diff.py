"""Benchmark of ``sk-analyze dcci-diff`` on two profiles of ~2,000,000 child events each.

Prints, measured in the same run (each contender in its own subprocess so that
its peak RSS is its own):

* ours, end to end: Parquet sk_events -> occurrences -> alignment ->
  classification (+ MWU/BH) -> child decomposition -> repair (``analyze``);
* ours, the statistics kernel alone: per-SK wall stats and per-child
  wall/max-lane stats of *every* SK and child (the like-for-like figure);
* a straightforward pandas implementation of those statistics;
* the same statistics as one DuckDB SQL query.

Each contender's best wall time of ``--repeat`` round-robin runs is printed with its least
CPU time (all threads: on a shared machine the steadier figure of work done), the like-for-like
contenders with a fingerprint of their statistics (they must agree) and ``ours_stats`` with
its stage times; the load average is printed before and after.

Targets (issue 7): >= 10x faster than pandas, within 1.5x of DuckDB, peak RSS <= 2 GB.
Issue 17: the graph-context alignment (``map_side`` of both sides + ``align``) of two graphs of
``--align-sks`` (5,000) SK launches each, repeated layers with one SK fused differently and one
missing on the candidate side, is timed in this process (best of 5) and printed as a share of
``ours`` end to end (target: at most 10 %).

    python benchmarks/bench_dcci_diff.py [--iterations 125] [--sks 50] [--children 8] [--cores 40]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl

from sk_analytics.schema import SK_EVENTS, SK_STRUCTURE, SYMBOLS

HASH = "5f3c0a9e1b2d4c6f8a7e9d0c1b2a3f4e"
OPS = ["RmsNorm", "MatMul", "Add", "Gelu", "Cast", "Softmax", "Mul", "Transpose", "Reshape", "Sub", "Neg", "Exp"]
REGRESSED = {(3, 2), (17, 5), (31, 0)}  # (sk index, child position) slower under disable-all
SIDES = {"baseline": ("1001", "1_0", 0), "candidate": ("2002", "7_2", 1000)}  # process, modelId, skId offset


def _ops(k: int, children: int) -> list[str]:
    return [OPS[(k + j) % len(OPS)] for j in range(children)]


def generate(side: str, *, iterations: int, sks: int, children: int, cores: int, seed: int) -> dict[str, pl.DataFrame]:
    """Vectorized profile of one side: span + child events, structure and symbols."""
    process, model_id, offset = SIDES[side]
    base = np.random.default_rng(0).integers(5_000, 20_000, size=(sks, children)).astype(np.int64)  # same build
    rng = np.random.default_rng(seed)
    noise = rng.integers(0, 200, size=(iterations, sks, cores, children)).astype(np.int64)
    dur = base[None, :, None, :] + noise
    if side == "candidate":
        for k, j in REGRESSED:
            dur[:, k, :, j] += 12_000
    offs = np.cumsum(dur, axis=3) - dur + 100  # children back to back after a 100 ns prologue
    sk_len = (dur.sum(axis=3) + 200).max(axis=2)  # (I, S)
    slot = sk_len.max() + 2_000
    t0 = (np.arange(iterations)[:, None] * sks + np.arange(sks)[None, :]) * slot + 10**12  # (I, S)
    child_ts = t0[:, :, None, None] + offs
    shape = dur.shape
    sk_idx = np.broadcast_to(np.arange(sks)[None, :, None, None], shape)
    core_idx = np.broadcast_to(np.arange(cores)[None, None, :, None], shape)
    node_idx = np.broadcast_to(np.arange(children)[None, None, None, :] + 1, shape)  # [0] is an event member
    span_shape = (iterations, sks, cores)
    span_ts = np.broadcast_to(t0[:, :, None], span_shape)
    span_dur = np.broadcast_to(sk_len[:, :, None], span_shape)
    n_span = int(np.prod(span_shape))
    events = pl.DataFrame(
        {
            "ts_ns": np.concatenate([span_ts.ravel(), child_ts.ravel()]),
            "dur_ns": np.concatenate([span_dur.ravel(), dur.ravel()]),
            "sk_id": np.concatenate([np.broadcast_to(np.arange(sks)[None, :, None], span_shape).ravel(), sk_idx.ravel()]) + offset,
            "core": np.concatenate([np.broadcast_to(np.arange(cores)[None, None, :], span_shape).ravel(), core_idx.ravel()]),
            "node_id": np.concatenate([np.full(n_span, -1), node_idx.ravel()]),
        }
    ).with_columns(
        pl.int_range(pl.len()).alias("record"),
        pl.lit(0).alias("device_id"),
        pl.when(pl.col("core") < cores // 3).then(pl.lit("AIC")).otherwise(pl.lit("AIV")).alias("lane"),
        pl.lit(model_id).alias("model_id"),
        pl.when(pl.col("node_id") >= 0).then(pl.col("node_id")).alias("node_id"),
        pl.col("core").alias("block_idx"),
        pl.lit(cores).alias("block_num"),
        (pl.col("node_id") < 0).alias("is_span"),
        pl.lit(f"sk_meta/{process}/sk_prof_device_0.json").alias("source_file"),
    )
    op_of = pl.DataFrame({"sk_id": np.repeat(np.arange(sks), children) + offset,
                          "node_id": np.tile(np.arange(children) + 1, sks),
                          "canonical_op": [op for k in range(sks) for op in _ops(k, children)]})
    events = events.join(op_of, on=["sk_id", "node_id"], how="left").with_columns(
        pl.concat_str(pl.lit("static_kernel_"), pl.col("canonical_op"), pl.lit(f"_{HASH}_1_d0")).fill_null("sk_fused").alias("func_name"),
    ).with_columns(
        pl.concat_str(pl.lit("["), pl.col("block_idx"), pl.lit(f"/{cores}]"), pl.col("func_name")).alias("name")
    )
    events = SK_EVENTS.conform(events.sample(fraction=1.0, shuffle=True, seed=seed))  # file order is not time order
    members = []
    for k in range(sks):
        members.append(dict(scope_id=k + offset, child_index=0, member_kind="event", func_name=None, canonical_op=None))
        members += [dict(scope_id=k + offset, child_index=j + 1, member_kind="kernel",
                         func_name=f"static_kernel_{op}_{HASH}_1_d0", canonical_op=op) for j, op in enumerate(_ops(k, children))]
    structure = pl.DataFrame(members).with_columns(
        pl.lit(f"model_{model_id}").alias("model_dir"), pl.concat_str(pl.lit("sk_"), pl.col("scope_id")).alias("sk_func_name"),
        pl.concat_str(pl.lit("layer"), (pl.col("scope_id") - offset) % 5).alias("scope_name"),
        pl.lit(children + 1).alias("node_count"), pl.col("child_index").alias("node_id"), pl.lit(0).alias("stream_id"),
        pl.lit(None, dtype=pl.Utf8).alias("member_detail"), pl.lit("AIV_ONLY").alias("kernel_type"),
        pl.lit(cores).alias("num_blocks"), pl.int_range(1, pl.len() + 1).alias("line"),
        pl.lit(f"sk_meta/{process}/model_{model_id}/sk_fused_nodes.log").alias("source_file"),
    )
    structure = SK_STRUCTURE.conform(structure).with_columns(pl.lit(process).alias("process"))
    symbols = SYMBOLS.conform(
        structure.filter(pl.col("member_kind") == "kernel").select(
            pl.lit("updated").alias("graph"), "model_dir", pl.lit(0).alias("stream_idx"), "node_id",
            pl.lit("Kernel").alias("node_type"), "func_name", "canonical_op", "kernel_type", "source_file",
        )
    ).with_columns(pl.lit(process).alias("process"))
    return {"events": events, "structure": structure, "symbols": symbols}


def alignment_sides(sks: int) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(structure, launched) of each side: one graph of ``sks`` SKs — layers of 20 distinct structures, the
    candidate with one SK fused without its last child in the middle and one SK missing."""
    def side(process: str, model_id: str, offset: int, refuse: int | None, drop: int | None) -> tuple[pl.DataFrame, pl.DataFrame]:
        scope = np.arange(sks)
        kind = scope % 20
        keep = scope != drop if drop is not None else np.ones(sks, bool)
        scope, kind = scope[keep], kind[keep]
        children = np.where(scope == refuse, 2, 3)
        rows = np.repeat(np.arange(scope.size), children)
        child = np.arange(rows.size) - np.repeat(np.cumsum(children) - children, children)
        ops = np.array(OPS)[(kind[rows] + child) % len(OPS)]
        structure = SK_STRUCTURE.conform(pl.DataFrame({
            "model_dir": f"model_{model_id}", "sk_func_name": [f"sk_{s}" for s in scope[rows] + offset],
            "scope_id": scope[rows] + offset, "scope_name": [f"layer{k % 5}" for k in kind[rows]], "node_count": 3,
            "child_index": child, "node_id": child, "stream_id": 0, "member_kind": "kernel", "member_detail": None,
            "func_name": [f"static_kernel_{op}_{HASH}_1_d0" for op in ops], "canonical_op": ops, "kernel_type": "AIV_ONLY",
            "num_blocks": 8, "line": np.arange(rows.size) + 1, "source_file": f"sk_meta/{process}/model_{model_id}/sk_fused_nodes.log",
        })).with_columns(pl.lit(process).alias("process"))
        launched = pl.DataFrame({"process": process, "device_id": 0, "model_id": model_id, "sk_id": scope + offset},
                                schema_overrides={"device_id": pl.Int64})
        return structure, launched

    base = side("1001", "1_0", 0, None, None)
    cand = side("2002", "7_2", 1000, sks // 2, sks // 3)
    return base[0], base[1], cand[0], cand[1]


def time_alignment(sks: int, repeat: int = 5) -> tuple[float, float, dict[str, Any]]:
    """Best wall times of mapping both sides to structural identities (``map_side``, unchanged by the
    graph-context alignment) and of the alignment itself (``align``: rank and graph pairing, anchored LCS,
    slots) on :func:`alignment_sides`, and the alignment's counts."""
    from sk_analytics.dcci.align import align, map_side

    base_s, base_l, cand_s, cand_l = alignment_sides(sks)
    best_map, best_align, result = float("inf"), float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        mapped = map_side(base_s, base_l), map_side(cand_s, cand_l)
        middle = time.perf_counter()
        result = align(*mapped)
        best_map, best_align = min(best_map, middle - start), min(best_align, time.perf_counter() - middle)
    assert result is not None
    [pair] = result.graphs
    counts = {k: pair[k] for k in ("sks", "anchors", "paired_in_runs", "only_in_baseline", "only_in_candidate", "ambiguous")}
    return best_map, best_align, counts


# ----------------------------------------------------------------------------- contenders


def _events(folder: Path, side: str) -> pl.LazyFrame:
    process = SIDES[side][0]
    return pl.scan_parquet(folder / side / "events.parquet").with_columns(pl.lit(process).alias("process"))


def run_ours(folder: Path, warmup: int) -> dict[str, Any]:
    from sk_analytics.dcci.analysis import SideInput, analyze
    from sk_analytics.schema import SK_MARKERS

    sides = {}
    for side in SIDES:
        sides[side] = SideInput(
            root=folder / side,
            events=_events(folder, side),
            structure=pl.read_parquet(folder / side / "structure.parquet"),
            markers=pl.DataFrame(schema={**SK_MARKERS.schema, "process": pl.Utf8}),
            symbols=pl.read_parquet(folder / side / "symbols.parquet"),
        )
    config = {"super_kernel_optimize_options": {"dcci_disable_on_kernel": [".*"]}}
    result = analyze(sides["baseline"], sides["candidate"], warmup=warmup, disable_all_config=config)
    return {"slower": result["summary"]["classes"]["significantly_slower"], "repair": result["repair"]["list"],
            "children_rows": sum(len(c["rows"]) for c in result["children"])}


def run_ours_stats(folder: Path, warmup: int) -> dict[str, Any]:
    """Per-SK and per-child stats of every SK/child with our modules (like-for-like with pandas/DuckDB).

    As ``analyze`` does: the events stay lazy scans, both sides are cut into occurrences and then
    decomposed side by side (``map_sides``), each pass streaming its events from the Parquet file;
    the child timings feed both child statistics.
    """
    from sk_analytics.dcci.classify import robust_stats
    from sk_analytics.dcci.occurrences import EVENT_COLUMNS, child_timings, map_sides, sk_occurrences

    clock = [time.perf_counter()]
    events = [_events(folder, side).select(EVENT_COLUMNS) for side in SIDES]
    occurrences = map_sides(sk_occurrences, events)
    clock.append(time.perf_counter())
    timings = map_sides(child_timings, events, occurrences)
    clock.append(time.perf_counter())
    post = pl.col("occurrence") >= warmup
    sks = pl.concat([occ.lazy().filter(post).with_columns(side=pl.lit(side)) for side, occ in zip(SIDES, occurrences, strict=True)])
    children = pl.concat([ch.lazy().filter(post).with_columns(side=pl.lit(side)) for side, ch in zip(SIDES, timings, strict=True)])
    sk = robust_stats(sks, ["side", "sk_id"], "wall_us")
    wall = robust_stats(children, ["side", "sk_id", "node_id"], "wall_us")
    lane = robust_stats(children, ["side", "sk_id", "node_id"], "max_lane_us")
    sk, wall, lane = pl.collect_all([sk, wall, lane])
    clock.append(time.perf_counter())
    stages = dict(zip(("occurrences", "child_timings", "stats"), (round(b - a, 3) for a, b in zip(clock, clock[1:], strict=False)), strict=True))
    return {"sk_rows": sk.height, "child_rows": wall.height + lane.height,
            "check": _check(sk["p50_us"].sum(), wall["p90_us"].sum(), lane["mad_us"].sum()), "stages_s": stages}


def _check(sk_p50: float, child_wall_p90: float, child_lane_mad: float) -> list[float]:
    """A fingerprint of the statistics (sums over all keys) to show the contenders agree."""
    return [round(float(v), 6) for v in (sk_p50, child_wall_p90, child_lane_mad)]


def _agree(checks: list[list[float]]) -> bool:
    """Fingerprints equal up to float summation order."""
    return all(math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6) for other in checks[1:] for a, b in zip(checks[0], other, strict=True))


def run_pandas(folder: Path, warmup: int) -> dict[str, Any]:
    import pandas as pd

    cols = ["device_id", "model_id", "sk_id", "ts_ns", "dur_ns", "node_id", "is_span"]
    keys = ["device_id", "model_id", "sk_id"]
    sk_out, child_out = [], []
    for side in SIDES:
        df = pd.read_parquet(folder / side / "events.parquet", columns=cols)
        df["end_ns"] = df["ts_ns"] + df["dur_ns"]
        df = df.sort_values([*keys, "ts_ns"], kind="stable")
        prev_end = df.groupby(keys)["end_ns"].cummax().groupby([df[k] for k in keys]).shift(1)
        new = (df["ts_ns"] > prev_end) | prev_end.isna()
        df["occurrence"] = new.astype("int64").groupby([df[k] for k in keys]).cumsum() - 1
        df = df[df["occurrence"] >= warmup]
        span = df[df["is_span"]].groupby([*keys, "occurrence"]).agg(start=("ts_ns", "min"), end=("end_ns", "max"))
        span["wall_us"] = (span["end"] - span["start"]) / 1000.0
        span["side"] = side
        sk_out.append(span.reset_index())
        child = df[~df["is_span"]].groupby([*keys, "occurrence", "node_id"]).agg(
            start=("ts_ns", "min"), end=("end_ns", "max"), max_lane=("dur_ns", "max"))
        child["wall_us"] = (child["end"] - child["start"]) / 1000.0
        child["max_lane_us"] = child["max_lane"] / 1000.0
        child["side"] = side
        child_out.append(child.reset_index())

    def stats(frame: pd.DataFrame, by: list[str], value: str) -> pd.DataFrame:
        g = frame.groupby(by)[value]
        med = g.transform("median")
        out = g.agg(count="count", p50_us="median", min_us="min", max_us="max")
        out["p90_us"] = g.quantile(0.9)
        out["mad_us"] = (frame[value] - med).abs().groupby([frame[b] for b in by]).median()
        return out

    sks = stats(pd.concat(sk_out), ["side", "sk_id"], "wall_us")
    children = pd.concat(child_out)
    wall = stats(children, ["side", "sk_id", "node_id"], "wall_us")
    lane = stats(children, ["side", "sk_id", "node_id"], "max_lane_us")
    return {"sk_rows": len(sks), "child_rows": len(wall) + len(lane),
            "check": _check(sks["p50_us"].sum(), wall["p90_us"].sum(), lane["mad_us"].sum())}


DUCKDB_SQL = """
WITH spans AS (
  SELECT side, device_id, model_id, sk_id, record, ts_ns, ts_ns + dur_ns AS end_ns FROM events WHERE is_span
), running AS (
  SELECT *, max(end_ns) OVER (PARTITION BY side, device_id, model_id, sk_id ORDER BY ts_ns, record
                              ROWS UNBOUNDED PRECEDING) AS run_end
  FROM spans
), flagged AS (
  SELECT *, CASE WHEN ts_ns > coalesce(lag(run_end) OVER (PARTITION BY side, device_id, model_id, sk_id
                                                          ORDER BY ts_ns, record), -1)
                 THEN 1 ELSE 0 END AS new
  FROM running
), tagged AS (
  SELECT *, sum(new) OVER (PARTITION BY side, device_id, model_id, sk_id ORDER BY ts_ns, record
                           ROWS UNBOUNDED PRECEDING) - 1 AS occurrence
  FROM flagged
), occ AS (
  SELECT side, device_id, model_id, sk_id, occurrence, min(ts_ns) AS start_ns, (max(end_ns) - min(ts_ns)) / 1000.0 AS wall_us
  FROM tagged GROUP BY ALL
), child_events AS (
  SELECT c.side, c.device_id, c.model_id, c.sk_id, c.node_id, c.ts_ns, c.dur_ns, o.occurrence
  FROM (SELECT * FROM events WHERE NOT is_span) c
  ASOF JOIN occ o ON c.side = o.side AND c.device_id = o.device_id AND c.model_id = o.model_id
                 AND c.sk_id = o.sk_id AND c.ts_ns >= o.start_ns
), child AS (
  SELECT side, sk_id, node_id, occurrence, (max(ts_ns + dur_ns) - min(ts_ns)) / 1000.0 AS wall_us,
         max(dur_ns) / 1000.0 AS max_lane_us
  FROM child_events WHERE occurrence >= $warmup GROUP BY side, device_id, model_id, sk_id, node_id, occurrence
)
SELECT 'sk' AS level, side, sk_id, NULL AS node_id, count(*) AS n, median(wall_us) AS p50, quantile_cont(wall_us, 0.9) AS p90,
       mad(wall_us) AS mad, min(wall_us) AS mn, max(wall_us) AS mx, NULL AS lane_p50, NULL AS lane_p90, NULL AS lane_mad
FROM occ WHERE occurrence >= $warmup GROUP BY side, sk_id
UNION ALL
SELECT 'child', side, sk_id, node_id, count(*), median(wall_us), quantile_cont(wall_us, 0.9), mad(wall_us), min(wall_us),
       max(wall_us), median(max_lane_us), quantile_cont(max_lane_us, 0.9), mad(max_lane_us)
FROM child GROUP BY side, sk_id, node_id
"""


def run_duckdb(folder: Path, warmup: int) -> dict[str, Any]:
    import duckdb

    con = duckdb.connect()
    parts = " UNION ALL ".join(
        f"SELECT '{side}' AS side, * FROM read_parquet('{folder / side / 'events.parquet'}')" for side in SIDES
    )
    con.execute(f"CREATE VIEW events AS {parts}")
    rows = con.execute(DUCKDB_SQL, {"warmup": warmup}).fetchall()
    sk = [r for r in rows if r[0] == "sk"]
    child = [r for r in rows if r[0] == "child"]
    return {"sk_rows": len(sk), "child_rows": 2 * len(child),
            "check": _check(sum(r[5] for r in sk), sum(r[6] for r in child), sum(r[12] for r in child))}


CONTENDERS = {"ours": run_ours, "ours_stats": run_ours_stats, "pandas": run_pandas, "duckdb": run_duckdb}


PRELOAD = {
    "ours": ("sk_analytics.dcci.analysis", "scipy.stats"),
    "ours_stats": ("sk_analytics.dcci.occurrences", "sk_analytics.dcci.classify"),
    "pandas": ("pandas", "pyarrow.parquet", "pyarrow.dataset", "pyarrow.pandas_compat",
               "pandas.core.arrays.arrow.extension_types"),  # read_parquet imports these lazily
    "duckdb": ("duckdb",),
}
"""Modules imported before the clock starts: import time is constant, not data-dependent."""


def _child(name: str, folder: Path, warmup: int) -> None:
    import importlib

    for module in PRELOAD[name]:
        importlib.import_module(module)
    start, cpu = time.perf_counter(), time.process_time()
    result = CONTENDERS[name](folder, warmup)
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    print(json.dumps({"name": name, "seconds": elapsed, "cpu_seconds": cpu, "peak_mb": _peak_kb() / 1024, "result": result}))


def _load() -> str:
    """The 1/5/15-minute load averages (other work on a shared machine skews every figure)."""
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def _peak_kb() -> int:
    """This process's own peak RSS: VmHWM of its address space (ru_maxrss would also count the
    parent's RSS before exec on Linux, i.e. the generated data)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=125)
    parser.add_argument("--sks", type=int, default=50)
    parser.add_argument("--children", type=int, default=8)
    parser.add_argument("--cores", type=int, default=40)
    parser.add_argument("--warmup", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3, help="runs per contender, round robin (best time reported)")
    parser.add_argument("--align-sks", type=int, default=5000, help="SK launches per graph of the alignment figure")
    parser.add_argument("--child", nargs=2, metavar=("NAME", "DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args.child[0], Path(args.child[1]), args.warmup)
        return
    with tempfile.TemporaryDirectory(prefix="bench-dcci-") as tmp:
        folder = Path(tmp)
        start = time.perf_counter()
        for i, side in enumerate(SIDES):
            parts = generate(side, iterations=args.iterations, sks=args.sks, children=args.children, cores=args.cores, seed=i + 1)
            (folder / side).mkdir()
            for name, frame in parts.items():
                frame.write_parquet(folder / side / f"{name}.parquet")
            if i == 0:
                n_child = int((~parts["events"]["is_span"]).sum())
                n_all = parts["events"].height
        print(f"generated 2 profiles: {n_child:,} child events + {n_all - n_child:,} span events each "
              f"({args.sks} SKs x {args.children} children x {args.cores} cores x {args.iterations} iterations) "
              f"in {time.perf_counter() - start:.1f} s")
        print(f"load average before: {_load()}")
        runs: dict[str, list[dict[str, Any]]] = {name: [] for name in CONTENDERS}
        for _ in range(args.repeat):  # round robin: every contender sees the same machine load
            for name in CONTENDERS:
                out = subprocess.run([sys.executable, __file__, "--warmup", str(args.warmup), "--child", name, str(folder)],
                                     check=True, capture_output=True, text=True)
                runs[name].append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(f"load average after:  {_load()}")
        figures = {name: min(r, key=lambda x: x["seconds"]) for name, r in runs.items()}
        for name, best in figures.items():
            cpu = min(r["cpu_seconds"] for r in runs[name])
            print(f"{name:>11}: {best['seconds']:7.2f} s  (CPU {cpu:5.2f} s)  peak RSS {best['peak_mb']:7.0f} MB  {best['result']}")
        ours, stats = figures["ours"]["seconds"], figures["ours_stats"]["seconds"]
        pandas_s, duck_s = figures["pandas"]["seconds"], figures["duckdb"]["seconds"]
        peak = figures["ours"]["peak_mb"]
        print(f"pandas / ours end-to-end: {pandas_s / ours:.1f}x; ours end-to-end / duckdb: {ours / duck_s:.2f}x")
        print(f"like-for-like stats kernel: pandas / ours {pandas_s / stats:.1f}x; ours / duckdb {stats / duck_s:.2f}x")
        map_s, align_s, counts = time_alignment(args.align_sks)
        print(f"two graphs of {args.align_sks:,} SKs each: map to structural identities {map_s * 1000:.1f} ms, "
              f"graph-context alignment {align_s * 1000:.1f} ms = {align_s / ours:.1%} of ours end to end  {counts}")
        checks = [
            (align_s / ours <= 0.10, "graph-context alignment of two 5,000-SK graphs <= 10% of dcci-diff end to end"),
            (pandas_s / ours >= 10.0, ">= 10x faster than pandas (end to end)"),
            (ours / duck_s <= 1.5, "within 1.5x of DuckDB (end to end)"),
            (stats / duck_s <= 1.5, "within 1.5x of DuckDB (like-for-like statistics)"),
            (pandas_s / stats >= 10.0, ">= 10x faster than pandas (like-for-like statistics)"),
            (_agree([figures[n]["result"]["check"] for n in ("ours_stats", "pandas", "duckdb")]),
             "ours_stats, pandas and duckdb agree on the statistics fingerprint"),
            (peak <= 2048.0, f"peak RSS <= 2 GB ({peak:.0f} MB)"),
        ]
        for ok, text in checks:
            print(f"  [{'ok' if ok else 'MISS'}] {text}")

if __name__ == "__main__":
    main()
