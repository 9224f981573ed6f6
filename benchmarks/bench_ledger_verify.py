"""Issue 24: ``ledger verify`` with full re-hashing of a session's evidence, against ``sha256sum`` and
``b3sum`` of the same files (same run, same page cache), and the cost an append pays.

    .venv/bin/python benchmarks/bench_ledger_verify.py [--session demo-session] [--appends 500]
        [--baseline OTHER/bin/sk-analyze] [--skip-verify] [--skip-bind]

Without ``--session`` the demo session is created first (``sk-run sweep --demo``, about three
minutes, 2 GB). Each tool reads the files once to warm the page cache, then is timed
``--repeat`` times, the tools taking turns (so a burst of load hits all of them alike); the
figure is the best time and the peak RSS (``/usr/bin/time``). ``--baseline``: another
``sk-analyze`` (an older tree) timed in the same turns. The ``sk-analyze`` runs get an environment
without ``PYTHONDONTWRITEBYTECODE``, as an installed package has its bytecode cached (the warm-up
run writes it); with it set, every run compiles sk-tune's sources again (~40 ms here).
``--skip-verify`` with another tree's interpreter measures that tree's ``Ledger.append``.
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


def _timed(argv: list[str], *, stdin: bytes | None = None, env: dict[str, str] | None = None) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one run of ``argv``."""
    start = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-f", "%M", *argv], input=stdin, capture_output=True, check=False, env=env)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{argv[0]} failed ({done.returncode}): {done.stderr.decode()[-500:]}")
    return wall, int(done.stderr.decode().strip().splitlines()[-1])


def evidence_files(session: Path) -> list[str]:
    from sk_analytics.ledger.evidence import walk

    return [rel for rel, _ in walk(session)]


def bench_verify(session: Path, repeat: int, baseline: Path | None) -> None:
    files = evidence_files(session)
    size = sum((session / f).stat().st_size for f in files)
    listing = b"\0".join(f.encode() for f in files) + b"\0"
    xargs = ["xargs", "-0", "-n", "256"]
    print(f"session {session}: {len(files)} evidence files, {size / 1e9:.2f} GB")
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    sk = [str(BIN / "sk-analyze"), "ledger", "verify", str(session)]
    tools: dict[str, tuple[list[str], bytes | None, dict[str, str] | None]] = {
        "sk-analyze ledger verify": (sk, None, env),
        "sk-analyze ledger verify --quick": ([*sk, "--quick"], None, env),
    }
    if baseline is not None:
        tools["baseline ledger verify"] = ([str(baseline), *sk[1:]], None, env)
    for tool in ("sha256sum", "b3sum"):
        if shutil.which(tool) is None:
            print(f"  {tool}: not installed")
            continue
        tools[tool] = ([*xargs, tool], listing, None)
    os.chdir(session)
    for argv, stdin, tool_env in tools.values():
        _timed(argv, stdin=stdin, env=tool_env)  # warm the page cache (and the bytecode cache)
    runs: dict[str, list[tuple[float, int]]] = {name: [] for name in tools}
    for _ in range(repeat):
        for name, (argv, stdin, tool_env) in tools.items():
            runs[name].append(_timed(argv, stdin=stdin, env=tool_env))
    results = {name: (min(r[0] for r in got), max(r[1] for r in got)) for name, got in runs.items()}
    for name, (wall, rss) in results.items():
        print(f"  {name:<34} {wall:6.2f} s  {wall and size / wall / 1e9:5.2f} GB/s  peak RSS {rss / 1024:6.1f} MiB")
    from sk_analytics.ledger.chain import read_records
    from sk_analytics.ledger.evidence_verify import verify_evidence

    records = read_records(session)
    alone = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        report = verify_evidence(session, records, finished=True)
        alone = min(alone, time.perf_counter() - t0)
        assert report.problem is None, report.problem
    print(f"  {'of which the evidence re-hash':<34} {alone:6.2f} s  {size / alone / 1e9:5.2f} GB/s  (in-process: the rest of "
          "verify is start-up, the ledger and the other checks)")
    fastest = {k: v[0] for k, v in results.items() if k in ("sha256sum", "b3sum")}
    if fastest:
        faster = min(fastest.values())
        line = (f"  verify / faster of sha256sum, b3sum: {results['sk-analyze ledger verify'][0] / faster:.2f}x; "
                f"--quick {results['sk-analyze ledger verify --quick'][0] / faster:.2f}x; evidence re-hash alone: {alone / faster:.2f}x")
        if baseline is not None:
            line += f"; baseline {results['baseline ledger verify'][0] / faster:.2f}x"
        print(line)


def bench_appends(n: int) -> None:
    """Mean cost of Ledger.append (signing, fsync, head, witness) and of binding an unchanged small session."""
    from sk_analytics.ledger.chain import Ledger

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
        from sk_analytics.ledger import witness

        t0 = time.perf_counter()
        for i in range(n):
            witness.note(ledger.path, i + 1, "0" * 64)
        print(f"  of which the witness line: {(time.perf_counter() - t0) / n * 1e3:.3f} ms/append")
        floor = []
        line, head, tmp = folder / "floor.jsonl", folder / "floor.head", folder / ".floor.head.tmp"
        for _ in range(n):  # the same three fsyncs with nothing else: the I/O floor of an append
            t0 = time.perf_counter()
            fd = os.open(line, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            os.write(fd, b"x" * 400 + b"\n")
            os.fsync(fd)
            os.close(fd)
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
            os.write(fd, b"y" * 300)
            os.fsync(fd)
            os.close(fd)
            os.replace(tmp, head)
            fd = os.open(folder, os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
            floor.append(time.perf_counter() - t0)
        print(f"  of which the three fsyncs (same writes, nothing else): median {statistics.median(floor) * 1e3:.3f} ms")


def bench_bind(session: Path) -> None:
    """Binding an unchanged session (what each record of a long sweep pays for the walk) and binding it from scratch."""
    from sk_analytics.ledger.evidence import bind, forget

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
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--baseline", type=Path, help="another sk-analyze to time in the same turns (an older tree)")
    parser.add_argument("--skip-verify", action="store_true", help="only the appends (and --skip-bind: not the binding)")
    parser.add_argument("--skip-bind", action="store_true")
    args = parser.parse_args()
    if args.skip_verify and args.skip_bind:
        bench_appends(args.appends)
        return
    with tempfile.TemporaryDirectory() as scratch:  # the demo session made here is removed again
        session = args.session
        if session is None:
            session = Path(scratch) / "demo-session"
            subprocess.run([str(BIN / "sk-run"), "sweep", "--demo", "--session", str(session)], check=True, stdout=subprocess.DEVNULL)
        session = session.resolve()
        if not args.skip_verify:
            bench_verify(session, args.repeat, args.baseline)
        bench_appends(args.appends)
        if not args.skip_bind:
            bench_bind(session)


if __name__ == "__main__":
    main()
