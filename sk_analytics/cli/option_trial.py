"""``sk-analyze option-trial`` and ``sk-analyze stability``: the Stage O gate.

Exit codes: 0 accepted / stable, 1 not accepted / not stable, 2 bad input.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from sk_analytics.cli._base import FiniteFloat, PathArg, lang_option
from sk_analytics.errors import EXIT_NEGATIVE, EXIT_OK, InputError, UsageError
from sk_analytics.ingest.rank_log_defaults import DEFAULT_EXPECTED_RANKS, DEFAULT_WARMUP
from sk_analytics.option_trial.modes import GATE_MODES, SEQUENTIAL_CAP

if TYPE_CHECKING:  # the gate (Polars, NumPy, SciPy) is imported when a command runs: --help stays fast
    from sk_analytics.option_trial.api import SideSummary

F = TypeVar("F", bound=Callable[..., Any])

SOURCE_HELP = "a folder of run-*/log_<rank>.log, or parquet:DATA_DIR#round=R[,role=X]"


def _common(func: F) -> F:
    """Options shared by both commands."""
    func = lang_option("Table language.")(func)
    func = click.option("--json-out", type=PathArg(dir_okay=False, path_type=Path), help="Write the summary JSON here (atomic).")(func)
    func = click.option("--expected-ranks", type=click.IntRange(min=1), default=DEFAULT_EXPECTED_RANKS, show_default=True, help="Rank logs per run.")(func)
    func = click.option("--warmup", type=click.IntRange(min=0), default=DEFAULT_WARMUP, show_default=True, help="Decode samples dropped per rank.")(func)
    return func


@click.command("option-trial")
@click.option("--baseline", required=True, help=f"Five-run incumbent: {SOURCE_HELP}.")
@click.option("--candidate", "candidates", multiple=True, required=True, help=f"NAME=SOURCE of a trial; SOURCE is {SOURCE_HELP}.")
@click.option("--option-trial/--no-option-trial", default=True, help="Accepted for command-line compatibility; the decision is always the option-trial gate.")
@click.option("--gate", type=click.Choice(GATE_MODES), default="protocol", show_default=True,
              help="strict: also require the 95% CI of the improvement to exclude zero; "
              "stats: decide by the statistics policy (one-sided 5% tests; NOT the protocol); "
              "sequential: its sequential form, a look after every candidate run from the 3rd to --sequential-cap "
              "(5% false wins overall; NOT the protocol; undecided exits 1 and asks for one more run).")
@click.option("--sequential-cap", type=click.IntRange(min=3, max=50), default=SEQUENTIAL_CAP, show_default=True,
              help="With --gate sequential: most candidate runs it looks at (runs beyond it are not read).")
@click.option("--allow-p90-regression-pct", type=FiniteFloat(min=0.0), default=0.0, show_default=True,
              help="Pooled decode P90 may regress by up to this % before its check fails (the reference tool's option; the protocol uses 0).")
@click.option("--allow-stddev-regression-pct", type=FiniteFloat(min=0.0), default=0.0, show_default=True,
              help="Pooled decode stddev may regress by up to this % before its check fails (the reference tool's option; the protocol uses 0).")
@_common
def option_trial(
    baseline: str,
    candidates: tuple[str, ...],
    option_trial: bool,
    gate: str,
    sequential_cap: int,
    allow_p90_regression_pct: float,
    allow_stddev_regression_pct: float,
    warmup: int,
    expected_ranks: int,
    json_out: Path | None,
    lang: str,
) -> int:
    """Compare trial candidates with the five-run incumbent (protocol §5 gate),
    print a table and the statistics beside the gate; exit 0 when accepted."""
    from sk_analytics.files.atomic import write_json
    from sk_analytics.option_trial.api import evaluate_option_trial, summarize_side
    from sk_analytics.option_trial.gate import Allowances
    from sk_analytics.option_trial.report import render_option_trial
    from sk_analytics.option_trial.sources import parse_candidate_arg
    from sk_analytics.option_trial.stats import split_samples

    if not option_trial:
        raise UsageError("only the option-trial decision is implemented (drop --no-option-trial)")
    try:
        allowances = Allowances(allow_p90_regression_pct, allow_stddev_regression_pct)
    except ValueError as error:
        raise UsageError(str(error)) from None
    pairs = [parse_candidate_arg(value) for value in candidates]
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise UsageError(f"--candidate has duplicate names: {', '.join(sorted({n for n in names if names.count(n) > 1}))}")

    def summary_of(source: str) -> SideSummary:
        # One source at a time, and its timings frame (validated by load_source) is a temporary: only the
        # compact samples outlive split_samples, so the memory peak is one side's frame, not every side's.
        samples = split_samples(_load_source(source, expected_ranks=expected_ranks, warmup=warmup), warmup)
        return summarize_side(samples, label=source, warmup=warmup)

    base_summary = summary_of(baseline)
    summaries = {name: summary_of(path) for name, path in pairs}
    result = evaluate_option_trial(
        base_summary,
        summaries,
        warmup=warmup,
        gate=gate,  # type: ignore[arg-type]  # a str of click.Choice(GATE_MODES), so a GateMode
        baseline_path=baseline,
        candidate_paths=dict(pairs),
        expected_ranks=None,  # load_source has checked every source already
        allowances=allowances,
        sequential_cap=sequential_cap,
    )
    click.echo(render_option_trial(result, lang), nl=False)
    if json_out is not None:
        write_json(json_out, result)
    return EXIT_OK if result["selection"]["option_trial_accepted"] else EXIT_NEGATIVE


@click.command("stability")
@click.argument("source")
@_common
def stability(source: str, warmup: int, expected_ranks: int, json_out: Path | None, lang: str) -> int:
    """Five-run stability of SOURCE (exactly 5 runs, decimal spread <= 5%);
    exit 0 when stable.

    Exit 1 when not stable; a SOURCE with another number of runs gets no
    verdict: exit 2 saying it needs 5 runs."""
    from sk_analytics.files.atomic import write_json
    from sk_analytics.option_trial.api import stability as stability_check
    from sk_analytics.option_trial.gate import BASELINE_REQUIRED_RUNS
    from sk_analytics.option_trial.report import render_stability

    frame = _load_source(source, expected_ranks=expected_ranks, warmup=warmup)
    result = stability_check(frame, warmup, path=source, expected_ranks=None)  # checked by load_source
    runs = result["baseline"]["run_count"]
    if runs != BASELINE_REQUIRED_RUNS:  # too few (or many) runs is no verdict on stability: not "not stable"
        raise InputError(source, f"has {runs} run(s): the stability check needs {BASELINE_REQUIRED_RUNS} runs",
                         expected=f"exactly {BASELINE_REQUIRED_RUNS} clean runs (protocol §4)")
    click.echo(render_stability(result, lang), nl=False)
    if json_out is not None:
        write_json(json_out, result)
    return EXIT_OK if result["baseline_stability"]["stable"] else EXIT_NEGATIVE


def _load_source(source: str, *, expected_ranks: int, warmup: int) -> Any:
    """:func:`~sk_analytics.option_trial.sources.load_source`; a run with another number of rank logs
    names ``--expected-ranks``, the option that set the number it was checked against."""
    from sk_analytics.ingest.timings import RankCountError
    from sk_analytics.option_trial.sources import load_source

    try:
        return load_source(source, expected_ranks=expected_ranks, warmup=warmup)
    except RankCountError as exc:
        raise InputError(exc.path, exc.message, line=exc.line,
                         expected=f"{expected_ranks} rank logs per run; pass --expected-ranks N for another rank count") from None
