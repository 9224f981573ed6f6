"""Canonical op tokens and the structural identity of fused SuperKernels (formats.md §4).

Everything that differs between two processes of the same build (pids, model
dirs, sk/scope/node/stream/task ids, hashes, handles, counters, timestamps) is
removed here, so that kernels and SKs can be aligned across processes.

Canonical op token of a kernel symbol, step by step (every step is one regex of
:data:`RULES`; the scalar :func:`canonical_op` and the vectorized
:func:`canonical_op_expr` run the *same* patterns, so they cannot drift):

1. strip leading ``[i/n]`` block prefixes (with or without a following space);
2. an SK name ``sk_<scopeId>_<scopeNames>_start_<first>_end_<last>`` becomes
   ``sk_<scopeNames>_start_<canon(first)>_end_<canon(last)>`` (scope id dropped);
3. strip a ``static_kernel_`` prefix (``static_kernel_<Op>_…`` gives ``<Op>``);
4. cut at the first ``_``-delimited token of exactly 32 or 64 hex digits;
5. drop every ``0x…`` token;
6. unless the symbol is a *communication* kernel, cut at the first
   dtype/format token (``ND``, ``NZ``, ``FRACTAL_*``, ``FP16``, ``BF16``,
   ``INT8``, …; ASCII case-insensitive; never the first token);
7. drop compile tails ``_<n>_d<m>``, ``__kernel<n>``, ``_high_performance[_n]``,
   numeric tails ``_<n>`` and trailing ``_`` (repeatedly, at the end only);
8. strip ``_`` at both ends; when nothing is left, the token is the symbol of
   step 1 unchanged (a token is never empty for a non-empty symbol).

Communication kernels (name contains, ASCII case-insensitive, one of
:data:`COMMUNICATION_WORDS`, e.g. ``HcclAllReduce``, ``hcom_allGather_``) are
kept whole: steps 1, 3, 4, 5, 7, 8 remove only their unstable parts, and they
are never cut at a dtype/format token, so ``hcom_allReduce__520_1_1`` gives
``hcom_allReduce``.

All patterns use only ASCII classes (``[0-9]``, explicit case classes) and the
end anchor ``\\z`` (``\\Z`` in Python), so Python ``re`` and the Rust regex
engine of Polars agree on every input, Unicode included.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import polars as pl

from sk_analytics.fingerprint import sha256_bytes

COMMUNICATION_WORDS: tuple[str, ...] = (
    "hccl", "hcom", "lccl", "allreduce", "all_reduce", "allgather", "all_gather",
    "reducescatter", "reduce_scatter", "alltoall", "all_to_all",
    "sendrecv", "send_recv",
)
"""Substrings (ASCII case-insensitive) that mark a communication kernel.

Not ``broadcast``: the compute ops ``BroadcastTo`` / ``BroadcastGradientArgs``
(real kernel_details names such as ``aclnnEqTensor_BroadcastToAiCore_BroadcastTo``)
must be cut at dtype tokens like any kernel; a broadcast collective is still
caught by ``hccl``/``hcom``/``lccl`` (``HcclBroadcast``, ``hcom_broadcast_``)."""

DTYPE_FORMAT_TOKENS: tuple[str, ...] = (
    # formats
    "nd", "nz", "fractal", "nchw", "nhwc", "ncdhw", "ndhwc", "nc1hwc0", "ndc1hwc0", "c1hwncoc0",
    # data types (``DT_`` spellings cut at ``DT``)
    "dt", "fp4", "fp8", "fp16", "fp32", "fp64", "bf16", "hf32", "hif8", "float16", "float32",
    "float64", "bfloat16", "int4", "int8", "int16", "int32", "int64", "uint1", "uint8",
    "uint16", "uint32", "uint64", "bool", "complex32", "complex64", "complex128",
)
"""Tokens (``_``-delimited, ASCII case-insensitive) at which a symbol is cut."""


def _ci(word: str) -> str:
    """ASCII-only case-insensitive pattern for ``word`` (no ``(?i)``: engines fold Unicode differently)."""
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else re.escape(c) for c in word)


_HEX = "[0-9a-fA-F]"
_ANY = r"[\s\S]*"


@dataclass(frozen=True)
class Rules:
    """The regexes of the canonical op token, in Rust syntax (``\\z`` = end of text)."""

    prefix: str = r"\A(?:\[[0-9]+/[0-9]+\] *)+"
    sk_name: str = r"\Ask_([0-9]+)_(.+?)_start_(.+?)_end_(.+)\z"
    communication: str = "|".join(_ci(w) for w in COMMUNICATION_WORDS)
    static_kernel: str = r"\Astatic_kernel_"
    hash_cut: str = rf"(?:\A|_){_HEX}{{32}}(?:{_HEX}{{32}})?(?:_{_ANY})?\z"
    zero_x_token: str = rf"\A0[xX]{_HEX}+\z"
    dtype_cut: str = rf"_(?:{'|'.join(_ci(w) for w in DTYPE_FORMAT_TOKENS)})(?:_{_ANY})?\z"
    tails: str = r"(?:_[0-9]+_d[0-9]+|__kernel[0-9]*|_high_performance(?:_[0-9]+)?|_[0-9]+|_)+\z"

    def python(self, field: str) -> re.Pattern[str]:
        """The same pattern compiled for Python ``re`` (``\\z`` becomes ``\\Z``)."""
        return re.compile(getattr(self, field).replace(r"\z", r"\Z"))


RULES = Rules()
_PY = {name: RULES.python(name) for name in Rules.__dataclass_fields__}


# --------------------------------------------------------------------------- scalar


def _plain_op(symbol: str) -> str:
    """Steps 1 and 3-8 for one symbol (no SK-name handling)."""
    stripped = _PY["prefix"].sub("", symbol, count=1)
    is_comm = _PY["communication"].search(stripped) is not None
    text = _PY["static_kernel"].sub("", stripped, count=1)
    text = _PY["hash_cut"].sub("", text, count=1)
    text = "_".join(t for t in text.split("_") if _PY["zero_x_token"].search(t) is None)
    if not is_comm:
        text = _PY["dtype_cut"].sub("", text, count=1)
    text = _PY["tails"].sub("", text, count=1).strip("_")
    return text if text else stripped


def canonical_op(symbol: str) -> str:
    """Canonical op token of one kernel symbol (see the module docstring).

    >>> canonical_op("static_kernel_RmsNorm_5f3c0a9e1b2d4c6f8a7e9d0c1b2a3f4e_9_d0")
    'RmsNorm'
    """
    stripped = _PY["prefix"].sub("", symbol, count=1)
    sk = _PY["sk_name"].search(stripped)
    if sk is not None:
        return f"sk_{sk[2]}_start_{_plain_op(sk[3])}_end_{_plain_op(sk[4])}"
    return _plain_op(stripped)


# --------------------------------------------------------------------------- vectorized


def _plain_op_expr(expr: pl.Expr) -> pl.Expr:
    stripped = expr.str.replace(RULES.prefix, "")
    is_comm = stripped.str.contains(RULES.communication)
    text = stripped.str.replace(RULES.static_kernel, "").str.replace(RULES.hash_cut, "")
    text = (
        text.str.split("_")
        .list.eval(pl.element().filter(~pl.element().str.contains(RULES.zero_x_token)))
        .list.join("_")
    )
    text = pl.when(is_comm).then(text).otherwise(text.str.replace(RULES.dtype_cut, ""))
    text = text.str.replace(RULES.tails, "").str.strip_chars("_")
    return pl.when(text == "").then(stripped).otherwise(text)


def canonical_op_expr(expr: pl.Expr) -> pl.Expr:
    """Vectorized :func:`canonical_op` (null stays null); same results on every input."""
    stripped = expr.str.replace(RULES.prefix, "")
    parts = stripped.str.extract_groups(RULES.sk_name)
    sk_token = pl.concat_str(
        pl.lit("sk_"), parts.struct.field("2"), pl.lit("_start_"),
        _plain_op_expr(parts.struct.field("3")), pl.lit("_end_"), _plain_op_expr(parts.struct.field("4")),
    )
    return pl.when(parts.struct.field("1").is_not_null()).then(sk_token).otherwise(_plain_op_expr(stripped))


def canonical_op_column(frame: pl.DataFrame | pl.LazyFrame, source: str, target: str = "canonical_op") -> pl.LazyFrame:
    """Add ``target`` = canonical op of column ``source``, computed once per distinct
    symbol and joined back (large tables repeat a few hundred symbols millions of times)."""
    lazy = frame.lazy()
    distinct = lazy.select(pl.col(source).unique()).with_columns(canonical_op_expr(pl.col(source)).alias(target))
    return lazy.join(distinct, on=source, how="left", nulls_equal=True, maintain_order="left")


# --------------------------------------------------------------------------- SK names


@dataclass(frozen=True)
class SkName:
    """Fields of an SK name ``sk_<scopeId>_<scopeNames|none>_start_<firstFunc>_end_<lastFunc>``.

    The split is at the first ``_start_`` and then the first ``_end_`` after it
    (names are not escaped, so a first function containing ``_end_`` is
    ambiguous; the structural identity uses the fused members, not this split).
    """

    scope_id: int
    scope_names: str
    first_func: str
    last_func: str


def parse_sk_name(name: str) -> SkName | None:
    """Parse an SK name (an ``[i/n] `` prefix is allowed); ``None`` when it is not one."""
    match = _PY["sk_name"].search(_PY["prefix"].sub("", name, count=1))
    if match is None:
        return None
    return SkName(int(match[1]), match[2], match[3], match[4])


def sk_scope_name_expr(expr: pl.Expr) -> pl.Expr:
    """Vectorized scope-name part of an SK name; ``none`` when the name has no SK pattern."""
    return expr.str.replace(RULES.prefix, "").str.extract(RULES.sk_name, 2).fill_null("none")


# --------------------------------------------------------------------------- structural identity

IDENTITY_HASH_CHARS = 16
"""Hex characters of SHA-256 kept in ``structure_hash``."""

_SK_KEYS = ["model_dir", "sk_func_name", "scope_id"]


def structure_hash(key: str) -> str:
    """Stable short hash of a structure key (SHA-256 hex prefix)."""
    return sha256_bytes(key.encode("utf-8"))[:IDENTITY_HASH_CHARS]


def sk_identity(structure: pl.DataFrame | pl.LazyFrame, graph_keys: Sequence[str] | None = None) -> pl.DataFrame:
    """Structural identity of every fused SK of an ``sk_structure`` frame (schema.SK_STRUCTURE).

    One row per SK (``model_dir, sk_func_name, scope_id``) with:

    * ``boundary_first`` / ``boundary_last``: canonical op of its first and last
      *kernel* member (by child index; null when it has no kernel member);
    * ``child_ops``: ordered canonical ops of its kernel members;
    * ``structure_key``: ``scope=<scope_name>|first=<a>|last=<b>|ops=<a>,<x>,…,<b>``;
    * ``structure_hash``: :func:`structure_hash` of the key;
    * ``occurrence_index``: 0-based order of appearance (first line in the log)
      among SKs with the same key in the same graph.

    A graph is ``graph_keys`` (default: the hive partitions ``round/role/run``
    that are present, then ``source_file`` and ``model_dir``). Raw ids, hashes
    and timestamps never enter the key.
    """
    lazy = structure.lazy()
    names = lazy.collect_schema().names()
    if graph_keys is None:
        graph_keys = [c for c in ("round", "role", "run", "source_file") if c in names] + ["model_dir"]
    graph = list(dict.fromkeys(graph_keys))
    per_sk = list(dict.fromkeys(graph + _SK_KEYS))
    kernel_ops = pl.col("canonical_op").filter(pl.col("member_kind") == "kernel").sort_by(
        pl.col("child_index").filter(pl.col("member_kind") == "kernel")
    )
    sks = lazy.group_by(per_sk).agg(
        pl.col("scope_name").first(),
        pl.col("line").min().alias("first_line"),
        kernel_ops.alias("child_ops"),
    )
    ops_text = pl.col("child_ops").list.join(",")
    sks = sks.with_columns(
        pl.col("child_ops").list.first().alias("boundary_first"),
        pl.col("child_ops").list.last().alias("boundary_last"),
    ).with_columns(
        pl.concat_str(
            pl.lit("scope="), pl.col("scope_name"),
            pl.lit("|first="), pl.col("boundary_first").fill_null(""),
            pl.lit("|last="), pl.col("boundary_last").fill_null(""),
            pl.lit("|ops="), ops_text,
        ).alias("structure_key")
    )
    frame = sks.collect()
    keys = frame.get_column("structure_key").unique()
    hashes = pl.Series([structure_hash(k) for k in keys], dtype=pl.Utf8)  # one per distinct structure
    frame = frame.with_columns(
        pl.col("structure_key").replace_strict(keys, hashes, return_dtype=pl.Utf8).alias("structure_hash")
    )
    frame = frame.sort([*graph, "first_line", "scope_id"]).with_columns(
        (pl.int_range(pl.len()).over([*graph, "structure_key"])).cast(pl.Int32).alias("occurrence_index")
    )
    return frame.select(
        *per_sk, "scope_name", "boundary_first", "boundary_last", "child_ops",
        "structure_key", "structure_hash", "occurrence_index",
    )
