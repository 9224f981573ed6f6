"""Is a value a valid value of an SK option? Checked against the option registry's kind and range.

Every input that carries option values (a task's ``accepted_option_values``, a
config's ``super_kernel_optimize_options``, a ``--set`` on an option pointer)
goes through :func:`value_problem` at load, so a string where the registry
expects an integer, an integer out of range (``10**40``) or a nested object is
refused by name before anything runs, never blocked later for a false reason.
The registry (:mod:`sk_analytics.stage_o.options`) is only read here.
"""

from __future__ import annotations

import json
from typing import Any

from sk_analytics.errors import did_you_mean
from sk_analytics.stage_o.options import BY_NAME, BY_WRAPPER_NAME, OptionSpec, map_text, spec_of

STRUCT_FIELD_HIGH = 2**31 - 1
"""Largest value of one field of a ``struct`` option (the runtime reads each as a 32-bit integer)."""
_JSON_TYPES = {str: "a string", int: "an integer", float: "a number", bool: "a boolean", dict: "an object", list: "an array",
               type(None): "null"}
MAX_PATTERN = 4096
"""Longest kernel-name pattern of a ``pattern_list`` option."""


def expected_value(spec: OptionSpec) -> str:
    """The valid values of ``spec`` in words (its kind and range): what an error about a bad value expects."""
    if spec.kind == "uint":
        return f"an integer from {spec.low} to {spec.high}"
    if spec.kind == "pattern_list":
        return "a list of kernel-name patterns (strings)"
    if spec.kind == "map":
        return "k=v1,v2:k2=v3 text or an object of strings or string lists"
    if spec.kind == "struct":
        return f"an object with integer fields among {', '.join(sorted(spec.default))} (0 to {STRUCT_FIELD_HIGH})"
    return "nothing: the option cannot be set"


def _is_int(value: Any, low: int, high: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and low <= value <= high


def value_problem(spec: OptionSpec, value: Any) -> str | None:
    """Why ``value`` is no valid value of the option ``spec`` (kind, type, range), or None when it is."""
    if spec.kind == "uint":
        assert spec.low is not None and spec.high is not None
        ok = _is_int(value, spec.low, spec.high)
    elif spec.kind == "pattern_list":
        ok = isinstance(value, list) and all(isinstance(p, str) and 0 < len(p) <= MAX_PATTERN for p in value)
    elif spec.kind == "map":
        ok = map_text(value) is not None and (not isinstance(value, dict) or all(
            isinstance(v, str) or all(isinstance(x, str) for x in v) for v in value.values()))
    elif spec.kind == "struct":
        ok = isinstance(value, dict) and set(value) <= set(spec.default) and all(
            _is_int(v, 0, STRUCT_FIELD_HIGH) for v in value.values())
    else:
        ok = False
    if ok:
        return None
    shown = json.dumps(value, ensure_ascii=False)
    return (f"option {spec.name} value {shown[:60]}{'…' if len(shown) > 60 else ''} ({_JSON_TYPES.get(type(value), 'value')}) "
            f"is not valid: expected {expected_value(spec)}")


def name_problem(name: Any) -> str | None:
    """Why ``name`` is no registered option (with the closest registered names), or None when it is one."""
    if isinstance(name, str) and spec_of(name) is not None:
        return None
    text = name if isinstance(name, str) else repr(name)
    return f"unknown option {text!r}: not a registered option{did_you_mean(text, [*BY_NAME, *BY_WRAPPER_NAME])} (sk-run options lists them)"
