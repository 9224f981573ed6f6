"""``sk-analyze ingest PATH --out DIR``: every artifact under PATH -> Parquet tables.

Prints what was read (files, rows per table, warnings such as truncation or
buffer-full) or, with ``--json``, the same as one JSON object. Bad input exits 2
with one line naming the file and the line (raised as InputError).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from sk_analytics.cli._base import PathArg
from sk_analytics.errors import EXIT_OK

if TYPE_CHECKING:  # the parsers (Polars, Arrow) are imported when the command runs: --help stays fast
    from sk_analytics.ingest.collect import IngestReport


@click.command("ingest")
@click.argument("path", type=PathArg(path_type=Path))
@click.option("--out", "out_dir", required=True, type=PathArg(file_okay=False, path_type=Path),
              help="Data folder to write <table>/round=…/role=…/run=…/part-0.parquet into.")
@click.option("--round", "round_", default=None, help="Partition round (default: the folder above run-<k>, else PATH's name).")
@click.option("--role", default=None, help="Partition role (default: clean inside run-<k> folders, else profile).")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON (for machines).")
def ingest(path: Path, out_dir: Path, round_: str | None, role: str | None, as_json: bool) -> int:
    """Read every SK artifact under PATH (rank logs, kernel_details.csv, sk_prof
    traces, SK metadata) into typed, hive-partitioned Parquet tables under --out."""
    from sk_analytics.ingest.collect import ingest_path

    report = ingest_path(path, out_dir, round=round_, role=role)
    click.echo(json.dumps(report.to_dict(), ensure_ascii=False, indent=2) if as_json else render(report))
    return EXIT_OK


def render(report: IngestReport) -> str:
    """Human summary of an ingest: tables, files, warnings, what was written."""
    lines = [f"ingested {len(report.files)} file(s) from {report.root} into {report.out_dir}"]
    files_per_table: dict[str, int] = {}
    for read in report.files:
        files_per_table[read.table] = files_per_table.get(read.table, 0) + 1
    width = max([len(t) for t in files_per_table] + [5])
    lines.append(f"  {'table':<{width}}  {'rows':>10}  files")
    for table, rows in sorted(report.rows_by_table().items()):
        lines.append(f"  {table:<{width}}  {rows:>10}  {files_per_table[table]}")
    lines.append("files:")
    for read in report.files:
        where = " ".join(f"{k}={v}" for k, v in read.partition.items())
        lines.append(f"  {read.path}: {read.kind} -> {read.table}, {read.rows} rows [{where}]")
    warnings = report.warnings
    lines.append(f"warnings: {len(warnings)}" if warnings else "warnings: none")
    lines += [f"  - {w}" for w in warnings]
    lines.append(f"wrote {len(report.written)} Parquet file(s)")
    return "\n".join(lines)
