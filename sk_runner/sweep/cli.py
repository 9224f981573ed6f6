"""``sk-run sweep``: the whole Stage O session (phase entry, demo, resume)."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import click

from typing import TYPE_CHECKING

from sk_analytics.errors import EXIT_NEGATIVE, EXIT_OK, UsageError
from sk_analytics.interrupts import interrupt_of
from sk_analytics.option_trial.modes import GATE_MODES

if TYPE_CHECKING:  # the sweep (Polars, Arrow) is imported when it runs: --help stays fast
    from sk_runner.sweep.session import SweepSession


def run_and_print(session: SweepSession, lang: str = "zh", quiet: bool = False) -> int:
    """Run a session to its hand-off with progress; print where the report is (exit 0 BASE, 1 stopped)."""
    from sk_analytics.cli._base import OUTPUT_LABELS
    from sk_runner.sweep.driver import run_sweep

    labels = OUTPUT_LABELS[lang]
    say = (lambda text: None) if quiet else (lambda text: click.echo(text, err=False))
    click.echo(f"{labels['session']}{session.root}")
    for notice in session.notices:
        click.echo(f"sk-run: warning: {notice}", err=True)
    try:
        outcome = run_sweep(session, say=say, lang=lang)
    except BaseException as exc:  # Ctrl-C / SIGTERM (also one Python wrapped): every started process is already killed
        if interrupt_of(exc) is not None:
            click.echo(f"continue with: sk-run sweep --resume {shlex.quote(str(session.root.resolve()))}", err=True)
        raise
    assert outcome is not None
    click.echo(f"{labels['report']}{outcome.report}")
    click.echo(f"{labels['html']}{outcome.html}")
    click.echo(f"{labels['handoff']}{outcome.handoff}")
    return EXIT_OK if outcome.outcome == "base" else EXIT_NEGATIVE


@click.command("sweep")
@click.option("--task", "task", type=click.Path(dir_okay=False, path_type=Path), help="Dispatched stage-O task (phase entry).")
@click.option("--resume", "resume", type=click.Path(file_okay=False, path_type=Path), help="Continue an interrupted session.")
@click.option("--demo", is_flag=True, help="A complete sweep on the simulated device with the default network.")
@click.option("--session", "session_dir", type=click.Path(file_okay=False, path_type=Path), help="Folder of a new session.")
@click.option("--plan-only", is_flag=True, help="With --task: validate and print the plan, run nothing.")
@click.option("--network", default=None, help="With --demo: simulator network (default moe-decode).")
@click.option("--seed", default=2026, show_default=True, type=int, help="With --demo: session seed.")
@click.option("--ranks", default=None, type=click.IntRange(min=1), help="With --demo: ranks per process.")
@click.option("--iterations", default=None, type=click.IntRange(min=10), help="With --demo: decode samples per rank.")
@click.option("--gate", type=click.Choice(GATE_MODES), default=None,
              help="With --demo: gate mode of every option trial (default protocol; stats and sequential are NOT the protocol; "
                   "a task sets it as policy.gate).")
@click.option("--lang", type=click.Choice(["zh", "en"]), default="zh", show_default=True, help="Report language.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
def sweep(task: Path | None, resume: Path | None, demo: bool, session_dir: Path | None, plan_only: bool, network: str | None,
          seed: int, ranks: int | None, iterations: int | None, gate: str | None, lang: str, quiet: bool) -> int:
    """Run Stage O from a frozen Sbest-SEED to a sealed Sbest-BASE (see docs/sweep.md)."""
    if sum((task is not None, resume is not None, demo)) != 1:
        raise UsageError("give exactly one of --task FILE, --resume SESSION or --demo")
    if plan_only and task is None:
        raise UsageError("--plan-only goes with --task")
    if gate is not None and not demo:
        raise UsageError("--gate goes with --demo (a task sets policy.gate; a resumed session keeps its own)")
    if resume is not None:
        if session_dir is not None:
            raise UsageError("--resume takes the session folder itself; --session is for new sessions")
        from sk_runner.sweep.session import load_session

        return run_and_print(load_session(resume), lang, quiet)
    if demo:
        from dataclasses import replace

        from sk_runner.backends.base import Control
        from sk_runner.sweep.demo import DEMO_CONTROL, DEMO_POLICY, demo_session

        control = Control(ranks or DEMO_CONTROL.ranks, iterations or DEMO_CONTROL.iterations, DEMO_CONTROL.warmup)
        policy = DEMO_POLICY if gate is None else replace(DEMO_POLICY, gate=gate)
        return run_and_print(demo_session(session_dir, network=network, seed=seed, control=control, policy=policy), lang, quiet)
    from sk_runner.sweep.phase import enter_phase

    assert task is not None
    session, plan = enter_phase(task, session_dir)
    click.echo(json.dumps(plan, ensure_ascii=False, indent=2))
    if plan_only:
        return EXIT_OK
    return run_and_print(session, lang, quiet)
