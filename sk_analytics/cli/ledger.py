"""``sk-analyze ledger``: verify, show and hand over (to a new signer) a Stage O session ledger."""

from __future__ import annotations

import datetime as _dt
import json
from pathlib import Path

import click

from sk_analytics.cli._base import ExistingPath, PathArg
from sk_analytics.errors import EXIT_BAD_INPUT, EXIT_OK, IntegrityError
from sk_analytics.ledger.chain import LEDGER_NAME, LedgerRecord, raw_records, resolve_ledger_path, verify as verify_ledger
from sk_analytics.messages import is_coded, render, render_problem, resolve_lang


@click.group("ledger")
def ledger() -> None:
    """Verify, print or hand over the hash-chained ledger of a session (folder or ledger.jsonl)."""


@ledger.command("verify")
@click.argument("session_or_file", type=ExistingPath())
@click.option("--json", "as_json", is_flag=True, help="Print the verification report as JSON.")
@click.option("--quick", is_flag=True, help="Compare files over 1 MiB by size only instead of re-hashing them (says so).")
@click.option("--witness", "witness", type=PathArg(dir_okay=False, path_type=Path),
              help="Witness file to check the head against (default: the user's witness.jsonl when present).")
def verify(session_or_file: str, as_json: bool, quick: bool, witness: Path | None) -> int:
    """Detect truncated, edited, reordered, inserted, deleted, unsigned or foreign-signed records and a rolled-back head
    (exit 2 if any); for a session folder also re-hash every evidence file the ledger vouches for, check each recorded
    DCCI collection and the output files (handoff, BASE, settled matrix, reports); a session's own ledger.jsonl given as the
    file proves its folder the same way. Archive mode: any path, any cwd.

    A session that has not written its hand-off yet is ok, with a note saying how to resume it (or that a sweep is
    running on it: what that sweep wrote since its last record is not bound yet and not checked);
    temp files of interrupted writes are named as machinery to clean (never evidence)."""
    from sk_analytics.handoff.crosscheck import SESSION_FILE
    from sk_analytics.handoff.proof import Proof, identity_finding, prove, witness_finding
    from sk_analytics.ledger.verify import verify_read
    from sk_analytics.ledger.witness import witness_path

    path = Path(session_or_file)
    report, records = verify_read(path)  # the one verified read of the ledger; every check below reuses it
    ledger_file = resolve_ledger_path(path)
    folder = ledger_file.parent  # a session's own ledger.jsonl given as the file proves its session too
    proof = Proof()
    if report.ok:
        if witness is None and witness_path().is_file():
            witness = witness_path()
        proof.finding = identity_finding(ledger_file, records) or witness_finding(ledger_file, records, witness)
        if proof.finding is None and (folder / SESSION_FILE).is_file() and (path.is_dir() or path.name == LEDGER_NAME):
            proof = prove(folder, records, quick=quick)
    finding = proof.finding
    unfinished = None
    if report.ok and finding is None and (path.is_dir() or path.name == LEDGER_NAME):
        from sk_analytics.stage_o.session_notes import temp_note, unfinished_note

        if not proof.running:  # a running sweep's temp files are its writes in progress, not leftovers
            proof.notes += [note for note in (temp_note(folder, records, folder),) if note is not None]
        unfinished = unfinished_note(records, folder, running=proof.running)
    if as_json:
        files = None if finding is None else {"file": finding.file, "rule": finding.rule, "message": finding.message}
        click.echo(json.dumps({**report.to_json(), "files_disagreeing": files, "notes": proof.notes, "unfinished": unfinished},
                              ensure_ascii=False, indent=2))
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
    if finding is not None:
        detail = finding.message.removeprefix(f"{finding.file}: ")  # the file is named once, in front
        if not as_json:
            click.echo(f"FAIL file {finding.file} [rule {finding.rule}] {detail}")
        raise IntegrityError(f"{folder / finding.file}: rule {finding.rule}: {detail}")
    if not as_json:
        for note in proof.notes:
            click.echo(f"note: {note}")
        signers = "; ".join(f"{count} record(s) signed by {who}" for who, count in report.signers.items())
        seen = f"; head checked against the witness {witness}" if witness is not None else ""
        click.echo(f"ok: {report.path}: {report.records} record(s), chain intact, head seq {report.head_seq}; {signers}{seen}")
        if unfinished is not None:
            click.echo(f"note: {unfinished}")
    return EXIT_OK


@ledger.command("hand-over")
@click.argument("session_or_file", type=ExistingPath())
@click.argument("next_key")
def hand_over_cmd(session_or_file: str, next_key: str) -> int:
    """Authorise the key NEXT_KEY (SHA256:… fingerprint) to sign this ledger from the next record on
    (signed by the current signer; without it a second signer is refused, rule one-signer)."""
    from sk_analytics.ledger.chain import hand_over

    record = hand_over(session_or_file, next_key)
    click.echo(f"ok: record seq {record.seq} authorises {next_key} to sign {resolve_ledger_path(session_or_file)}")
    return EXIT_OK


@ledger.command("show")
@click.argument("session_or_file", type=ExistingPath())
@click.option("--json", "as_json", is_flag=True, help="Print the records as JSON Lines.")
def show(session_or_file: str, as_json: bool) -> int:
    """Print the session's history, one record a line (verification problems are flagged)."""
    path = resolve_ledger_path(session_or_file)
    records = raw_records(path)
    if not records and path.is_file() and not path.read_bytes().strip():  # no line at all: printing nothing with exit 0 would read as a
        # history of no event (`verify` refuses it alike); lines that are no record are flagged by the verification below
        raise IntegrityError(f"{path}: rule identity: the ledger holds no records: nothing to show (emptied, or not a session)")
    report = verify_ledger(path)
    for record in records:
        if as_json:
            click.echo(json.dumps({**record.body(), "hash": record.hash}, ensure_ascii=False, sort_keys=True))
        else:
            click.echo(format_record(record))
    if not report.ok:
        first = report.problems[0]
        where = f"{report.path}:{first.line}" if first.line else str(report.path)
        click.echo(f"WARNING: {where}: ledger fails verification ({len(report.problems)} problem(s); first: rule {first.code}: "
                   f"{' '.join(first.message.split())}); run `sk-analyze ledger verify`", err=True)
        return EXIT_BAD_INPUT
    return EXIT_OK


def format_record(record: LedgerRecord) -> str:
    """One human line: seq, UTC time, kind, the record's summary in the reader's language (``SK_LANG``, else the
    locale; an older record's Chinese ``summary_zh`` as it is), else its data as JSON."""
    try:
        when = _dt.datetime.fromtimestamp(record.ts_ns / 1e9, tz=_dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    except (OverflowError, OSError, ValueError):  # a forged or damaged ts_ns: show it, do not crash the display
        when = f"ts_ns={record.ts_ns}"
    data = record.data
    summary = data.get("summary_zh") or data.get("summary")  # summary_zh: records written before summaries were codes
    if is_coded(summary):  # a message this sk-tune cannot word (a newer one's): the record as it is, below
        summary = render(summary, resolve_lang()) if render_problem(summary) is None else None
    if not isinstance(summary, str):
        summary = json.dumps(data, ensure_ascii=False, sort_keys=True)
    if len(summary) > 160:
        summary = summary[:157] + "..."
    return f"{record.seq:>5}  {when}  {record.kind:<22} {summary}"
