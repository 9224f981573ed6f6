"""How the simulated SK runtime reads its options: the config layouts, value
checks as the real option manager does them, and the resulting DCCI task bits.

The registry itself (names, kinds, defaults, ranges) is
:data:`sk_analytics.stage_o.options.REGISTRY`; the pattern syntax is
:mod:`sk_analytics.dcci.pattern`. Like the real runtime, an out-of-range or
malformed value is not rejected: it produces an ``OptionName: …, set value is
invalid, …`` line and the default is used (formats.md §5).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonpointer
import numpy as np

from sk_analytics.dcci.pattern import pattern_problem, to_regex
from sk_analytics.errors import InputError
from sk_analytics.stage_o.options import TORCH_COMPILE_ROOT, OptionSpec, current_registry

OPTIONS_KEY = "super_kernel_optimize_options"
DEBUG_OPTIONS_KEY = "super_kernel_debug_options"
YAML_PARENT = "/model_config/custom_params"

#: ``aggressive_opt_strategies`` fields and their valid ranges.
AGGRESSIVE_FIELDS: dict[str, tuple[int, int]] = {
    "value_breaker_bypass": (0, 3),
    "task_breaker_bypass": (0, 1),
    "event_breaker_bypass": (0, 1),
}
MAP_MAX_CHARS = 1024
_MAP_SYNTAX = re.compile(r"^[A-Za-z0-9_]+=[^:=]*(?::[A-Za-z0-9_]+=[^:=]*)*$")
NON_NUMERIC_RANGE = "[N/A, N/A]"
"""`valid range` text of an invalid line for options without a numeric range."""

# DCCI task bits (formats.md §5).
DCCI_DISABLE = 0x1
DCCI_SYNC_ALL = 0x2
DCCI_BEFORE = 0x4
DCCI_AFTER = 0x8
DCCI_CROSS_CORE = 0x10
DCCI_AFTER_FUNC = 0x20


@dataclass(frozen=True)
class OptionLine:
    """One option line of ``super_kernel.log`` (set, or invalid and defaulted)."""

    name: str
    value_text: str
    valid: bool
    valid_range: str = ""
    default_text: str = ""

    def text(self) -> str:
        if self.valid:
            return f"OptionName: {self.name}, set value: {self.value_text}"
        return (
            f"OptionName: {self.name}, set value is invalid, value is {self.value_text}, "
            f"valid range is {self.valid_range}, the process will use default value: {self.default_text}"
        )


@dataclass(frozen=True)
class EffectiveOptions:
    """The option values the simulated runtime actually uses, after validation."""

    values: dict[str, Any]
    lines: tuple[OptionLine, ...] = field(default_factory=tuple)

    def get(self, name: str) -> Any:
        return self.values[name]

    @property
    def aggressive(self) -> dict[str, int]:
        aggressive: dict[str, int] = self.values["aggressive_opt_strategies"]
        return aggressive

    @property
    def invalid(self) -> tuple[OptionLine, ...]:
        return tuple(line for line in self.lines if not line.valid)


def value_text(value: Any) -> str:
    """How an option value is written in an option line: ints plain, the rest compact JSON."""
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def find_options(config: dict[str, Any], path: Path, pointer: str | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """(optimize options, debug options) of an execution config.

    ``pointer`` names the optimize-options object explicitly; its sibling
    ``super_kernel_debug_options`` (when present) holds the debug options.
    Otherwise the torch.compile layout (top level) or the YAML layout
    (``/model_config/custom_params``) is used; a config with neither has no options.
    """
    if pointer is not None:
        try:
            found = jsonpointer.resolve_pointer(config, pointer)
        except jsonpointer.JsonPointerException as exc:
            raise InputError(path, f"--options-pointer {pointer!r} does not resolve: {exc}", expected="a pointer to the options object") from None
        parent_parts = jsonpointer.JsonPointer(pointer).parts[:-1]
        parent = jsonpointer.resolve_pointer(config, jsonpointer.JsonPointer.from_parts(parent_parts).path, {})
        debug = parent.get(DEBUG_OPTIONS_KEY, {}) if isinstance(parent, dict) else {}
        return _mapping(found, path, pointer), _mapping(debug, path, "debug options")
    base: Any = config
    if OPTIONS_KEY not in config and DEBUG_OPTIONS_KEY not in config:
        base = jsonpointer.resolve_pointer(config, YAML_PARENT, {})
        if not isinstance(base, dict):
            base = {}
    where = TORCH_COMPILE_ROOT if base is config else YAML_PARENT + "/" + OPTIONS_KEY
    return _mapping(base.get(OPTIONS_KEY, {}), path, where), _mapping(base.get(DEBUG_OPTIONS_KEY, {}), path, where)


def _mapping(value: Any, path: Path, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputError(path, f"options at {where} are a {type(value).__name__}", expected="a mapping of option name -> value")
    return value


def _check_uint(spec: OptionSpec, value: Any) -> bool:
    return (isinstance(value, int) and not isinstance(value, bool) and spec.low is not None and spec.high is not None
            and spec.low <= value <= spec.high)


def _check_patterns(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(p, str) and pattern_problem(p) is None for p in value)


def _check_map(value: Any) -> bool:
    if isinstance(value, dict):
        value = ":".join(f"{k}={','.join(map(str, v)) if isinstance(v, list) else v}" for k, v in value.items())
    return isinstance(value, str) and len(value) <= MAP_MAX_CHARS and (value == "" or _MAP_SYNTAX.match(value) is not None)


def _aggressive(value: Any, lines: list[OptionLine]) -> dict[str, int]:
    """Validate the struct field by field; each invalid field falls back to 0."""
    result = {name: 0 for name in AGGRESSIVE_FIELDS}
    if not isinstance(value, dict):
        lines.append(OptionLine("aggressive_opt_strategies", value_text(value), False, NON_NUMERIC_RANGE, value_text(result)))
        return result
    for key, raw in value.items():
        name = f"aggressive_opt_strategies.{key}"
        if key not in AGGRESSIVE_FIELDS:
            lines.append(OptionLine(name, value_text(raw), False, NON_NUMERIC_RANGE, "none"))
            continue
        low, high = AGGRESSIVE_FIELDS[key]
        if isinstance(raw, int) and not isinstance(raw, bool) and low <= raw <= high:
            result[key] = raw
            lines.append(OptionLine(name, str(raw), True))
        else:
            lines.append(OptionLine(name, value_text(raw), False, f"[{low}, {high}]", "0"))
    return result


def resolve(optimize: dict[str, Any], debug: dict[str, Any]) -> EffectiveOptions:
    """Validate every given option as the SK option manager does; defaults for the rest (every option
    of the registry, read at call time: the simulated runtime knows exactly the registered options)."""
    specs = {spec.name: spec for spec in current_registry()}
    values: dict[str, Any] = {name: spec.default for name, spec in specs.items()}
    values["aggressive_opt_strategies"] = dict(specs["aggressive_opt_strategies"].default)
    lines: list[OptionLine] = []
    for name, raw in [*optimize.items(), *debug.items()]:
        spec = specs.get(name)
        if spec is None or spec.kind == "not_settable":
            lines.append(OptionLine(name, value_text(raw), False, NON_NUMERIC_RANGE, "none"))
            continue
        if spec.kind == "struct":
            values[name] = _aggressive(raw, lines)
            continue
        checks: dict[str, Callable[[OptionSpec, Any], bool]] = {
            "uint": _check_uint, "pattern_list": lambda s, v: _check_patterns(v), "map": lambda s, v: _check_map(v)}
        ok = checks[spec.kind](spec, raw)
        if ok:
            values[name] = raw
            lines.append(OptionLine(name, value_text(raw), True))
        else:
            valid_range = f"[{spec.low}, {spec.high}]" if spec.kind == "uint" else NON_NUMERIC_RANGE
            lines.append(OptionLine(name, value_text(raw), False, valid_range, value_text(spec.default)))
    return EffectiveOptions(values, tuple(lines))


def match_any(patterns: list[str], names: list[str]) -> np.ndarray:
    """Boolean array: which ``names`` at least one runtime pattern matches (whole name)."""
    if not patterns:
        return np.zeros(len(names), dtype=bool)
    combined = re.compile("|".join(f"(?:{to_regex(p)})" for p in patterns))
    return np.fromiter((combined.match(n) is not None for n in names), dtype=bool, count=len(names))


def dcci_bits(options: EffectiveOptions, func_names: list[str]) -> np.ndarray:
    """DCCI task flags of each kernel task (formats.md §5): 0x20 = 0x8 OR NOT 0x1."""
    disable = match_any(options.get("dcci_disable_on_kernel"), func_names)
    before = match_any(options.get("dcci_before_kernel_start"), func_names)
    after = match_any(options.get("dcci_after_kernel_end"), func_names)
    bits: np.ndarray = np.where(disable, DCCI_DISABLE, 0) | np.where(before, DCCI_BEFORE, 0) | np.where(after, DCCI_AFTER, 0)
    if options.get("debug_sync_all"):
        bits |= DCCI_SYNC_ALL
    if options.get("debug_cross_core_sync_check"):
        bits |= DCCI_CROSS_CORE
    bits |= np.where(after | ~disable, DCCI_AFTER_FUNC, 0)
    return bits.astype(np.int64)
