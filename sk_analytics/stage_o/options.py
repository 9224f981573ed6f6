"""The SK option registry (formats.md §5): the one place an option is written down.

Each :class:`OptionSpec` says everything sk-tune knows of one option: its kind,
default and range (what the runtime accepts), its Stage O category and trial
values or why it is never tried (protocol §3), and which checked torch_npu
releases' wrapper accepts it. The option matrix (:mod:`.matrix`), the matrix
schema's category enum, the npu backend's wrapper table
(``sk_runner.backends.torch_npu_options``), the simulator's option list and
truth probes (``sk_runner.sim``) and the option table of docs/runner.md are
derived from :data:`REGISTRY`; adding an option is one entry here plus, for the
simulator, its effect in ``sk_runner/sim/model.py`` (docs/design.md says so).

Each option has two names: the runtime's (``name``: formats.md §5, what
``super_kernel.log`` writes and what the matrix, the pointers and the sim use)
and torch_npu's (``wrapper``: the key ``NPUGraph._validate_options`` accepts in
``torch.compile(options=…)``). They differ for the extend options only:
``opt_extend_option`` / ``debug_extend_option`` are ``opt_extend`` /
``debug_extend`` to the wrapper, whose value is the ``k=v1,v2:k2=v3`` text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from jsonpointer import JsonPointer, JsonPointerException, resolve_pointer

from sk_analytics.errors import InputError
from sk_analytics.messages import ids

OptionKind = Literal["uint", "pattern_list", "map", "struct", "not_settable"]
Risk = Literal["low", "medium", "high"]
Category = str
"""A Stage O category of the matrix (``dcci``, ``auto_op_parallel``, ``aggressive``, ``experimental``):
the state machine treats ``dcci`` (joint repair) and ``aggressive`` (risky timeout) specially, any other
like ``experimental``. The matrix schema's enum is every category the registry uses (:func:`categories`)."""

TORCH_NPU_RELEASES: tuple[str, ...] = (
    "2.7.1.post11",
    "2.8.0.post5",
    "2.9.1",
    "2.10.0.post7",
    "2.11.0.post3",
    "2.12.0.post3",
    "2.13.0",
    "2.14.0",
)
"""The checked torch_npu releases: the newest build of every minor release from 2.7 to 2.14 (docs/runner.md;
``tests/torch_npu_sources.py`` fetches their sources)."""

EVERY_RELEASE = TORCH_NPU_RELEASES
FULL_WRAPPER: tuple[str, ...] = tuple(r for r in TORCH_NPU_RELEASES if not r.startswith(("2.8.", "2.9.")))
"""The releases whose wrapper knows the whole registry (2.8 and 2.9 know only four of its options)."""

WRAPPER_TYPES: dict[str, str] = {"uint": "int", "pattern_list": "list of str", "map": "str", "struct": "dict of int"}
"""The ``value_type`` torch_npu's wrapper checks, per registry kind (the same in every release)."""


@dataclass(frozen=True)
class Trial:
    """One value Stage O tries for an option (a matrix candidate before probing)."""

    value: Any
    risk: Risk
    id: str | None = None
    """The matrix entry id (None: ``<name-with-dashes>-<value>``)."""
    prerequisites: tuple[str, ...] = ()
    authorisation: str | None = None


@dataclass(frozen=True)
class EveryOtherValue:
    """Trial values of a ``uint`` option: every value of ``[low, high]`` but the default, ascending."""

    risk: Risk = "low"


@dataclass(frozen=True)
class OptionSpec:
    """One registered SK option: what the runtime accepts, what Stage O tries, what torch_npu accepts."""

    name: str
    kind: OptionKind
    default: Any
    low: int | None = None
    high: int | None = None
    debug: bool = False
    wrapper_name: str | None = None
    """torch_npu's key for the option (None: the same as ``name``)."""
    category: Category | None = None
    """The matrix category of its trials (None: never tried)."""
    trials: tuple[Trial, ...] | EveryOtherValue = ()
    """The values Stage O tries, in trial order."""
    excluded: str | None = None
    """Why the option is never an explicit trial: the catalogs' message id the matrix's ``excluded`` records as its
    ``reason`` (``excluded.*``); debug options need none."""
    trial_order: int | None = None
    """Where its trials stand in the frozen trial order (lower first; None: after every numbered option,
    in registry order)."""
    torch_npu: tuple[str, ...] = ()
    """The checked releases (:data:`TORCH_NPU_RELEASES`) whose ``NPUGraph._validate_options`` has the option under
    its torch_npu name, in the table and with the type the npu backend uses; evidence: each release's own
    sources, read by ``tests/test_torch_npu_api.py::test_the_option_mapping_is_what_the_release_wrapper_accepts``.
    Empty until that test has seen it: no release is claimed without evidence."""

    @property
    def wrapper(self) -> str:
        """The name ``NPUGraph._validate_options`` and ``torch.compile(options=…)`` know."""
        return self.wrapper_name or self.name

    def trial_values(self) -> tuple[Trial, ...]:
        """Its trials with every id filled in (:class:`EveryOtherValue` expanded over the range)."""
        if isinstance(self.trials, EveryOtherValue):
            assert self.low is not None and self.high is not None, f"{self.name}: EveryOtherValue needs a range"
            values = [Trial(v, self.trials.risk) for v in range(self.low, self.high + 1) if v != self.default]
        else:
            values = list(self.trials)
        stem = self.name.replace("_", "-")
        return tuple(t if t.id is not None else Trial(t.value, t.risk, f"{stem}-{t.value}", t.prerequisites, t.authorisation)
                     for t in values)


DCCI_DISABLE_ALL = [".*"]
_DCCI_JOINT_ONLY = "excluded.dcci_joint_only"
_NO_PROBED_VALUE = "excluded.no_probed_value"


def _aggressive(task: int, value: int, event: int = 0) -> dict[str, int]:
    return {"event_breaker_bypass": event, "task_breaker_bypass": task, "value_breaker_bypass": value}


REGISTRY: tuple[OptionSpec, ...] = (
    OptionSpec("preload_code", "uint", 1, 0, 2, category="experimental", trials=EveryOtherValue(), trial_order=4,
               torch_npu=EVERY_RELEASE),
    OptionSpec("split_mode", "uint", 4, 1, 4, category="experimental", trials=EveryOtherValue(), trial_order=5,
               torch_npu=EVERY_RELEASE),
    OptionSpec("stream_fusion", "uint", 1, 0, 1, category="experimental", trials=EveryOtherValue(), trial_order=6,
               torch_npu=EVERY_RELEASE),
    OptionSpec("dcci_disable_on_kernel", "pattern_list", [], category="dcci", trial_order=0,
               trials=(Trial(DCCI_DISABLE_ALL, "medium", "dcci-disable-all"),), torch_npu=FULL_WRAPPER),
    OptionSpec("debug_sync_all", "uint", 0, 0, 1, debug=True, torch_npu=EVERY_RELEASE),
    OptionSpec("kernel_map", "not_settable", None, excluded="excluded.not_settable"),
    OptionSpec("constant_codegen", "uint", 0, 0, 1, category="experimental", trials=EveryOtherValue(), trial_order=7,
               torch_npu=FULL_WRAPPER),
    OptionSpec("auto_op_parallel", "uint", 0, 0, 1, category="auto_op_parallel", trials=(Trial(1, "low"),), trial_order=1,
               torch_npu=FULL_WRAPPER),
    OptionSpec("dcci_before_kernel_start", "pattern_list", [], excluded=_DCCI_JOINT_ONLY, torch_npu=FULL_WRAPPER),
    OptionSpec("debug_op_exec_trace", "uint", 0, 0, 1, debug=True, torch_npu=FULL_WRAPPER),
    OptionSpec("debug_cross_core_sync_check", "uint", 0, 0, 1, debug=True, torch_npu=FULL_WRAPPER),
    OptionSpec("opt_extend_option", "map", {}, wrapper_name="opt_extend", excluded=_NO_PROBED_VALUE, torch_npu=FULL_WRAPPER),
    OptionSpec("debug_extend_option", "map", {}, debug=True, wrapper_name="debug_extend", torch_npu=FULL_WRAPPER),
    OptionSpec("dcci_after_kernel_end", "pattern_list", [], excluded=_DCCI_JOINT_ONLY, torch_npu=FULL_WRAPPER),
    OptionSpec(
        "aggressive_opt_strategies",
        "struct",
        {"value_breaker_bypass": 0, "task_breaker_bypass": 0, "event_breaker_bypass": 0},
        category="aggressive",
        trial_order=2,
        trials=(
            Trial(_aggressive(1, 0), "high", "aggressive-task1-value0"),
            Trial(_aggressive(0, 1), "medium", "aggressive-task0-value1"),
            Trial(_aggressive(0, 2), "medium", "aggressive-task0-value2"),
            Trial(_aggressive(0, 3), "medium", "aggressive-task0-value3"),
            Trial(_aggressive(0, 0, 1), "high", "aggressive-event1-task0-value0", authorisation="event_breaker_bypass"),
        ),
        torch_npu=FULL_WRAPPER,
    ),
    OptionSpec("ubuf_lock_ignore_kernel", "pattern_list", [], excluded=_NO_PROBED_VALUE, torch_npu=FULL_WRAPPER),
    OptionSpec("early_start", "uint", 0, 0, 1, category="experimental", trial_order=3,
               trials=(Trial(1, "high", prerequisites=("operator_adaptation",)),), torch_npu=FULL_WRAPPER),
    OptionSpec("debug_per_op_max_core_num", "uint", 0, 0, 1, debug=True, torch_npu=FULL_WRAPPER),
)
"""Every SK option, in the order of formats.md §5 (the matrix's ``excluded`` list keeps this order).
DCCI comes first in trial order so that its only first trial (disable-all) is derived from the five-run O0
without DCCI options (protocol §6.1); ``early_start=1`` needs declared operator adaptation and
``event_breaker_bypass`` the user's risk authorisation."""

BY_NAME: dict[str, OptionSpec] = {spec.name: spec for spec in REGISTRY}
BY_WRAPPER_NAME: dict[str, OptionSpec] = {spec.wrapper: spec for spec in REGISTRY}


def wrapper_section(spec: OptionSpec) -> str:
    """The ``_validate_options`` table an option is checked in: ``debug_options`` for a debug option."""
    return "debug_options" if spec.debug else "optimize_options"


def current_registry() -> tuple[OptionSpec, ...]:
    """:data:`REGISTRY` as it is now (read at call time, so that a test's temporary registry is seen)."""
    return REGISTRY


def trial_ordered(registry: Sequence[OptionSpec] | None = None) -> list[OptionSpec]:
    """The options that have trials, in frozen trial order (``trial_order``, then registry order)."""
    specs = [s for s in (current_registry() if registry is None else registry) if s.trial_values()]
    return sorted(specs, key=lambda s: float("inf") if s.trial_order is None else s.trial_order)


def categories(registry: Sequence[OptionSpec] | None = None) -> list[Category]:
    """Every category the registry's trials use, in trial order: the matrix schema's ``category`` enum."""
    return list(dict.fromkeys(s.category for s in trial_ordered(registry) if s.category is not None))


def registry_problems(registry: Sequence[OptionSpec] | None = None) -> list[str]:
    """What makes a registry unusable, one line each: an option neither tried nor excluded (it would drop out
    of the matrix unseen), both, a trial without a category, a debug option with trials, an unknown release."""
    problems = []
    specs = current_registry() if registry is None else registry
    names = [s.name for s in specs]
    problems += [f"{n}: registered twice" for n in sorted({n for n in names if names.count(n) > 1})]
    for spec in specs:
        tried, excluded = bool(spec.trial_values()), spec.excluded is not None
        if excluded and spec.excluded not in ids("en"):
            problems.append(f"{spec.name}: exclusion reason {spec.excluded!r} is no message of the catalogs")
        if spec.debug or spec.name.startswith("debug_"):
            if tried or excluded:
                problems.append(f"{spec.name}: a debug option is never tried and needs no exclusion reason")
        elif tried == excluded:
            problems.append(f"{spec.name}: {'both tried and excluded' if tried else 'neither tried nor excluded'}"
                            " (give it trials with a category, or an excluded reason)")
        if tried and spec.category is None:
            problems.append(f"{spec.name}: trials without a category")
        unknown = sorted(set(spec.torch_npu) - set(TORCH_NPU_RELEASES))
        if unknown:
            problems.append(f"{spec.name}: torch_npu releases not checked: {', '.join(unknown)}")
    return problems


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
