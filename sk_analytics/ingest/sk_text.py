"""Shared reading of the SK metadata text logs (``sk_fused_nodes.log``, ``super_kernel.log``).

Both logs are written through the CANN logger: every line may carry a prefix
``YYYY-MM-DD HH:MM:SS.mmm [<pid>:<tid>] [<LEVEL>] [<file>:<n>] [<Function>] ``
(the function tag is optional), and payloads longer than 4096 characters
continue on following lines as ``[CONT:<n>] <rest>`` (with or without the
prefix). :func:`logical_lines` undoes both, vectorized, and keeps the 1-based
number of the first physical line of each logical line for error messages.
"""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl

from sk_analytics.errors import InputError
from sk_analytics.files.io_seam import reading

LOG_PREFIX = r"^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\.[0-9]+ \[[0-9]+:[0-9]+\] \[[A-Z]+\] \[[^\]]*\] (?:\[[A-Za-z_][A-Za-z0-9_]*\] )?"
"""The CANN logger prefix (date, time, [pid:tid], [LEVEL], [file:line], optional [Function])."""

CONTINUATION = r"^\[CONT:[0-9]+\] "
"""Start of the payload of a continuation line."""

MODEL_DIR = re.compile(r"^model_[0-9]+_[0-9]+$")
"""The metadata folder of one model load: ``model_<rtsModelId>_<callCount>``."""


def read_log_text(path: Path, what: str) -> str:
    """The text of a log (undecodable bytes replaced: logs may carry foreign output)."""
    with reading(path, what):
        return path.read_bytes().decode("utf-8", errors="replace")


REPLACED = "\ufffd"
"""What :func:`read_log_text` puts where a byte was not UTF-8."""


def refuse_replaced(path: Path, used: pl.DataFrame) -> None:
    """Bad input naming the first of the ``used`` lines (``line``, ``payload``) that held a byte that is not UTF-8.

    :func:`read_log_text` replaces such bytes so that foreign output in a log is skipped, not fatal; a line the
    parser keeps values from must be the file's own text, not one with U+FFFD where its bytes were."""
    bad = used.filter(pl.col("payload").str.contains(REPLACED, literal=True))
    if bad.height:
        raise InputError(path, "a line it reads holds bytes that are not UTF-8 text", line=int(bad.item(0, "line")),
                         expected="UTF-8 text in every SK header, member and marker line")


def model_dir_of(path: Path) -> str:
    """``model_<id>_<n>`` folder holding an SK metadata file."""
    folder = path.parent.name
    if MODEL_DIR.match(folder) is None:
        raise InputError(path, f"SK metadata file is in folder {folder!r}", expected="a model_<rtsModelId>_<callCount> folder")
    return folder


def logical_lines(path: Path, text: str) -> pl.DataFrame:
    """``line`` (Int32, first physical line) and ``payload`` (prefix removed,
    continuations joined) of every logical line of ``text``."""
    physical = (
        pl.Series("payload", [text], dtype=pl.Utf8)
        .str.split("\n")
        .explode()
        .to_frame()
        .with_row_index("line", offset=1)
        .with_columns(pl.col("payload").str.strip_suffix("\r").str.replace(LOG_PREFIX, ""))
    )
    if text.endswith("\n"):
        physical = physical.head(physical.height - 1)
    is_cont = pl.col("payload").str.contains(CONTINUATION)
    physical = physical.with_columns(is_cont.alias("cont"), is_cont.not_().cum_sum().alias("logical"))
    orphan = physical.filter(pl.col("cont") & (pl.col("logical") == 0))
    if orphan.height:
        raise InputError(path, "continuation line without a line to continue", line=int(orphan.item(0, "line")),
                         expected="[CONT:<n>] only after a logged line")
    if not physical.get_column("cont").any():
        return physical.select(pl.col("line").cast(pl.Int32), "payload")
    return (
        physical.with_columns(pl.col("payload").str.replace(CONTINUATION, ""))
        .group_by("logical", maintain_order=True)
        .agg(pl.col("line").first().cast(pl.Int32), pl.col("payload").str.join(""))
        .select("line", "payload")
    )
