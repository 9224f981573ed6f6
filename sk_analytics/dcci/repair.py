"""The DCCI joint repair: child-op union, narrow verified patterns, repair config and its diff.

Protocol §6: take the stable de-duplicated union of canonical op tokens of all
significantly slower children of all significantly slower SKs; for each token
build a narrow pattern (runtime syntax, formats.md §5) that contains the token
literally and, verified against the candidate build's symbol inventory,
matches every symbol of that op and no symbol of any other op. The repair is
disable-all plus ``dcci_before_kernel_start`` = ``dcci_after_kernel_end`` =
that list, and an RFC 6902 diff proves only those two pointers changed.

The protocol asks for a regex *list*: when no single pattern matches exactly
a token's symbols (its kernels appear under several prefix families, e.g.
``static_kernel_MatMulV2_…`` and ``MatMulV2_<hash>_mix_aiv``, next to
look-alikes such as ``static_kernel_BatchMatMulV2_…``), the token contributes
one narrow pattern per family, each verified to match no symbol of another op,
whose union matches exactly the token's symbols. A token for which no such set
exists blocks the whole repair (we never propose a pattern that over-matches,
nor a partial list).
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import jsonpatch
import jsonpointer
import polars as pl

from sk_analytics.dcci.pattern import ALPHABET, matches_expr, pattern_problem
from sk_analytics.errors import InputError
from sk_analytics.messages import coded, ids, text

OPTIONS_POINTERS: Final = ("/super_kernel_optimize_options", "/model_config/custom_params/super_kernel_optimize_options")
"""Where execution configs keep the SK options (torch.compile layout, YAML experiment layout)."""
DISABLE: Final = "dcci_disable_on_kernel"
BEFORE: Final = "dcci_before_kernel_start"
AFTER: Final = "dcci_after_kernel_end"
DISABLE_ALL: Final = [".*"]

_HASH_RUN = re.compile(r"[0-9A-Fa-f]{16,}")


@dataclass(frozen=True)
class PatternChoice:
    """The verified pattern set of one canonical op token (or why there is none)."""

    token: str
    status: str  # "verified" | "over_match" | "no_symbols" | "unexpressible"
    pattern: str | None
    """The first (usually the only) pattern of the set."""
    intended_symbols: tuple[str, ...]
    matched_symbols: tuple[str, ...]
    rejected: tuple[dict[str, Any], ...] = field(default=())
    parts: tuple[tuple[str, tuple[str, ...]], ...] = field(default=())
    """Every pattern of the set with the symbols it matches (their union = ``intended_symbols``)."""

    @property
    def patterns(self) -> list[str]:
        return [p for p, _ in self.parts] if self.parts else ([self.pattern] if self.pattern else [])

    def to_json(self) -> dict[str, Any]:
        parts = self.parts if self.parts else (((self.pattern, self.matched_symbols),) if self.pattern else ())
        return {
            "token": self.token,
            "status": self.status,
            "pattern": self.pattern,
            "patterns": [{"pattern": p, "matched_symbols": list(m)} for p, m in parts],
            "intended_symbols": list(self.intended_symbols),
            "matched_symbols": list(self.matched_symbols),
            "rejected_candidates": list(self.rejected),
        }


def union_tokens(significant_children: pl.DataFrame, token: str = "canonical_op") -> list[str]:
    """Stable de-duplicated union of tokens, in the frame's row order (SK order, then child position)."""
    return significant_children.get_column(token).drop_nulls().unique(maintain_order=True).to_list()


def symbol_inventory(symbols: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
    """Unique (func_name, canonical_op) of a build's symbol inventory (every graph, every model)."""
    return (
        symbols.lazy()
        .select("func_name", "canonical_op")
        .unique(subset=["func_name"], keep="first", maintain_order=True)
        .sort("func_name")
        .collect()
    )


def _literal(text: str) -> str:
    """A literal for the pattern syntax: characters outside the alphabet (or ``*``) become ``.``."""
    return "".join(c if c in ALPHABET and c != "*" else "." for c in text)


def _shape(tail: str) -> str | None:
    """Tail through the character after its last hash run, hash characters replaced by
    ``.`` (so the hash length and the delimiter that follows it are pinned); None without a hash."""
    runs = list(_HASH_RUN.finditer(tail))
    if not runs:
        return None
    cut = runs[-1].end() + 1
    return _HASH_RUN.sub(lambda m: "." * len(m.group(0)), tail[:cut])


def _heads(prefixes: set[str]) -> list[str]:
    """Pattern heads covering every symbol's text before the token, narrowest first: the one prefix
    literally; prefixes of one length merged position by position (differing characters become ``.``);
    ``.*`` then the prefixes' longest common suffix; ``.*``."""
    if len(prefixes) == 1:
        return [_literal(next(iter(prefixes)))]
    heads = []
    if len({len(p) for p in prefixes}) == 1:
        heads.append("".join(_literal(column[0]) if len(set(column)) == 1 else "." for column in zip(*prefixes, strict=True)))
    suffix = os.path.commonprefix([p[::-1] for p in prefixes])[::-1]
    heads += [".*" + _literal(suffix), ".*"]
    return list(dict.fromkeys(heads))


def candidate_patterns(token: str, symbols: Sequence[str]) -> list[str]:
    """Candidate patterns for ``token`` from its symbols, narrowest readable first."""
    cut = [(s[: s.find(token)], s[s.find(token) + len(token) :]) for s in symbols if token in s]
    if not cut or len(cut) != len(symbols):
        return []
    tails = [t for _, t in cut]
    endings: list[str] = []
    if all(not t for t in tails):
        endings.append("")
    firsts = {t[:1] for t in tails}
    if len(firsts) == 1 and "" not in firsts:
        endings.append(_literal(firsts.pop()) + ".*")
    shapes = {_shape(t) for t in tails}
    if len(shapes) == 1 and None not in shapes:
        endings.append(_literal(shapes.pop() or "") + ".*")
    endings.append(".*")
    out = [head + token + ending for head in _heads({p for p, _ in cut}) for ending in endings]
    return list(dict.fromkeys(p for p in out if pattern_problem(p) is None))


def choose_pattern(token: str, inventory: pl.DataFrame) -> PatternChoice:
    """The narrowest verified pattern set of ``token``: one pattern matching exactly its op's symbols, else
    one pattern per prefix family (text before the token), each matching only symbols of the op, together
    all of them. ``over_match`` when no such set exists."""
    intended = tuple(inventory.filter(pl.col("canonical_op") == token).get_column("func_name").to_list())
    if not intended:
        return PatternChoice(token, "no_symbols", None, (), ())
    if "*" in token or pattern_problem(token) is not None:
        return PatternChoice(token, "unexpressible", None, intended, ())
    rejected: list[dict[str, Any]] = []
    single = _first_verified(token, intended, inventory, rejected)
    if single is not None:
        return PatternChoice(token, "verified", single[0], intended, single[1], tuple(rejected), (single,))
    families: dict[str, list[str]] = {}
    for symbol in intended:
        families.setdefault(symbol[: symbol.find(token)] if token in symbol else symbol, []).append(symbol)
    if len(families) < 2:
        return PatternChoice(token, "over_match", None, intended, (), tuple(rejected))
    parts = []
    for family in sorted(families.values(), key=lambda f: sorted(f)):
        part = _first_verified(token, tuple(family), inventory, rejected)
        if part is None:
            return PatternChoice(token, "over_match", None, intended, (), tuple(rejected))
        parts.append(part)
    matched = tuple(dict.fromkeys(s for _, m in parts for s in m))
    assert set(matched) == set(intended)  # each part covers its family and matches only the op's symbols
    return PatternChoice(token, "verified", parts[0][0], intended, matched, tuple(rejected), tuple(parts))


def _first_verified(token: str, symbols: tuple[str, ...], inventory: pl.DataFrame,
                    rejected: list[dict[str, Any]]) -> tuple[str, tuple[str, ...]] | None:
    """The first candidate pattern of ``symbols`` that matches all of them and no symbol of another op, with
    what it matches; each refused candidate is appended to ``rejected``."""
    for pattern in candidate_patterns(token, symbols):
        hit = inventory.filter(matches_expr(pattern, pl.col("func_name")))
        matched = tuple(hit.get_column("func_name").to_list())
        foreign = hit.filter(pl.col("canonical_op").ne_missing(token)).get_column("func_name").to_list()
        missed = sorted(set(symbols) - set(matched))
        if not foreign and not missed:
            return pattern, matched
        rejected.append({"pattern": pattern, "over_matched_symbols": foreign, "missed_symbols": missed})
    return None


def options_pointer(config: dict[str, Any]) -> str:
    """The pointer of the SK options object holding ``dcci_disable_on_kernel: [".*"]``."""
    for pointer in OPTIONS_POINTERS:
        options = jsonpointer.resolve_pointer(config, pointer, None)
        if isinstance(options, dict) and options.get(DISABLE) == DISABLE_ALL:
            return pointer
    raise InputError(
        None,
        "the disable-all diagnostic config has no dcci_disable_on_kernel == [\".*\"]",
        expected=f"super_kernel_optimize_options at one of {', '.join(OPTIONS_POINTERS)}",
    )


def repair_config(disable_all_config: dict[str, Any], patterns: Sequence[str]) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Disable-all + before = after = ``patterns``, and the RFC 6902 patch from disable-all.

    Raises ``AssertionError`` if the patch touches anything but the two pointers
    (it cannot, but the proof is the point of the diff).
    """
    base = options_pointer(disable_all_config)
    repaired = copy.deepcopy(disable_all_config)
    options = jsonpointer.resolve_pointer(repaired, base)
    options[BEFORE] = list(patterns)
    options[AFTER] = list(patterns)
    patch = jsonpatch.make_patch(disable_all_config, repaired).patch
    allowed = {f"{base}/{BEFORE}", f"{base}/{AFTER}"}
    touched = {op["path"] for op in patch}
    if not touched <= allowed or not patch:
        raise AssertionError(f"repair diff touches {sorted(touched)}, allowed only {sorted(allowed)}")
    return repaired, patch


def changed_pointers(patch: Sequence[dict[str, Any]]) -> list[str]:
    """The sorted pointers an RFC 6902 patch touches."""
    return sorted({op["path"] for op in patch})


__all__ = [
    "PatternChoice",
    "changed_pointers",
    "choose_pattern",
    "candidate_patterns",
    "options_pointer",
    "repair_config",
    "symbol_inventory",
    "union_tokens",
]


def repair_message(repair: Mapping[str, Any]) -> dict[str, Any]:
    """The repair decision as a recorded message: its code's catalog message, or (a code no catalog knows) the
    decision's own words in both languages."""
    msg_id = f"dcci.repair.{repair['reason']}"
    if msg_id in ids("zh"):
        return coded(msg_id, tokens=", ".join(repair.get("failed_tokens") or []))
    return {"zh": str(repair.get("reason_zh") or repair["reason"]), "en": str(repair["reason"])}


def repair_reason(repair: Mapping[str, Any], lang: str) -> str:
    """The sentence of a repair decision code (``repair.reason``) in ``lang``; the code itself when no catalog knows it."""
    msg_id = f"dcci.repair.{repair['reason']}"
    tokens = ", ".join(repair.get("failed_tokens") or [])
    return text(msg_id, lang, tokens=tokens) if msg_id in ids(lang) else str(repair["reason"])
