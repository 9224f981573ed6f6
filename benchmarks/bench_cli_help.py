"""``--help`` start-up of ``sk-analyze`` and ``sk-run``, their commands and every subcommand.

Targets: the group helps <= 0.3 s wall (issue 14 §4); the ``--help`` of every command and
subcommand within 0.2 CPU s of a bare ``python -c "import click"`` (issue 26: the command
modules import their implementation, Polars, NumPy, SciPy, Arrow, jsonschema, only when
they run).

Prints, measured in the same run (best of ``--rounds`` fresh processes each): the wall
time of the group helps as shipped and when every command is imported to describe itself
(the behaviour before the summaries); then, for every command and subcommand (found by
walking the click groups), the CPU time (user + system, of the child process) of its
``--help`` above ``python -c "import click"``.

    python benchmarks/bench_cli_help.py [--rounds 3] [--strict]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time

GROUP_CASES = {
    "python -c pass": "pass",
    "sk-analyze --help": "from sk_analytics.cli import main; main(['--help'])",
    "sk-analyze --help (importing every command)": "import sk_analytics.cli as c; c.cli.summaries = {}; c.main(['--help'])",
    "sk-run --help": "from sk_runner.cli import main; main(['--help'])",
    "sk-run --help (importing every command)": "import sk_runner.cli as c; c.cli.summaries = {}; c.main(['--help'])",
}
ENTRY_POINTS = {"sk-analyze": "sk_analytics.cli", "sk-run": "sk_runner.cli"}
CPU_MARGIN_S = 0.2


def every_command() -> list[tuple[str, list[str]]]:
    """(entry point, argv) of every command and subcommand: the walk that writes docs/cli.md."""
    from sk_analytics.cli.help_doc import command_contexts, resolve

    paths = [ctx.command_path.split() for ctx in command_contexts({prog: resolve(f"{m}:cli") for prog, m in ENTRY_POINTS.items()})]
    return [(path[0], path[1:]) for path in paths]


def help_code(prog: str, argv: list[str]) -> str:
    return f"from {ENTRY_POINTS[prog]} import main; main({[*argv, '--help']!r})"


def once(code: str) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one fresh ``python -c code``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    args = parser.parse_args(argv)
    commands = every_command()
    wall = {name: float("inf") for name in GROUP_CASES}
    cpu = {" ".join([prog, *a]): float("inf") for prog, a in commands}
    click_cpu = float("inf")
    for _ in range(args.rounds):  # interleaved, so that load from other processes hits every case alike
        click_cpu = min(click_cpu, once("import click")[1])
        for name, code in GROUP_CASES.items():
            wall[name] = min(wall[name], once(code)[0])
        for prog, a in commands:
            key = " ".join([prog, *a])
            cpu[key] = min(cpu[key], once(help_code(prog, a))[1])
    floor = wall["python -c pass"]
    print(f"load average {os.getloadavg()[0]:.1f}; best of {args.rounds} fresh processes")
    for name, seconds in wall.items():
        print(f"  {name:46s} {seconds:7.3f} s wall  ({seconds / floor:4.1f}x python -c pass)")
    print(f"CPU of --help above python -c 'import click' ({click_cpu:.3f} s CPU):")
    for name, seconds in cpu.items():
        print(f"  {name + ' --help':46s} {seconds - click_cpu:+7.3f} s CPU")
    worst = max(cpu, key=lambda k: cpu[k])
    checks = {
        "sk-analyze --help <= 0.3 s": wall["sk-analyze --help"] <= 0.3,
        "sk-run --help <= 0.3 s": wall["sk-run --help"] <= 0.3,
        f"every --help within {CPU_MARGIN_S} CPU s of import click (worst: {worst}, {cpu[worst] - click_cpu:+.3f} s)":
            cpu[worst] - click_cpu <= CPU_MARGIN_S,
    }
    for name, ok in checks.items():
        print(f"  [{'ok' if ok else 'MISSED'}] {name}")
    return 1 if args.strict and not all(checks.values()) else 0


if __name__ == "__main__":
    raise SystemExit(main())
