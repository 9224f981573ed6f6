"""``sk-analyze dcci-diff``: diagnose a repeatable disable-all DCCI regression (protocol §6)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from sk_analytics.cli._base import ExistingPath, PathArg, lang_option
from sk_analytics.errors import EXIT_NEGATIVE, EXIT_OK


@click.command("dcci-diff")
@click.option("--baseline", "baseline", required=True, type=PathArg(path_type=Path, file_okay=False),
              help="O0 diagnostic profile root (with its collection manifest).")
@click.option("--candidate", "candidate", required=True, type=PathArg(path_type=Path, file_okay=False),
              help="disable-all diagnostic profile root (with its collection manifest).")
@click.option("--warmup", default=8, show_default=True, type=click.IntRange(min=0),
              help="Occurrences of every SK dropped as warm-up.")
@click.option("--json-out", "json_out", required=True, type=PathArg(path_type=Path, dir_okay=False),
              help="Decision JSON (written atomically).")
@click.option("--report-md", "report_md", type=PathArg(path_type=Path, dir_okay=False),
              help="Markdown report (written atomically).")
@lang_option("Report language.")
@click.option("--tables-out", "tables_out", type=PathArg(path_type=Path, file_okay=False),
              help="Also write the derived sk_occurrences/sk_children Parquet tables of both sides here.")
@click.option("--trace-out", "trace_out", type=PathArg(path_type=Path, dir_okay=False),
              help="Also write both sides' SK timelines as a Chrome trace (JSON; opens in MindStudio Insight, Perfetto, "
                   "chrome://tracing): per rank a baseline and a candidate process on aligned tracks, slower SKs and "
                   "their slower children flagged.")
@click.option("--session", "session", type=ExistingPath(path_type=Path, file_okay=False),
              help="Sweep session whose signed ledger must have recorded both collections (rule ledger-pair).")
def dcci_diff(baseline: Path, candidate: Path, warmup: int, json_out: Path, report_md: Path | None, lang: str,
              tables_out: Path | None, trace_out: Path | None, session: Path | None) -> int:
    """Align SKs structurally, classify each, decompose slower ones into children and
    propose the one joint repair (exit 0: repair proposed, 1: no repair, 2: bad input)."""
    from sk_analytics.dcci.pipeline import analyze_pair, write_derived_tables
    from sk_analytics.dcci.report import render, summary_line
    from sk_analytics.files.atomic import write_json, write_text

    pair = _load(baseline, candidate, session)
    result = analyze_pair(pair, warmup=warmup)
    write_json(json_out, result)
    if tables_out is not None:
        write_derived_tables(pair, tables_out)
    if report_md is not None:
        write_text(report_md, render(result, lang))
    if trace_out is not None:
        from sk_analytics.dcci.rank_events import process_events
        from sk_analytics.dcci.trace import write_trace

        sides = {"baseline": pair.baseline, "candidate": pair.candidate}
        write_trace(trace_out, result, {role: process_events(side.events, side.by_process) for role, side in sides.items()},
                    {role: side.structure for role, side in sides.items()})
    click.echo(summary_line(result))
    repair = result["repair"]
    return EXIT_OK if repair["proposed"] else EXIT_NEGATIVE


LIVE_ONLY_RULES = ("session-binding", "live-stat")


def _load(baseline: Path, candidate: Path, session: Path | None) -> Any:
    """The pair, checked live; a session's collections that only fail the live rules (the session
    was copied or moved) are checked again in archive mode, which is said: the signed ledger
    still vouches for each manifest (rule ledger-pair) and the manifests for every file."""
    from sk_analytics.contract.rules import ContractInputError, ContractIntegrityError
    from sk_analytics.dcci.pipeline import load_pair

    try:
        return load_pair(baseline, candidate, session=session)
    except (ContractIntegrityError, ContractInputError) as exc:
        if session is None or exc.rule not in LIVE_ONLY_RULES:
            raise
        pair = load_pair(baseline, candidate, session=session, archive=True)
        click.echo(f"dcci-diff: archive mode: the collections fail the live rule {exc.rule} (the session was copied or "
                   "moved); checked instead against their signed manifests and the session's signed ledger (rule ledger-pair)")
        return pair
