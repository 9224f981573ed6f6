"""Parquet I/O of the schema tables: atomic, typed, versioned, hive-partitioned.

Layout: ``<data dir>/<table>/round=<r>/role=<x>/run=<k>/part-0.parquet``, so
``pl.scan_parquet(data / "timings/**/*.parquet", hive_partitioning=True)``
reads every run of a session with the partition values as columns.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from sk_analytics.errors import InputError
from sk_analytics.files.atomic import atomic_path, commit_temp, temp_beside
from sk_analytics.schema import SCHEMA_VERSION, TABLES, Table, round_index

PART_FILE = "part-0.parquet"
COMPRESSION: Final = "zstd"
ROW_GROUP_ROWS = 1 << 19
"""Rows per Parquet row group of a streamed file (:class:`TableStream`). Half pyarrow's
default (the 1 Mi-row groups :func:`write_table` gives a whole frame): one group is held as
Arrow before it is written (~58 MB of ``timings`` rows), which keeps the ingest of a
10-million-sample rank log under 300 MB peak (271-286 MB; 1 Mi rows: 315-325 MB)."""


def _partition_dir(root: Path, table: Table, partition: Mapping[str, str]) -> Path:
    missing = [k for k in table.partition_by if k not in partition]
    if missing:
        raise ValueError(f"table {table.name}: partition values missing for {missing}")
    folder = root / table.name
    for key in table.partition_by:
        value = str(partition[key])
        if not value or "/" in value or value in {".", ".."}:
            raise ValueError(f"table {table.name}: bad partition value {key}={value!r}")
        folder = folder / f"{key}={value}"
    return folder


def write_table(
    frame: pl.DataFrame | pl.LazyFrame,
    table: Table,
    data_dir: str | Path,
    partition: Mapping[str, str],
    metadata: Mapping[str, str] | None = None,
) -> Path:
    """Conform ``frame`` to ``table`` and write it atomically; return the file path.

    ``metadata`` adds key/value pairs to the file's Parquet metadata (beside
    ``schema_version`` and ``table``, which it cannot replace).

    Re-ingesting the same partition replaces its file as a whole (never a
    partial mix of old and new rows). A column the schema declares not
    nullable is written as a required Parquet field, so the files say what
    docs/schema.md says (and a null there is refused, naming the column).
    """
    arrow = _file_arrow(frame, table, metadata)
    target = _partition_dir(Path(data_dir), table, partition) / PART_FILE
    with atomic_path(target, site="parquet") as tmp:
        pq.write_table(arrow, tmp, compression=COMPRESSION)
    return target


def remove_table_file(table: Table, data_dir: str | Path, partition: Mapping[str, str]) -> bool:
    """Remove the file of ``table`` in ``partition`` if there is one (True when one was removed).

    What a partition that has no rows gets instead of a file of no rows: a failed run's timings
    (rows an interrupted earlier attempt of the same run left must not stay, and an empty file
    would claim timings the run does not have)."""
    target = _partition_dir(Path(data_dir), table, partition) / PART_FILE
    try:
        target.unlink()
    except FileNotFoundError:
        return False
    return True


def _file_arrow(frame: pl.DataFrame | pl.LazyFrame, table: Table, metadata: Mapping[str, str] | None) -> pa.Table:
    """``frame`` conformed to ``table`` as the Arrow table a file stores: required fields, key/value metadata."""
    arrow = required_fields(table.conform(frame).to_arrow(), table)
    stored = dict(arrow.schema.metadata or {})
    stored.update({key.encode(): value.encode() for key, value in (metadata or {}).items()})
    stored.update({b"schema_version": SCHEMA_VERSION.encode(), b"table": table.name.encode()})
    return arrow.replace_schema_metadata(stored)


class TableStream:
    """One partition file of ``table`` written a row group at a time, for more rows than memory should hold.

    Rows go into a temp file beside the target (:data:`ROW_GROUP_ROWS` rows
    are held at most, as Arrow); :meth:`commit` puts the file in place like
    :func:`write_table` does, :meth:`discard` removes the temp file and the
    folders it created, so an ingest that fails later leaves no trace. The
    file holds the same rows, order, dtypes and metadata as :func:`write_table`
    of all rows at once (byte for byte up to one row group; past it the row
    groups are :data:`ROW_GROUP_ROWS` long, not 1 Mi). The key/value metadata
    lives in the file's footer, written at :meth:`commit`: metadata known only
    once every row was written (the sources of ``sk_events``) goes there.

    ``group_per_write``: each :meth:`write` is a row group of its own (split
    at :data:`ROW_GROUP_ROWS`), nothing is held between writes. For wide rows
    written one source at a time (an sk_prof trace per rank): a reader of one
    source's rows skips the other row groups by their statistics.
    """

    def __init__(self, table: Table, data_dir: str | Path, partition: Mapping[str, str], metadata: Mapping[str, str] | None = None,
                 *, group_per_write: bool = False) -> None:
        self.table = table
        self.metadata = dict(metadata or {})
        self.group_per_write = group_per_write
        self.target = _partition_dir(Path(data_dir), table, partition) / PART_FILE
        schema = _file_arrow(pl.DataFrame(schema=table.schema), table, None).schema.remove_metadata()  # the footer gets it at commit
        self._made = _missing_folders(self.target.parent)
        self._tmp: Path | None = None
        self._writer: pq.ParquetWriter | None = None
        self._pending: list[pa.Table] = []
        self._rows = 0
        try:
            self._tmp = temp_beside(self.target)
            self._writer = pq.ParquetWriter(self._tmp, schema, compression=COMPRESSION)
        except BaseException:
            self.discard()
            raise

    def write(self, frame: pl.DataFrame) -> None:
        """Add ``frame``'s rows (conformed to the table); every full row group is written out."""
        arrow = _file_arrow(frame, self.table, self.metadata)
        self._pending.append(arrow)
        self._rows += arrow.num_rows
        if self.group_per_write or self._rows >= ROW_GROUP_ROWS:
            self._flush(final=self.group_per_write)

    def _open_writer(self) -> pq.ParquetWriter:
        if self._writer is None:
            raise ValueError(f"table {self.table.name}: the stream to {self.target} is already committed or discarded")
        return self._writer

    def _flush(self, *, final: bool) -> None:
        """Write the held rows in full row groups (all of them when ``final``), keeping the rest."""
        writer = self._open_writer()
        if not self._pending:
            return
        held = pa.concat_tables(self._pending)
        done = held.num_rows if final else held.num_rows - held.num_rows % ROW_GROUP_ROWS
        if done:
            writer.write_table(held.slice(0, done), row_group_size=ROW_GROUP_ROWS)
            pa.default_memory_pool().release_unused()  # the encoder's buffers: ~10 MB less peak RSS over a 10 M-row file
        rest = held.slice(done)
        self._pending, self._rows = ([rest] if rest.num_rows else []), rest.num_rows

    def commit(self, metadata: Mapping[str, str] | None = None) -> Path:
        """Write the last rows, the footer with the key/value metadata (the stream's, then ``metadata``)
        and put the file in place of the target; return the target."""
        self._flush(final=True)
        writer = self._open_writer()
        empty = pl.DataFrame(schema=self.table.schema)
        writer.add_key_value_metadata(footer_metadata(_file_arrow(empty, self.table, {**self.metadata, **(metadata or {})}).schema))
        writer.close()
        self._writer = None
        if self._tmp is not None:
            commit_temp(self._tmp, self.target, site="parquet")
        return self.target

    def discard(self) -> None:
        """Drop everything written: close, remove the temp file and the folders this stream created (if empty)."""
        self._pending = []
        if self._writer is not None:
            try:
                self._writer.close()
            except (OSError, pa.ArrowException):  # the write that failed may fail again on close: nothing to keep
                pass
            self._writer = None
        if self._tmp is not None:
            self._tmp.unlink(missing_ok=True)
        for folder in self._made:
            try:
                folder.rmdir()
            except OSError:  # a folder made by a later stream (discard those first) or a file landed there: not ours to remove
                break


ARROW_SCHEMA_KEY = "ARROW:schema"
"""Parquet key/value key under which pyarrow stores the Arrow schema of the file."""


def footer_metadata(schema: pa.Schema) -> dict[str, str]:
    """The key/value metadata :func:`pyarrow.parquet.write_table` stores for an Arrow table of ``schema``:
    the schema's own pairs, then ``ARROW:schema`` (the IPC-serialized schema, base64), from which
    pyarrow reads the schema back, its metadata included. Given to a writer opened with a bare schema,
    the file is byte for byte the one ``write_table`` makes (``tests/test_ingest_stream.py``)."""
    stored = {key.decode(): value.decode() for key, value in (schema.metadata or {}).items()}
    return {**stored, ARROW_SCHEMA_KEY: base64.b64encode(schema.serialize().to_pybytes()).decode("ascii")}


def _missing_folders(folder: Path) -> list[Path]:
    """``folder`` and its parents that do not exist yet, deepest first."""
    missing = []
    while not folder.exists() and folder != folder.parent:
        missing.append(folder)
        folder = folder.parent
    return missing


def required_fields(arrow: pa.Table, table: Table) -> pa.Table:
    """``arrow`` with each column the schema declares not nullable marked required (ValueError on a null there)."""
    nullable = {c.name: c.nullable for c in table.columns}
    nulls = [name for name in arrow.column_names if not nullable.get(name, True) and arrow.column(name).null_count]
    if nulls:
        raise ValueError(f"table {table.name}: null values in column(s) {', '.join(nulls)}, which the schema declares not nullable")
    schema = pa.schema([field.with_nullable(nullable.get(field.name, True)) for field in arrow.schema]).with_metadata(arrow.schema.metadata)
    return arrow.cast(schema)


def read_schema_version(path: str | Path) -> str | None:
    """The ``schema_version`` stored in a Parquet file's key/value metadata."""
    return _schema_version(_read_arrow_schema(path))


def _schema_version(schema: pa.Schema) -> str | None:
    value = (schema.metadata or {}).get(b"schema_version")
    return None if value is None else value.decode()


def _read_arrow_schema(path: str | Path) -> pa.Schema:
    """A Parquet file's schema; a damaged or foreign file is bad input naming the file."""
    try:
        return pq.read_schema(path)
    except (OSError, pa.ArrowException) as exc:
        raise InputError(path, f"not a readable Parquet file ({' '.join(str(exc).split())})", expected="a table written by sk-analyze ingest") from exc


HIVE_UNSAFE = re.compile(r"[/\\=,#%*?\[\]{}\x00-\x1f]")
"""Characters a partition value must not hold: a path separator; ``=`` (the hive reader loses the column);
glob characters (the scan expands ``round=a*b``, ``round=a[1]`` as patterns); ``%`` (read back URL-decoded,
``a%20b`` as ``a b``); ``,`` and ``#`` (``parquet:DIR#round=R,role=X`` cannot select them); control characters."""


def hive_value_ok(value: str) -> bool:
    """Whether ``value`` makes a partition folder ``key=<value>`` that reads back as itself and can be selected."""
    return bool(value) and value not in {".", "..", "__HIVE_DEFAULT_PARTITION__"} and not HIVE_UNSAFE.search(value)


def _check_partition_folders(folder: Path, files: list[Path]) -> None:
    """A partition folder that would not read back as itself (an older ingest wrote ``round=a*b``) is bad
    input naming it: Polars' scan lost the column or expanded the name as a glob (exit 70)."""
    for part in sorted({part for f in files for part in f.relative_to(folder).parts[:-1]}):
        key, eq, value = part.partition("=")
        if eq and not hive_value_ok(value):
            raise InputError(folder / part, f"partition folder {part!r} cannot be read back as {key} {value!r}",
                             expected=f"{key}=<value> without / \\ = , # % * ? [ ] {{ }} (re-ingest it with another --{key})")


def scan_table(data_dir: str | Path, table: str | Table) -> pl.LazyFrame:
    """Lazily scan every partition of ``table`` under ``data_dir``.

    Partition columns come back as strings; an absent table is an empty frame
    with the right schema, so pipelines need no special case.
    """
    spec = TABLES[table] if isinstance(table, str) else table
    folder = Path(data_dir) / spec.name
    files = sorted(folder.glob("**/*.parquet")) if folder.is_dir() else []
    hive_schema = {key: pl.Utf8 for key in spec.partition_by}
    if not files:
        return pl.LazyFrame(schema={**spec.schema, **hive_schema})
    _check_partition_folders(folder, files)
    check_files(files, spec)
    # key=value folders above the table (a campaign's session=<name>) are partitions too for Polars: read, then dropped
    outer = [p.split("=", 1)[0] for p in folder.parts if "=" in p and p.split("=", 1)[0] not in hive_schema]
    frame = pl.scan_parquet(
        [str(f) for f in files],
        hive_partitioning=True,
        hive_schema={**{key: pl.Utf8 for key in outer}, **hive_schema},
    )
    return frame.drop(outer) if outer else frame


def check_files(files: list[Path], spec: Table) -> None:
    """Every file is a Parquet table of ``spec`` at this schema version (else InputError naming the file).

    Many files (a campaign's sessions) have their footers read by a few threads (pyarrow releases the GIL)."""
    if len(files) > 64:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=4) as pool:
            schemas = list(pool.map(_read_arrow_schema, files))
    else:
        schemas = [_read_arrow_schema(path) for path in files]
    for path, schema in zip(files, schemas, strict=True):
        version = _schema_version(schema)
        if version != SCHEMA_VERSION:
            raise InputError(path, f"Parquet schema_version is {version!r}", expected=repr(SCHEMA_VERSION))
        missing = [name for name in spec.schema if name not in schema.names]
        if missing:
            raise InputError(path, f"Parquet file lacks column(s) {', '.join(missing)}", expected=f"the {spec.name} table schema")


DERIVED_BY_DCCI_DIFF = ("sk_occurrences", "sk_children")
"""Tables that ``sk-analyze dcci-diff`` computes from sk_events and writes only when asked (``--tables-out``)."""


class SessionTables(dict[str, pl.LazyFrame]):
    """Every table of a data folder as a LazyFrame, saying which ones no file was written for and why.

    A plain ``dict`` (``tables["timings"]``); ``absent`` maps each table
    without any Parquet file to the reason, so an empty frame is never a silent one.
    """

    absent: dict[str, str]

    def __init__(self, frames: Mapping[str, pl.LazyFrame], absent: Mapping[str, str]) -> None:
        super().__init__(frames)
        self.absent = dict(absent)


def _absent_reason(name: str, data_dir: Path) -> str:
    if name in DERIVED_BY_DCCI_DIFF:
        return (f"not written: derived by dcci-diff, which writes it only with --tables-out (the sweep keeps its diagnosis "
                f"in experiments/Sbest/DCCI/dcci-diff.json); `sk-analyze dcci-diff BASE CAND --tables-out {data_dir}` writes it")
    return f"not written: no Parquet file under {data_dir / name}"


def open_tables(data_dir: str | Path) -> SessionTables:
    """Every known table under ``data_dir`` as a LazyFrame (empty when absent; ``.absent`` says which and why),
    each with a numeric ``round_index`` beside its ``round`` partition (:func:`round_index`)."""
    folder = Path(data_dir)
    absent = {name: _absent_reason(name, folder) for name in TABLES
              if not (folder / name).is_dir() or next((folder / name).glob("**/*.parquet"), None) is None}
    return SessionTables({name: scan_table(folder, name).with_columns(round_index()) for name in TABLES}, absent)
