"""The SK options as torch_npu's wrapper spells them, which release accepts which, and configs in its names.

``torch.compile(options={"super_kernel_optimize_options": …, "super_kernel_debug_options": …})``
goes through ``NPUGraph._validate_options``, which accepts only the keys of its
two tables (``optimize_options`` / ``debug_options``) with one Python type each
(``int``, ``list`` of ``str``, ``dict`` of ``int``, ``str``) and raises for any
other. Its names are the registry's (:mod:`sk_analytics.stage_o.options`)
except for the extend options, ``opt_extend`` / ``debug_extend``, whose value
is the ``k=v1,v2:k2=v3`` text; ``super_kernel.log`` and the option matrix use
the runtime's names. This module maps between the two (pure functions over
option maps and configs) and says, per checked torch_npu release, which
registry options its wrapper accepts (:data:`RELEASE_OPTIONS`; checked against
each release's real sources by ``tests/test_torch_npu_api.py``).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

from sk_analytics.errors import InputError
from sk_analytics.stage_o.options import (
    REGISTRY,
    TORCH_NPU_RELEASES,
    WRAPPER_TYPES,
    OptionSpec,
    map_text,
    spec_of,
    wrapper_section,
)
from sk_runner.config import DEBUG_OPTIONS_KEY, OPTIONS_KEY

OPTION_MAPS = (OPTIONS_KEY, DEBUG_OPTIONS_KEY)
STRUCT_FIELDS = ("value_breaker_bypass", "task_breaker_bypass", "event_breaker_bypass")

RELEASE_OPTIONS: Mapping[str, frozenset[str]] = {
    release: frozenset(spec.name for spec in REGISTRY if release in spec.torch_npu) for release in TORCH_NPU_RELEASES
}
"""Registry options (runtime names) whose torch_npu name each checked release's wrapper accepts, in the
table :func:`wrapper_section` names, with the type of :data:`WRAPPER_TYPES`: derived from each option's
``torch_npu`` releases in the registry (the evidence: ``tests/test_torch_npu_api.py`` reads every release's
own ``_validate_options``). The wrappers of 2.8 and 2.9 also know ``debug_dcci_disable_on_kernel``, which the
registry does not have."""

_MINOR = re.compile(r"^(\d+\.\d+)\.")


def checked_release(version: str) -> str | None:
    """The checked release whose wrapper torch_npu ``version`` has: the version itself, else the
    checked build of its minor release (``2.9.0`` -> ``2.9.1``); None outside the checked range."""
    if version in RELEASE_OPTIONS:
        return version
    minor = _MINOR.match(version)
    return next((r for r in RELEASE_OPTIONS if minor and r.startswith(minor.group(1) + ".")), None)


def release_problem(version: str, spec: OptionSpec) -> str | None:
    """Why the wrapper of torch_npu ``version`` rejects ``spec`` whatever its value, or None (accepted,
    or a release outside the checked range: its own wrapper is asked)."""
    release = checked_release(version)
    if release is None or spec.name in RELEASE_OPTIONS[release]:
        return None
    known = sorted(s.wrapper for n in RELEASE_OPTIONS[release] if (s := spec_of(n)) is not None)
    via = "" if release == version else f" (as its checked build {release})"
    return (f"torch_npu {version}{via}: NPUGraph._validate_options has no {wrapper_section(spec)} key {spec.wrapper!r} "
            f"(it knows {', '.join(known)})")


def wrapper_value(spec: OptionSpec, value: Any) -> Any:
    """``value`` in the form the wrapper takes: a map as its text, anything else as given."""
    if spec.kind == "map":
        text = map_text(value)
        return value if text is None else text
    return copy.deepcopy(value)


def value_problem(spec: OptionSpec, value: Any) -> str | None:
    """Why the wrapper's type check rejects ``value`` (already in wrapper form), or None."""
    kind = spec.kind
    if kind == "uint":
        ok = isinstance(value, int)
    elif kind == "pattern_list":
        ok = isinstance(value, list) and all(isinstance(item, str) for item in value)
    elif kind == "map":
        ok = isinstance(value, str)
    elif kind == "struct":
        ok = isinstance(value, dict) and set(value) <= set(STRUCT_FIELDS) and all(isinstance(v, int) for v in value.values())
    else:
        return f"{spec.name} cannot be set"
    return None if ok else f"{spec.wrapper} must be {WRAPPER_TYPES[kind]}, got {value!r}"


def wrapper_options(options: Mapping[str, Any], *, source: Any = None, where: str = OPTIONS_KEY) -> dict[str, Any]:
    """An option map with torch_npu's names and value forms (unknown keys as given); one option
    given under both of its names is an :class:`InputError` (which one would win is not knowable)."""
    out: dict[str, Any] = {}
    given: dict[str, str] = {}
    for key, value in options.items():
        spec = spec_of(str(key))
        name = str(key) if spec is None else spec.wrapper
        if name in given:
            raise InputError(source, f"{where} sets {name!r} twice (as {given[name]!r} and {key!r})",
                             expected="each SK option once, by its runtime or its torch_npu name")
        given[name] = str(key)
        out[name] = value if spec is None else wrapper_value(spec, value)
    return out


def wrapper_config(config: Mapping[str, Any], *, source: Any = None) -> dict[str, Any]:
    """A copy of ``config`` whose every SK option map (either layout, any depth) uses torch_npu's names."""

    def walk(node: Any, path: str) -> Any:
        if isinstance(node, Mapping):
            return {k: (wrapper_options(v, source=source, where=f"{path}/{k}") if k in OPTION_MAPS and isinstance(v, Mapping)
                        else walk(v, f"{path}/{k}")) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(item, f"{path}/{i}") for i, item in enumerate(node)]
        return copy.deepcopy(node)

    options: dict[str, Any] = walk(config, "")
    return options


__all__ = [
    "RELEASE_OPTIONS", "WRAPPER_TYPES", "checked_release", "release_problem", "value_problem",
    "wrapper_config", "wrapper_options", "wrapper_section", "wrapper_value",
]  # fmt: skip
