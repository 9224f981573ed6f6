"""``sk_fused_nodes.log`` -> the ``sk_structure`` table (formats.md §4).

One row per member of every fused SK: kernel members (``KernelInfos{…}``) and
event/memory members (``EventWait(…)``, ``EventNotify(…)``, ``EventReset(…)``,
``MemoryWrite(…)``, ``MemoryWait(…)``, ``type: Default``). Lines may carry the
logger prefix and ``[CONT:<n>]`` continuations (see :mod:`sk_text`).

Checks (one line each, naming the file and line):

* a member line that does not have the member shape, a member before any
  ``SK Function:`` header, an unknown event/memory payload -> :class:`InputError`;
* member indices ``[i]`` of an SK must be 0, 1, 2, … in order -> :class:`InputError`
  (the index is the sk_prof ``nodeId``; a gap would mis-attribute children);
* ``Node Count:`` different from the number of members -> a **warning**, rows
  kept: a killed process cuts the log in the middle of an SK, and the members
  that were written are still true. ``sk_identity`` of such an SK describes the
  members present, so the warning tells the user not to align it.

Lines that are neither a header nor a member (other logger output, blank
lines) are skipped and counted in a warning.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sk_analytics.errors import InputError
from sk_analytics.ingest.base import ParseResult, relative_source
from sk_analytics.ingest.canonical import canonical_op_column, sk_scope_name_expr
from sk_analytics.ingest.sk_text import logical_lines, model_dir_of, read_log_text, refuse_replaced
from sk_analytics.schema import SK_STRUCTURE

HEADER = r"^\s*SK Function: (\S+), scope id: ([0-9]+), Node Count: ([0-9]{1,9})\s*$"
MEMBER_START = r"^\s*\[[0-9]+\] \[nodeId:"
MEMBER = (
    r"^\s*\[([0-9]+)\] \[nodeId:([0-9]+), streamId:([0-9]+), streamIdxInGraph:[0-9]+, nodeIdxInStream:[0-9]+"
    r"(?:\] - KernelInfos\{(.*)\}|, (.*)\])\s*$"
)
"""A member: ids, then either ``] - KernelInfos{…}`` or ``, <event/memory payload>]``."""
FUNC_NAME = r"(?:^|, )funcName:([^,}]+)"
KERNEL_TYPE = r"(?:^|, )kernelType:([A-Z0-9_]+)"
NUM_BLOCKS = r"(?:^|, )numBlocks:([0-9]+)"
DETAIL_KIND = r"^(?:(Event)(?:Wait|Notify|Reset)\(.*\)|(Memory)(?:Write|Wait)\(.*\)|type: (Default))$"
EXPECTED_MEMBER = (
    "[<i>] [nodeId:<id>, streamId:<sid>, streamIdxInGraph:<k>, nodeIdxInStream:<j>] - KernelInfos{funcName:<f>, …} "
    "or [<i>] [nodeId:…, …, EventWait|EventNotify|EventReset|MemoryWrite|MemoryWait(…) | type: Default]"
)


def parse_fused_nodes(path: Path, *, root: Path | None = None, model_dir: str | None = None) -> ParseResult:
    """Parse one ``sk_fused_nodes.log``; ``model_dir`` defaults to the parent folder name."""
    model = model_dir if model_dir is not None else model_dir_of(path)
    lines = logical_lines(path, read_log_text(path, "sk_fused_nodes.log"))
    warnings: list[str] = []
    frame = _members(path, lines, warnings)
    frame = frame.with_columns(
        pl.lit(model).alias("model_dir"),
        pl.lit(relative_source(path, root)).alias("source_file"),
        sk_scope_name_expr(pl.col("sk_func_name")).alias("scope_name"),
    )
    return ParseResult(SK_STRUCTURE, SK_STRUCTURE.conform(canonical_op_column(frame, "func_name")), path, warnings)


def _members(path: Path, lines: pl.DataFrame, warnings: list[str]) -> pl.DataFrame:
    """Member rows with their SK header fields; raises on structural errors."""
    header = pl.col("payload").str.extract_groups(HEADER)
    classified = lines.with_columns(
        header.alias("h"),
        pl.col("payload").str.contains(MEMBER_START).alias("is_member"),
    ).with_columns(
        pl.col("h").struct.field("1").is_not_null().alias("is_header"),
    ).with_columns(
        pl.col("is_header").cum_sum().alias("sk"),
        pl.when(pl.col("is_header")).then(pl.col("h").struct.field("1")).forward_fill().alias("sk_func_name"),
        pl.when(pl.col("is_header")).then(pl.col("h").struct.field("2")).forward_fill().alias("scope_id"),
        pl.when(pl.col("is_header")).then(pl.col("h").struct.field("3")).forward_fill().alias("node_count"),
        pl.when(pl.col("is_header")).then(pl.col("line")).forward_fill().alias("header_line"),
    )
    refuse_replaced(path, classified.filter(pl.col("is_header") | pl.col("is_member")))
    _raise_first(path, classified.filter(pl.col("payload").str.contains("SK Function:", literal=True) & ~pl.col("is_header")),
                 "malformed SK header", "  SK Function: <name>, scope id: <id>, Node Count: <n>")
    _raise_first(path, classified.filter(pl.col("is_header") & (pl.col("scope_id").str.len_chars() > 18)),
                 "scope id out of range", "an integer below 10^18")
    other = classified.filter(~pl.col("is_header") & ~pl.col("is_member") & (pl.col("payload").str.strip_chars() != ""))
    if other.height:
        warnings.append(f"{path}: skipped {other.height} line(s) that are neither an SK header nor a member "
                        f"(first: line {other.item(0, 'line')})")
    members = classified.filter(pl.col("is_member"))
    _raise_first(path, members.filter(pl.col("sk") == 0), "member line before any 'SK Function:' header",
                 "  SK Function: <name>, scope id: <id>, Node Count: <n> first")
    parts = pl.col("payload").str.extract_groups(MEMBER)
    members = members.with_columns(parts.alias("m")).with_columns(
        pl.col("m").struct.field("1").cast(pl.Int32, strict=False).alias("child_index"),
        pl.col("m").struct.field("2").cast(pl.Int64, strict=False).alias("node_id"),
        pl.col("m").struct.field("3").cast(pl.Int64, strict=False).alias("stream_id"),
        pl.col("m").struct.field("4").alias("kernel_infos"),
        pl.col("m").struct.field("5").alias("member_detail"),
    )
    _raise_first(path, members.filter(pl.col("m").struct.field("1").is_null()), "malformed SK member", EXPECTED_MEMBER)
    _raise_first(path, members.filter(pl.col("child_index").is_null() | pl.col("node_id").is_null() | pl.col("stream_id").is_null()),
                 "SK member id out of range", "integers below 2^31 (index) and 2^63 (ids)")
    kinds = pl.col("member_detail").str.extract_groups(DETAIL_KIND)
    members = members.with_columns(
        pl.col("kernel_infos").str.extract(FUNC_NAME, 1).alias("func_name"),
        pl.col("kernel_infos").str.extract(KERNEL_TYPE, 1).alias("kernel_type"),
        pl.col("kernel_infos").str.extract(NUM_BLOCKS, 1).cast(pl.Int64, strict=False).alias("num_blocks"),
        pl.when(pl.col("kernel_infos").is_not_null()).then(pl.lit("kernel"))
        .otherwise(pl.coalesce(*[kinds.struct.field(str(i)) for i in (1, 2, 3)]).str.to_lowercase())
        .alias("member_kind"),
    )
    _raise_first(path, members.filter(pl.col("kernel_infos").is_not_null() & pl.col("func_name").is_null()),
                 "kernel member without funcName", "KernelInfos{funcName:<f>, kernelType:<t>, …}")
    _raise_first(path, members.filter(pl.col("member_kind").is_null()), "unknown event/memory member payload",
                 "EventWait|EventNotify|EventReset|MemoryWrite|MemoryWait(…) or type: Default")
    position = pl.int_range(pl.len()).over("sk").cast(pl.Int32)
    _raise_first(path, members.filter(pl.col("child_index") != position), "SK member index out of order",
                 "member indices 0, 1, 2, … under each header")
    _warn_counts(path, classified, members, warnings)
    return members.select(
        "sk_func_name", pl.col("scope_id").cast(pl.Int64), pl.col("node_count").cast(pl.Int32), "child_index",
        "node_id", "stream_id", "member_kind", "member_detail", "func_name", "kernel_type", "num_blocks",
        "line",
    )


def _raise_first(path: Path, bad: pl.DataFrame, message: str, expected: str) -> None:
    if bad.height:
        raise InputError(path, message, line=int(bad.item(0, "line")), expected=expected)


def _warn_counts(path: Path, classified: pl.DataFrame, members: pl.DataFrame, warnings: list[str]) -> None:
    """Warn for every SK whose ``Node Count`` differs from its member lines."""
    counts = members.group_by("sk").len("members")
    headers = classified.filter(pl.col("is_header")).join(counts, on="sk", how="left").with_columns(
        pl.col("members").fill_null(0), pl.col("node_count").cast(pl.Int64)
    )
    for row in headers.filter(pl.col("members") != pl.col("node_count")).iter_rows(named=True):
        warnings.append(
            f"{path}:{row['header_line']}: SK {row['sk_func_name']} (scope id {row['scope_id']}) declares "
            f"Node Count {row['node_count']} but has {row['members']} member line(s); do not align it"
        )
