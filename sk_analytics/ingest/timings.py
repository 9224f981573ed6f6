"""Rank timing logs (``run-<k>/log_<rank>.log``) -> the ``timings`` table.

A timing line matches ``Inference time \\((decode|prefill)\\): ([0-9.]+) ms``
(formats.md §1); every other line is ignored. The value's decimal text is
kept exactly (``value_text``) beside its float view, because the Stage O
stability spread is computed in decimal arithmetic. Parsing is vectorized:
the file becomes one Polars string column, the pattern is extracted from all
lines at once.

:func:`read_candidate` reads a whole candidate folder (every ``run-*``) into
one timings frame with a ``run`` column and validates it the way the
option-trial gate needs it (same rank count in every run, decode samples left
after warm-up).
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from sk_analytics.errors import InputError, display_path
from sk_analytics.ingest.base import ParseResult, relative_source
from sk_analytics.schema import TIMINGS

TIMING_PATTERN = r"Inference time \((decode|prefill)\): ([0-9.]+) ms"
"""The timing-line pattern of the existing Stage O tooling (kept verbatim)."""

_VALUE_SHAPE = r"^(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)$"
"""What ``[0-9.]+`` must also be to be a decimal number (``1.2.3`` is not)."""

RANK_LOG = re.compile(r"^log_(\d+)\.log$")
RUN_DIR = re.compile(r"^run-(\d+)$")

DEFAULT_EXPECTED_RANKS = 8
DEFAULT_WARMUP = 8


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


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8", errors="replace")
    except OSError as exc:
        raise InputError(path, f"cannot read rank log: {exc.strerror or exc}") from exc


def timings_from_text(text: str, *, rank: int, run_index: int | None, source_file: str) -> pl.DataFrame:
    """Timing rows of one log's text, conformed to ``TIMINGS``.

    Several matches on one line are all kept (the legacy tool used
    ``findall`` over the file). A match whose number is not a decimal
    (``1.2.3``) raises :class:`InputError` naming the line.
    """
    lines = pl.DataFrame({"text": text.split("\n")}).with_row_index("line", offset=1)
    hits = (
        lines.lazy()
        .filter(pl.col("text").str.contains("Inference time (", literal=True))
        .with_columns(pl.col("text").str.extract_all(TIMING_PATTERN).alias("hit"))
        .explode("hit")
        .drop_nulls("hit")
        .with_columns(pl.col("hit").str.extract_groups(TIMING_PATTERN).alias("g"))
        .select(
            pl.col("line").cast(pl.Int32),
            pl.col("g").struct.field("1").alias("phase"),
            pl.col("g").struct.field("2").alias("value_text"),
        )
        .collect()
    )
    bad = hits.filter(~pl.col("value_text").str.contains(_VALUE_SHAPE))
    if bad.height:
        first = bad.row(0, named=True)
        raise InputError(
            source_file,
            f"timing value {first['value_text']!r} is not a decimal number",
            line=first["line"],
            expected="digits with at most one '.'",
        )
    frame = hits.with_columns(
        pl.lit(run_index, dtype=pl.Int32).alias("run_index"),
        pl.lit(rank, dtype=pl.Int32).alias("rank"),
        pl.int_range(pl.len(), dtype=pl.Int32).over("phase").alias("sample_index"),
        pl.col("value_text").cast(pl.Float64).alias("value_ms"),
        pl.lit(source_file).alias("source_file"),
    )
    return TIMINGS.conform(frame)


def parse_rank_log(path: Path, *, root: Path | None = None) -> ParseResult:
    """Parse one ``log_<rank>.log`` into ``timings`` rows (rank from the file
    name, run_index from a ``run-<k>`` parent folder)."""
    path = Path(path)
    rank = rank_of(path)
    source = relative_source(path, root)
    frame = timings_from_text(_read_text(path), rank=rank, run_index=run_index_of(path.parent), source_file=source)
    warnings = [] if frame.height else [f"{display_path(path)}: no timing lines"]
    return ParseResult(TIMINGS, frame, path, warnings)


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
    folder = Path(folder)
    if not folder.is_dir():
        raise InputError(folder, "not a folder", expected="a candidate folder holding run-*/log_<rank>.log")
    runs = sorted(
        (p for p in folder.glob("run-*") if p.is_dir()),
        key=lambda p: (run_index_of(p) is None, run_index_of(p) or 0, p.name),
    )
    if not runs:
        raise InputError(folder, "no run-* folders found", expected="run-1/log_0.log ...")
    frames: list[pl.DataFrame] = []
    for run in runs:
        logs = sorted((p for p in run.glob("log_*.log") if RANK_LOG.match(p.name)), key=rank_of)
        if len(logs) != expected_ranks:
            raise InputError(run, f"found {len(logs)} rank logs", expected=f"{expected_ranks} (log_<rank>.log)")
        for log in logs:
            parsed = parse_rank_log(log, root=root).frame
            decode = parsed.filter(pl.col("phase") == "decode").height
            if decode <= max(warmup, 0):
                raise InputError(
                    log,
                    f"no decode samples remain after warmup={warmup} ({decode} decode samples)",
                    expected=f"more than {warmup} decode samples per rank",
                )
            frames.append(parsed.with_columns(pl.lit(run.name).alias("run")))
    frame = pl.concat(frames, how="vertical")
    check_candidate(frame, label=str(folder), expected_ranks=expected_ranks, warmup=warmup)
    return frame


def check_candidate(frame: pl.DataFrame, *, label: str, expected_ranks: int, warmup: int) -> None:
    """Validate a timings frame with a ``run`` column for the option-trial gate.

    Shared by raw-log and Parquet inputs so that both reject the same things.
    """
    if warmup < 0:
        raise InputError(label, f"warm-up {warmup} is negative", expected="--warmup >= 0")
    if frame.is_empty():
        raise InputError(label, "no timing samples", expected="run-*/log_<rank>.log with timing lines")
    per_run = frame.group_by("run").agg(pl.col("rank").n_unique().alias("ranks")).sort("run")
    wrong = per_run.filter(pl.col("ranks") != expected_ranks)
    if wrong.height:
        row = wrong.row(0, named=True)
        raise InputError(f"{label}/{row['run']}", f"found {row['ranks']} ranks", expected=str(expected_ranks))
    decode_left = (
        frame.filter(pl.col("phase") == "decode")
        .group_by("run", "rank", "source_file")
        .agg(pl.len().alias("n"))
    )
    all_ranks = frame.select("run", "rank", "source_file").unique()
    starved = (
        all_ranks.join(decode_left, on=["run", "rank", "source_file"], how="left")
        .with_columns(pl.col("n").fill_null(0))
        .filter(pl.col("n") <= warmup)
        .sort("run", "rank")
    )
    if starved.height:
        row = starved.row(0, named=True)
        raise InputError(
            row["source_file"],
            f"no decode samples remain after warmup={warmup} ({row['n']} decode samples)",
            expected=f"more than {warmup} decode samples per rank",
        )
