"""SK time profiling traces -> the ``sk_events`` table (formats.md §3).

Accepts ``sk_prof_device_<id>.json`` and the legacy ``sk_event_dev_device_<id>.json``
(``args.modelRI`` integer instead of ``args.modelId``): a JSON array of
Chrome-trace complete events ending with ``{}`` (``[{}]`` when empty), or the
object form ``{"traceEvents": [...]}``. A truncated array (killed process)
keeps every complete record and reports where it stopped; text after the
closing ``{}]`` is an error, not a truncation.

Why not ``json.load``: names are written unescaped (a ``"`` or ``\\`` in a
name breaks strict JSON) and the files reach millions of events. The bytes are
read in chunks (a record cut by a chunk border is carried into the next one)
and cut into lines by Polars' CSV reader; when every line holds one record
(the runtime's layout) a line is a record, otherwise the text is cut at the
``}`` ``,`` ``{`` separators (JSON whitespace allowed between them). Records
in the runtime's key order are parsed by one one-pass regex; any other record
goes to an order-free tier (one pattern per field plus a whole-record shape
check). A name ends at the first ``"`` followed by ``,"<known key>":`` or
``}``, and the record with that name removed must still be one JSON object;
a name containing ``},{`` cannot be told apart from two records and makes the
file an error, never a silent mis-parse.

``ts``/``dur`` are µs with 6 decimals on the device clock; they are converted
from their text, without floats, to integer ns (``ts_ns``, ``dur_ns``), the
sub-ns digits rounded half up. Strings repeated on every row (names, func names,
canonical ops) are computed once per distinct name and joined back, which
keeps memory well under three times the file size.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from sk_analytics.errors import InputError
from sk_analytics.files.io_seam import reading
from sk_analytics.ingest.base import ParseResult, relative_source
from sk_analytics.ingest.canonical import canonical_op_expr
from sk_analytics.schema import SK_EVENTS

FILE_NAME = re.compile(r"^(?:sk_prof_device|sk_event_dev_device)_([0-9]+)\.json$")
"""Current and legacy trace file names; the number is the device id."""

CHUNK_BYTES = 8 << 20
"""Bytes read per chunk; records are re-assembled across chunk borders. 8 MiB: as fast as 16 (issue 47)
with a lower peak (the chunk, the one read ahead and the fields of one are held at a time)."""

MAX_WHOLE_US_DIGITS = 15
"""Integer µs digits accepted in ts/dur (10^15 µs ≈ 31 years; ×1000 fits Int64)."""

_WS = "[ \t\r\n]*"
_SEPARATOR = rf"\}}({_WS},{_WS})\{{"
_SPLIT_MARK = "\x1e"
_KEYS = "ph|name|pid|tid|ts|dur|args|cat|id|modelId|modelRI|skId|nodeId"
_END = rf'"?{_WS}[,}}]'
"""What may follow a number of the generic tier: its closing quote, then the next member or the object's end
(``"dur":1e3`` or ``"skId":12.5`` is no number the tier reads; it read 1 and 12 of them)."""
_NUMBER = rf'"?([0-9]+)(?:\.([0-9]+))?{_END}'
_DIGITS_FIELD = rf'"?([0-9]+){_END}'
_NAME_END = rf'("{_WS}(?:,{_WS}"(?:{_KEYS})"{_WS}:|\}}))'
_QUICK_NAME = rf'"name"{_WS}:{_WS}"([^"]*)"'
_NAME_FIELD = rf'"name"{_WS}:{_WS}"([\s\S]*?){_NAME_END}'
_STRIP = " \t\r\n,"
"""Stripped from both ends of a record text: whitespace and the separator's comma."""
HEAD_BYTES = 4096
"""Bytes read before the file head (``[`` or ``{"traceEvents": [``) is matched."""
_RAW = ["ph", "name", "lane", "core", "ts_whole", "ts_frac", "dur_whole", "dur_frac", "model_id", "model_ri",
        "sk_id", "node_id"]
"""Text columns both parsing tiers produce for every record."""
_BATCH_COLUMNS = ["record", "lane", "core", "ts_ns", "dur_ns", "model_id", "sk_id", "node_id", "name"]
"""What a parsed batch holds (``name`` categorical), whichever pass parsed it."""
_FIELDS: dict[str, tuple[str, tuple[str, ...]]] = {
    "ph": (rf'"ph"{_WS}:{_WS}"([^"]*)"', ("ph",)),
    "lane": (rf'"pid"{_WS}:{_WS}"([^"]*)"', ("lane",)),
    "core": (rf'"tid"{_WS}:{_WS}{_DIGITS_FIELD}', ("core",)),
    "ts": (rf'"ts"{_WS}:{_WS}{_NUMBER}', ("ts_whole", "ts_frac")),
    "dur": (rf'"dur"{_WS}:{_WS}{_NUMBER}', ("dur_whole", "dur_frac")),
    "model_id": (rf'"modelId"{_WS}:{_WS}"([^"]*)"', ("model_id",)),
    "model_ri": (rf'"modelRI"{_WS}:{_WS}{_DIGITS_FIELD}', ("model_ri",)),
    "sk_id": (rf'"skId"{_WS}:{_WS}{_DIGITS_FIELD}', ("sk_id",)),
    "node_id": (rf'"nodeId"{_WS}:{_WS}{_DIGITS_FIELD}', ("node_id",)),
}
"""Generic tier: one pattern per field (any key order, any JSON whitespace)."""
_SP = " ?"
_COMPACT = (
    rf'\A\{{{_SP}"(?:name":{_SP}"(?P<name_a>[^"]*)",{_SP}"ph":{_SP}"(?P<ph_a>[^"]*)"'
    rf'|ph":{_SP}"(?P<ph_b>[^"]*)",{_SP}"name":{_SP}"(?P<name_b>[^"]*)"),{_SP}'
    rf'"pid":{_SP}"(?P<lane>[^"]*)",{_SP}"tid":{_SP}(?P<core>[0-9]+),{_SP}'
    rf'"ts":{_SP}(?P<ts_whole>[0-9]+)(?:\.(?P<ts_frac>[0-9]+))?,{_SP}'
    rf'"dur":{_SP}(?P<dur_whole>[0-9]+)(?:\.(?P<dur_frac>[0-9]+))?,{_SP}'
    rf'"args":{_SP}\{{{_SP}"model(?:Id":{_SP}"(?P<model_id>[^"]*)"|RI":{_SP}(?P<model_ri>[0-9]+)),{_SP}'
    rf'"skId":{_SP}(?P<sk_id>[0-9]+)(?:,{_SP}"nodeId":{_SP}(?P<node_id>[0-9]+))?{_SP}\}}{_SP}\}}\z'
)
"""Fast tier: the runtime's layout (name/ph first, then pid, tid, ts, dur, args),
at most one space after ``:``/``,``. A one-pass regex, several times faster than
the generic tier; records it does not match go to the generic tier."""
_STRING = r'"[^"\\]*(?:\\.[^"\\]*)*"'
_SCALAR = rf'(?:{_STRING}|-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?|true|false|null)'
_MEMBER = rf"{_STRING}{_WS}:{_WS}{_SCALAR}"
_OBJECT = rf"\{{{_WS}(?:{_MEMBER}(?:{_WS},{_WS}{_MEMBER})*)?{_WS}\}}"


def _record_shape(name: str) -> str:
    """One JSON object of scalar members and one-level objects; the name value is
    matched by ``name`` (it is not escaped, so it is not a JSON string)."""
    member = rf'(?:"name"{_WS}:{_WS}"{name}"|{_STRING}{_WS}:{_WS}(?:{_SCALAR}|{_OBJECT}))'
    return rf"\A\{{{_WS}{member}(?:{_WS},{_WS}{member})*{_WS}\}}\z"


_SHAPE = _record_shape('[^"]*')
_NAME = r"\A\[([0-9]+)/([0-9]+)\]( ?)([\s\S]*)\z"
_EMPTY = rf"\A\{{{_WS}\}}\z"
_BWS = rb"[ \t\r\n]*"
_HEAD = re.compile(rb"\A(?:\xef\xbb\xbf)?" + _BWS + rb'(?:\[|\{[\s\S]*?"traceEvents"' + _BWS + b":" + _BWS + rb"\[)" + _BWS)
_TAIL_ARRAY = re.compile(_BWS + rb"\]" + _BWS + rb"\Z")
_TAIL_OBJECT = re.compile(_BWS + rb"\]" + _BWS + rb"\}" + _BWS + rb"\Z")
_AFTER_END = re.compile(rb"\{" + _BWS + rb"\}" + _BWS + rb"\](?:" + _BWS + rb"\})?" + _BWS + rb"(?=[^ \t\r\n])")
"""The runtime's end marker ``{}]`` (``{}]}`` in the object form) followed by more text."""


def device_id_of(path: Path) -> int:
    """Device id from ``sk_prof_device_<id>.json`` / ``sk_event_dev_device_<id>.json``."""
    match = FILE_NAME.match(path.name)
    if match is None:
        raise InputError(path, "not an SK time profiling file name",
                         expected="sk_prof_device_<id>.json or sk_event_dev_device_<id>.json")
    return int(match.group(1))


def parse_sk_prof(path: Path, *, root: Path | None = None) -> ParseResult:
    """Parse one SK time profiling trace into ``sk_events`` rows (device clock)."""
    frame, warnings = sk_prof_events(path, root=root)
    return ParseResult(SK_EVENTS, SK_EVENTS.conform(frame), path, warnings)


def sk_prof_events(
    path: Path, *, root: Path | None = None, columns: Sequence[str] | None = None
) -> tuple[pl.DataFrame, list[str]]:
    """The ``sk_events`` columns ``columns`` (all by default; typed as the table's) of one trace, and the
    parser warnings. Every record is checked whatever the columns; a caller that reads only the
    timing columns (dcci-diff) skips deriving the name columns of every row.

    The chunks are parsed one after another, each in one pass of Polars' own threads: a chunk in the
    runtime's layout by :func:`_runtime_layout`, any other by the regex tiers."""
    device_id = device_id_of(path)
    warnings: list[str] = []
    wanted = list(SK_EVENTS.column_names if columns is None else columns)
    names = any(c in _NAME_COLUMNS for c in wanted)
    kept = _BATCH_COLUMNS if names else _BATCH_COLUMNS[:-1]
    parts = [
        batch.events if batch.events is not None else _parse_batch(path, batch, warnings).select(kept)
        for batch in _batches(path, names=names)
    ]
    events = pl.concat(parts, how="vertical")  # _batches always yields the end-of-file batch
    frame = _finish(events, device_id, relative_source(path, root), wanted)
    return frame.select(pl.col(c).cast(SK_EVENTS.schema[c]) for c in wanted), warnings


@dataclass
class _Batch:
    """Record texts of one chunk: ``record`` index, 1-based ``line`` of its start, ``text``."""

    records: pl.DataFrame
    at_eof: bool
    closed: bool
    """At the end of the file: whether the array (or object) was closed."""
    records_before: int = 0
    """Records of the file in earlier batches (a cut exactly at a batch boundary leaves this batch empty)."""
    events: pl.DataFrame | None = None
    """The batch's event rows when :func:`_runtime_layout` parsed it (``records`` is then empty)."""


def _batches(path: Path, *, names: bool = True) -> Iterator[_Batch]:
    """Read the file in chunks of bytes and cut each into record texts; the last,
    possibly cut, record of a chunk is carried into the next one."""
    carry, line, record, first = b"", 1, 0, True
    # two chunk buffers, filled in turn: the chunk being parsed and the one read ahead (reused, not
    # allocated per chunk: fresh buffers were a third of the parse's page faults)
    buffers = [bytearray(CHUNK_BYTES), bytearray(CHUNK_BYTES)]
    with reading(path, "SK time profiling file"), open(path, "rb") as fh:

        def fill(turn: int) -> memoryview:
            return memoryview(buffers[turn])[: fh.readinto(buffers[turn])]

        ahead, turn = fill(0), 1
        while True:
            # one chunk read ahead: the last chunk of the file is parsed knowing it is the last, with its close
            raw = ahead
            ahead = fill(turn) if raw else memoryview(b"")
            turn ^= 1
            at_eof = not ahead
            end = buffers[turn].rfind(b"\n", 0, len(raw)) + 1  # raw lies in the buffer not just filled
            middle = not first and not at_eof and end > 0
            if middle:
                # a middle chunk: the fields pass reads the carry and the chunk up to its last newline, one copy
                fast = _runtime_layout([carry, raw[:end]], record, names=names)
                if fast is not None:
                    events, records, lines = fast
                    yield _Batch(_NO_RECORDS, at_eof, True, record, events)
                    record, line, carry = record + records, line + lines, bytes(raw[end:])
                    continue
            data = carry + raw
            if first:
                if not at_eof and len(data) < HEAD_BYTES:
                    carry = data
                    continue
                body = _head_end(path, data)
                line += data.count(b"\n", 0, body)
                data, first = data[body:], False
            closed = True
            if at_eof:
                data, closed = _strip_tail(data)
                if not closed:
                    _refuse_text_after_end(path, data, line)
            cut = len(data) if at_eof else data.rfind(b"\n") + 1
            # an unclosed trace's last chunk goes to the regex tiers, which find where the writer stopped;
            # a middle chunk here was already refused by the fields pass
            fast = _runtime_layout([memoryview(data)[:cut]], record, names=names) if closed and not middle else None
            if fast is not None:
                events, records, lines = fast
                yield _Batch(_NO_RECORDS, at_eof, closed, record, events)
                record += records
                line += lines  # a chunk that is not the last ends with its last newline
                carry = data[cut:]
            else:
                pieces, carry, line = _split(path, data, line, keep_last=not at_eof)
                pieces = pieces.filter(pl.col("text") != "").with_row_index("record", offset=record)
                yield _Batch(pieces.with_columns(pl.col("record").cast(pl.Int64)), at_eof, closed, record)
                record += pieces.height
            if at_eof:
                return


_FIELDS_PER_LINE = 12
"""Comma-separated fields read per line by the runtime-layout pass (a record has 8 or 9, then trailing commas)."""
_FIELD_HEADER = ",".join(f"f{i}" for i in range(_FIELDS_PER_LINE)).encode() + b"\n"
_NO_RECORDS = pl.DataFrame(schema={"record": pl.Int64, "line": pl.Int64, "text": pl.Utf8})
_DIGITS = "[0-9]+"
_US = rf"{_DIGITS}(?:\.{_DIGITS})?"


def _runtime_layout(
    parts: Sequence[bytes | memoryview], first_record: int, *, names: bool
) -> tuple[pl.DataFrame, int, int] | None:
    """Event rows (as :func:`_parse_batch` returns them, ``name`` only when ``names``), the record count
    and the line count of the text ``parts`` (joined) when every line of it is one record in the runtime's
    layout, or ``{}``, or empty; None otherwise.

    The runtime writes ``{"ph":"X","name":"…","pid":"AIC","tid":0,"ts":…,"dur":…,"args":{"modelId":"…"
    (or "modelRI":n),"skId":n[,"nodeId":n]}},`` a line. Polars' CSV reader cuts the lines at their commas
    in one multi-threaded pass and one query checks and types every field: each must be the layout's,
    exactly as the fast regex tier (``_COMPACT`` without its optional spaces) matches it, and every value
    valid. Anything else (a comma, quote or ``}`` in a name, another key order, spaces, a bad or cut
    record) returns None, and the regex tiers parse the chunk and name the bad record. Names repeat on
    most rows: they are checked once per distinct name."""
    text = b"".join((_FIELD_HEADER, *parts))
    try:
        cells = pl.read_csv(
            text, has_header=True, separator=",", quote_char=None, infer_schema=False,
            truncate_ragged_lines=False, raise_if_empty=False,
        )
    except pl.exceptions.PolarsError:
        return None  # not UTF-8, or a line of more fields than a record has
    lines = cells.height  # Polars cuts at "\n" only and reads an empty line as a row of nulls: a row a line
    if cells.width != _FIELDS_PER_LINE:
        return None
    f = [pl.col(f"f{i}") for i in range(_FIELDS_PER_LINE)]
    ph_first = f[0] == '{"ph":"X"'
    has_node = f[8].is_not_null()
    model = f[6].str.slice(8, 9)
    # per row: the fields there are and the high-cardinality ones; the few distinct values of the others below
    layout = (
        pl.when(ph_first).then(f[1].str.starts_with('"name":"')).otherwise(f[0].str.starts_with('{"name":"') & (f[1] == '"ph":"X"'))
        & f[2].is_in(['"pid":"AIC"', '"pid":"AIV"'])
        & pl.all_horizontal(c.is_not_null() for c in f[3:8])
        & (f[7].str.ends_with("}}") != has_node)
        & f[4].str.contains(rf'\A"ts":{_US}\z')
        & f[5].str.contains(rf'\A"dur":{_US}\z')
        & pl.all_horizontal(c.is_null() for c in f[9:])
    ).fill_null(False)
    distinct = [
        (f[3], rf'\A"tid":{_DIGITS}\z'),
        (f[6], rf'\A"args":\{{"model(?:RI":{_DIGITS}|Id":"[^"]*")\z'),
        (f[7], rf'\A"skId":{_DIGITS}(?:\}}\}})?\z'),
        (f[8], rf'\A"nodeId":{_DIGITS}\}}\}}\z'),
    ]
    checks = cells.lazy().select(*(c.drop_nulls().unique().str.contains(pattern).all().alias(f"ok{i}")
                                    for i, (c, pattern) in enumerate(distinct)))
    if not all(checks.collect().row(0)):
        return None
    empty = ((f[0] == "{}") & pl.all_horizontal(c.is_null() for c in f[1:])).fill_null(False)
    rows = (
        cells.lazy()
        .filter(~pl.all_horizontal(c.is_null() for c in f))  # empty lines (or commas only) are no records
        .with_row_index("record", offset=first_record)
        .select(
            pl.col("record").cast(pl.Int64), empty.alias("empty"), layout.alias("layout"),
            pl.when(ph_first).then(f[1]).otherwise(f[0]).alias("name_field"),
            f[2].str.slice(7, 3).alias("lane"),
            _int_text(f[3].str.slice(6)).alias("core"),
            _us_number_to_ns(f[4].str.slice(5)).alias("ts_ns"),
            _us_number_to_ns(f[5].str.slice(6)).alias("dur_ns"),
            pl.when(model == '"modelId"').then(f[6].str.slice(19).str.head(-1))
            .when(model == '"modelRI"').then(f[6].str.slice(18)).alias("model_id"),
            _int_text(pl.when(has_node).then(f[7].str.slice(7)).otherwise(f[7].str.slice(7).str.head(-2))).alias("sk_id"),
            _int_text(f[8].str.slice(9).str.head(-2)).alias("node_id"),
        )
        .collect()
    )
    valid = pl.col("empty") | (pl.col("layout") & pl.all_horizontal(pl.col(c).is_not_null() for c in ("core", "ts_ns", "dur_ns", "sk_id")))
    if not rows.select(valid.all()).item():
        return None  # not the layout, or a number too large: the regex tiers report it
    events = rows.filter(~pl.col("empty"))
    field = pl.col("name_field")
    name = field.str.slice(pl.when(field.str.starts_with("{")).then(9).otherwise(8)).str.head(-1)
    good_name = (
        field.str.ends_with('"') & ~name.str.contains('"', literal=True)
        & ~name.str.contains("}", literal=True)  # never a record separator "},{" inside one line
        & name.str.contains(_NAME)
    )
    if not events.select(field.unique()).select(good_name.all()).item():
        return None
    out = events.select(*_BATCH_COLUMNS[:-1], *([name.cast(pl.Categorical).alias("name")] if names else []))
    return out, rows.height, lines


def _split(path: Path, data: bytes, line: int, *, keep_last: bool) -> tuple[pl.DataFrame, bytes, int]:
    """Stripped record texts with the line they start on, the carried tail (when
    ``keep_last``) and the line it starts on. Fast path: one record per line (the
    runtime's layout), lines cut by Polars' CSV reader; otherwise the text is cut
    at the ``},{`` separators."""
    cut = data.rfind(b"\n") + 1 if keep_last else len(data)
    lines = _lines(path, data[:cut], line)
    one_per_line = (lines == "") | (
        lines.str.starts_with("{") & lines.str.ends_with("}") & ~lines.str.contains(_SEPARATOR)
    )
    if one_per_line.all():
        frame = pl.DataFrame({"line": pl.int_range(line, line + lines.len(), eager=True, dtype=pl.Int64), "text": lines})
        return frame, data[cut:], line + lines.len()
    text, rest = _decode(path, data, line, final=not keep_last)
    segments = (
        pl.Series("text", [text], dtype=pl.Utf8)
        .str.replace_all(_SEPARATOR, "}${1}" + _SPLIT_MARK + "{")
        .str.split(_SPLIT_MARK)
        .explode()
    )
    newlines = segments.str.count_matches("\n").cast(pl.Int64)
    starts = line + newlines.cum_sum().shift(1, fill_value=0)
    frame = pl.DataFrame({"line": starts, "text": segments.str.strip_chars(_STRIP)})
    if not keep_last:
        return frame, b"", line + int(newlines.sum())
    return frame.head(frame.height - 1), segments[-1].encode() + rest, int(starts[-1])


def _lines(path: Path, body: bytes, line: int) -> pl.Series:
    """The lines of ``body`` (whitespace and separator commas stripped)."""
    expected = body.count(b"\n") + (0 if not body or body.endswith(b"\n") else 1)
    try:
        lines = pl.read_csv(
            body, has_header=False, separator="\x1f", quote_char=None, schema={"text": pl.Utf8},
            raise_if_empty=False, truncate_ragged_lines=False,
        ).get_column("text")
    except pl.exceptions.PolarsError:
        lines = None  # not UTF-8 (reported below) or a unit separator inside a line
    if lines is None or lines.len() != expected:
        text, _ = _decode(path, body, line, final=True)
        lines = pl.Series("text", text.split("\n")[:expected], dtype=pl.Utf8)
    return lines.fill_null("").str.strip_chars(_STRIP)


def _decode(path: Path, data: bytes, line: int, *, final: bool) -> tuple[str, bytes]:
    """UTF-8 text of ``data`` and the bytes of a character cut at its end (kept for the next chunk)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        text = decoder.decode(data, final=final)
    except UnicodeDecodeError as exc:
        bad = line + data.count(b"\n", 0, exc.start)
        raise InputError(path, f"not UTF-8 text ({exc.reason})", line=bad, expected="a UTF-8 JSON trace") from exc
    rest = decoder.getstate()[0]
    return text, rest


def _head_end(path: Path, data: bytes) -> int:
    """Byte offset of the first record (after ``[`` or the object form's ``{"traceEvents": [``)."""
    if data.strip(b" \t\r\n") in (b"", b"\xef\xbb\xbf"):
        return len(data)  # an empty file: reported as truncated before any record
    head = _HEAD.match(data)
    if head is None:
        raise InputError(path, "does not start a trace event array", line=1,
                         expected='a JSON array "[...]" or an object {"traceEvents": [...]}')
    return head.end()


def _strip_tail(data: bytes) -> tuple[bytes, bool]:
    """``data`` without the array/object close; whether the close was there."""
    tail = data[-4096:]
    for pattern in (_TAIL_OBJECT, _TAIL_ARRAY):
        match = pattern.search(tail)
        if match is not None:
            return data[: len(data) - len(tail) + match.start()], True
    return data, False


def _refuse_text_after_end(path: Path, data: bytes, line: int) -> None:
    """A closed trace followed by more text (two traces concatenated, an editor's
    leftovers) is not a truncated one: refuse it instead of reporting truncation."""
    tail_start = max(0, len(data) - 4096)
    matches = list(_AFTER_END.finditer(data, tail_start))
    match = matches[-1] if matches else None
    if match is not None:
        where = line + data.count(b"\n", 0, match.end())
        raise InputError(path, "text after the end of the trace array", line=where,
                         expected='nothing but whitespace after the closing "{}]"')


def _parse_batch(path: Path, batch: _Batch, warnings: list[str]) -> pl.DataFrame:
    """Typed event rows of a batch (``{}`` records dropped); InputError on a bad record."""
    groups = pl.col("text").str.extract_groups(_COMPACT)
    records = batch.records.with_columns(groups.alias("g")).with_columns(
        pl.col("g").struct.field("lane").is_not_null().alias("fast")
    )
    fast = records.filter(pl.col("fast")).select(
        "record", "line", "text",
        pl.coalesce(_group("ph_a"), _group("ph_b")).alias("ph"),
        pl.coalesce(_group("name_a"), _group("name_b")).alias("name"),
        *[_group(c) for c in _RAW[2:]],
        pl.lit(True).alias("shaped"), pl.lit(False).alias("empty"), pl.lit(None, dtype=pl.Utf8).alias("twice"),
    )
    fields = pl.concat([fast, _generic_fields(records.filter(~pl.col("fast")).select("record", "line", "text"))])
    fields = fields.sort("record").with_columns(_typed_columns()).with_columns(_problem().alias("problem"))
    if batch.at_eof and not batch.closed:
        fields = _truncate(path, fields, warnings, batch.records_before)
    bad = fields.filter(pl.col("problem").is_not_null())
    if bad.height:
        row = bad.row(0, named=True)
        raise InputError(path, f"bad trace event: {row['problem']}", line=row["line"], record=row["record"],
                         expected='{"ph":"X","name":"[i/n]…","pid":"AIC|AIV","tid":n,"ts":µs,"dur":µs,"args":{…}}')
    return fields.filter(~pl.col("empty")).select(*_BATCH_COLUMNS[:-1], pl.col("name").cast(pl.Categorical))


def _group(name: str) -> pl.Expr:
    return pl.col("g").struct.field(name)


def _generic_fields(records: pl.DataFrame) -> pl.DataFrame:
    """The generic tier: one pattern per field, record shape checked separately."""
    extracted = records.with_columns(
        pl.col("text").str.contains(_EMPTY).alias("empty"),
        pl.col("text").str.contains(_SHAPE).alias("shaped"),
        pl.col("text").str.extract(_QUICK_NAME, 1).alias("name"),
        *[pl.col("text").str.extract_groups(pattern).alias(f) for f, (pattern, _) in _FIELDS.items()],
    ).with_columns(
        pl.col(f).struct.field(str(i + 1)).alias(column)
        for f, (_, columns) in _FIELDS.items() for i, column in enumerate(columns)
    )
    odd = ~pl.col("shaped") & ~pl.col("empty")
    extracted = extracted.with_columns(_twice(pl.when(odd).then(pl.col("text").str.replace(_NAME_FIELD, '"name":"${2}'))
                                              .otherwise(pl.col("text"))).alias("twice"))
    if extracted.select(odd.any()).item():  # a name with quotes (or a bad record): the slower, exact patterns
        extracted = extracted.with_columns(
            pl.when(odd).then(pl.col("text").str.extract(_NAME_FIELD, 1)).otherwise(pl.col("name")).alias("name"),
            # the record with that name emptied must have the strict shape (the name cannot hide structure)
            pl.when(odd)
            .then(pl.col("text").str.replace(_NAME_FIELD, '"name":"${2}').str.contains(_SHAPE))
            .otherwise(pl.col("shaped"))
            .alias("shaped"),
        )
    return extracted.select("record", "line", "text", *_RAW, "shaped", "empty", "twice")


_KEY_PATTERNS = {key: rf'"{key}"{_WS}:' for key in ("ph", "name", "pid", "tid", "ts", "dur", "args", "modelId", "modelRI", "skId", "nodeId")}


def _twice(text: pl.Expr) -> pl.Expr:
    """The first key of the layout a record names more than once (null when none): the tier reads the first of
    them, so ``"dur":1.0,"dur":27.473`` would be a 1 µs event where the file also says 27.473 µs."""
    expr = pl.lit(None, dtype=pl.Utf8)
    for key, pattern in reversed(_KEY_PATTERNS.items()):
        expr = pl.when(text.str.count_matches(pattern) > 1).then(pl.lit(key)).otherwise(expr)
    return expr


def _us_to_ns(field: str) -> pl.Expr:
    """Integer ns of a ``<int>[.<frac>]`` µs text, sub-ns digits rounded half up; null when too large."""
    whole = pl.col(f"{field}_whole")
    frac = pl.col(f"{field}_frac").fill_null("").str.pad_end(4, "0")
    ns = (
        whole.cast(pl.Int64, strict=False) * 1000
        + frac.str.slice(0, 3).cast(pl.Int64, strict=False)
        + (frac.str.slice(3, 1) >= "5").cast(pl.Int64)
    )
    return pl.when(whole.str.len_chars() <= MAX_WHOLE_US_DIGITS).then(ns)


def _us_number_to_ns(text: pl.Expr) -> pl.Expr:
    """:func:`_us_to_ns` of a whole ``<int>[.<frac>]`` text (already checked to be one) of at most
    :data:`_EXACT_FRACTION_DIGITS` fraction digits, read as an exact decimal: ns = µs × 1000 + 0.5,
    truncated (a third of the string work). Null otherwise (then the regex tiers take the chunk)."""
    dot = text.str.find(".", literal=True).cast(pl.Int64)
    length = text.str.len_bytes().cast(pl.Int64)
    fraction_digits = (length - dot - 1).fill_null(0)
    ns = (text.cast(_EXACT_US, strict=False) * 1000 + pl.lit(0.5).cast(pl.Decimal(38, 1))).cast(pl.Int64, strict=False)
    return pl.when((dot.fill_null(length) <= MAX_WHOLE_US_DIGITS) & (fraction_digits <= _EXACT_FRACTION_DIGITS)).then(ns)


_EXACT_FRACTION_DIGITS = 6
"""Fraction digits of a µs number the fields pass converts (the runtime writes 6)."""
_EXACT_US = pl.Decimal(38, _EXACT_FRACTION_DIGITS)


def _int_text(text: pl.Expr) -> pl.Expr:
    """Int64 of a digit text; null when it does not fit."""
    return text.cast(pl.Int64, strict=False)


def _int(field: str) -> pl.Expr:
    return _int_text(pl.col(field))


def _typed_columns() -> list[pl.Expr]:
    return [
        pl.col("ph").alias("ph_text"),
        _int("core").alias("core"),
        _us_to_ns("ts").alias("ts_ns"),
        _us_to_ns("dur").alias("dur_ns"),
        pl.coalesce("model_id", "model_ri").alias("model_id"),
        _int("sk_id").alias("sk_id"),
        _int("node_id").alias("node_id"),
    ]


def _problem() -> pl.Expr:
    """First thing wrong with a record (null when it is a good event or ``{}``)."""
    name_ok = pl.col("name").str.contains(_NAME)
    checks: list[tuple[pl.Expr, str | pl.Expr]] = [
        (~pl.col("shaped"), "not one JSON object of scalar members and an args object"),
        (pl.col("twice").is_not_null(), pl.format('key "{}" given more than once (which of its values is meant is unknown)', "twice")),
        (pl.col("ph_text").is_null(), 'no "ph"'),
        (pl.col("ph_text") != "X", 'ph is not "X"'),
        (pl.col("name").is_null(), 'no "name"'),
        (~name_ok, "name lacks the [blockIdx/blockNum] prefix"),
        (pl.col("lane").is_null() | ~pl.col("lane").is_in(["AIC", "AIV"]), 'pid is not "AIC" or "AIV"'),
        (pl.col("core").is_null(), 'no integer "tid"'),
        (pl.col("ts_ns").is_null(), 'no "ts" number of at most 15 integer digits (plain digits[.digits], no exponent)'),
        (pl.col("dur_ns").is_null(), 'no "dur" number of at most 15 integer digits (plain digits[.digits], no exponent)'),
        (pl.col("model_id").is_null(), 'no args "modelId" (or legacy "modelRI")'),
        (pl.col("sk_id").is_null(), 'no integer args "skId"'),
    ]
    expr = pl.lit(None, dtype=pl.Utf8)
    for condition, message in reversed(checks):
        expr = pl.when(condition.fill_null(True)).then(pl.lit(message) if isinstance(message, str) else message).otherwise(expr)
    return pl.when(pl.col("empty")).then(pl.lit(None, dtype=pl.Utf8)).otherwise(expr)


def _truncate(path: Path, fields: pl.DataFrame, warnings: list[str], records_before: int) -> pl.DataFrame:
    """Unclosed array (killed writer): drop a bad last record and say where it stopped.

    ``fields`` are the last batch's records; ``records_before`` those of earlier batches."""
    if fields.height == 0:
        if records_before:  # cut exactly after a record that ended an earlier batch
            warnings.append(f"{path}: truncated after record {records_before - 1} (array not closed); kept every record")
        else:
            warnings.append(f"{path}: truncated before the first record (no trace events)")
        return fields
    last = fields.row(fields.height - 1, named=True)
    if last["problem"] is not None:
        warnings.append(
            f"{path}: truncated in record {last['record']} (line {last['line']}); "
            f"kept the {last['record']} complete records before it"
        )
        return fields.head(fields.height - 1)
    warnings.append(f"{path}: truncated after record {last['record']} (array not closed); kept every record")
    return fields


_NAME_COLUMNS = ("name", "block_idx", "block_num", "func_name", "canonical_op")
"""sk_events columns derived from the event name."""


def _finish(events: pl.DataFrame, device_id: int, source_file: str, columns: Sequence[str]) -> pl.DataFrame:
    """``columns`` of the parsed events: the constants and, when asked for, the columns derived from the
    name, computed once per distinct name and joined back (the string data is then shared, not repeated
    per row)."""
    frame = events.lazy()
    if "name" in events.columns:
        names = events.select(pl.col("name").unique()).with_columns(pl.col("name").cast(pl.Utf8).alias("name_text"))
        parts = pl.col("name_text").str.extract_groups(_NAME)
        names = names.with_columns(
            parts.struct.field("1").cast(pl.Int32).alias("block_idx"),
            parts.struct.field("2").cast(pl.Int32).alias("block_num"),
            parts.struct.field("4").alias("func_name"),
        ).with_columns(canonical_op_expr(pl.col("func_name")).alias("canonical_op_all"))
        frame = frame.join(names.lazy(), on="name", how="left", maintain_order="left").with_columns(
            pl.col("name_text").alias("name"),
            pl.when(pl.col("node_id").is_not_null()).then(pl.col("canonical_op_all")).alias("canonical_op"),
        )
    return (
        frame.with_columns(
            pl.lit(device_id, dtype=pl.Int32).alias("device_id"),
            pl.col("core").cast(pl.Int32),
            pl.col("node_id").is_null().alias("is_span"),
            pl.lit(source_file).alias("source_file"),
        )
        .select(columns)
        .collect()
    )
