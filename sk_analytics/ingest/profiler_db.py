"""``ascend_pytorch_profiler_<rank>.db`` (torch_npu ``export_type=Db``) and ``msprof_<timestamp>.db``
(msprof's own DB export) -> the ``kernels`` table.

The SQLite export holds what ``kernel_details.csv`` holds, normalised
(formats.md §2): one ``TASK`` row per device task (``startNs``/``endNs``
integer ns, ``deviceId``, ``streamId``, ``taskId``, ``modelId``), the compute
tasks' details in ``COMPUTE_TASK_INFO`` (joined on ``globalTaskId``; name, op
type, accelerator core, shapes and dtypes as ids into ``STRING_IDS``), the
communication ops in ``COMMUNICATION_OP`` and the profiler steps in
``STEP_TIME``. ``kernel_details.csv`` is exactly the compute tasks plus the
communication ops (checked on the real samples), so this module writes the
same rows and columns:

* ``start_ns`` is ``TASK.startNs`` as read (Int64 end to end, no float on
  the way); ``start_text`` its µs text with 3 decimals; ``duration_us`` (and
  ``wait_us``) the correctly rounded float of ``(endNs - startNs) / 1000``,
  bit for bit what the CSV's 3-decimal text parses to (:func:`exact_us`);
* ``type``/``accelerator_core``/shapes/dtypes are the strings, ``N/A`` -> null;
* ``step_id`` is the ``STEP_TIME`` step whose span holds the start;
* communication ops get ``accelerator_core`` ``HCCL`` (as the CSV writes
  them), the database's device id, no stream/task/model id;
* the DB has no ``OP State``; ``Wait Time(us)`` only where
  ``COMPUTE_TASK_INFO`` has a ``waitNs`` column: null otherwise;
* ``row`` numbers the rows in start order (``kernel_details.csv``'s order).

Reading: the queries return Arrow record batches straight from SQLite through
ADBC (``adbc-driver-sqlite``), joined on integer ids only; the strings are
attached by a Polars join against ``STRING_IDS``. The file is opened
read-only and immutable (profiles are evidence).

Refused with an :class:`~sk_analytics.errors.InputError` naming the file and
the table: not an SQLite file, a ``META_DATA`` schema version other than
:data:`SUPPORTED_MAJORS`, a missing table or column, an id without its
string, a non-integer time, an end before its start. ``META_DATA`` is
optional (msprof's export may lack it): without it, or without a version in
it, the schema version is unknown and the file is read by its tables, with a
note among the warnings.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import polars as pl

from sk_analytics.errors import InputError
from sk_analytics.files.io_seam import reading
from sk_analytics.ingest.base import ParseResult, relative_source
from sk_analytics.ingest.canonical import canonical_op_column
from sk_analytics.ingest.discover import PROFILER_DB_NAME
from sk_analytics.schema import KERNELS

FILE_NAME = re.compile(PROFILER_DB_NAME)
"""The torch_npu DB export of one rank (``ascend_pytorch_profiler_<rank>.db``; ``analysis.db``
beside it is not read) or msprof's own DB export (``msprof_<timestamp>.db``)."""

SUPPORTED_MAJORS = frozenset({1})
"""``META_DATA`` ``SCHEMA_VERSION_MAJOR`` values read (torch_npu 2.1-2.6 write 1.x.y;
msprof-analyze 26.2 checks no version at all, only that the tables exist)."""

NA_TEXT = "N/A"
HCCL_CORE = "HCCL"
SK_TYPE = "SuperKernel"
SK_NAME_PREFIX = "sk_"

REQUIRED: Mapping[str, tuple[str, ...]] = {
    "STRING_IDS": ("id", "value"),
    "TASK": ("startNs", "endNs", "deviceId", "globalTaskId", "streamId", "taskId", "modelId"),
    "COMPUTE_TASK_INFO": (
        "globalTaskId", "name", "opType", "taskType", "blockDim", "mixBlockDim", "inputShapes", "inputDataTypes", "outputShapes",
    ),
}  # fmt: skip
"""Tables and columns the kernels table needs; each must exist."""
OPTIONAL: Mapping[str, tuple[str, ...]] = {
    "META_DATA": ("name", "value"),
    "COMMUNICATION_OP": ("opName", "startNs", "endNs", "opType"),
    "STEP_TIME": ("id", "startNs", "endNs"),
}
"""Tables read when present (a run without communication or steps lacks them; msprof's own
export may lack ``META_DATA``); when present, complete."""



def parse_profiler_db(path: Path, *, root: Path | None = None) -> ParseResult:
    """Read one DB export into a frame conforming to ``KERNELS``."""
    path = Path(path)
    with _connect(path) as db:
        tables = _columns(db, path)
        notes = _check_version(db, path) if "META_DATA" in tables else [_note(path, "has no META_DATA table")]
        wait = "waitNs" in tables.get("COMPUTE_TASK_INFO", ())
        compute = _query(db, path, "TASK", _COMPUTE_SQL.format(wait=", c.waitNs AS wait_ns" if wait else ""))
        strings = _query(db, path, "STRING_IDS", "SELECT id, value FROM STRING_IDS")
        comm = _query(db, path, "COMMUNICATION_OP", _COMM_SQL) if "COMMUNICATION_OP" in tables else None
        steps = _query(db, path, "STEP_TIME", "SELECT id, startNs AS step_start, endNs AS step_end FROM STEP_TIME") if "STEP_TIME" in tables else None
    _require_integers(path, compute, ("TASK", ("start_ns", "end_ns")))
    if comm is not None:
        _require_integers(path, comm, ("COMMUNICATION_OP", ("start_ns", "end_ns")))
    frame = _kernels(path, compute, comm, strings, steps, has_wait=wait)
    if frame.height == 0:
        notes.append(f"{path}: no compute tasks or communication ops: the kernels table gets nothing from it")
    return ParseResult(KERNELS, KERNELS.conform(frame.with_columns(pl.lit(relative_source(path, root)).alias("source_file"))), path, notes)


_COMPUTE_SQL = """
SELECT t.startNs AS start_ns, t.endNs AS end_ns, t.deviceId AS device_id, t.streamId AS stream_id,
       t.taskId AS task_id, t.modelId AS model_id, c.name AS name_id, c.opType AS type_id,
       c.taskType AS core_id, c.blockDim AS block_num, c.mixBlockDim AS mix_block_num,
       c.inputShapes AS input_shapes_id, c.inputDataTypes AS input_data_types_id, c.outputShapes AS output_shapes_id{wait}
FROM COMPUTE_TASK_INFO c JOIN TASK t ON t.globalTaskId = c.globalTaskId
"""
_COMM_SQL = "SELECT opName AS name_id, opType AS type_id, startNs AS start_ns, endNs AS end_ns FROM COMMUNICATION_OP"


# --------------------------------------------------------------------------- SQLite edge


@contextmanager
def _connect(path: Path) -> Iterator[Any]:
    """A read-only, immutable ADBC connection (no journal or lock file is written)."""
    if not path.is_file():
        raise InputError(path, "no such file", expected="an ascend_pytorch_profiler_<rank>.db file")
    with reading(path, "profiler database"), path.open("rb") as fh:
        if fh.read(16) != b"SQLite format 3\x00":
            raise InputError(path, "not an SQLite database", expected="the torch_npu DB export (export_type=Db)")
    import adbc_driver_sqlite.dbapi as adbc

    uri = "file:" + quote(str(path.resolve())) + "?mode=ro&immutable=1"
    try:
        connection = adbc.connect(uri)
    except adbc.Error as exc:
        raise InputError(path, f"cannot open the database ({_first_line(exc)})") from None
    try:
        yield connection
    finally:
        connection.close()


def _query(db: Any, path: Path, table: str, sql: str) -> pl.DataFrame:
    """One query as a Polars frame (Arrow batches, no row objects); errors name the table."""
    import adbc_driver_sqlite.dbapi as adbc

    try:
        with db.cursor() as cursor:
            cursor.execute(sql)
            frame = pl.from_arrow(cursor.fetch_arrow_table())
    except adbc.Error as exc:
        raise InputError(path, f"table {table}: cannot read ({_first_line(exc)})") from None
    assert isinstance(frame, pl.DataFrame)
    return frame


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _columns(db: Any, path: Path) -> dict[str, tuple[str, ...]]:
    """Columns of every table the kernels need or may use; missing ones are an InputError."""
    wanted = [*REQUIRED, *OPTIONAL]
    listed = ", ".join(f"'{t}'" for t in wanted)
    info = _query(
        db, path, "sqlite_master",
        f"SELECT m.name AS tbl, p.name AS col FROM sqlite_master m JOIN pragma_table_info(m.name) p "
        f"WHERE m.type IN ('table', 'view') AND m.name IN ({listed})",
    )  # fmt: skip
    tables: dict[str, tuple[str, ...]] = {}
    for table, column in info.iter_rows():
        tables[table] = (*tables.get(table, ()), column)
    for table, needed in [*REQUIRED.items(), *((t, c) for t, c in OPTIONAL.items() if t in tables)]:
        if table not in tables:
            raise InputError(path, f"no table {table}", expected=f"the torch_npu DB export tables {', '.join(REQUIRED)}")
        missing = [c for c in needed if c not in tables[table]]
        if missing:
            raise InputError(path, f"table {table} lacks column(s) {', '.join(missing)}", expected=f"{table}({', '.join(needed)}, …)")
    return tables


def _check_version(db: Any, path: Path) -> list[str]:
    """Refuse a ``META_DATA`` schema major other than :data:`SUPPORTED_MAJORS`; a table without
    any version gives a note (the tables and columns checked by :func:`_columns` are the layout)."""
    meta = _query(db, path, "META_DATA", "SELECT name, value FROM META_DATA")
    values = dict(zip(meta["name"].cast(pl.Utf8).to_list(), meta["value"].cast(pl.Utf8).to_list(), strict=True))
    version = values.get("SCHEMA_VERSION") or ".".join(
        values.get(f"SCHEMA_VERSION_{part}", "") for part in ("MAJOR", "MINOR", "MICRO")
    ).strip(".")
    major_text = values.get("SCHEMA_VERSION_MAJOR") or (version or "").split(".")[0]
    supported = ", ".join(f"{m}.x.y" for m in sorted(SUPPORTED_MAJORS))
    if not major_text:
        return [_note(path, "table META_DATA has no SCHEMA_VERSION")]
    if not major_text.isdigit() or int(major_text) not in SUPPORTED_MAJORS:
        raise InputError(path, f"table META_DATA: unknown schema version {version or major_text!r}", expected=f"schema version {supported}")
    return []


def _note(path: Path, what: str) -> str:
    """The note for a DB without a schema version (msprof's own export writes no META_DATA)."""
    return (f"{path}: {what}: schema version unknown (null), read by its tables "
            f"({', '.join(REQUIRED)} with the columns of schema 1.x)")


def _require_integers(path: Path, frame: pl.DataFrame, spec: tuple[str, tuple[str, ...]]) -> None:
    """Times must come out of SQLite as integers (a REAL or TEXT column would round or fail)."""
    table, columns = spec
    for column in columns:
        dtype = frame.schema[column]
        if frame.height and not dtype.is_integer():
            raise InputError(path, f"table {table}: {column} is {dtype}, not integer ns", expected="integer nanoseconds")


# --------------------------------------------------------------------------- frame

_ID_COLUMNS = {"name_id": "name", "type_id": "type", "core_id": "accelerator_core",
               "input_shapes_id": "input_shapes", "input_data_types_id": "input_data_types", "output_shapes_id": "output_shapes"}  # fmt: skip
_INT_COLUMNS = ("device_id", "stream_id", "task_id", "model_id", "block_num", "mix_block_num")


def _kernels(
    path: Path, compute: pl.DataFrame, comm: pl.DataFrame | None, strings: pl.DataFrame, steps: pl.DataFrame | None, *, has_wait: bool
) -> pl.DataFrame:
    """Compute tasks and communication ops as kernels rows, in start order.

    Every string operation (``N/A`` -> null, quote removal, ``is_sk``,
    ``canonical_op``) runs once per distinct string of ``STRING_IDS``; the
    rows only gather the results by id."""
    devices = compute.get_column("device_id").unique().drop_nulls()
    rows = compute.select(
        "start_ns", "end_ns", *(pl.col(c).cast(pl.Int64) for c in (*_INT_COLUMNS, *_ID_COLUMNS)),
        (exact_us(pl.col("wait_ns").cast(pl.Int64)) if has_wait else pl.lit(None, dtype=pl.Float64)).alias("wait_us"),
        pl.lit(False).alias("is_comm"),
    )
    if comm is not None and comm.height:
        device = devices[0] if devices.len() == 1 else None
        comm_rows = comm.select(
            "start_ns", "end_ns",
            *(pl.lit(device if c == "device_id" else None, dtype=pl.Int64).alias(c) for c in _INT_COLUMNS),
            *(pl.col(c).cast(pl.Int64) if c in comm.columns else pl.lit(None, dtype=pl.Int64).alias(c) for c in _ID_COLUMNS),
            pl.lit(None, dtype=pl.Float64).alias("wait_us"), pl.lit(True).alias("is_comm"),
        ).cast(rows.schema)  # fmt: skip
        rows = _in_start_order(rows, comm_rows)
    elif not rows.get_column("start_ns").is_sorted():
        rows = rows.sort("start_ns", maintain_order=True)
    _check_rows(path, rows)
    table, rows = _string_table(path, strings, rows)
    rows = rows.with_columns(
        pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("row"),
        _start_text(pl.col("start_ns")).alias("start_text"),
        exact_us(pl.col("end_ns") - pl.col("start_ns")).alias("duration_us"),
        pl.lit(None, dtype=pl.Utf8).alias("op_state"),
        *(_gather(table["text"], pl.col(id_col)).alias(column) for id_col, column in _ID_COLUMNS.items()
          if column not in ("name", "input_shapes", "output_shapes")),
        _gather(table["value"], pl.col("name_id")).alias("name"),
        _gather(table["shape"], pl.col("input_shapes_id")).alias("input_shapes"),
        _gather(table["shape"], pl.col("output_shapes_id")).alias("output_shapes"),
        _gather(table["canonical_op"], pl.col("name_id")).alias("canonical_op"),
        (_gather(table["sk_name"], pl.col("name_id")) | _gather(table["sk_type"], pl.col("type_id")).fill_null(False)).alias("is_sk"),
    )
    rows = rows.with_columns(pl.when(pl.col("is_comm")).then(pl.lit(HCCL_CORE)).otherwise(pl.col("accelerator_core")).alias("accelerator_core"))
    return _with_steps(rows.drop(*_ID_COLUMNS, "end_ns", "is_comm"), steps)


def _in_start_order(compute: pl.DataFrame, comm: pl.DataFrame) -> pl.DataFrame:
    """Both kinds in start order (a stable sort: at equal starts compute tasks first, each in
    table order); a linear merge when both are already sorted, as torch_npu writes them."""
    if compute.get_column("start_ns").is_sorted() and comm.get_column("start_ns").is_sorted():
        return compute.merge_sorted(comm, key="start_ns")
    return pl.concat([compute, comm], how="vertical").sort("start_ns", maintain_order=True)


def _gather(values: pl.Series, positions: pl.Expr) -> pl.Expr:
    """``values[position]`` per row (null position -> null)."""
    return pl.lit(values).gather(positions)


def _positions(path: Path, rows: pl.DataFrame, ids: pl.Series) -> pl.DataFrame:
    """Each id column replaced by the row of its id in the sorted ``ids`` (a binary search per
    row, vectorized); an id that STRING_IDS does not define is refused."""
    last = max(ids.len() - 1, 0)
    found = {}
    for id_col in _ID_COLUMNS:
        position = pl.lit(ids).search_sorted(pl.col(id_col)).clip(0, last).cast(pl.Int64)
        found[id_col] = pl.when(pl.col(id_col).is_not_null()).then(position)
    located = rows.with_columns(**found) if ids.len() else rows.with_columns(pl.lit(None, dtype=pl.Int64).alias(c) for c in _ID_COLUMNS)
    for id_col in _ID_COLUMNS:
        wanted, at = rows.get_column(id_col), located.get_column(id_col)
        bad = wanted.is_not_null() & (at.is_null() | (ids.gather(at.fill_null(0)) != wanted.fill_null(-1)) if ids.len() else wanted.is_not_null())
        if bad.any():
            raise InputError(path, f"table STRING_IDS lacks id {wanted.filter(bad)[0]} (used as {id_col.removesuffix('_id')})",
                             expected="every string id defined in STRING_IDS")
    return located


def _string_table(path: Path, strings: pl.DataFrame, rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """The strings sorted by id, each as stored (``value``), as a kernels text cell (``text``:
    N/A -> null), as a shape (quotes removed), with its canonical op and SK flags; and the rows
    with their id columns turned into positions in that table."""
    table = strings.select(pl.col("id").cast(pl.Int64), pl.col("value").cast(pl.Utf8)).sort("id")
    if table.get_column("id").is_duplicated().any():
        raise InputError(path, "table STRING_IDS has an id twice", expected="unique ids")
    if rows.get_column("name_id").null_count():
        raise InputError(path, "table COMPUTE_TASK_INFO/COMMUNICATION_OP: a task without a name id", expected="a STRING_IDS id in every name")
    located = _positions(path, rows, table.get_column("id"))
    value = pl.col("value")
    table = table.with_columns(
        pl.when(value == NA_TEXT).then(None).otherwise(value).alias("text"),
        pl.when(value == NA_TEXT).then(None).otherwise(value.str.replace_all('"', "", literal=True)).alias("shape"),
        value.str.starts_with(SK_NAME_PREFIX).alias("sk_name"),
        (value == SK_TYPE).alias("sk_type"),
    )
    ops = canonical_op_column(table.select("value"), "value").select("canonical_op").collect()
    return table.with_columns(ops.to_series()), located


def _check_rows(path: Path, rows: pl.DataFrame) -> None:
    """A task that ends before it starts is bad input naming its table, its ids and its kernels row."""
    bad = rows.with_row_index("row", offset=1).filter(pl.col("end_ns") < pl.col("start_ns"))
    if bad.height:
        first = bad.row(0, named=True)
        what = ("COMMUNICATION_OP: the communication op" if first["is_comm"]
                else f"TASK: the compute task with streamId {first['stream_id']}, taskId {first['task_id']}")
        raise InputError(path, f"table {what} at kernels row {first['row']} has endNs {first['end_ns']} before startNs "
                               f"{first['start_ns']}", expected="endNs >= startNs")


def exact_us(ns: pl.Expr) -> pl.Expr:
    """Integer ns -> the float64 nearest to ns / 1000 (correctly rounded), i.e. exactly what the
    CSV export's 3-decimal µs text parses to (``53181`` -> ``53.181``).

    Polars turns a division by a constant into a multiplication by its reciprocal, which is one
    ulp off in about 14 % of values (``53.181000000000004``); NumPy's IEEE division of the exact
    float of the integer (exact below 2**53 ns, 104 days) is correctly rounded. Nulls stay null."""
    return ns.map_batches(_divide_by_1000, return_dtype=pl.Float64)


def _divide_by_1000(ns: pl.Series) -> pl.Series:
    quotient = ns.cast(pl.Float64).to_numpy() / 1000.0  # null -> NaN -> null below
    return pl.Series(ns.name, quotient, dtype=pl.Float64).fill_nan(None)


def _start_text(ns: pl.Expr) -> pl.Expr:
    """Exact µs text with 3 decimals of integer ns (``1736405443881410320`` -> ``1736405443881410.320``)."""
    return pl.concat_str((ns // 1000).cast(pl.Utf8), pl.lit("."), (ns % 1000).cast(pl.Utf8).str.zfill(3))


def _with_steps(rows: pl.DataFrame, steps: pl.DataFrame | None) -> pl.DataFrame:
    """``step_id``: the STEP_TIME step whose [start, end] holds the row's start (null outside every step)."""
    if steps is None or steps.height == 0:
        return rows.with_columns(pl.lit(None, dtype=pl.Int64).alias("step_id"))
    spans = steps.select(pl.col("id").cast(pl.Int64), pl.col("step_start").cast(pl.Int64), pl.col("step_end").cast(pl.Int64)).sort("step_start")
    at = (pl.lit(spans["step_start"]).search_sorted(pl.col("start_ns"), side="right").cast(pl.Int64) - 1)
    inside = (at >= 0) & (pl.col("start_ns") <= pl.lit(spans["step_end"]).gather(at.clip(0)))
    return rows.with_columns(pl.when(inside).then(pl.lit(spans["id"]).gather(at.clip(0))).alias("step_id"))


__all__ = ["FILE_NAME", "SUPPORTED_MAJORS", "exact_us", "parse_profiler_db"]
