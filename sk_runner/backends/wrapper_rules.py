"""Wrapper-side acceptance of an exact option value, from the option registry (formats.md §5).

This is what the option wrapper checks before a value reaches the runtime:
the option exists and is settable, and the value has the right *shape*
(unsigned integer, pattern list in the pattern syntax, ``k=v`` map of at most
1024 characters, aggressive-strategy struct). Ranges are deliberately *not*
checked here: the real runtime accepts an out-of-range number, logs
"set value is invalid ... use default value" in ``super_kernel.log`` and runs
with the default — the probe's runtime check catches that.
"""

from __future__ import annotations

import re
from typing import Any

from sk_analytics.dcci.pattern import pattern_problem
from sk_analytics.stage_o.options import BY_NAME, is_debug_option, map_text
from sk_runner.backends.base import WrapperVerdict

MAP_TEXT = re.compile(r"^[^=:,]+=[^=:]*(?::[^=:,]+=[^=:]*)*$")
MAP_MAX_CHARS = 1024
STRUCT_FIELDS = ("value_breaker_bypass", "task_breaker_bypass", "event_breaker_bypass")


def registry_verdict(option: str, value: Any) -> WrapperVerdict:
    """Accept or reject ``option = value`` as the wrapper would (shape, not range)."""
    spec = BY_NAME.get(option)
    if is_debug_option(option):
        return _no(f"{option} is a debug option: never part of a clean trial or the option matrix")
    if spec is None:
        return _no(f"{option} is not a registered SK option")
    if spec.kind == "not_settable":
        return _no(f"{option} cannot be set")
    problem = _shape_problem(spec.kind, value)
    if problem:
        return _no(f"{option}: {problem}")
    return WrapperVerdict(True, f"{option} accepts {value!r} (shape {spec.kind})", {"kind": spec.kind})


def _no(reason: str) -> WrapperVerdict:
    return WrapperVerdict(False, reason, {})


def _is_uint(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _shape_problem(kind: str, value: Any) -> str | None:
    if kind == "uint":
        return None if _is_uint(value) else f"{value!r} is not an unsigned integer"
    if kind == "pattern_list":
        if not isinstance(value, list):
            return f"{value!r} is not a list of patterns"
        for item in value:
            problem = pattern_problem(item) if isinstance(item, str) else "not a string"
            if problem:
                return f"pattern {item!r}: {problem}"
        return None
    if kind == "map":
        text = map_text(value)
        if text is None:
            return f"{value!r} is not a k=v1,v2:k2=v3 map"
        if len(text) > MAP_MAX_CHARS:
            return f"map text has {len(text)} characters (at most {MAP_MAX_CHARS})"
        return None if text == "" or MAP_TEXT.match(text) else f"{text!r} is not a k=v1,v2:k2=v3 map"
    if kind == "struct":
        if not isinstance(value, dict):
            return f"{value!r} is not an object of {', '.join(STRUCT_FIELDS)}"
        unknown = sorted(set(value) - set(STRUCT_FIELDS))
        if unknown:
            return f"unknown field(s) {unknown} (known: {', '.join(STRUCT_FIELDS)})"
        bad = [k for k, v in value.items() if not _is_uint(v)]
        return f"field(s) {bad} are not unsigned integers" if bad else None
    return f"unknown option kind {kind}"
