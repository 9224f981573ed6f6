"""sk-tune's dcci-diff beside Huawei's msprof-analyze on the demo's DCCI pair (all ranks).

Both tools get the same two diagnostic collections of ``sk-run demo``
(``<session>/experiments/Sbest/DCCI/diag/{baseline,candidate}_profile/attempt-1``),
alternated round by round in this one run:

* sk-tune: ``sk-analyze dcci-diff`` on the pair (every rank at once);
* msprof-analyze: ``compare -d <candidate rank r> -bp <baseline rank r>`` for every rank r
  (compare takes one rank per call), its cost summed over the ranks.

Measured per tool: wall time, CPU time (user + system of the command and every process
it waited for, from ``RUSAGE_CHILDREN``: what the load of a shared machine does not
inflate) and peak memory (the summed RSS of the command's whole process tree, sampled
every 20 ms), and what each identifies: how many rows stand for SKs, which SKs it says
are slower, which child ops. The last line gives the ratios against issue 47's targets:
msprof-analyze's summed wall over sk-tune's (>= 3x), sk-tune's peak over msprof-analyze's
largest call (<= 1x), and the CPU ratio beside them. msprof-analyze's answer is read from
the ``KernelCompare`` sheet of its workbook (a zip of XML; read with the standard
library), sk-tune's from its JSON.

    .venv/bin/python benchmarks/bench_vs_msprof.py [--session demo-session] [--rounds 2]

Needs the ``interop`` extra (msprof-analyze) and a demo session (``sk-run demo`` makes one).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from xml.etree import ElementTree

import psutil

BIN = Path(sys.executable).parent
DIAG = Path("experiments/Sbest/DCCI/diag")
XLSX = "{http://schemas.openxmlformats.org/spreadsheetml/2006/main}"


@dataclass
class Run:
    wall_s: float = 0.0
    cpu_s: float = 0.0
    peak_mb: float = 0.0
    calls: int = 0
    outputs: list[Path] = field(default_factory=list)


def measured(argv: list[str], run: Run) -> None:
    """Run ``argv``, adding its wall and CPU time to ``run`` and raising its peak to the tree's summed RSS peak."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    peak, done = 0, threading.Event()

    def sample() -> None:
        nonlocal peak
        root = psutil.Process(proc.pid)
        while not done.is_set():
            try:
                tree = [root, *root.children(recursive=True)]
                peak = max(peak, sum(p.memory_info().rss for p in tree if p.is_running()))
            except psutil.Error:
                pass
            done.wait(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, err = proc.communicate()
    done.set()
    sampler.join()
    if proc.returncode not in (0, 1):  # dcci-diff exits 1 when it proposes no repair
        raise SystemExit(f"{argv[0]} failed ({proc.returncode}): {err[-2000:]}")
    run.wall_s += time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    run.cpu_s += (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    run.peak_mb = max(run.peak_mb, peak / 2**20)
    run.calls += 1


def rank_dirs(root: Path) -> dict[int, Path]:
    """Rank -> its ``*_ascend_pt`` folder (rank from ``profiler_info_<rank>.json``)."""
    found = {}
    for folder in root.glob("*_ascend_pt"):
        info = next(folder.glob("profiler_info_*.json"), None)
        if info is not None:
            found[int(info.stem.rsplit("_", 1)[1])] = folder
    return dict(sorted(found.items()))


def sheet(path: Path, name: str) -> list[list[str | None]]:
    """Rows of one sheet of an .xlsx workbook (shared strings resolved)."""
    with zipfile.ZipFile(path) as book:
        shared = [
            "".join(t.text or "" for t in item.iter(f"{XLSX}t"))
            for item in ElementTree.fromstring(book.read("xl/sharedStrings.xml")).findall(f"{XLSX}si")
        ]
        names = re.findall(r'<sheet [^>]*name="([^"]+)"', book.read("xl/workbook.xml").decode())
        xml = ElementTree.fromstring(book.read(f"xl/worksheets/sheet{names.index(name) + 1}.xml"))
    rows = []
    for row in xml.iter(f"{XLSX}row"):
        cells = []
        for cell in row.findall(f"{XLSX}c"):
            value = cell.find(f"{XLSX}v")
            cells.append(None if value is None else shared[int(value.text)] if cell.get("t") == "s" else value.text)
        rows.append(cells)
    return rows


def msprof_findings(workbooks: list[Path]) -> dict[str, object]:
    """The SuperKernel rows of every rank's KernelCompare sheet: rows, calls and total duration change."""
    rows, calls, base_us, comp_us = 0, 0, 0.0, 0.0
    for book in workbooks:
        for cells in sheet(book, "KernelCompare")[2:]:
            if len(cells) > 12 and cells[1] == "SuperKernel":
                rows += 1
                calls += int(cells[12] or 0)
                base_us += float(cells[3] or 0)
                comp_us += float(cells[8] or 0)
    return {"sk_rows": rows, "sk_calls": calls, "sk_total_change_pct": 100 * (comp_us / base_us - 1) if base_us else None}


def sk_tune_findings(result: dict) -> dict[str, object]:
    """SK rows, the slower SK structures (with on how many ranks x occurrences) and the slower child ops."""
    slower = [sk for sk in result["sks"] if sk["class"] == "significantly_slower"]
    structures: dict[str, set[tuple[int, int]]] = {}
    for sk in slower:
        label = f"{sk['scope_name']}: {sk['boundary_first']}..{sk['boundary_last']}"
        structures.setdefault(label, set()).add((sk["rank"], sk["occurrence_index"]))
    ops = sorted({row["canonical_op"] for c in result["children"] for row in c["rows"]
                  if row["significant"] and row["wall"]["class"] == "significantly_slower"})  # fmt: skip
    return {"sk_rows": len(result["sks"]), "slower_sks": len(slower),
            "structures": {k: len(v) for k, v in structures.items()}, "child_ops": ops, "repair": result["repair"].get("tokens", [])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--session", type=Path, default=Path("demo-session"))
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--pair", nargs=2, type=Path, metavar=("BASELINE", "CANDIDATE"),
                        help="two sealed collection roots instead of the session's (with --warmup)")
    parser.add_argument("--warmup", type=int, help="occurrences dropped as warm-up (default: the session's dcci-diff.json)")
    args = parser.parse_args()
    if args.pair:
        baseline, candidate = args.pair
    else:
        baseline, candidate = (args.session / DIAG / f"{role}_profile" / "attempt-1" for role in ("baseline", "candidate"))
    if not (baseline.is_dir() and candidate.is_dir()):
        raise SystemExit(f"no DCCI pair under {args.session / DIAG}: run `sk-run demo` first")
    msprof = BIN / "msprof-analyze"
    if not msprof.exists():
        raise SystemExit("msprof-analyze is not installed: pip install -e '.[interop]'")
    warmup = args.warmup
    if warmup is None:
        warmup = json.loads((args.session / "experiments/Sbest/DCCI/dcci-diff.json").read_text(encoding="utf-8"))["warmup"]
    ranks_b, ranks_c = rank_dirs(baseline), rank_dirs(candidate)
    assert list(ranks_b) == list(ranks_c), (ranks_b, ranks_c)
    sk, ms = Run(), Run()
    with tempfile.TemporaryDirectory(prefix="bench-vs-msprof-") as tmp:
        out = Path(tmp)
        for r in range(args.rounds):
            diff = out / f"diff-{r}.json"
            measured([str(BIN / "sk-analyze"), "dcci-diff", "--baseline", str(baseline), "--candidate", str(candidate),
                      "--warmup", str(warmup), "--json-out", str(diff)], sk)  # fmt: skip
            sk.outputs.append(diff)
            for rank in ranks_c:
                folder = out / f"cmp-{r}-{rank}"
                measured([str(msprof), "compare", "-d", str(ranks_c[rank]), "-bp", str(ranks_b[rank]), "-o", str(folder)], ms)
                ms.outputs += sorted(folder.glob("performance_comparison_result_*.xlsx"))
        mine = sk_tune_findings(json.loads(sk.outputs[-1].read_text(encoding="utf-8")))
        theirs = msprof_findings(ms.outputs[-len(ranks_c):])
    load = os.getloadavg()
    print(f"demo DCCI pair: {len(ranks_c)} ranks, warm-up {warmup}; {args.rounds} rounds alternated; load average {load[0]:.1f} {load[1]:.1f}")
    print("| | sk-tune `dcci-diff` | msprof-analyze `compare` (per rank) |")
    print("|---|---|---|")
    print(f"| wall time per pair (mean of {args.rounds}) | {sk.wall_s / args.rounds:.1f} s (1 call) | "
          f"{ms.wall_s / args.rounds:.1f} s ({len(ranks_c)} calls) |")
    print(f"| CPU time per pair (user + system) | {sk.cpu_s / args.rounds:.1f} s | {ms.cpu_s / args.rounds:.1f} s |")
    print(f"| peak memory (process tree RSS) | {sk.peak_mb:.0f} MB | {ms.peak_mb:.0f} MB (largest call) |")
    print(f"| rows standing for SuperKernels | {mine['sk_rows']} (one per SK launch slot and rank) | "
          f"{theirs['sk_rows']} (`SuperKernel`, one per rank, {theirs['sk_calls']} launches) |")
    change = theirs["sk_total_change_pct"]
    print(f"| which SKs are slower | {mine['slower_sks']} slots of {len(mine['structures'])} structures: "
          + "; ".join(f"`{k}` ({v} occurrences x ranks)" for k, v in mine["structures"].items())
          + f" | none named: all SuperKernels {change:+.2f} % in total |")
    print(f"| which child ops | {', '.join(mine['child_ops']) or '-'} | - (sk_prof is not read) |")
    print(f"| proposed repair | {', '.join(mine['repair']) or '-'} | - |")
    wall, cpu, peak = ms.wall_s / sk.wall_s, ms.cpu_s / sk.cpu_s, sk.peak_mb / ms.peak_mb
    print(f"ratios: wall {wall:.2f}x faster ({'ok' if wall >= 3 else 'MISS'}, target >= 3x), "
          f"CPU {cpu:.2f}x less (what the load does not skew; no target), "
          f"peak {peak:.2f}x of msprof-analyze's largest call ({'ok' if peak <= 1 else 'MISS'}, target <= 1x)")


if __name__ == "__main__":
    main()
