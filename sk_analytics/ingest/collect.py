"""Parse every artifact of a folder and write its Parquet tables, one file per
(table, round/role/run partition).

All files are parsed before anything is written, so bad input (an
:class:`~sk_analytics.errors.InputError` naming the file and line) leaves the
output folder untouched. Several files of one table in one partition (the 8
rank logs of a run, the sk_prof traces of several devices) go into one file.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from sk_analytics.errors import InputError, UsageError
from sk_analytics.ingest.base import ParseResult, relative_source
from sk_analytics.ingest.discover import KINDS, Artifact, default_partition, discover
from sk_analytics.ingest.sources import SOURCED_TABLES, SourceRecord, encode_sources, source_record
from sk_analytics.schema import TABLES
from sk_analytics.tables import write_table

Partition = dict[str, str]


@dataclass(frozen=True)
class FileRead:
    """One artifact that was read: where, what, how many rows, what to know about it."""

    path: str
    kind: str
    table: str
    rows: int
    partition: Partition
    warnings: tuple[str, ...] = ()


@dataclass
class IngestReport:
    """What an ingest read and wrote (printed by ``sk-analyze ingest``, ``--json`` too)."""

    root: Path
    out_dir: Path
    files: list[FileRead] = field(default_factory=list)
    written: list[Path] = field(default_factory=list)

    @property
    def warnings(self) -> list[str]:
        """Every parser warning (truncation, buffer-full, ignored records), in file order."""
        return [w for f in self.files for w in f.warnings]

    def rows_by_table(self) -> dict[str, int]:
        totals: dict[str, int] = {}
        for read in self.files:
            totals[read.table] = totals.get(read.table, 0) + read.rows
        return totals

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (paths as POSIX strings)."""
        return {
            "root": self.root.as_posix(),
            "out_dir": self.out_dir.as_posix(),
            "files": [
                {"path": f.path, "kind": f.kind, "table": f.table, "rows": f.rows, "partition": f.partition, "warnings": list(f.warnings)}
                for f in self.files
            ],
            "rows_by_table": self.rows_by_table(),
            "written": [p.as_posix() for p in self.written],
            "warnings": self.warnings,
        }


def parse_artifact(artifact: Artifact, root: Path) -> ParseResult:
    """Run the parser of the artifact's kind (imported on first use)."""
    module_name, function = artifact.kind.parser.split(":")
    parser = getattr(importlib.import_module(module_name), function)
    result: ParseResult = parser(artifact.path, root=root)
    return result


def ingest_path(path: str | Path, out_dir: str | Path, *, round: str | None = None, role: str | None = None) -> IngestReport:
    """Ingest every artifact under ``path`` (a run, candidate, session or profile
    folder, or one file) into ``out_dir`` with the derived partitions of
    :func:`~sk_analytics.ingest.discover.default_partition`."""
    root = Path(path)
    if not root.exists():
        raise InputError(root, "no such file or folder")
    out = Path(out_dir)
    artifacts = discover(root, skip=(out,))
    if not artifacts:
        names = ("run-*/log_<rank>.log, kernel_details.csv, ascend_pytorch_profiler_<rank>.db, msprof_<n>.db, sk_prof_device_<id>.json, "
                 "sk_fused_nodes.log, super_kernel.log or sk_graph_*.json")
        raise InputError(root, "no SK artifact found", expected=names)
    base = root if root.is_dir() else root.parent
    return _ingest(artifacts, base, out, lambda a: default_partition(a, root, round=round, role=role))


def ingest_run_dir(
    run_dir: str | Path, data_dir: str | Path, round: str, role: str, run: str, *, parsed: Mapping[Path, ParseResult] | None = None,
    hashes: Mapping[str, str] | None = None,
) -> IngestReport:
    """Ingest one run folder into ``data_dir`` under exactly ``round/role/run``
    (what the runner calls after each clean run). A run without artifacts gives
    an empty report.

    ``parsed`` holds artifacts the caller already parsed (keyed by
    ``Path(run_dir) / name``, parsed with ``root=run_dir``): they are used as
    they are instead of being parsed again (the runner validates the rank logs
    before it ingests them). ``hashes`` (path relative to ``run_dir`` -> SHA-256)
    are the digests the caller just sealed the folder's files with: the source
    records of ``sk_events`` take them instead of hashing the traces again."""
    folder = Path(run_dir)
    if not folder.is_dir():
        raise InputError(folder, "run folder does not exist")
    partition = {"round": round, "role": role, "run": run}
    return _ingest(discover(folder), folder, Path(data_dir), lambda _: partition, parsed, hashes)


def _check_partition(partition: Partition) -> None:
    """Partition values become folder names: refuse what cannot be one."""
    for key, value in partition.items():
        if not value or "/" in value or "\\" in value or value in {".", ".."}:
            raise UsageError(f"bad {key} value {value!r}: expected a non-empty folder name without '/'")


def _ingest(
    artifacts: list[Artifact], root: Path, out: Path, partition_of: Callable[[Artifact], Partition],
    parsed: Mapping[Path, ParseResult] | None = None, hashes: Mapping[str, str] | None = None,
) -> IngestReport:
    report = IngestReport(root=root, out_dir=out)
    known = parsed or {}
    groups: dict[tuple[str, tuple[tuple[str, str], ...]], list[pl.DataFrame]] = {}
    sources: dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, SourceRecord]] = {}
    for artifact in artifacts:
        partition = partition_of(artifact)
        _check_partition(partition)
        result = known[artifact.path] if artifact.path in known else parse_artifact(artifact, root)
        rel = relative_source(artifact.path, root)
        report.files.append(FileRead(rel, artifact.kind.name, result.table.name, result.rows, partition, tuple(result.warnings)))
        key = (result.table.name, tuple(partition.items()))
        groups.setdefault(key, []).append(result.frame)
        if result.table.name in SOURCED_TABLES:
            sources.setdefault(key, {})[rel] = source_record(artifact.path, result.warnings, (hashes or {}).get(rel))
    for key, frames in sorted(groups.items()):
        table, partition_items = key
        frame = pl.concat(frames, how="vertical") if len(frames) > 1 else frames[0]
        metadata = encode_sources(sources[key]) if key in sources else None
        report.written.append(write_table(frame, TABLES[table], out, dict(partition_items), metadata))
    return report


__all__ = ["KINDS", "FileRead", "IngestReport", "ingest_path", "ingest_run_dir", "parse_artifact"]
