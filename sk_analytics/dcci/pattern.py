"""The SK runtime's kernel-name pattern syntax (formats.md §5) as exact regexes.

A pattern is matched against the *whole* kernel funcName. Its alphabet is
``[A-Za-z0-9_.*-]``: ``.`` is any character, ``X*`` is zero or more of the
preceding atom ``X``, and a pattern must not start with ``*``. Everything else
is literal. We translate a pattern into an anchored regular expression once and
use it both in Python (``re.fullmatch``) and vectorized in Polars
(``str.contains`` over the symbol inventory), so the verification of a repair
pattern sees exactly what the runtime will see.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import TYPE_CHECKING

from sk_analytics.errors import InputError

if TYPE_CHECKING:  # the simulator validates patterns with this module and must not pay Polars' import
    import polars as pl

ALPHABET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.*-")


def pattern_problem(pattern: str) -> str | None:
    """Why ``pattern`` is not valid runtime syntax, or None when it is."""
    if not pattern:
        return "empty pattern"
    if pattern[0] == "*":
        return "pattern starts with '*'"
    bad = sorted({c for c in pattern if c not in ALPHABET})
    if bad:
        return f"characters {''.join(bad)!r} are outside [A-Za-z0-9_.*-]"
    if "**" in pattern:
        return "'*' must follow a character or '.', not another '*'"
    return None


@lru_cache(maxsize=4096)
def to_regex(pattern: str) -> str:
    """The anchored regex (Python and Rust syntax) equivalent to ``pattern``.

    ``.`` becomes "any character including newline" (``(?s)``), ``*`` stays a
    Kleene star on the previous atom, every other character is escaped.
    Raises :class:`InputError` for a pattern the runtime would not accept.
    """
    problem = pattern_problem(pattern)
    if problem is not None:
        raise InputError(None, f"invalid SK kernel pattern {pattern!r}: {problem}", expected="runtime pattern syntax [A-Za-z0-9_.*-], not starting with '*'")
    body = "".join(c if c in ".*" else re.escape(c) for c in pattern)
    return f"^(?s:{body})$"


def matches(pattern: str, name: str) -> bool:
    """Whether the runtime would apply ``pattern`` to the kernel ``name``."""
    return re.fullmatch(to_regex(pattern), name) is not None


def matches_expr(pattern: str, names: pl.Expr) -> pl.Expr:
    """Vectorized :func:`matches` over a column of kernel names."""
    return names.str.contains(to_regex(pattern))
