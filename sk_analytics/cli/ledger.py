"""``sk-analyze ledger``: verify and show a Stage O session ledger."""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from sk_analytics.errors import EXIT_OK, IntegrityError
from sk_analytics.ledger import LedgerRecord, raw_records, resolve_ledger_path, verify as verify_ledger

if TYPE_CHECKING:
    from sk_analytics.stage_o.crosscheck import Disagreement


@click.group("ledger")
def ledger() -> None:
    """Verify or print the hash-chained ledger of a session (folder or ledger.jsonl)."""


@ledger.command("verify")
@click.argument("session_or_file", type=click.Path(exists=True))
@click.option("--json", "as_json", is_flag=True, help="Print the verification report as JSON.")
def verify(session_or_file: str, as_json: bool) -> int:
    """Detect truncated, edited, reordered, inserted, deleted or unsigned records (exit 2 if any);
    for a session folder also output files (handoff, BASE, settled matrix, reports) that disagree with it."""
    from sk_analytics.stage_o.crosscheck import RULE

    report = verify_ledger(session_or_file)
    disagreement = _cross_check(Path(session_or_file)) if report.ok else None
    if as_json:
        files = None if disagreement is None else {"file": disagreement.file, "rule": RULE, "message": disagreement.message}
        click.echo(json.dumps({**report.to_json(), "files_disagreeing": files}, ensure_ascii=False, indent=2))
    else:
        for problem in report.problems:
            where = f"line {problem.line}" if problem.line else "head"
            click.echo(f"FAIL {where} [rule {problem.code}] {problem.message}")
        for warning in report.warnings:
            click.echo(f"WARN {warning}")
    if not report.ok:
        first = report.problems[0]
        where = f"{report.path}:{first.line}" if first.line else report.path
        raise IntegrityError(
            f"{where}: ledger verification failed with {len(report.problems)} problem(s); first: rule {first.code}: {first.message}"
        )
    if disagreement is not None:
        if not as_json:
            click.echo(f"FAIL file {disagreement.file} [rule {RULE}] {disagreement.message}")
        raise IntegrityError(f"{Path(session_or_file) / disagreement.file}: rule {RULE}: {disagreement.message}")
    if not as_json:
        signers = "; ".join(f"{count} record(s) signed by {who}" for who, count in report.signers.items())
        click.echo(f"ok: {report.path}: {report.records} record(s), chain intact, head seq {report.head_seq}; {signers or 'no records'}")
    return EXIT_OK


@ledger.command("show")
@click.argument("session_or_file", type=click.Path(exists=True))
@click.option("--json", "as_json", is_flag=True, help="Print the records as JSON Lines.")
def show(session_or_file: str, as_json: bool) -> int:
    """Print the session's history, one record a line (verification problems are flagged)."""
    path = resolve_ledger_path(session_or_file)
    report = verify_ledger(path)
    for record in raw_records(path):
        if as_json:
            click.echo(json.dumps({**record.body(), "hash": record.hash}, ensure_ascii=False, sort_keys=True))
        else:
            click.echo(format_record(record))
    if not report.ok:
        first = report.problems[0]
        where = f"{report.path}:{first.line}" if first.line else str(report.path)
        click.echo(f"WARNING: {where}: ledger fails verification ({len(report.problems)} problem(s); first: rule {first.code}: "
                   f"{' '.join(first.message.split())}); run `sk-analyze ledger verify`", err=True)
        return 2
    return EXIT_OK


def _cross_check(path: Path) -> Disagreement | None:
    """For a sweep session folder: the first output file that disagrees with the ledger."""
    from sk_analytics.stage_o.crosscheck import SESSION_FILE, first_disagreement

    if not (path.is_dir() and (path / SESSION_FILE).is_file()):
        return None
    return first_disagreement(path)


def format_record(record: LedgerRecord) -> str:
    """One human line: seq, UTC time, kind, the record's summary (Chinese when present)."""
    try:
        when = _dt.datetime.fromtimestamp(record.ts_ns / 1e9, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError):  # a forged or damaged ts_ns: show it, do not crash the display
        when = f"ts_ns={record.ts_ns}"
    data = record.data
    summary = data.get("summary_zh") or data.get("summary")
    if not isinstance(summary, str):
        summary = json.dumps(data, ensure_ascii=False, sort_keys=True)
    if len(summary) > 160:
        summary = summary[:157] + "..."
    return f"{record.seq:>5}  {when}  {record.kind:<22} {summary}"
