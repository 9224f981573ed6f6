"""Rank timing logs (``run-<k>/log_<rank>.log``) -> the ``timings`` table.

A line that mentions ``Inference time (`` is a timing line and must be one
whole (:data:`TIMING_LINE_PATTERN`): any text before it (a log prefix such as
torchrun's ``[default0]:``), then exactly one ``Inference time
(decode|prefill): <value> ms`` (formats.md §1), then only spaces, tabs or a
``\r`` up to the end of the line. A line that spells the marker otherwise
(:data:`NEAR_MISS_PATTERN`: another case, ``inference time (decode)``, or
other spacing, ``Inference time(decode)``) is a near miss of it. Every other
line is ignored. A timing line that is not this (text after the unit: ``12.5
ms 13.0 ms``, ``12.5 msec``; a second timing on the line), a near miss, or a
line whose value is not a plain positive decimal of at most
:data:`MAX_VALUE_CHARS` characters (a sign, an exponent, ``inf``, ``nan``,
``1.2.3``, ``0.000``) is bad input naming the file, the line and the expected
format, never a silently skipped or guessed sample. The value's decimal text is kept exactly (``value_text``)
beside its float view, because the Stage O stability spread is computed in
decimal arithmetic. Parsing is vectorized: the lines of every log of a
candidate become one Polars string column and the pattern is extracted from
all of them at once.

:func:`read_candidate` reads a whole candidate folder (every ``run-*``) into
one timings frame with a ``run`` column and validates it the way the
option-trial gate needs it (same rank count in every run, decode samples left
after warm-up).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from sk_analytics.errors import InputError, display_path
from sk_analytics.ingest.base import ParseResult, relative_source
from sk_analytics.ingest.discover import hollow_refusal
from sk_analytics.ingest.rank_log_defaults import DEFAULT_EXPECTED_RANKS, DEFAULT_WARMUP
from sk_analytics.ingest.text_stream import Piece, pieces
from sk_analytics.schema import IN_WARMUP, TIMINGS, WEIGHT

TIMING_PATTERN = r"Inference time \((decode|prefill)\): ([0-9.]+) ms"
"""The timing text of the existing Stage O tooling (kept verbatim)."""

LINE_END = r"[ \t\r]*$"
"""What may follow the unit of a timing line: spaces, tabs, a ``\r`` (CRLF logs), nothing else."""

TIMING_LINE_PATTERN = (r"Inference time \((?P<phase>decode|prefill)\): (?P<value>[0-9.]+) ms" + LINE_END)
"""A whole timing line from its ``Inference time (`` on (searched, so a log prefix before it is allowed)."""

IMPOSSIBLE_PATTERN = (r"Inference time \((?:decode|prefill)\): "
                      r"((?i:[-+][0-9.]+(?:e[-+]?[0-9]+)?|[-+]?[0-9.]*e[-+]?[0-9]+|[-+]?inf(?:inity)?|[-+]?nan)) ms")
"""A timing line whose number is signed, has an exponent, or is inf/nan: refused, not skipped."""

NEAR_MISS_PATTERN = r"(?i)inference\s*time\s*\("
"""A spelling of the marker in any case and spacing: on a line without the exact
``Inference time (`` it is a near miss of the format, refused (a case or a
missing space must not turn a sample into ignored text)."""

MAX_VALUE_CHARS = 32
"""Longest decimal text of a timing value (a measured millisecond figure has far fewer digits)."""

_MARKER = "Inference time ("

RANK_LOG = re.compile(r"^log_(\d+)\.log$")
RUN_DIR = re.compile(r"^run-(\d+)$")


def rank_of(path: Path) -> int:
    """Rank number of ``log_<rank>.log``; any other name is bad input."""
    match = RANK_LOG.match(path.name)
    if match is None:
        raise InputError(path, "not a rank timing log name", expected="log_<rank>.log")
    return int(match.group(1))


def run_index_of(folder: Path) -> int | None:
    """k of a ``run-<k>`` folder, or None when the folder has no number."""
    match = RUN_DIR.match(folder.name)
    return int(match.group(1)) if match else None


@dataclass(frozen=True)
class RankLog:
    """Identity of one rank log inside a parse: where its rows come from."""

    path: Path
    rank: int
    run_index: int | None
    source_file: str
    run: str


def _rank_log(path: Path, root: Path | None) -> RankLog:
    return RankLog(path, rank_of(path), run_index_of(path.parent), relative_source(path, root), path.parent.name)


def _lines(batch: list[Piece]) -> pl.LazyFrame:
    """One row per line of a batch of pieces: ``file_id``, 1-based ``line`` and
    ``text``; the split into lines happens in Polars."""
    pieces = pl.DataFrame(
        {"piece": list(range(len(batch))), "file_id": [p.file_id for p in batch],
         "first": [p.first_line for p in batch], "text": [p.text for p in batch]},
        schema={"piece": pl.Int32, "file_id": pl.Int32, "first": pl.Int32, "text": pl.Utf8},
    )
    return (
        pieces.lazy()
        .with_columns(pl.col("text").str.split("\n"))
        .explode("text")
        .with_columns((pl.int_range(pl.len(), dtype=pl.Int32).over("piece") + pl.col("first")).alias("line"))
        .drop("piece", "first")
    )


@dataclass(frozen=True)
class _Bad:
    """The first refused line of a batch: its log, line, what is wrong and what was expected."""

    file_id: int
    line: int
    message: str
    expected: str


_TIMING_EXPECTED = ("one 'Inference time (decode|prefill): <plain positive decimal> ms' per line (this case and spacing), "
                    "then only spaces, tabs or \\r to the end of the line")
_SHOWN_CHARS = 120
_UNIT = r"(?i)inference\s*time\s*\(\s*(?:decode|prefill)\s*\)\s*:\s*[0-9.]+\s*([^\W\d_]+)"
"""The unit of a timing line that is otherwise one (error path only)."""
_LOOSE = r"(?i)inference\s*time\s*\(\s*(?:decode|prefill)\s*\)\s*:\s*[0-9.]+\s*ms"
"""A timing line in any case and spacing (error path only): a near miss of the format."""


def _shown(text: str) -> str:
    """A refused line as the message shows it: whole when short, else from its ``Inference time (`` on, cut."""
    text = text.strip()
    if len(text) > _SHOWN_CHARS:
        text = text[text.find(_MARKER):]
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def _why_malformed(text: str) -> str:
    """What is wrong with a timing line that is not one whole (the error path: one line, plain ``re``)."""
    markers = text.count(_MARKER)
    if markers > 1:
        return f"; {markers} timings on one line"
    timing = re.search(TIMING_PATTERN, text)
    if timing is not None:
        return f"; text after the unit: {text[timing.end():].rstrip()[:40]!r}"
    unit = re.search(_UNIT, text)
    if unit is not None and unit.group(1) != "ms":
        return f"; unit {unit.group(1)!r}: the format's unit is 'ms'"
    if not markers or re.search(_LOOSE, text):
        return "; a near miss of the timing format (case or spacing)"
    return ""


def _bad_line(marked: pl.DataFrame) -> _Bad | None:
    """The first line that mentions ``Inference time (`` without being one whole timing line, or
    that is a near miss of it: an impossible value (sign, exponent, inf, nan) or any other malformed timing text."""
    wrong = marked.filter(pl.col("value_text").is_null() | (pl.col("markers") != 1))
    if not wrong.height:
        return None
    row = wrong.sort("file_id", "line").row(0, named=True)
    impossible = re.search(IMPOSSIBLE_PATTERN, row["text"])
    if impossible is not None:
        return _Bad(row["file_id"], row["line"], f"timing value {impossible.group(1)[:40]!r} cannot be a decode time",
                    "a plain positive decimal number of milliseconds (no sign, exponent, inf or nan)")
    return _Bad(row["file_id"], row["line"], f"malformed timing line {_shown(row['text'])!r}{_why_malformed(row['text'])}",
                _TIMING_EXPECTED)


def _bad_value(hits: pl.DataFrame) -> _Bad | None:
    """The first timing value that is too long, not a decimal number (``1.2.3``) or zero (``0.000``)."""
    wrong = hits.filter((pl.col("value_text").str.len_bytes() > MAX_VALUE_CHARS) | pl.col("value_ms").is_null()
                        | (pl.col("value_ms") == 0))
    if not wrong.height:
        return None
    row = wrong.row(0, named=True)
    text = row["value_text"]
    if len(text) > MAX_VALUE_CHARS:
        return _Bad(row["file_id"], row["line"], f"timing value of {len(text)} characters cannot be a decode time",
                    f"at most {MAX_VALUE_CHARS} characters")
    if row["value_ms"] is None:
        return _Bad(row["file_id"], row["line"], f"timing value {text!r} is not a decimal number", "digits with at most one '.'")
    return _Bad(row["file_id"], row["line"], f"timing value {text!r} ms is zero: no step takes no time",
                "a positive number of milliseconds")


def _extract(lines: pl.LazyFrame, logs: list[RankLog]) -> pl.DataFrame:
    """Timing samples of a batch at once: file_id, line, phase (is_decode), value_text, value_ms.

    Every line is a timing line (:data:`TIMING_LINE_PATTERN`, one sample), a
    line that does not mention ``Inference time (`` in any case or spacing
    (other log output), or refused: the first malformed line or near miss
    raises :class:`InputError` naming its file and line. One regex pass over
    the lines that mention the marker; the near-miss pattern looks only at the
    lines without it (a log of samples pays a literal search per line).
    """
    split = lines.with_columns(pl.col("text").str.contains(_MARKER, literal=True).alias("exact")).collect()
    others = split.filter(~pl.col("exact"))  # eager: the near-miss search runs on these rows only
    candidates = split if not others.height else pl.concat(  # a log of samples only: no copy, no near-miss search
        [split.filter(pl.col("exact")), others.filter(pl.col("text").str.contains(NEAR_MISS_PATTERN))])
    marked = (
        candidates.lazy()
        .select("file_id", "line", "text",
                pl.col("text").str.count_matches(_MARKER, literal=True).alias("markers"),
                pl.col("text").str.extract_groups(TIMING_LINE_PATTERN).alias("parts"))
        .unnest("parts")
        .rename({"value": "value_text"})
        .collect()
    )
    hits = (
        marked.lazy()
        .filter(pl.col("value_text").is_not_null() & (pl.col("markers") == 1))
        .select(
            "file_id",
            "line",
            (pl.col("phase") == "decode").alias("is_decode"),
            "value_text",
            pl.col("value_text").cast(pl.Float64, strict=False).alias("value_ms"),
        )
        .collect()
    )
    found = [bad for bad in (_bad_line(marked), _bad_value(hits)) if bad is not None]
    if found:
        first = min(found, key=lambda bad: (bad.file_id, bad.line))
        raise InputError(logs[first.file_id].path, first.message, line=first.line, expected=first.expected)
    return hits


BATCH_BYTES = 2 << 20
"""Logs are parsed in batches of about this much text (small logs share a
batch, a large one is cut at line ends into several): the decoded text and
its line split exist for one batch at a time, so memory stays near the size
of the parsed samples, never near the size of the files."""


def _batches(logs: list[RankLog]) -> Iterator[list[Piece]]:
    """The pieces of every log in order (:func:`~sk_analytics.ingest.text_stream.pieces`),
    cut into consecutive batches of about :data:`BATCH_BYTES` characters."""
    batch: list[Piece] = []
    size = 0
    for file_id, log in enumerate(logs):
        for piece in pieces(log.path, file_id, "rank log"):
            batch.append(piece)
            size += len(piece.text)
            if size >= BATCH_BYTES:
                yield batch
                batch, size = [], 0
    if batch:
        yield batch


def _per_file(logs: list[RankLog], field: str, dtype: pl.DataType) -> pl.Expr:
    """Column of ``field`` of each row's log (rows carry ``file_id``, the index in ``logs``)."""
    return pl.lit(pl.Series([getattr(log, field) for log in logs], dtype=dtype)).gather(pl.col("file_id"))


class _SampleCounter:
    """Running count of decode and prefill samples per log, so that ``sample_index``
    continues across the batches a log is cut into."""

    def __init__(self) -> None:
        self.seen: dict[tuple[int, bool], int] = {}

    def index(self, hits: pl.DataFrame) -> pl.Series:
        """``sample_index`` of ``hits`` (file_id, is_decode), counting on from earlier batches."""
        local = hits.select(pl.int_range(pl.len(), dtype=pl.Int32).over("file_id", "is_decode").alias("i"))
        offsets = dict(self.seen)
        counts = hits.group_by("file_id", "is_decode").len()
        for file_id, is_decode, n in counts.iter_rows():
            self.seen[(file_id, is_decode)] = self.seen.get((file_id, is_decode), 0) + n
        if not offsets:
            return local["i"].alias("sample_index")
        table = pl.DataFrame({"file_id": [k[0] for k in offsets], "is_decode": [k[1] for k in offsets], "offset": list(offsets.values())},
                             schema={"file_id": pl.Int32, "is_decode": pl.Boolean, "offset": pl.Int32})
        offset = hits.select("file_id", "is_decode").join(table, on=["file_id", "is_decode"], how="left", maintain_order="left")["offset"]
        index: pl.Series = local["i"] + offset.fill_null(0)
        return index.alias("sample_index")


def _parse_batch(logs: list[RankLog], batch: list[Piece], counter: _SampleCounter) -> pl.DataFrame:
    """``timings`` rows (plus ``run`` and ``file_id``, the index in ``logs``) of one batch;
    the first malformed line raises :class:`InputError` naming file and line.

    ``phase``, ``source_file`` and ``run`` are Categorical (a few distinct
    values over many rows: 4 bytes a row instead of a string view each);
    :meth:`Table.conform` casts them back to strings where a table is written.
    """
    hits = _extract(_lines(batch), logs)
    return hits.select(
        _per_file(logs, "run_index", pl.Int32()).alias("run_index"),
        _per_file(logs, "rank", pl.Int32()).alias("rank"),
        pl.when(pl.col("is_decode")).then(pl.lit("decode")).otherwise(pl.lit("prefill")).cast(pl.Categorical).alias("phase"),
        pl.lit(counter.index(hits)),
        "value_ms",
        "value_text",
        "line",
        _per_file(logs, "source_file", pl.Categorical()).alias("source_file"),
        _per_file(logs, "run", pl.Categorical()).alias("run"),
        "file_id",
    )


def _parse_logs(logs: list[RankLog]) -> pl.DataFrame:
    """``timings`` rows (plus ``run`` and ``file_id``, the index in ``logs``)
    of several rank logs, streamed and parsed vectorized a batch at a time
    (see :data:`BATCH_BYTES`). The first malformed line (see :func:`_extract`)
    or unreadable log raises :class:`InputError` naming it."""
    counter = _SampleCounter()
    frames = [_parse_batch(logs, batch, counter) for batch in _batches(logs)]
    return pl.concat(frames or [_parse_batch(logs, [], counter)], rechunk=False)


def parse_rank_log(path: Path, *, root: Path | None = None) -> ParseResult:
    """Parse one ``log_<rank>.log`` into ``timings`` rows (rank from the file
    name, run_index from a ``run-<k>`` parent folder)."""
    return parse_rank_logs([path], root=root)[0]


def parse_rank_logs(paths: Sequence[Path], *, root: Path | None = None) -> list[ParseResult]:
    """:func:`parse_rank_log` of several logs (results in the order of ``paths``)
    in one vectorized pass: the runner validates the rank logs of a run this
    way before it ingests them. The first malformed value raises :class:`InputError`."""
    logs = [_rank_log(Path(path), root) for path in paths]
    raw = _parse_logs(logs)
    frame = TIMINGS.conform(raw).with_columns(raw["file_id"])
    parts = frame.partition_by("file_id", as_dict=True, include_key=False)
    empty = frame.clear().drop("file_id")
    results = []
    for file_id, log in enumerate(logs):
        rows = parts.get((file_id,), empty)
        results.append(ParseResult(TIMINGS, rows, log.path, [] if rows.height else _no_timings(log)))
    return results


def stream_rank_log(path: Path, *, root: Path | None = None) -> Iterator[ParseResult]:
    """:func:`parse_rank_log` a batch at a time (:data:`BATCH_BYTES`): consecutive ``timings``
    rows of the log, so ``ingest`` can write a log of millions of samples without holding them.

    The rows, their order and ``sample_index`` are those of :func:`parse_rank_log`; the
    warnings of the results add up to its warnings (a log without samples ends with an
    empty result that says so). A malformed line raises :class:`InputError` in the batch
    that holds it, after the earlier batches were yielded."""
    logs = [_rank_log(Path(path), root)]
    counter = _SampleCounter()
    rows = 0
    for batch in _batches(logs):
        frame = TIMINGS.conform(_parse_batch(logs, batch, counter))
        rows += frame.height
        yield ParseResult(TIMINGS, frame, logs[0].path)
    if not rows:
        yield ParseResult(TIMINGS, TIMINGS.conform(_parse_batch(logs, [], counter)), logs[0].path, _no_timings(logs[0]))


def _no_timings(log: RankLog) -> list[str]:
    return [f"{display_path(log.path)}: no timing lines"]


def read_candidate(
    folder: Path,
    *,
    expected_ranks: int = DEFAULT_EXPECTED_RANKS,
    warmup: int = DEFAULT_WARMUP,
    root: Path | None = None,
) -> pl.DataFrame:
    """Every ``run-*/log_<rank>.log`` of a candidate (or baseline) folder as one
    timings frame with a ``run`` column (the run folder name).

    Bad input raises :class:`InputError`: a missing/empty folder, a run with
    a rank-log count other than ``expected_ranks``, an unreadable log, a
    malformed value, a rank with no decode sample left after ``warmup``.
    """
    logs = _candidate_logs(Path(folder), expected_ranks, warmup, root)
    frame = _parse_logs(logs)
    counts = frame.lazy().group_by("file_id").agg(pl.len().alias("all"), (pl.col("phase") == "decode").sum().alias("decode")).collect()
    _refuse_starved(logs, dict(zip(counts["file_id"], counts["decode"], strict=True)), warmup, set(counts["file_id"]))
    frame.drop_in_place("file_id")  # in place: `drop` would copy every (chunked) column
    return frame


COUNT_ROWS = 1_000_000
"""Rows of samples :func:`read_candidate_counts` holds before it counts them (about 50 MB)."""


def read_candidate_counts(
    folder: Path,
    *,
    expected_ranks: int = DEFAULT_EXPECTED_RANKS,
    warmup: int = DEFAULT_WARMUP,
    root: Path | None = None,
) -> pl.DataFrame:
    """:func:`read_candidate` in bounded memory, what :func:`~sk_analytics.option_trial.stats.split_samples` takes.

    While the parsed samples stay under :data:`COUNT_ROWS` rows this is
    :func:`read_candidate`'s frame itself (counting would cost more than it
    saves). Past it, the samples are counted each time that many rows have
    come: one row per log, phase, warm-up flag and distinct value (``run``,
    ``rank``, ``phase``, ``value_text``, ``value_ms``,
    :data:`~sk_analytics.option_trial.stats.WEIGHT`,
    :data:`~sk_analytics.option_trial.stats.IN_WARMUP`, ``source_file``), so
    memory follows the distinct values (a few thousand per rank for
    millisecond figures with three decimals), not the samples: a
    10-million-sample rank log is read in bounded memory. Same refusals as
    :func:`read_candidate`.
    """
    logs = _candidate_logs(Path(folder), expected_ranks, warmup, root)
    counter = _SampleCounter()
    frames: list[pl.DataFrame] = []
    rows = 0
    counted: pl.DataFrame | None = None
    for batch in _batches(logs):
        frames.append(_parse_batch(logs, batch, counter))
        rows += frames[-1].height
        if rows >= COUNT_ROWS:
            counted, frames, rows = _count(counted, frames, warmup), [], 0
    _refuse_starved(logs, {file_id: n for (file_id, is_decode), n in counter.seen.items() if is_decode}, warmup,
                    {file_id for file_id, _ in counter.seen})
    if counted is None:
        frame = pl.concat(frames or [_parse_batch(logs, [], counter)], rechunk=False)
        frame.drop_in_place("file_id")
        return frame
    return _count(counted, frames, warmup).select(
        _per_file(logs, "run", pl.Categorical()).alias("run"),
        _per_file(logs, "rank", pl.Int32()).alias("rank"),
        "phase", "value_text", "value_ms", WEIGHT, IN_WARMUP,
        _per_file(logs, "source_file", pl.Categorical()).alias("source_file"),
    )


def _count(counted: pl.DataFrame | None, frames: list[pl.DataFrame], warmup: int) -> pl.DataFrame:
    """``counted`` (file_id, phase, warm-up flag, value_text, value_ms, weight) with the samples of ``frames`` added."""
    keys = ["file_id", "phase", IN_WARMUP, "value_text"]
    new = [
        pl.concat(frames).lazy()
        .with_columns(((pl.col("phase") == "decode") & (pl.col("sample_index") < warmup)).alias(IN_WARMUP))
        .group_by(keys).agg(pl.col("value_ms").first(), pl.len().cast(pl.Int64).alias(WEIGHT))
    ] if frames else []
    parts = new + ([counted.lazy()] if counted is not None else [])
    return pl.concat(parts).group_by(keys).agg(pl.col("value_ms").first(), pl.col(WEIGHT).sum()).collect()


class RankCountError(InputError):
    """A run holds another number of rank logs than expected (a command line names the option that sets it)."""


def _candidate_logs(folder: Path, expected_ranks: int, warmup: int, root: Path | None) -> list[RankLog]:
    """The rank logs of every run of a candidate folder, in run and rank order (the folder checks of :func:`read_candidate`)."""
    if warmup < 0:
        raise InputError(folder, f"warm-up {warmup} is negative", expected="--warmup >= 0")
    if not folder.is_dir():
        raise InputError(folder, "not a folder", expected="a candidate folder holding run-*/log_<rank>.log")
    runs = sorted((p for p in folder.glob("run-*") if p.is_dir()), key=lambda p: (run_index_of(p) or 0, p.name))
    if not runs:
        raise InputError(folder, "no run-* folders found", expected="run-1/log_0.log ...")
    odd = next((run for run in runs if run.name != f"run-{run_index_of(run)}"), None)
    if odd is not None:  # run-2-old, run-3.bak, run-01: counted, it would be one run too many (or run 1 twice)
        raise InputError(odd, "not a run folder name",
                         expected="run-<k> (k without leading zeros) for every run-* folder: move other folders out of "
                                  f"{folder}")
    logs: list[RankLog] = []
    for run in runs:
        paths = sorted((p for p in run.glob("log_*.log") if RANK_LOG.match(p.name)), key=rank_of)
        if len(paths) != expected_ranks:
            raise RankCountError(run, f"found {len(paths)} rank logs", expected=f"{expected_ranks} (log_<rank>.log)")
        ranks = [rank_of(p) for p in paths]
        if len(set(ranks)) != len(ranks):
            duplicate = next(p for p, r in zip(paths, ranks, strict=True) if ranks.count(r) > 1)
            raise InputError(duplicate, f"rank {rank_of(duplicate)} has more than one log", expected="one log_<rank>.log per rank")
        names = [p.name for p in paths]
        present = set(names)
        missing = next((rank for rank in range(expected_ranks) if f"log_{rank}.log" not in present), None)
        if missing is not None:  # log_0 and log_2 of two ranks: rank 1 left out, a rank beyond the run's counted
            raise InputError(run, f"no log of rank {missing} (found {', '.join(names)})",
                                 expected=f"log_0.log … log_{expected_ranks - 1}.log, one per rank")
        logs += [_rank_log(p, root) for p in paths]
    return logs


def _refuse_starved(logs: list[RankLog], decode_counts: dict[int, int], warmup: int, sampled: set[int]) -> None:
    """Logs without any timing line (``file_id`` not in ``sampled``) are bad input, each named as ``ingest``
    names them (:func:`~sk_analytics.ingest.discover.hollow_refusal`); then the first log (by ``file_id``) with
    no decode sample after ``warmup``."""
    hollow = [log.path for file_id, log in enumerate(logs) if file_id not in sampled]
    if hollow:
        raise hollow_refusal(hollow)
    for file_id, log in enumerate(logs):
        n = decode_counts.get(file_id, 0)
        if n <= warmup:
            raise InputError(log.path, f"no decode samples remain after warmup={warmup} ({n} decode samples)",
                             expected=f"more than {warmup} decode samples per rank")
