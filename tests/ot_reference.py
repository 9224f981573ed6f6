"""A straightforward pure-Python implementation of the option-trial formulas
(formats.md §1), written independently of the product to check it.

Input: ``{run name: {rank: {"decode": [text, ...], "prefill": [text, ...]}}}``
(or rank-log folders via :func:`read_folder`). Means are exact (integer sums of
the decimal texts) rounded once, the mean and median over runs too (of the runs'
exact rational metrics); the stddev is ``sqrt`` of the exact
population variance; P50/P90 follow the textbook definitions on floats.
"""

from __future__ import annotations

import math
import re
import statistics
from decimal import ROUND_HALF_EVEN, Context, Decimal
from fractions import Fraction
from pathlib import Path
from typing import Any

TIMING = re.compile(r"Inference time \((decode|prefill)\): ([0-9.]+) ms")
CTX = Context(prec=28, rounding=ROUND_HALF_EVEN)

Data = dict[str, dict[int, dict[str, list[str]]]]


def read_folder(folder: Path) -> Data:
    """Rank logs of a candidate folder, parsed line by line with ``re``."""
    data: Data = {}
    runs = sorted((p for p in folder.glob("run-*") if p.is_dir()), key=lambda p: int(p.name.split("-")[1]))
    for run in runs:
        ranks: dict[int, dict[str, list[str]]] = {}
        for log in run.glob("log_*.log"):
            phases: dict[str, list[str]] = {"decode": [], "prefill": []}
            for phase, value in TIMING.findall(log.read_text(errors="replace")):
                phases[phase].append(value)
            ranks[int(log.stem.split("_")[1])] = phases
        data[run.name] = dict(sorted(ranks.items()))
    return data


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    position = (len(ordered) - 1) * q
    lower = int(position)
    upper = min(lower + 1, len(ordered) - 1)
    return ordered[lower] + (ordered[upper] - ordered[lower]) * (position - lower)


def stats(texts: list[str]) -> dict[str, Any]:
    """Textbook statistics; mean and variance from exact integer sums."""
    decimals = [Decimal(t) for t in texts]
    floats = [float(d) for d in decimals]
    scale = max(0, *(-int(d.as_tuple().exponent) for d in decimals))
    units = [int(d.scaleb(scale)) for d in decimals]
    n, s1, s2 = len(units), sum(units), sum(u * u for u in units)
    mean = Fraction(s1, n * 10**scale)
    variance = Fraction(n * s2 - s1 * s1, n * n * 10 ** (2 * scale))
    return {
        "count": n,
        "mean_ms": float(mean),
        "p50_ms": statistics.median(floats),
        "p90_ms": quantile(floats, 0.9),
        "stddev_ms": math.sqrt(float(variance)),
        "min_ms": min(floats),
        "max_ms": max(floats),
    }


def exact_mean(texts: list[str]) -> Fraction:
    """The exact rational mean of decimal texts."""
    return sum((Fraction(t) for t in texts), Fraction(0)) / len(texts)


def exact_mean_text(texts: list[str]) -> str:
    total = Decimal(0)
    for t in texts:
        total = CTX.add(total, Decimal(t))
    return str(CTX.divide(total, Decimal(len(texts))))


def summarize(data: Data, warmup: int) -> dict[str, Any]:
    """The summary numbers of one side: per run (worst rank, pooled decode and
    prefill stats of the run) and over runs, as formats.md §1 defines them."""
    runs: list[dict[str, Any]] = []
    pooled: list[str] = []
    prefill: list[str] = []
    for ranks in data.values():
        best: tuple[float, int, str, Fraction] | None = None
        run_decode: list[str] = []
        run_prefill: list[str] = []
        for rank, phases in ranks.items():
            kept = phases["decode"][warmup:]
            run_decode += kept
            run_prefill += phases["prefill"]
            mean = stats(kept)["mean_ms"]
            if best is None or mean > best[0]:
                best = (mean, rank, exact_mean_text(kept), exact_mean(kept))
        assert best is not None
        runs.append(
            {
                "worst_rank": best[1],
                "mean_ms": best[0],
                "mean_exact_ms": best[2],
                "mean_exact": best[3],
                "decode": stats(run_decode),
                "prefill": stats(run_prefill) if run_prefill else None,
            }
        )
        pooled += run_decode
        prefill += run_prefill
    run_means = [run["mean_ms"] for run in runs]
    exact_means = [run["mean_exact"] for run in runs]
    return {
        "run_count": len(data),
        "runs": runs,
        "worst_ranks": [run["worst_rank"] for run in runs],
        "run_worst_rank_means_ms": run_means,
        "run_worst_rank_means_exact_ms": [run["mean_exact_ms"] for run in runs],
        "worst_rank_mean_ms": float(statistics.mean(exact_means)),
        "median_run_worst_rank_mean_ms": float(statistics.median(exact_means)),
        "decode": stats(pooled),
        "prefill": stats(prefill) if prefill else None,
    }


def spread_pct(exact: list[str]) -> float:
    values = [Decimal(v) for v in exact]
    total = Decimal(0)
    for v in values:
        total = CTX.add(total, v)
    mean = CTX.divide(total, Decimal(len(values)))
    return float(CTX.multiply(CTX.divide(CTX.subtract(max(values), min(values)), mean), Decimal(100)))


def gate(base: dict[str, Any], cand: dict[str, Any]) -> dict[str, bool]:
    stable = base["run_count"] == 5 and spread_pct(base["run_worst_rank_means_exact_ms"]) <= 5.0
    return {
        "baseline_stable": stable,
        "baseline_min_runs": base["run_count"] == 5,
        "candidate_min_runs": cand["run_count"] >= 3,
        "mean_improvement": cand["worst_rank_mean_ms"] < base["worst_rank_mean_ms"],
        "median_run_direction": cand["median_run_worst_rank_mean_ms"] < base["median_run_worst_rank_mean_ms"],
        # a relative change against a zero baseline is undefined: the check fails closed
        "p90_no_material_regression": base["decode"]["p90_ms"] != 0 and cand["decode"]["p90_ms"] <= base["decode"]["p90_ms"],
        "stddev_no_material_regression": base["decode"]["stddev_ms"] != 0
        and cand["decode"]["stddev_ms"] <= base["decode"]["stddev_ms"],
    }
