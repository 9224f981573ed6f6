"""Strict loading of evidence JSON (and YAML configs): duplicate keys and NaN refused.

Python's ``json`` silently keeps the last of two equal keys and accepts
``NaN``/``Infinity``; either would let two different texts carry the same
fingerprint or a value that canonical JSON cannot represent. Every evidence
file (manifests, session records, configs, workload/control descriptions) is
therefore read through these functions, which raise :class:`InputError`
naming the file, the line and the offending key.

Hostile input is refused the same way: nesting deeper than
:data:`MAX_DEPTH` levels (it would otherwise end in a ``RecursionError``),
YAML anchors/aliases (an "alias bomb" of a few lines expands to gigabytes when
turned into JSON data), integers of more than :data:`MAX_INT_DIGITS` digits
(Python refuses to convert them), a number too large for a float (``1e400``
would silently become ``inf``), and an input that is no regular file (a FIFO
or a device would hang the reader, a folder cannot be read).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from functools import cache
from os import PathLike
from pathlib import Path
from typing import Any

from sk_analytics.errors import InputError, did_you_mean
from sk_analytics.files.io_seam import open_regular, reading

MAX_DEPTH = 200
"""Deepest nesting of arrays/objects accepted in any JSON or YAML input (configs are under 10)."""
MAX_INT_DIGITS = 4300
"""Most digits of an integer in any input: Python's own conversion limit (``sys.get_int_max_str_digits``),
above which it raises instead of parsing; every field bounds its numbers far lower."""


class DuplicateKeyError(InputError):
    """A JSON object or YAML mapping names the same key twice."""

    rule = "duplicate-key"


class _Refused(Exception):
    """A key repeated in one object (``key``), a NaN/Infinity (``constant``) or a number no float or int holds
    (``number``), seen by the parser without its place."""

    def __init__(self, key: str | None = None, constant: str | None = None, number: str | None = None) -> None:
        super().__init__(key, constant, number)
        self.key, self.constant, self.number = key, constant, number


def _reject_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, Any] = {}
    for key, value in pairs:
        if key in seen:
            raise _Refused(key=key)
        seen[key] = value
    return seen


def _reject_constant(name: str) -> Any:
    raise _Refused(constant=name)


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        raise _Refused(number=text)
    return int(text)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):  # 1e400: too large for a float, Python would make it inf
        raise _Refused(number=text)
    return value


def _number_problem(text: str) -> str:
    """What is wrong with a number the parser refused (``text``: as written)."""
    digits = len(text.lstrip("-"))
    if digits > MAX_INT_DIGITS and text.lstrip("-").isdigit():
        return f"an integer of {digits} digits"
    return f"number {text[:40]}{'…' if len(text) > 40 else ''} is beyond the range of a float"


_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\]:]|NaN|-?Infinity')
"""The tokens :func:`_refused_line` follows: strings (so a ``NaN`` inside one is no token), brackets, colons, constants."""


def _refused_line(text: str, refused: _Refused) -> int | None:
    """The line of what the parser refused: the first NaN/Infinity, or the first key ``refused.key`` that repeats a key
    of its own object. Only on the error path: the parser reached it, so the text before it is well-formed JSON."""
    objects: list[set[str] | None] = []  # per open bracket: the keys of an object (None: an array)
    string: str | None = None
    for match in _TOKENS.finditer(text):
        token = match.group()
        if token.startswith('"'):
            try:
                string = json.loads(token)
            except ValueError:  # an escape the parser would have refused before
                string = None
            continue
        if token == ":" and string is not None and objects and objects[-1] is not None:
            if string in objects[-1] and string == refused.key:
                return text.count("\n", 0, match.start()) + 1
            objects[-1].add(string)
        elif token in ("{", "["):
            objects.append(set() if token == "{" else None)
        elif token in ("}", "]"):
            if objects:
                objects.pop()
        elif token != ":" and refused.constant is not None:
            return text.count("\n", 0, match.start()) + 1
        string = None
    return None


def loads_strict(text: str, source: str | PathLike[str] = "<json>") -> Any:
    """Parse JSON ``text``; duplicate keys and NaN/Infinity raise :class:`InputError` naming their line."""
    src = str(source)
    try:
        return _shallow(json.loads(text, object_pairs_hook=_reject_duplicates, parse_constant=_reject_constant,
                                   parse_int=_bounded_int, parse_float=_finite_float), src)
    except RecursionError:
        raise _too_deep(src) from None
    except _TooDeep:
        raise
    except _Refused as exc:
        if exc.number is not None:
            at = text.find(exc.number)
            raise InputError(src, f"invalid JSON: {_number_problem(exc.number)}", line=text.count("\n", 0, at) + 1 if at >= 0 else None,
                             expected=f"a finite number (integers of at most {MAX_INT_DIGITS} digits)") from None
        line = _refused_line(text, exc)
        if exc.key is not None:
            raise DuplicateKeyError(src, f"rule duplicate-key: key {exc.key!r} appears twice in one object", line=line,
                                    expected="unique keys") from None
        raise InputError(src, f"invalid JSON: {exc.constant} is not valid JSON", line=line,
                         expected="strict JSON without NaN/Infinity") from None
    except json.JSONDecodeError as exc:  # the column ends json's "Unterminated string starting at" and the like
        where = f"{'' if exc.msg.endswith(' at') else ' at'} column {exc.colno}"
        raise InputError(src, f"invalid JSON: {exc.msg}{where}", line=exc.lineno, expected="strict JSON") from exc


class _TooDeep(InputError):
    """Nesting beyond :data:`MAX_DEPTH`."""


def _too_deep(source: str) -> _TooDeep:
    return _TooDeep(source, f"nested deeper than {MAX_DEPTH} levels", expected=f"at most {MAX_DEPTH} levels of arrays/objects")


def _shallow(value: Any, source: str) -> Any:
    """``value`` itself, after checking (without recursion) that it nests at most :data:`MAX_DEPTH` levels."""
    level: list[Any] = [value]
    for _ in range(MAX_DEPTH + 1):
        level = [sub for item in level if isinstance(item, (dict, list))
                 for sub in (item.values() if isinstance(item, dict) else item) if isinstance(sub, (dict, list))]
        if not level:
            return value
    raise _too_deep(source)


def read_text_file(path: Path) -> str:
    """A UTF-8 text file's content; missing, unreadable or non-UTF-8 -> :class:`InputError` naming it
    (a read the machine failed: :class:`~sk_analytics.errors.ReadFault`)."""
    try:
        with reading(path), open(open_regular(path, "a JSON/YAML input"), encoding="utf-8") as fh:
            return fh.read()
    except UnicodeDecodeError as exc:
        raise InputError(path, f"cannot read: not UTF-8 text (byte {exc.start})", expected="a UTF-8 text file") from exc


def load_json_file(path: str | PathLike[str]) -> Any:
    """Read and strictly parse a UTF-8 JSON file."""
    p = Path(path)
    return loads_strict(read_text_file(p), p)


@cache
def _yaml_loader() -> type:
    """The strict YAML loader class, built on first use (PyYAML is imported only when a YAML file is read)."""
    import yaml

    class _StrictYamlLoader(yaml.SafeLoader):
        """SafeLoader whose mappings refuse duplicate keys and which refuses aliases."""

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                # types-PyYAML leaves Parser.peek_event unannotated (it returns the Event checked above)
                mark = self.peek_event().start_mark  # type: ignore[no-untyped-call]
                raise InputError(self.name, "YAML alias (*name) refused: an alias can expand a few lines into gigabytes",
                                 line=mark.line + 1, expected="a config without anchors (&name) and aliases (*name)")
            return super().compose_node(parent, index)

    def _construct_mapping(loader: _StrictYamlLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        loader.flatten_mapping(node)
        result: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=deep)
            if key in result:
                raise DuplicateKeyError(
                    loader.name,
                    f"rule duplicate-key: key {key!r} appears twice in one mapping",
                    line=key_node.start_mark.line + 1,
                    expected="unique keys",
                )
            result[key] = loader.construct_object(value_node, deep=deep)
        return result

    def _construct_int(loader: _StrictYamlLoader, node: yaml.ScalarNode) -> Any:
        value = yaml.SafeLoader.construct_yaml_int(loader, node)
        if not _YAML_JSON_INT.fullmatch(node.value):
            raise InputError(loader.name, f"integer {node.value!r} is YAML 1.1 notation (octal, hex, binary, sexagesimal or with '_') "
                             f"that would be read as {value}", line=node.start_mark.line + 1, expected="a decimal integer as JSON writes it")
        return value

    def _construct_float(loader: _StrictYamlLoader, node: yaml.ScalarNode) -> Any:
        value = yaml.SafeLoader.construct_yaml_float(loader, node)
        if ":" in node.value or "_" in node.value:
            raise InputError(loader.name, f"number {node.value!r} is YAML 1.1 notation (sexagesimal or with '_') that would be read "
                             f"as {value}", line=node.start_mark.line + 1, expected="a decimal number as JSON writes it")
        return value

    def _construct_bool(loader: _StrictYamlLoader, node: yaml.ScalarNode) -> Any:
        value = yaml.SafeLoader.construct_yaml_bool(loader, node)
        if node.value.lower() not in ("true", "false"):
            raise InputError(loader.name, f"{node.value!r} is a YAML 1.1 boolean that would be read as {str(value).lower()}",
                             line=node.start_mark.line + 1, expected="true or false (or quote it for the text)")
        return value

    _StrictYamlLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
    _StrictYamlLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)
    _StrictYamlLoader.add_constructor("tag:yaml.org,2002:float", _construct_float)
    _StrictYamlLoader.add_constructor("tag:yaml.org,2002:bool", _construct_bool)
    return _StrictYamlLoader


_YAML_JSON_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
"""An integer as JSON (and YAML 1.2) writes it; PyYAML's YAML 1.1 also reads 010 as 8, 0x10, 0b11, 1_000 and 1:30 as 90."""


def load_config_file(path: str | PathLike[str]) -> Any:
    """Read a JSON (``.json``) or YAML (anything else) file strictly.

    YAML values must also be JSON data: dates, NaN and non-string keys are
    refused, so the result always has a canonical-JSON fingerprint.
    """
    p = Path(path)
    if p.suffix.lower() == ".json":
        return load_json_file(p)
    import yaml

    text = read_text_file(p)
    try:
        loader = _yaml_loader()(text)
        loader.name = str(p)
        try:
            data = loader.get_single_data()
        finally:
            loader.dispose()
    except RecursionError:
        raise _too_deep(str(p)) from None
    except ValueError as exc:  # an integer over Python's conversion limit: int() raises while constructing it
        raise InputError(p, f"invalid YAML: {exc}".split(";")[0], expected=f"integers of at most {MAX_INT_DIGITS} digits") from None
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark is not None else None
        raise InputError(p, f"invalid YAML: {exc.problem}", line=line) from exc
    except yaml.YAMLError as exc:
        raise InputError(p, f"invalid YAML: {exc}") from exc
    _shallow(data, str(p))
    bad_key = _non_string_key(data)
    if bad_key is not None:
        raise InputError(p, f"mapping key {bad_key!r} is not a string", expected="JSON-compatible YAML")
    try:
        # Round-trip through strict JSON: refuses dates, NaN and other non-JSON values.
        return loads_strict(json.dumps(data, allow_nan=False), p)
    except (TypeError, ValueError) as exc:
        raise InputError(p, f"value is not JSON data: {exc}", expected="JSON-compatible YAML") from exc


def _non_string_key(value: Any) -> Any:
    """The first mapping key that is not a string (JSON would coerce it silently)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, sub in item.items():
                if not isinstance(key, str):
                    return key
                stack.append(sub)
        elif isinstance(item, list):
            stack.extend(item)
    return None


def check_against_schema(schema: Mapping[str, Any], data: Any, source: str | PathLike[str], what: str) -> None:
    """Raise :class:`InputError` naming the first violation of the JSON Schema ``schema`` by ``data``: the file, the
    record's JSON pointer and what was wrong; an unknown key with the closest valid names ("did you mean 'warmup'?").

    One check for every input that has a schema (a dispatched task, a campaign spec); jsonschema is imported on
    the first check, so a CLI's ``--help`` does not pay for it."""
    validator = _integral_validator()(dict(schema))
    # the deepest problem first; 'unevaluated' only when nothing more precise is known
    errors = sorted(validator.iter_errors(data), key=lambda e: (e.validator == "unevaluatedProperties", -len(e.absolute_path)))
    if not errors:
        return
    err = errors[0]
    where = "/" + "/".join(str(p).replace("~", "~0").replace("/", "~1") for p in err.absolute_path)
    if err.validator in ("additionalProperties", "unevaluatedProperties") and isinstance(err.instance, dict):
        known = _declared_keys(err.schema, schema)
        unknown = sorted(set(err.instance) - known)
        if unknown:
            hint = did_you_mean(unknown[0], known)
            raise InputError(source, f"{what}: unknown key {unknown[0]!r} in {where}{hint}", record=where,
                             expected=f"keys among {', '.join(sorted(known))}")
    if err.validator == "required" and isinstance(err.instance, dict):
        missing = next((k for k in err.validator_value if k not in err.instance), None)
        raise InputError(source, f"{what}: {where} has no {missing!r}", record=where, expected=f"the key {missing!r}")
    if err.validator in _DESCRIBED:
        shown = json.dumps(err.instance, ensure_ascii=False)
        raise InputError(source, f"{what}: {where} is {shown[:60]}{'…' if len(shown) > 60 else ''}", record=where,
                         expected=describe_schema(err.schema))
    raise InputError(source, f"{what} invalid at {where}: {err.message}", record=where)


@cache
def _integral_validator() -> Any:
    """Draft 2020-12 whose ``integer`` is a JSON integer only: ``2.0`` is a number with a fraction part written, and
    a workload given ``SK_RUN_RANKS=2.0`` fails on it (JSON Schema's own ``integer`` accepts it)."""
    from jsonschema import Draft202012Validator, validators

    checker = Draft202012Validator.TYPE_CHECKER.redefine(
        "integer", lambda _checker, value: isinstance(value, int) and not isinstance(value, bool))
    return validators.extend(Draft202012Validator, type_checker=checker)  # type: ignore[no-untyped-call]  # untyped in jsonschema


_DESCRIBED = frozenset({"type", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "enum", "const", "minLength"})
"""Validators whose failure reads best as "<pointer> is <value> (expected <what the schema allows>)"."""
_TYPE_WORDS = {"integer": "an integer", "number": "a number", "string": "a string", "boolean": "true or false",
               "array": "a list", "object": "a JSON object", "null": "null"}


def describe_schema(part: Mapping[str, Any]) -> str:
    """What a (sub)schema allows, in words: ``an integer from 1 to 1024``, ``a number > 0 and <= 604800 or null``,
    ``protocol or strict``."""
    if "const" in part:
        return json.dumps(part["const"])
    if "enum" in part:
        return " or ".join(str(v) for v in part["enum"])
    types = part.get("type", [])
    types = [types] if isinstance(types, str) else list(types)
    main = next((t for t in types if t != "null"), None)
    words = _TYPE_WORDS.get(main or "", "any value")
    if main == "array" and isinstance(part.get("items"), Mapping) and part["items"].get("type") == "string":
        words = "a list of strings"
    if main == "string" and part.get("minLength"):
        words = "a non-empty string"
    low, high = part.get("minimum"), part.get("maximum")
    if low is not None and high is not None:
        words += f" from {low} to {high}"
    else:
        if low is not None:
            words += f" >= {low}"
        if part.get("exclusiveMinimum") is not None:
            words += f" > {part['exclusiveMinimum']}"
        if high is not None:
            words += f" {'and ' if part.get('exclusiveMinimum') is not None else ''}<= {high}"
    return words + (" or null" if "null" in types and main is not None else "")


def _declared_keys(part: Mapping[str, Any], root: Mapping[str, Any]) -> set[str]:
    """The keys a (sub)schema declares: its ``properties`` and those of the local ``$ref``/``allOf`` parts it merges."""
    keys = set(part.get("properties", {}))
    for sub in [*part.get("allOf", []), *([{"$ref": part["$ref"]}] if "$ref" in part else [])]:
        ref = sub.get("$ref", "")
        target: Any = root
        if ref.startswith("#/"):
            for name in ref[2:].split("/"):
                target = target.get(name, {})
            keys |= _declared_keys(target, root)
        else:
            keys |= _declared_keys(sub, root)
    return keys
