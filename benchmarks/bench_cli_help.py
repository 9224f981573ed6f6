"""`sk-analyze --help` / `sk-run --help` start-up (issue 14 §4: <= 0.3 s).

Prints, measured in the same run (best of ``--rounds`` fresh processes each):
the group help as shipped (command summaries, no command imported), the same
help when every command is imported to describe itself (the behaviour before
the summaries), a bare ``python -c pass`` (the interpreter's own floor), and
one command's own help (``ingest --help``, ``sim --help``), whose start-up the
summaries must not change.

    python benchmarks/bench_cli_help.py [--rounds 5] [--strict]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

CASES = {
    "python -c pass": "pass",
    "sk-analyze --help": "from sk_analytics.cli import main; main(['--help'])",
    "sk-analyze --help (importing every command)": "import sk_analytics.cli as c; c.cli.summaries = {}; c.main(['--help'])",
    "sk-analyze ingest --help": "from sk_analytics.cli import main; main(['ingest', '--help'])",
    "sk-run --help": "from sk_runner.cli import main; main(['--help'])",
    "sk-run --help (importing every command)": "import sk_runner.cli as c; c.cli.summaries = {}; c.main(['--help'])",
    "sk-run sim --help": "from sk_runner.cli import main; main(['sim', '--help'])",
}


def once(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    best = {name: float("inf") for name in CASES}
    for _ in range(args.rounds):
        for name, code in CASES.items():
            best[name] = min(best[name], once(code))
    floor = best["python -c pass"]
    print(f"load average {os.getloadavg()[0]:.1f}; best of {args.rounds} fresh processes")
    for name, seconds in best.items():
        print(f"  {name:46s} {seconds:7.3f} s  ({seconds / floor:4.1f}x python -c pass)")
    checks = {
        "sk-analyze --help <= 0.3 s": best["sk-analyze --help"] <= 0.3,
        "sk-run --help <= 0.3 s": best["sk-run --help"] <= 0.3,
    }
    for name, ok in checks.items():
        print(f"  [{'ok' if ok else 'MISSED'}] {name}")
    return 1 if args.strict and not all(checks.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
