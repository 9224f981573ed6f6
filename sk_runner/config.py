"""Execution configs of a trial: load, derive by one RFC 6901 pointer, prove the diff, stay clean.

Protocol §5.1: a trial changes exactly one JSON pointer relative to the
incumbent; the DCCI joint repair (§6) is the only two-pointer trial, and only
for ``dcci_before_kernel_start`` + ``dcci_after_kernel_end`` with identical
lists. The RFC 6902 diff written next to the trial config is computed with
``jsonpatch`` from the two documents and checked to touch nothing but the
declared pointers. Debug options never enter a clean trial (§5, formats §5) and
profiling/metadata/trace switches in the environment make a process unclean.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonpatch
import jsonpointer

from sk_analytics.errors import EnvironmentBlocker, InputError, UsageError
from sk_analytics.files.strict_json import load_config_file, loads_strict
from sk_analytics.stage_o.option_values import name_problem, value_problem
from sk_analytics.stage_o.options import is_debug_option, spec_of

OPTIONS_KEY = "super_kernel_optimize_options"
DEBUG_OPTIONS_KEY = "super_kernel_debug_options"
JOINT_DCCI_OPTIONS = ("dcci_before_kernel_start", "dcci_after_kernel_end")

#: Environment variables that make a process unclean (profiling, SK metadata
#: dump, sk_prof, trace, debug sync). Exact names and name prefixes.
UNCLEAN_ENV_NAMES = frozenset(
    {
        "ASCEND_PROF_SK_ON",  # sk_prof time profiling (formats §3)
        "ASCEND_OP_COMPILE_SAVE_KERNEL_META",  # SK metadata dump (formats §4)
        "SK_RUN_PROFILE",  # profiler switch of our own backends / the simulator
        "PROFILING_MODE",  # GE/ACL profiling
        "PROFILING_OPTIONS",
        "ASCEND_LAUNCH_BLOCKING",  # synchronous launches = debug sync
        "TORCH_NPU_PROFILER",
    }
)
UNCLEAN_ENV_PREFIXES = ("ASCEND_PROF", "MSPROF", "SK_RUN_PROFILE")
#: Values that mean "switched off"; such a variable is still removed from the child env.
OFF_VALUES = frozenset({"", "0", "false", "off", "no", "none"})


def load_config(path: str | Path) -> dict[str, Any]:
    """Read a JSON (``.json``) or YAML config strictly; its top must be a mapping."""
    data = load_config_file(path)
    if not isinstance(data, dict):
        raise InputError(path, f"config is a {type(data).__name__}", expected="a JSON object / YAML mapping at the top")
    return data


@dataclass(frozen=True)
class PointerChange:
    """One ``--set /pointer=JSON`` request."""

    pointer: str
    value: Any

    @property
    def parts(self) -> list[str]:
        return jsonpointer.JsonPointer(self.pointer).parts


def parse_set(text: str) -> PointerChange:
    """Parse ``/json/pointer=JSON_VALUE`` (split at the first ``=``)."""
    pointer, sep, raw = text.partition("=")
    if not sep:
        raise UsageError(f"--set {text!r}: expected /json/pointer=JSON_VALUE")
    try:
        jsonpointer.JsonPointer(pointer)
    except jsonpointer.JsonPointerException as exc:
        raise UsageError(f"--set {text!r}: {pointer!r} is not an RFC 6901 pointer ({exc})") from None
    if pointer == "":
        raise UsageError(f"--set {text!r}: the empty pointer would replace the whole config")
    try:
        value = loads_strict(raw, f"--set {pointer}")
    except InputError as exc:  # a repeated key, NaN, an integer of thousands of digits: named as in a file
        if isinstance(exc.__cause__, json.JSONDecodeError):
            raise UsageError(f"--set {text!r}: value {raw!r} is not JSON (quote strings: '\"x\"')") from None
        raise UsageError(f"--set {text[:80]!r}: {exc.message}" + (f" (expected {exc.expected})" if exc.expected else "")) from None
    return PointerChange(pointer, value)


@dataclass(frozen=True)
class DerivedConfig:
    """The trial config, the RFC 6902 patch from the incumbent, and the change set."""

    config: dict[str, Any]
    patch: list[dict[str, Any]]
    changes: tuple[PointerChange, ...]
    originals: tuple[Any, ...]
    """value at each pointer before the trial (``None`` when absent)."""

    @property
    def allowed_pointers(self) -> list[str]:
        return [c.pointer for c in self.changes]


def derive_config(
    base: Mapping[str, Any],
    changes: Sequence[PointerChange],
    *,
    joint_dcci: bool = False,
    source: str | Path = "<base config>",
) -> DerivedConfig:
    """Apply the pointer changes to a deep copy of ``base`` and prove the diff.

    Zero changes make an incumbent copy (O0). More than one is refused unless
    ``joint_dcci`` and the pair is the DCCI joint repair (protocol §6).
    """
    check_change_count(changes, joint_dcci=joint_dcci)
    config = copy.deepcopy(dict(base))
    originals = []
    for change in changes:
        ptr = jsonpointer.JsonPointer(change.pointer)
        try:
            parent, last = ptr.to_last(config)
        except jsonpointer.JsonPointerException as exc:
            raise InputError(source, f"pointer {change.pointer} does not resolve: {exc}", expected="an existing parent object") from None
        if not isinstance(parent, dict):
            raise InputError(source, f"pointer {change.pointer}: parent is a {type(parent).__name__}", expected="a JSON object as the parent")
        originals.append(copy.deepcopy(parent.get(last)))
        if last in parent and parent[last] == change.value and type(parent[last]) is type(change.value):
            raise UsageError(f"--set {change.pointer}: value equals the incumbent's, the trial would change nothing")
        parent[last] = copy.deepcopy(change.value)
    patch = jsonpatch.make_patch(dict(base), config).patch
    verify_patch(patch, [c.pointer for c in changes])
    return DerivedConfig(config, patch, tuple(changes), tuple(originals))


def check_change_count(changes: Sequence[PointerChange], *, joint_dcci: bool) -> None:
    """At most one pointer; two only as the DCCI joint repair with identical lists."""
    if len(changes) <= 1:
        if joint_dcci:
            raise UsageError("--joint-dcci needs exactly the two --set pointers dcci_before_kernel_start and dcci_after_kernel_end")
        return
    if not joint_dcci:
        raise UsageError(
            f"{len(changes)} pointers given ({', '.join(c.pointer for c in changes)}): a trial changes exactly one "
            "RFC 6901 pointer (the DCCI joint repair needs --joint-dcci)"
        )
    if len(changes) != 2:
        raise UsageError(f"--joint-dcci takes exactly two --set pointers, got {len(changes)}")
    by_name = {c.parts[-1]: c for c in changes}
    if sorted(by_name) != sorted(JOINT_DCCI_OPTIONS):
        raise UsageError(
            "--joint-dcci pointers must end in dcci_before_kernel_start and dcci_after_kernel_end, got "
            + ", ".join(c.pointer for c in changes)
        )
    before, after = (by_name[n] for n in JOINT_DCCI_OPTIONS)
    if before.parts[:-1] != after.parts[:-1] or before.parts[-2:-1] != [OPTIONS_KEY]:
        raise UsageError(f"--joint-dcci pointers must sit in the same {OPTIONS_KEY} object")
    if not isinstance(before.value, list) or before.value != after.value:
        raise UsageError("--joint-dcci: dcci_before_kernel_start and dcci_after_kernel_end must be exactly the same list")


def verify_patch(patch: Sequence[Mapping[str, Any]], allowed: Sequence[str]) -> None:
    """Every op of ``patch`` (path and ``from``) lies at or under an allowed pointer."""
    allowed_parts = [jsonpointer.JsonPointer(p).parts for p in allowed]
    for index, op in enumerate(patch):
        for key in ("path", "from"):
            if key not in op:
                continue
            parts = jsonpointer.JsonPointer(op[key]).parts
            if not any(parts[: len(a)] == a for a in allowed_parts):
                raise InputError(
                    None,
                    f"config diff op {index} ({op.get('op')} {op[key]}) changes a pointer outside {list(allowed)}",
                    record=index,
                    expected="only the declared pointers to change",
                )


def option_maps(config: Any, pointer: tuple[str, ...] = ()) -> Iterator[tuple[str, tuple[str, ...], Any]]:
    """Yield (key, pointer parts, value) of every SK option map anywhere in the config."""
    if isinstance(config, dict):
        for key, value in config.items():
            here = (*pointer, str(key))
            if key in (OPTIONS_KEY, DEBUG_OPTIONS_KEY):
                yield key, here, value
            yield from option_maps(value, here)
    elif isinstance(config, list):
        for i, value in enumerate(config):
            yield from option_maps(value, (*pointer, str(i)))


def debug_violations(config: Mapping[str, Any]) -> list[str]:
    """Pointers of debug options in ``config`` (``debug_*`` options, non-empty debug map)."""
    found = []
    for key, parts, value in option_maps(config):
        path = jsonpointer.JsonPointer.from_parts(list(parts)).path
        if key == DEBUG_OPTIONS_KEY and value not in (None, {}, [], ""):
            found.append(path)
        elif key == OPTIONS_KEY and isinstance(value, dict):
            found.extend(f"{path}/{name}" for name in value if is_debug_option(str(name)))
    return found


def check_config_options(config: dict[str, Any], source: Path | str) -> None:
    """Every option of every ``super_kernel_optimize_options`` map of an execution config is a registered option with a
    valid value (:mod:`~sk_analytics.stage_o.option_values`); else a one-line error naming the option's pointer."""
    for key, parts, options in option_maps(config):
        if key != OPTIONS_KEY or not isinstance(options, dict):
            continue
        for name, value in options.items():
            spec = spec_of(name)
            problem = name_problem(name) if spec is None else value_problem(spec, value)
            if problem is not None:
                raise InputError(source, problem, record=jsonpointer.JsonPointer.from_parts([*parts, name]).path)


def refuse_debug_options(config: Mapping[str, Any], source: str | Path) -> None:
    """Raise :class:`InputError` when the config carries any debug option."""
    found = debug_violations(config)
    if found:
        raise InputError(source, f"debug options are not allowed in a clean trial: {', '.join(found)}",
                         expected="no debug_* option and an empty super_kernel_debug_options")


def unclean_env(env: Mapping[str, str]) -> dict[str, str]:
    """Profiling/metadata/trace/debug switches of ``env`` (name -> value), set or not."""
    return {k: v for k, v in env.items() if k in UNCLEAN_ENV_NAMES or k.startswith(UNCLEAN_ENV_PREFIXES)}


def refuse_dirty_env(env: Mapping[str, str]) -> None:
    """Raise :class:`EnvironmentBlocker` when any unclean switch is switched on."""
    on = {k: v for k, v in unclean_env(env).items() if v.strip().lower() not in OFF_VALUES}
    if on:
        listed = ", ".join(f"{k}={v}" for k, v in sorted(on.items()))
        raise EnvironmentBlocker(f"profiling/metadata/trace switches are set ({listed}): clean trials need them unset")


def scrub_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without any profiling/metadata/trace/debug switch (even switched-off ones)."""
    dirty = unclean_env(env)
    return {k: v for k, v in env.items() if k not in dirty}


def options_pointer_of(change: PointerChange) -> tuple[str, str] | None:
    """(pointer of the option, option name) addressed by ``change`` — the key
    directly under ``super_kernel_optimize_options`` — or None outside an option map."""
    parts = change.parts
    for i, part in enumerate(parts[:-1]):
        if part == OPTIONS_KEY:
            return jsonpointer.JsonPointer.from_parts(parts[: i + 2]).path, parts[i + 1]
    return None


def resolve(config: Mapping[str, Any], pointer: str) -> Any:
    """Value at ``pointer`` (None when absent)."""
    return jsonpointer.resolve_pointer(config, pointer, None)
