"""``kernel_details.csv`` (torch_npu profiler) -> the ``kernels`` table.

Accepts every header variant of formats.md §2 (Level0/Level1, ``Block Dim`` or
``Block Num``, with or without ``Device_id`` and ``Step Id``/``Step ID``, CRLF,
trailing TAB or quotes around ``Start Time(us)``, ``N/A`` cells, quoted shapes).
Columns are matched by name (case-insensitive, trimmed), so metric columns and
the column order do not matter.

``start_ns`` is computed from the decimal text with integer string arithmetic,
never through float64 (which loses the last digits of an epoch in µs).

Every row's field count is checked against the header: a row with a cell
missing or added is an :class:`~sk_analytics.errors.InputError` naming the
line and both counts, never a silent shift of the later columns.

A last line without a line break whose cells may be cut (a crash during the
export: fields missing, an open quote, or a read column last) is never used
as data: it is dropped with a warning naming the file, the line and why
(:func:`~.csv_fields.cut_reason`). A negative or non-finite duration is an
``InputError`` naming the line; a file without data rows gives a warning.

Two paths, one result:

* fast: Polars' CSV reader parses only the needed columns, numbers typed
  (``N/A``/empty -> null), and a few vectorized checks confirm every cell;
  meanwhile, in a second thread, Arrow's multi-threaded CSV parser
  (``pyarrow.csv``) tokenizes every row and refuses any whose width is not
  the header's (Polars fills a short row with nulls and drops a long row's
  extra cells when it reads a subset of the columns);
* exhaustive: when the fast path cannot vouch for the file (the parser
  refused a row or a number, a start time is not ``<digits>.<3 digits>``, a
  required cell is empty), the widths are counted record by record
  (:mod:`.csv_fields`), every needed column is re-read as text, trimmed,
  converted, and the first bad row or cell becomes an
  :class:`~sk_analytics.errors.InputError` naming the file, the line and
  what was expected.
"""

from __future__ import annotations

import csv
import io
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from sk_analytics.errors import InputError
from sk_analytics.files.io_seam import reading
from sk_analytics.ingest.base import ParseResult, relative_source
from sk_analytics.ingest.canonical import canonical_op_column
from sk_analytics.ingest.csv_fields import cut_reason, first_width_mismatch, line_feed_line
from sk_analytics.schema import KERNELS

NA_TEXT = "N/A"
"""The profiler's "no value"; an empty cell means the same."""

SK_TYPE = "SuperKernel"
SK_NAME_PREFIX = "sk_"

HEADER_PROBE_BYTES = 1 << 16
ARROW_BLOCK_BYTES: int | None = None
"""Block size of the Arrow width check (None: Arrow's default); tests make it tiny
so that rows straddle the parser's blocks."""


@dataclass(frozen=True)
class Field:
    """How one kernels column is read: its header spellings and its parse kind."""

    column: str
    headers: tuple[str, ...]
    kind: str
    """``int``, ``float``, ``duration`` (a float >= 0), ``text`` (N/A/empty -> null), ``name``
    (as written, must not be empty), ``shape`` (like text, literal quotes removed) or ``start``."""
    required: bool = False


FIELDS: tuple[Field, ...] = (
    Field("step_id", ("Step Id", "Step ID"), "int"),
    Field("device_id", ("Device_id",), "int"),
    Field("model_id", ("Model ID",), "int"),
    Field("task_id", ("Task ID",), "int"),
    Field("stream_id", ("Stream ID",), "int"),
    Field("name", ("Name",), "name", required=True),
    Field("type", ("Type",), "text"),
    Field("op_state", ("OP State",), "text"),
    Field("accelerator_core", ("Accelerator Core",), "text"),
    Field("start_text", ("Start Time(us)",), "start", required=True),
    Field("duration_us", ("Duration(us)",), "duration", required=True),
    Field("wait_us", ("Wait Time(us)",), "float"),
    Field("block_num", ("Block Dim", "Block Num"), "int"),
    Field("mix_block_num", ("Mix Block Dim", "Mix Block Num"), "int"),
    Field("input_shapes", ("Input Shapes",), "shape"),
    Field("input_data_types", ("Input Data Types",), "text"),
    Field("output_shapes", ("Output Shapes",), "shape"),
)
"""Every kernel_details column the ``kernels`` table keeps (others are ignored)."""

EXPECTED = {
    "int": "an integer or N/A (int64: at most 9223372036854775807)",
    "float": "a finite decimal number or N/A",
    "duration": "a finite decimal number >= 0 (microseconds)",
    "start": "a non-negative decimal number of microseconds below 9223372036854775.808 (int64 ns; at most 3 non-zero decimals)",
    "name": "a non-empty kernel name",
}


def parse_kernel_details(path: Path, *, root: Path | None = None) -> ParseResult:
    """Parse one kernel_details.csv into a frame conforming to ``KERNELS``."""
    path = Path(path)
    header, last_line = _probe(path)
    positions = _locate_columns(path, header)
    fields = [f for f in FIELDS if f.column in positions]
    source, warnings = _without_cut_line(path, last_line, len(header), positions)
    frame = _fast(path, positions, fields, len(header), source)
    if frame is None:
        frame = _exhaustive(path, positions, fields, len(header), source)
    if frame.height == 0:
        warnings.append(f"{path}: no data rows (header only): the kernels table gets nothing from it")
    frame = frame.with_columns(pl.lit(None).alias(f.column) for f in FIELDS if f.column not in positions)
    frame = frame.with_columns(
        ((pl.col("type") == SK_TYPE).fill_null(False) | pl.col("name").str.starts_with(SK_NAME_PREFIX)).alias("is_sk"),
        pl.lit(relative_source(path, root)).alias("source_file"),
    )
    ops = canonical_op_column(frame.select("name"), "name").select("canonical_op").collect()  # row order kept
    return ParseResult(KERNELS, KERNELS.conform(frame.with_columns(ops.to_series())), path, warnings)


# --------------------------------------------------------------------------- header


def _probe(path: Path) -> tuple[list[str], bytes]:
    """Header cells (trimmed, BOM removed) and the file's last line if it has no line break."""
    with reading(path), path.open("rb") as fh:
        head = fh.read(HEADER_PROBE_BYTES)
        while b"\n" not in head:
            more = fh.read(HEADER_PROBE_BYTES)
            if not more:
                break
            head += more
        size = fh.seek(0, io.SEEK_END)
        fh.seek(max(size - HEADER_PROBE_BYTES, 0))
        tail = fh.read()
    if size == 0:
        raise InputError(path, "empty file (0 bytes): the export wrote no header", line=1,
                         expected="a kernel_details.csv header with Name, Start Time(us) and Duration(us)")
    first = head.split(b"\n", 1)[0].rstrip(b"\r")
    try:
        text = first.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise InputError(path, "header is not UTF-8 text", line=1, expected="a UTF-8 CSV header") from None
    try:
        cells = next(csv.reader([text], strict=True), [])
    except csv.Error as exc:
        raise InputError(path, f"malformed CSV header ({exc})", line=1, expected="a kernel_details.csv header") from None
    unterminated = b"" if tail.endswith(b"\n") or b"\n" not in tail else tail.rsplit(b"\n", 1)[1]
    return [cell.strip() for cell in cells], unterminated


def _check_widths(path: Path, width: int, source: Path | bytes) -> None:
    """Every row has the header's field count (a missing or extra cell would shift
    or drop cells silently); a cut last row is left out by :func:`_without_cut_line`."""
    if _widths_ok(source, width):
        return
    with reading(path):
        mismatch = first_width_mismatch(path, width)
    if mismatch is None or (mismatch.last and mismatch.found < width):
        return
    raise InputError(
        path,
        f"malformed CSV (row has {mismatch.found} fields, the header has {mismatch.expected})",
        line=mismatch.line,
        expected=f"{mismatch.expected} fields in every row (a missing or extra cell shifts the later columns)",
    )


def _without_cut_line(path: Path, last_line: bytes, width: int, positions: dict[str, int]) -> tuple[Path | bytes, list[str]]:
    """What to read: the file, or its bytes without a cut last line (module docstring) and the
    warning that names the file, the line and why."""
    reason = cut_reason(last_line, width, frozenset(positions.values()))
    if reason is None:
        return path, []
    with reading(path):
        data = path.read_bytes()
    kept = data[: len(data) - len(last_line)]
    line = kept.count(b"\n") + 1
    return kept, [f"{path}:{line}: the last line has no line break and {reason}: the export was cut, the line is not used as data"]


def _locate_columns(path: Path, header: list[str]) -> dict[str, int]:
    """Position of each known column in ``header``.

    A kept column given twice (a repeated header cell, or two spellings of it such
    as ``Block Dim`` and ``Block Num``) is refused: the two cells may differ, and
    reading one of them would drop the other without a word."""
    spellings = {h.casefold(): field for field in FIELDS for h in field.headers}
    cells: dict[str, list[int]] = {}
    for position, cell in enumerate(header):
        field = spellings.get(cell.casefold())
        if field is not None:
            cells.setdefault(field.column, []).append(position)
    for field in FIELDS:
        found = cells.get(field.column, [])
        if len(found) > 1:
            where = ", ".join(str(p + 1) for p in found[:-1]) + f" and {found[-1] + 1}"
            raise InputError(
                path,
                f"header gives column {field.headers[0]} (columns {where}) more than once: "
                f"{', '.join(repr(header[p]) for p in found)}",
                line=1,
                expected="a kernel_details.csv header that names each column once",
            )
    positions = {column: found[0] for column, found in cells.items()}
    missing = [f.headers[0] for f in FIELDS if f.required and f.column not in positions]
    separator = next((sep for sep in (";", "\t", "|") if len(header) == 1 and sep in header[0]), None)
    if missing and separator is not None:
        raise InputError(
            path,
            f"header is one cell split by {separator!r}, not by commas ({_first_line(header[0])[:80]!r}): "
            "a re-saved export (a spreadsheet in a locale with decimal commas writes ';')",
            line=1,
            expected="the comma-separated kernel_details.csv the profiler wrote",
        )
    if missing:
        raise InputError(
            path,
            f"header lacks column(s) {', '.join(missing)}",
            line=1,
            expected="a kernel_details.csv header with Name, Start Time(us) and Duration(us)",
        )
    return positions


def _read(source: Path | bytes, positions: dict[str, int], fields: list[Field], width: int, *, typed: bool) -> pl.DataFrame:
    """The needed columns, renamed to kernels column names, blank lines dropped.

    ``row`` is the 1-based data row counting blank lines (= physical line - 1
    when no cell holds a line break).
    """
    by_position = sorted(fields, key=lambda f: positions[f.column])
    dtypes = {"int": pl.Int64, "float": pl.Float64, "duration": pl.Float64}
    schema = {f.column: (dtypes.get(f.kind, pl.Utf8) if typed else pl.Utf8) for f in by_position}
    names = {positions[f.column]: f.column for f in by_position}
    frame = pl.read_csv(
        source,
        columns=[positions[f.column] for f in by_position],
        schema_overrides=[schema.get(names.get(i, ""), pl.Utf8) for i in range(width)],
        infer_schema=False,
        null_values=[NA_TEXT] if typed else None,
        raise_if_empty=False,
    )
    frame.columns = list(schema)
    frame = frame.with_row_index("row", offset=1).with_columns(pl.col("row").cast(pl.Int64))
    blank = frame.select(pl.all_horizontal(pl.col(c).is_null() for c in schema)).to_series()
    return frame.filter(~blank) if blank.any() else frame


def _widths_ok(source: Path | bytes, width: int) -> bool:
    """Arrow's CSV parser agrees that every row has ``width`` fields (it tokenizes every
    field of every row, multi-threaded, and refuses any other width; only the first column
    is converted). False for any refusal: the exhaustive path then finds out why."""
    import pyarrow as pa
    import pyarrow.csv as pa_csv

    try:
        pa_csv.read_csv(
            io.BytesIO(source) if isinstance(source, bytes) else source,
            read_options=pa_csv.ReadOptions(column_names=[f"c{i}" for i in range(width)], skip_rows=1,
                                            block_size=ARROW_BLOCK_BYTES or None),
            parse_options=pa_csv.ParseOptions(ignore_empty_lines=True),
            convert_options=pa_csv.ConvertOptions(include_columns=["c0"], column_types={"c0": pa.string()}, check_utf8=False),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return False
    return True


# --------------------------------------------------------------------------- fast path


def _fast(path: Path, positions: dict[str, int], fields: list[Field], width: int, source: Path | bytes | None = None) -> pl.DataFrame | None:
    """Typed read plus vectorized checks; None when any cell needs the exhaustive path.
    ``source``: what to read (default ``path``; the bytes without a cut last line)."""
    source = path if source is None else source
    with ThreadPoolExecutor(max_workers=1) as pool:  # both readers release the GIL
        widths = pool.submit(_widths_ok, source, width)
        try:
            frame = _read(source, positions, fields, width, typed=True)
        except pl.exceptions.PolarsError:
            return None
        if not widths.result():
            return None
    start = pl.col("start_text").str.strip_chars()
    dot = start.str.find(".", literal=True)
    digit_first = (start >= "0") & (start < ":")  # string order: the first character is 0-9
    start_ns = pl.when(digit_first & (dot == start.str.len_chars() - 4)).then(start.str.replace(".", "", literal=True).cast(pl.Int64, strict=False))
    # N/A and empty cells (quoted or not) are already null (null_values); text columns
    # are rewritten only if one still holds an empty string
    texts = [f for f in fields if f.kind in ("text", "shape")]
    has_empty = bool(texts) and frame.select(pl.any_horizontal((pl.col(f.column) == "").any() for f in texts)).item()
    text = {f.column: _text_value(pl.col(f.column), f) if has_empty else _text_value_no_na(pl.col(f.column), f) for f in texts}
    frame = frame.with_columns(start.alias("start_text"), start_ns.alias("start_ns"), **text)
    trusted = [
        pl.col("name").is_not_null(),
        pl.col("start_ns").is_not_null() & (pl.col("start_ns") >= 0),
        (pl.col("duration_us").is_finite() & (pl.col("duration_us") >= 0)).fill_null(False),
    ]
    if "wait_us" in frame.columns:
        trusted.append(pl.col("wait_us").is_finite().fill_null(True))
    if not frame.select(pl.all_horizontal(trusted).all()).item():
        return None
    return frame


def _text_value(expr: pl.Expr, field: Field) -> pl.Expr:
    """Text cell: N/A or empty -> null; shapes lose their literal quotes."""
    return _text_value_no_na(pl.when(expr.is_in([NA_TEXT, ""])).then(None).otherwise(expr), field)


def _text_value_no_na(expr: pl.Expr, field: Field) -> pl.Expr:
    """Text cell already free of N/A and empty cells: shapes lose their literal quotes."""
    return expr.str.replace_all('"', "", literal=True) if field.kind == "shape" else expr


# --------------------------------------------------------------------------- exhaustive path


def _exhaustive(path: Path, positions: dict[str, int], fields: list[Field], width: int, source: Path | bytes | None = None) -> pl.DataFrame:
    """Every row's width checked, every needed cell read as text and converted;
    InputError at the first bad row or cell."""
    source = path if source is None else source
    _check_widths(path, width, source)
    try:
        raw = _read(source, positions, fields, width, typed=False)
    except pl.exceptions.PolarsError as exc:
        line, reason = _first_bad_line(path, width)
        raise InputError(
            path,
            f"malformed CSV ({reason or _first_line(str(exc))})",
            line=line,
            expected=f"CSV records of at most {width} fields in UTF-8 with balanced quotes",
        ) from None
    checked = [_checked(f) for f in fields]
    bad = {f"bad:{f.column}": mask for f, (_, mask) in zip(fields, checked, strict=True) if mask is not None}
    frame = raw.select(
        "row",
        *[value.alias(f.column) for f, (value, _) in zip(fields, checked, strict=True)],
        _start_ns(pl.col("start_text").str.strip_chars()).alias("start_ns"),
        **bad,
    )
    first = frame.filter(pl.any_horizontal(bad.keys())).head(1)
    if first.height:
        _raise_bad_cell(path, raw, first.row(0, named=True), fields)
    return frame.drop(bad.keys())


def _checked(field: Field) -> tuple[pl.Expr, pl.Expr | None]:
    """Typed value of a text column and the mask of its invalid cells."""
    cell = pl.col(field.column)
    if field.kind == "name":
        return cell, cell.is_null() | (cell == "")
    if field.kind in ("text", "shape"):
        return _text_value(cell, field), None
    trimmed = cell.str.strip_chars()
    if field.kind == "start":
        return trimmed, _start_ns(trimmed).is_null()
    empty = trimmed.is_null() | trimmed.is_in([NA_TEXT, ""])
    dtype = pl.Int64 if field.kind == "int" else pl.Float64
    value = pl.when(empty).then(None).otherwise(trimmed).cast(dtype, strict=False)
    bad = ~empty & value.is_null()
    if field.kind in ("float", "duration"):
        bad = bad | ~value.is_finite().fill_null(True)
    if field.kind == "duration":
        bad = bad | (value < 0).fill_null(False)
    return value, (bad | empty) if field.required else bad


def _start_ns(text: pl.Expr) -> pl.Expr:
    """Exact integer ns of a µs decimal text; null where it is not one.

    ``"1736405443881410.320"`` -> 1736405443881410320: integer part times 1000
    plus the first three decimals (right-padded); further decimals must be 0.
    """
    parts = text.str.split_exact(".", 1)
    fraction = parts.struct.field("field_1").fill_null("")
    well_formed = text.str.contains(r"^[0-9]+(\.[0-9]*)?$") & fraction.str.slice(3).str.contains(r"^0*$")
    digits = pl.concat_str(parts.struct.field("field_0"), fraction.str.slice(0, 3).str.pad_end(3, "0"))
    return pl.when(well_formed).then(digits.cast(pl.Int64, strict=False))


def _raise_bad_cell(path: Path, raw: pl.DataFrame, flags: dict[str, object], fields: list[Field]) -> None:
    """InputError for the first bad cell of the first bad row (cold path)."""
    field = next(f for f in fields if flags.get(f"bad:{f.column}"))
    row = int(str(flags["row"]))
    cell = raw.filter(pl.col("row") == row).get_column(field.column)[0]
    header = field.headers[0]
    empty = cell is None or cell.strip() in ("", NA_TEXT)
    message = f"empty required cell in column {header}" if empty else f"bad {header} value {cell!r}"
    expected = EXPECTED[field.kind].removesuffix(" or N/A") if field.required else EXPECTED[field.kind]
    raise InputError(path, message, line=_line_of_row(path, row), expected=expected)


def _first_line(text: str) -> str:
    """First line of a (multi-line) reader message, for a one-line error."""
    stripped = text.strip()
    return stripped.splitlines()[0] if stripped else "unreadable"


def _line_of_row(path: Path, row: int) -> int:
    """1-based physical line where data row ``row`` starts (quoted line breaks counted)."""
    text = path.read_bytes().decode("utf-8-sig", errors="replace")
    reader = csv.reader(io.StringIO(text, newline=""))
    line = 1
    for number, _ in enumerate(reader):
        if number == row:
            return line_feed_line(text, line)
        line = reader.line_num + 1
    return row + 1


def _first_bad_line(path: Path, width: int) -> tuple[int, str | None]:
    """Cold path after a reader error: the 1-based line where the problem starts.

    Looks for invalid UTF-8, then (Python's strict CSV reader) malformed quoting
    or too many fields; falls back to bisecting with the Polars reader itself
    for what only it rejects.
    """
    data = path.read_bytes()
    lines = data.split(b"\n")
    for number, raw in enumerate(lines, start=1):
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return number, "invalid UTF-8"
    text = data.decode("utf-8-sig")
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    start = 1
    try:
        for record in reader:
            if len(record) > width:
                return line_feed_line(text, start), f"{len(record)} fields, the header has {width}"
            start = reader.line_num + 1
    except csv.Error as exc:
        return line_feed_line(text, start), f"CSV error: {exc}"
    return _bisect_polars(lines), None


def _bisect_polars(lines: list[bytes]) -> int:
    """Smallest line count whose prefix the Polars reader rejects (1-based line)."""

    def fails(count: int) -> bool:
        try:
            pl.read_csv(b"\n".join(lines[:count]) + b"\n", infer_schema=False)
        except pl.exceptions.PolarsError:
            return True
        return False

    low, high = 1, len(lines)
    while low < high:
        middle = (low + high) // 2
        if fails(middle):
            high = middle
        else:
            low = middle + 1
    return low
