"""Parse every artifact of a folder and write its Parquet tables, one file per
(table, round/role/run partition).

All files are parsed before any table file is put in place, so bad input (an
:class:`~sk_analytics.errors.InputError` naming the file and line) leaves the
output folder untouched. A file that gives no row (a rank log without a timing
line, a header-only kernel_details.csv, the empty trace ``[{}]`` …) is bad input
too, every such file named (:func:`~sk_analytics.ingest.discover.hollow_refusal`):
a table of no rows, or a run short of one rank's log, would claim what the
sources do not hold. SK metadata is judged by its table in the partition
(``ArtifactKind.each_file``): a model that fused no SK beside models that did is a fact. Several files of one table in one partition (the 8
rank logs of a run, the sk_prof traces of several devices) go into one file.

Memory follows a row group, not the logs: a rank log is parsed a batch at a
time (:func:`stream_artifact`), an sk_prof trace one file (one rank) at a time, and
a partition's rows past :data:`HOLD_ROWS` are
streamed into a temp file beside their target (:class:`_PartitionRows`),
renamed into place only once every artifact parsed; any error removes the
temp files (and the folders made for them).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from sk_analytics.errors import InputError, UsageError
from sk_analytics.files.io_seam import reading
from sk_analytics.ingest.base import ParseResult, relative_source
from sk_analytics.ingest.discover import KINDS, Artifact, default_partition, discover, hollow_refusal
from sk_analytics.ingest.sources import SOURCED_TABLES, SourceRecord, encode_sources, source_record
from sk_analytics.schema import TABLES
from sk_analytics.tables import TableStream, hive_value_ok, write_table

Partition = dict[str, str]

HOLD_ROWS = 1 << 18
"""Rows of one output file held as frames; past them the rows are streamed (:class:`_PartitionRows`).
Half a row group, so the frames held and their Arrow copy never coexist at full size (the
10 M-line ingest peaks alike with 64 Ki). A sweep's runs stay under it, on the held path:
byte for byte and as fast as before (streamed, a run of 96 K rows took 10-20 % longer in a
noisy A/B: one Arrow conversion per frame)."""


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
    result: ParseResult = _parser(artifact.kind.parser)(artifact.path, root=root)
    return result


def stream_artifact(artifact: Artifact, root: Path) -> Iterator[ParseResult]:
    """The artifact's parse as consecutive results (its kind's ``stream`` parser, else one
    :func:`parse_artifact`): rows and warnings add up to those of :func:`parse_artifact`."""
    _refuse_gzip(artifact)
    if artifact.kind.stream is None:
        yield parse_artifact(artifact, root)
    else:
        yield from _parser(artifact.kind.stream)(artifact.path, root=root)


GZIP_MAGIC = b"\x1f\x8b"


def _refuse_gzip(artifact: Artifact) -> None:
    """A gzip file under an artifact's plain name (copied out of an archive) is named as one: each parser saw
    only bytes it could not read ("header is not UTF-8 text", "NUL byte", "no fused SK") and said so."""
    path = artifact.path
    if not path.is_file():  # a folder, FIFO or link: the parser names it (a FIFO is never opened here)
        return
    with reading(path, artifact.kind.name), path.open("rb") as fh:
        magic = fh.read(2)
    if magic == GZIP_MAGIC:
        raise InputError(path, "gzip-compressed data under a plain artifact name", line=1,
                         expected=f"{path.name} as it was written, uncompressed (gunzip it first)")


def _parser(name: str) -> Callable[..., Any]:
    """The ``module:function`` of a parser, its module imported on first use."""
    module_name, function = name.split(":")
    parser: Callable[..., Any] = getattr(importlib.import_module(module_name), function)
    return parser


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
    """Partition values become hive folder names (``round=<value>``) that every reader selects by name:
    refuse what cannot be one, or what would not read back as itself."""
    for key, value in partition.items():
        if not hive_value_ok(value):
            raise UsageError(
                f"bad {key} value {value!r}: expected a non-empty folder name without / \\ = , # % * ? [ ] {{ }} "
                f"(a hive partition folder {key}=<value> that readers select by name; name it with --round/--role "
                f"or rename its folder)")


class _PartitionRows:
    """The rows of one output file (a table in one partition), gathered while the artifacts are parsed.

    Few rows (under :data:`HOLD_ROWS`) are held as frames and written at the end by
    :func:`write_table`, as they always were. More (a run's 10-million-sample rank
    log, the sk_prof traces of many ranks) go on into a
    :class:`~sk_analytics.tables.TableStream` temp file instead, so memory stays near
    one row group (one parsed trace) whatever the files hold. A table whose file
    metadata names every source (``sk_events``) gets that metadata in the footer,
    at :meth:`write`, and one row group per source file (a reader of one rank's
    events skips the others').
    """

    def __init__(self, table: str, out: Path, partition: Partition) -> None:
        self.table = TABLES[table]
        self.out = out
        self.partition = partition
        self.frames: list[pl.DataFrame] = []
        self.rows = 0
        self.stream: TableStream | None = None

    def add(self, frame: pl.DataFrame) -> None:
        if self.stream is not None:
            self.stream.write(frame)
            return
        self.frames.append(frame)
        self.rows += frame.height
        if self.rows >= HOLD_ROWS:
            self.stream = TableStream(self.table, self.out, self.partition, group_per_write=self.table.name in SOURCED_TABLES)
            while self.frames:
                self.stream.write(self.frames.pop(0))

    def write(self, metadata: Mapping[str, str] | None) -> Path:
        """The file in place (the streamed temp committed, or the held rows written); its path."""
        if self.stream is not None:
            return self.stream.commit(metadata)
        frame = pl.concat(self.frames, how="vertical") if len(self.frames) > 1 else self.frames[0]
        self.frames = []
        return write_table(frame, self.table, self.out, self.partition, metadata)

    def discard(self) -> None:
        """Forget the rows; a streamed temp file (and the folders made for it) is removed."""
        self.frames = []
        if self.stream is not None:
            self.stream.discard()


def _ingest(
    artifacts: list[Artifact], root: Path, out: Path, partition_of: Callable[[Artifact], Partition],
    parsed: Mapping[Path, ParseResult] | None = None, hashes: Mapping[str, str] | None = None,
) -> IngestReport:
    report = IngestReport(root=root, out_dir=out)
    known = parsed or {}
    groups: dict[tuple[str, tuple[tuple[str, str], ...]], _PartitionRows] = {}
    streamed: list[_PartitionRows] = []  # in the order their temp files were opened
    sources: dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, SourceRecord]] = {}
    hollow: list[tuple[Artifact, tuple[str, tuple[tuple[str, str], ...]]]] = []  # with its (table, partition)
    rows_in: dict[tuple[str, tuple[tuple[str, str], ...]], int] = {}
    try:
        for artifact in artifacts:
            partition = partition_of(artifact)
            _check_partition(partition)
            results = iter([known[artifact.path]]) if artifact.path in known else stream_artifact(artifact, root)
            rel = relative_source(artifact.path, root)
            rows, warnings, table = 0, [], None
            for result in results:
                table = result.table.name
                rows_of = groups.setdefault((table, tuple(partition.items())), _PartitionRows(table, out, partition))
                rows_of.add(result.frame)
                if rows_of.stream is not None and rows_of not in streamed:
                    streamed.append(rows_of)
                rows += result.rows
                warnings += result.warnings
            if table is None:
                raise ValueError(f"the {artifact.kind.name} parser gave no result for {rel}")
            key = (table, tuple(partition.items()))
            rows_in[key] = rows_in.get(key, 0) + rows
            if not rows:
                hollow.append((artifact, key))
            report.files.append(FileRead(rel, artifact.kind.name, table, rows, partition, tuple(warnings)))
            if table in SOURCED_TABLES:
                sources.setdefault((table, tuple(partition.items())), {})[rel] = source_record(artifact.path, warnings, (hashes or {}).get(rel))
        refused = [a.path for a, key in hollow if a.kind.each_file or not rows_in[key]]
        if refused:
            raise hollow_refusal(refused)
        for key, rows_of in sorted(groups.items()):
            metadata = encode_sources(sources[key]) if key in sources else None
            report.written.append(rows_of.write(metadata))
            del groups[key]
    except BaseException:
        # latest stream first: each removes only the folders it made, and a later one's may lie inside them
        left = list(groups.values())  # not written yet
        for rows_of in [*(r for r in reversed(streamed) if r in left), *(r for r in left if r.stream is None)]:
            rows_of.discard()
        raise
    return report


__all__ = ["KINDS", "FileRead", "IngestReport", "ingest_path", "ingest_run_dir", "parse_artifact", "stream_artifact"]
