"""The SK option registry (formats.md §5) and where options live in a config.

Pure data plus a few helpers. The matrix builder and any validation of option
values read this one table, so the registry is written down exactly once.

Each option has two names: the runtime's (``name``: formats.md §5, what
``super_kernel.log`` writes and what the matrix, the pointers and the sim use)
and torch_npu's (``wrapper``: the key ``NPUGraph._validate_options`` accepts in
``torch.compile(options=…)``). They differ for the extend options only:
``opt_extend_option`` / ``debug_extend_option`` are ``opt_extend`` /
``debug_extend`` to the wrapper, whose value is the ``k=v1,v2:k2=v3`` text.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from jsonpointer import JsonPointer, JsonPointerException, resolve_pointer

from sk_analytics.errors import InputError

OptionKind = Literal["uint", "pattern_list", "map", "struct", "not_settable"]


@dataclass(frozen=True)
class OptionSpec:
    """One registered SK option: kind, default, valid range, debug flag, torch_npu's name."""

    name: str
    kind: OptionKind
    default: Any
    low: int | None = None
    high: int | None = None
    debug: bool = False
    wrapper_name: str | None = None
    """torch_npu's key for the option (None: the same as ``name``)."""

    @property
    def wrapper(self) -> str:
        """The name ``NPUGraph._validate_options`` and ``torch.compile(options=…)`` know."""
        return self.wrapper_name or self.name


REGISTRY: tuple[OptionSpec, ...] = (
    OptionSpec("preload_code", "uint", 1, 0, 2),
    OptionSpec("split_mode", "uint", 4, 1, 4),
    OptionSpec("stream_fusion", "uint", 1, 0, 1),
    OptionSpec("dcci_disable_on_kernel", "pattern_list", []),
    OptionSpec("debug_sync_all", "uint", 0, 0, 1, debug=True),
    OptionSpec("kernel_map", "not_settable", None),
    OptionSpec("constant_codegen", "uint", 0, 0, 1),
    OptionSpec("auto_op_parallel", "uint", 0, 0, 1),
    OptionSpec("dcci_before_kernel_start", "pattern_list", []),
    OptionSpec("debug_op_exec_trace", "uint", 0, 0, 1, debug=True),
    OptionSpec("debug_cross_core_sync_check", "uint", 0, 0, 1, debug=True),
    OptionSpec("opt_extend_option", "map", {}, wrapper_name="opt_extend"),
    OptionSpec("debug_extend_option", "map", {}, debug=True, wrapper_name="debug_extend"),
    OptionSpec("dcci_after_kernel_end", "pattern_list", []),
    OptionSpec(
        "aggressive_opt_strategies",
        "struct",
        {"value_breaker_bypass": 0, "task_breaker_bypass": 0, "event_breaker_bypass": 0},
    ),
    OptionSpec("ubuf_lock_ignore_kernel", "pattern_list", []),
    OptionSpec("early_start", "uint", 0, 0, 1),
    OptionSpec("debug_per_op_max_core_num", "uint", 0, 0, 1, debug=True),
)

BY_NAME: dict[str, OptionSpec] = {spec.name: spec for spec in REGISTRY}
BY_WRAPPER_NAME: dict[str, OptionSpec] = {spec.wrapper: spec for spec in REGISTRY}


def spec_of(name: str) -> OptionSpec | None:
    """The option called ``name`` by the runtime or by torch_npu's wrapper."""
    return BY_NAME.get(name) or BY_WRAPPER_NAME.get(name)


def runtime_name(name: str) -> str:
    """The runtime's (registry's) name of an option named either way; an unknown name as given."""
    spec = spec_of(name)
    return name if spec is None else spec.name


def both_names(name: str) -> tuple[str, ...]:
    """The runtime's and torch_npu's names of an option named either way (one name when they agree
    or the option is unknown)."""
    spec = spec_of(name)
    return (name,) if spec is None else tuple(dict.fromkeys((spec.name, spec.wrapper)))


def map_text(value: Any) -> str | None:
    """A map option value as the runtime's ``k=v1,v2:k2=v3`` text (the form torch_npu's wrapper
    takes): text as given, a mapping of text or lists joined; None for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and all(isinstance(k, str) and isinstance(v, str | list) for k, v in value.items()):
        return ":".join(f"{k}={v if isinstance(v, str) else ','.join(map(str, v))}" for k, v in value.items())
    return None

#: Where the options sit in the two execution-config layouts (formats.md §5).
TORCH_COMPILE_ROOT = "/super_kernel_optimize_options"
YAML_ROOT = "/model_config/custom_params/super_kernel_optimize_options"


def is_debug_option(name: str) -> bool:
    """Debug options never enter the matrix or clean samples."""
    spec = spec_of(name)
    return name.startswith("debug_") or (spec is not None and spec.debug)


def options_root(config: dict[str, Any]) -> str:
    """Pointer of the options object: the YAML layout when the config uses it."""
    if isinstance(config.get("model_config"), dict) and isinstance(config["model_config"].get("custom_params"), dict):
        return YAML_ROOT
    return TORCH_COMPILE_ROOT


def option_pointer(root: str, name: str) -> str:
    """RFC 6901 pointer of option ``name`` under ``root`` (escaped)."""
    try:
        return JsonPointer(root).path + JsonPointer.from_parts([name]).path
    except JsonPointerException as exc:
        raise InputError(None, f"options root {root!r} is not an RFC 6901 pointer: {exc}") from exc


def current_value(config: dict[str, Any], pointer: str) -> Any:
    """Value at ``pointer`` in ``config``, or None when absent."""
    return resolve_pointer(config, pointer, None)
