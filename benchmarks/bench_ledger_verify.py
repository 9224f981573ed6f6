"""Issue 24: ``ledger verify`` with full re-hashing of a session's evidence, against ``sha256sum`` and
``b3sum`` of the same files (same run, same page cache), and the cost an append pays.

    .venv/bin/python benchmarks/bench_ledger_verify.py [--session demo-session] [--appends 500]

Without ``--session`` the demo session is created first (``sk-run sweep --demo``, about three
minutes, 2 GB). Each tool reads the files once to warm the page cache, then is timed
``--repeat`` times; the figure is the best time and the peak RSS (``/usr/bin/time``).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent


def _timed(argv: list[str], *, stdin: bytes | None = None) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one run of ``argv``."""
    start = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], input=stdin, capture_output=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    return wall, int(done.stderr.decode().strip().splitlines()[-1])


def _best(argv: list[str], repeat: int, *, stdin: bytes | None = None) -> tuple[float, int]:
    runs = [_timed(argv, stdin=stdin) for _ in range(repeat)]
    return min(r[0] for r in runs), max(r[1] for r in runs)


def evidence_files(session: Path) -> list[str]:
    from sk_analytics.evidence import walk

    return [rel for rel, _ in walk(session)]


def bench_verify(session: Path, repeat: int) -> None:
    files = evidence_files(session)
    size = sum((session / f).stat().st_size for f in files)
    listing = b"\0".join(f.encode() for f in files) + b"\0"
    xargs = ["xargs", "-0", "-n", "256"]
    print(f"session {session}: {len(files)} evidence files, {size / 1e9:.2f} GB")
    sk = [str(BIN / "sk-analyze"), "ledger", "verify", str(session)]
    _timed(sk)  # warm the page cache
    results = {"sk-analyze ledger verify": _best(sk, repeat),
               "sk-analyze ledger verify --quick": _best([*sk, "--quick"], repeat)}
    for tool in ("sha256sum", "b3sum"):
        if shutil.which(tool) is None:
            print(f"  {tool}: not installed")
            continue
        os.chdir(session)
        results[tool] = _best([*xargs, tool], repeat, stdin=listing)
    for name, (wall, rss) in results.items():
        print(f"  {name:<34} {wall:6.2f} s  {wall and size / wall / 1e9:5.2f} GB/s  peak RSS {rss / 1024:6.1f} MiB")
    from sk_analytics.evidence_verify import verify_evidence
    from sk_analytics.ledger import read_records

    records = read_records(session)
    t0 = time.perf_counter()
    report = verify_evidence(session, records, finished=True)
    alone = time.perf_counter() - t0
    assert report.problem is None, report.problem
    print(f"  {'of which the evidence re-hash':<34} {alone:6.2f} s  {size / alone / 1e9:5.2f} GB/s  (in-process: the rest of "
          "verify is start-up, the ledger and the re-rendered reports)")
    faster = min(v[0] for k, v in results.items() if k in ("sha256sum", "b3sum"))
    print(f"  verify / faster of sha256sum, b3sum: {results['sk-analyze ledger verify'][0] / faster:.2f}x; "
          f"evidence re-hash alone: {alone / faster:.2f}x")


def bench_appends(n: int) -> None:
    """Mean cost of Ledger.append (signing, fsync, head, witness) and of binding an unchanged small session."""
    from sk_analytics.ledger import Ledger

    with tempfile.TemporaryDirectory() as tmp:
        os.environ["SK_TUNE_WITNESS"] = str(Path(tmp) / "witness.jsonl")  # never the user's witness
        folder = Path(tmp) / "s"
        folder.mkdir()
        ledger = Ledger(folder)
        ledger.append("warm", {})
        times = []
        for i in range(n):
            t0 = time.perf_counter()
            ledger.append("trial_result", {"round": f"O{i}", "ok": True, "summary_zh": "示例记录"})
            times.append(time.perf_counter() - t0)
        print(f"  Ledger.append: median {statistics.median(times) * 1e3:.3f} ms, mean {statistics.fmean(times) * 1e3:.3f} ms "
              f"over {n} records (witness included)")
        from sk_analytics import witness

        t0 = time.perf_counter()
        for i in range(n):
            witness.note(ledger.path, i + 1, "0" * 64)
        print(f"  of which the witness line: {(time.perf_counter() - t0) / n * 1e3:.3f} ms/append")


def bench_bind(session: Path) -> None:
    """Binding an unchanged session (what each record of a long sweep pays for the walk) and binding it from scratch."""
    from sk_analytics.evidence import bind, forget

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "copy"
        subprocess.run(["cp", "-a", str(session), str(copy)], check=True)
        shutil.rmtree(copy / "EVIDENCE", ignore_errors=True)
        forget(copy)
        t0 = time.perf_counter()
        bind(copy, records=[])
        first = time.perf_counter() - t0
        t0 = time.perf_counter()
        bind(copy, records=[])
        again = time.perf_counter() - t0
    print(f"  bind: all files once {first:.2f} s; an unchanged session again {again * 1e3:.1f} ms (the walk each record pays)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--session", type=Path)
    parser.add_argument("--appends", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    session = args.session
    if session is None:
        session = Path(tempfile.mkdtemp()) / "demo-session"
        subprocess.run([str(BIN / "sk-run"), "sweep", "--demo", "--session", str(session)], check=True, stdout=subprocess.DEVNULL)
    session = session.resolve()
    bench_verify(session, args.repeat)
    bench_appends(args.appends)
    bench_bind(session)


if __name__ == "__main__":
    main()
