"""Benchmark of the streaming rank-log reader (issue 29): time and peak memory against ``wc -l``.

Data (``benchmarks/.data/``, git-ignored): a candidate folder of 5 runs x 1 rank
whose ``run-1/log_0.log`` has ``--lines`` decode lines (10,000,000: 350 MB, every
line a sample, 3-decimal values), the other runs 1,000 lines; and a 2 GB sparse
file of NUL bytes in place of a rank log.

Each command runs as a fresh child process; its wall time and peak resident
set (``wait4`` rusage, interpreter and imports included) are printed beside
``wc -l`` of the same file (warm page cache: the file is read once before).

    .venv/bin/python benchmarks/bench_rank_log_stream.py [--lines 10000000]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / ".data" / "rank-log-stream"
ANALYZE = [sys.executable, "-c", "from sk_analytics.cli import main; main()"]
TARGET_MB = 300


def write_logs(folder: Path, lines: int) -> Path:
    """The candidate folder (module docstring); regenerated only when the line count differs."""
    big = folder / "c" / "run-1" / "log_0.log"
    stamp = folder / f".lines-{lines}"
    if stamp.is_file() and big.is_file():
        return big
    shutil.rmtree(folder, ignore_errors=True)
    rng = random.Random(29)
    block = "".join(f"Inference time (decode): {10 + rng.random() * 5:.3f} ms\n" for _ in range(10_000))
    for k in range(1, 6):
        (folder / "c" / f"run-{k}").mkdir(parents=True)
    with open(big, "w", encoding="ascii") as fh:
        for _ in range(lines // 10_000):
            fh.write(block)
    small = "".join(block.splitlines(keepends=True)[:1000])
    for k in range(2, 6):
        (folder / "c" / f"run-{k}" / "log_0.log").write_text(small, encoding="ascii")
    nul = folder / "nul" / "run-1" / "log_0.log"
    nul.parent.mkdir(parents=True)
    with open(nul, "wb") as fh:
        fh.truncate(2 << 30)
    stamp.write_text("")
    return big


def measure(argv: list[str]) -> tuple[float, float, float, int]:
    """(wall seconds, CPU seconds, peak RSS MB, exit code) of one child process (CPU: user + system,
    the figure a busy shared machine disturbs least)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=ROOT)
    _, status, usage = os.wait4(proc.pid, 0)
    return time.perf_counter() - t0, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=10_000_000)
    args = parser.parse_args()
    big = write_logs(DATA, args.lines)
    cand = big.parent.parent
    size_mb = big.stat().st_size / 1e6
    subprocess.run(["cat", str(big)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache for everyone alike
    out = DATA / "ingested"
    shutil.rmtree(out, ignore_errors=True)
    common = ["--expected-ranks", "1", "--warmup", "8"]
    cases = [
        ("wc -l (baseline)", ["wc", "-l", str(big)]),
        ("stability", [*ANALYZE, "stability", str(cand), *common]),
        ("option-trial (same side twice)", [*ANALYZE, "option-trial", "--baseline", str(cand), "--candidate", f"X={cand}", *common]),
        ("ingest", [*ANALYZE, "ingest", str(big.parent), "--out", str(out)]),
        ("stability, 2 GB of NULs", [*ANALYZE, "stability", str(DATA / "nul"), "--expected-ranks", "1"]),
    ]
    print(f"rank log: {args.lines:,} lines, {size_mb:.0f} MB (every line a decode sample); other runs 1,000 lines")
    print(f"{'':32} {'exit':>4} {'wall':>9} {'CPU':>9} {'peak RSS':>10}  {'wall / wc -l':>12}")
    base_wall = None
    for name, argv in cases:
        wall, cpu, rss, code = measure(argv)
        base_wall = base_wall or wall
        print(f"{name:32} {code:>4} {wall:8.2f}s {cpu:8.2f}s {rss:8.0f} MB  {wall / base_wall:11.0f}x")
    print(f"target: peak RSS <= {TARGET_MB} MB for the 10 M-line log; the NUL file refused (exit 2) after its first megabyte")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
