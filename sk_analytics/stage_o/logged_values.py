"""Whether a ``super_kernel.log`` set-value line logged the probed value (formats.md §4/§5).

The runtime does not refuse a value it cannot use: it may log that it fell
back to the default, or set another value. A probe therefore compares the
value of every ``OptionName: <name>, set value: <v>`` line of a probed option
with the value it set, for every kind of the registry
(:data:`~sk_analytics.stage_o.options.REGISTRY`), after bringing both sides to
the kind's normal form:

* ``uint``: an integer (a JSON ``true`` is no integer);
* ``pattern_list``: the patterns in order, logged as a JSON list or as the
  patterns themselves, comma-separated, bracketed or not (the pattern syntax
  has no comma, bracket, quote or space, so that text has one reading);
* ``map``: the ``k=v1,v2:k2=v3`` text of :func:`~sk_analytics.stage_o.options.map_text`,
  logged as that text or as JSON (a string or an object);
* ``struct``: field lines (``<option>.<field>``) as integers, or the whole
  struct as a JSON object; a field the probe did not set is the registry's
  default;
* an option the registry does not know: the JSON value (a boolean is not an
  integer, ``"1"`` is not ``1``), or the text as it is where it is no JSON.

A side with no normal form (``set value: 0x2`` for a ``uint``, a field the
struct does not have) cannot be compared: :func:`same_value` says so (None),
and the probe refuses the line by name rather than take it for a confirmation.
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from sk_analytics.stage_o.options import OptionKind, map_text, spec_of

FORMS: Final[dict[str | None, str]] = {
    "uint": "an integer",
    "pattern_list": "a JSON list of patterns, or the patterns comma-separated",
    "map": "the k=v1,v2:k2=v3 text, or JSON",
    "struct": "an integer per field line, or a JSON object",
    "not_settable": "nothing: the option cannot be set",
    None: "a JSON value, or text",
}
"""How a value of each registry kind may be logged to be compared (None: an option the registry does not know)."""

_PATTERNS_TEXT = re.compile(r"^(\[)?\s*(?P<list>[A-Za-z0-9_.*-]+(?:\s*,\s*[A-Za-z0-9_.*-]+)*)?\s*(?(1)\])$")
_NO_JSON: Final = object()


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return _NO_JSON


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def normal_form(kind: OptionKind | None, value: Any, default: Any = None) -> Any:
    """``value`` in the normal form of ``kind`` (None: an unknown option, compared as canonical JSON); None when it
    has none (``default``: a struct's registry default, whose fields fill the ones ``value`` lacks)."""
    if kind == "uint":
        return value if _is_int(value) else None
    if kind == "pattern_list":
        return tuple(value) if isinstance(value, list) and all(isinstance(p, str) for p in value) else None
    if kind == "map":
        return map_text(value)
    if kind == "struct":
        if not isinstance(value, dict) or not all(_is_int(v) for v in value.values()):
            return None
        return tuple(sorted({**(default or {}), **value}.items()))
    if kind == "not_settable":
        return None
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def logged_form(kind: OptionKind | None, text: str, default: Any = None) -> Any:
    """The normal form of the value a set-value line logged as ``text`` (:func:`normal_form`); None when it has none."""
    parsed = _json(text)
    if kind == "pattern_list" and not isinstance(parsed, list):
        found = _PATTERNS_TEXT.match(text.strip())
        return None if found is None else tuple(p.strip() for p in (found["list"] or "").split(",") if p.strip())
    if parsed is _NO_JSON:  # a map's text, or an unknown option's words, as they are
        return None if kind not in ("map", None) else normal_form(kind, text.strip())
    return normal_form(kind, parsed, default)


def same_value(option: str, probed: Any, logged_name: str, text: str) -> bool | None:
    """Whether the line ``OptionName: <logged_name>, set value: <text>`` logged ``probed``, the value the probe set for
    ``option`` (``logged_name``: the option under either of its names, or ``<option>.<field>`` for a struct's field):
    True the same, False another value, None when the two cannot be compared (no normal form on either side)."""
    spec = spec_of(option)
    kind, default = (None, None) if spec is None else (spec.kind, spec.default)
    _, dot, field = logged_name.partition(".")
    if dot:  # a struct logged field by field: the field's value against the probed field, else its default
        fields = {**(default if isinstance(default, dict) else {}), **(probed if isinstance(probed, dict) else {})}
        if kind not in ("struct", None) or field not in fields:
            return None
        kind, default, probed = ("uint" if kind == "struct" else None), None, fields[field]
    expected, logged = normal_form(kind, probed, default), logged_form(kind, text, default)
    return None if expected is None or logged is None else expected == logged


def kind_of(option: str) -> OptionKind | None:
    """The registry kind of ``option`` (either name); None for an option the registry does not know."""
    spec = spec_of(option)
    return None if spec is None else spec.kind
