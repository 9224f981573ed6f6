"""``super_kernel.log`` -> the ``sk_markers`` table (formats.md §3, §4).

Kept lines (logger prefix and ``[CONT:<n>]`` continuations undone, see
:mod:`sk_text`; every other line is skipped):

* ``phase``: ``Begin <Phase>`` / ``End <Phase>`` (``Begin aclskOptimize`` …);
* ``option_set``: ``OptionName: <name>, set value: <v>``;
* ``option_invalid``: ``OptionName: <name>, set value is invalid, value is <v>,
  valid range is [<a>, <b>], the process will use default value: <d>`` — the
  runtime silently fell back to its default, a probe failure;
* ``buffer_full``: ``[sk time profiling]  device <d> core <c> buffer is full,
  stop dump the time of nodes on device <d> core <c>`` — that core's later
  launches are missing from sk_prof, so no child-level attribution may be drawn
  from the trace (:func:`is_child_trace_complete`);
* ``sk_time_profiling``: any other ``[sk time profiling]`` line.

Buffer-full and invalid-option lines also become warnings of the ParseResult.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sk_analytics.errors import InputError
from sk_analytics.ingest.base import ParseResult, relative_source
from sk_analytics.ingest.sk_text import logical_lines, read_log_text, refuse_replaced
from sk_analytics.schema import SK_MARKERS

PHASE = r"^\s*(?:Begin|End) [A-Za-z_][A-Za-z0-9_]*(?:[^A-Za-z0-9_]|$)"
OPTION_INVALID = (
    r"OptionName: ([^,]+), set value is invalid, value is (.*), valid range is (\[[^\]]*\]), "
    r"the process will use default value: (.*?)\s*$"
)
OPTION_SET = r"OptionName: ([^,]+), set value: (.*?)\s*$"
SK_TIME_PROFILING = "[sk time profiling]"
BUFFER_FULL = (
    r"\[sk time profiling\] +device ([0-9]{1,9}) core ([0-9]{1,9}) buffer is full, "
    r"stop dump the time of nodes on device ([0-9]{1,9}) core ([0-9]{1,9})"
)
"""The runtime writes two spaces after ``]``; any number is accepted."""


def parse_super_kernel_log(path: Path, *, root: Path | None = None) -> ParseResult:
    """Parse one ``super_kernel.log`` into marker rows (plus warnings)."""
    lines = logical_lines(path, read_log_text(path, "super_kernel.log"))
    invalid = pl.col("payload").str.extract_groups(OPTION_INVALID)
    option = pl.col("payload").str.extract_groups(OPTION_SET)
    full = pl.col("payload").str.extract_groups(BUFFER_FULL)
    marked = lines.with_columns(invalid.alias("inv"), option.alias("opt"), full.alias("full")).with_columns(
        pl.when(pl.col("full").struct.field("1").is_not_null()).then(pl.lit("buffer_full"))
        .when(pl.col("payload").str.contains(SK_TIME_PROFILING, literal=True)).then(pl.lit("sk_time_profiling"))
        .when(pl.col("inv").struct.field("1").is_not_null()).then(pl.lit("option_invalid"))
        .when(pl.col("opt").struct.field("1").is_not_null()).then(pl.lit("option_set"))
        .when(pl.col("payload").str.contains(PHASE)).then(pl.lit("phase"))
        .alias("kind")
    ).filter(pl.col("kind").is_not_null())
    refuse_replaced(path, marked)
    mismatch = marked.filter(
        (pl.col("kind") == "buffer_full")
        & ((pl.col("full").struct.field("1") != pl.col("full").struct.field("3"))
           | (pl.col("full").struct.field("2") != pl.col("full").struct.field("4")))
    )
    if mismatch.height:
        raise InputError(path, "buffer-full line names two different device/core pairs", line=int(mismatch.item(0, "line")),
                         expected="... device <d> core <c> buffer is full, stop dump ... on device <d> core <c>")
    is_invalid = pl.col("kind") == "option_invalid"
    frame = marked.select(
        "kind",
        pl.col("full").struct.field("1").cast(pl.Int32).alias("device"),
        pl.col("full").struct.field("2").cast(pl.Int32).alias("core"),
        pl.when(is_invalid).then(pl.col("inv").struct.field("1"))
        .when(pl.col("kind") == "option_set").then(pl.col("opt").struct.field("1")).alias("option_name"),
        pl.when(is_invalid).then(pl.col("inv").struct.field("2"))
        .when(pl.col("kind") == "option_set").then(pl.col("opt").struct.field("2")).alias("value_text"),
        pl.when(is_invalid).then(pl.col("inv").struct.field("3")).alias("valid_range"),
        pl.when(is_invalid).then(pl.col("inv").struct.field("4")).alias("default_text"),
        pl.col("payload").str.strip_chars().alias("text"),
        "line",
        pl.lit(relative_source(path, root)).alias("source_file"),
    )
    return ParseResult(SK_MARKERS, SK_MARKERS.conform(frame), path, _warnings(path, frame))


def _warnings(path: Path, markers: pl.DataFrame) -> list[str]:
    """One warning per device with full buffers, one per option that fell back to its default."""
    warnings: list[str] = []
    full = (
        markers.filter(pl.col("kind") == "buffer_full")
        .group_by("device", maintain_order=True)
        .agg(pl.col("core").unique(maintain_order=True).sort(), pl.col("line").min())
    )
    for row in full.iter_rows(named=True):
        cores = ", ".join(str(c) for c in row["core"])
        warnings.append(
            f"{path}:{row['line']}: sk time profiling buffer full on device {row['device']} core(s) {cores}: "
            "the child trace is incomplete (no child-level attribution; shorten the collection window and re-collect)"
        )
    for row in markers.filter(pl.col("kind") == "option_invalid").iter_rows(named=True):
        warnings.append(
            f"{path}:{row['line']}: option {row['option_name']} value {row['value_text']} is outside "
            f"{row['valid_range']}; the runtime used the default {row['default_text']}"
        )
    return warnings


def buffer_full_cores(markers: pl.DataFrame | pl.LazyFrame, device: int | None = None) -> pl.DataFrame:
    """Distinct (device, core) pairs whose sk_prof buffer filled (optionally of one device)."""
    full = markers.lazy().filter(pl.col("kind") == "buffer_full")
    if device is not None:
        full = full.filter(pl.col("device") == device)
    return full.select("device", "core").unique().sort("device", "core").collect()


def is_child_trace_complete(markers: pl.DataFrame | pl.LazyFrame, device: int | None = None) -> bool:
    """True when no buffer-full marker exists (for ``device``, or for any device):
    only then may child-level attribution be drawn from the sk_prof trace."""
    return buffer_full_cores(markers, device).height == 0
