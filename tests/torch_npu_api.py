"""The npu backend's uses of torch_npu checked against one release's sources: a list of problems (empty: all good).

Pure functions of a :class:`~py_sources.SourceTree` (the release) and the
:class:`~npu_backend_uses.BackendUses` (read from the backend's AST), so the
same checks run on the real releases (``tests/test_torch_npu_api.py``) and on
small broken source trees that prove each check can fail
(``tests/test_torch_npu_api_checks.py``).
"""

from __future__ import annotations

import ast

from npu_backend_uses import BackendUses, Call, in_torch_npu, torch_npu_path
from py_sources import Definition, SourceTree, decorator_names, reads_name
from torch_npu_facts import device_module, registered_compile_backends, wrapper_option_types

from sk_analytics.stage_o.options import REGISTRY
from sk_runner.backends.torch_npu_options import WRAPPER_TYPES, wrapper_section

COMPILED_PREFIX = "torch_npu._C"
"""torch_npu's compiled extension: its classes (``ProfilerActivity``) are not in the ``.py`` sources."""


def _compiled_member_problem(tree: SourceTree, path: str, definition: Definition) -> str | None:
    """A name inside a compiled class (``ProfilerActivity.NPU``) is accepted when the package's own Python code uses it."""
    if not definition.module.startswith(COMPILED_PREFIX):
        return f"{path}: comes from {definition.module}, outside torch_npu's sources and its compiled extension"
    if "." not in definition.name:
        return None  # the compiled object itself, imported by the sources from torch_npu._C
    if tree.attribute_use("torch_npu", definition.name) is not None:
        return None
    return f"{path}: {definition.name} is in compiled code ({definition.module}) and torch_npu's own sources never use it"


def name_problems(tree: SourceTree, uses: BackendUses) -> list[str]:
    """Every torch_npu name the backend reads that the release does not define."""
    problems = []
    for path in uses.paths():
        if not in_torch_npu(path):
            continue
        definition = tree.resolve(torch_npu_path(path))
        if definition is None:
            first = next(u for u in uses.uses if u.path == path)
            problems.append(f"{path} (backend line {first.line}, {first.function}): not defined in the sources")
        elif definition.kind == "compiled" and (problem := _compiled_member_problem(tree, path, definition)):
            problems.append(problem)
    return problems


def call_problems(tree: SourceTree, uses: BackendUses) -> list[str]:
    """Every call on a torch_npu callable whose arguments the real signature would not bind."""
    problems = []
    for call in uses.calls:
        if not in_torch_npu(call.path):
            continue
        where = f"{call.path} (backend line {call.line})"
        if call.unresolved:
            problems.append(f"{where}: arguments cannot be checked: {call.unresolved}")
            continue
        definition = tree.resolve(torch_npu_path(call.path))
        if definition is None:
            continue  # reported by name_problems
        params = tree.params(definition)
        if params is None:
            problems.append(f"{where}: no signature in the sources ({definition.kind} {definition.where})")
            continue
        problems += [f"{where} -> {definition.where}: {p}" for p in params.problems(call.positional, call.keywords)]
        problems += _unbound_self_problems(call, definition)
    return problems


def _unbound_self_problems(call: Call, definition: Definition) -> list[str]:
    """A method called through its class with ``None`` for ``self`` (the exact-value probe) must not read ``self``."""
    node = definition.node
    if not (definition.in_class and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and call.positional_literals[:1] == (None,)):
        return []
    if decorator_names(node) & {"staticmethod", "classmethod"} or not node.args.args:
        return []
    first = node.args.args[0].arg
    lines = reads_name(node, first)
    return [f"{call.path} (backend line {call.line}) passes None as {first}, but {definition.where} reads {first} at line(s) {lines}"] if lines else []


def compile_backend_problems(tree: SourceTree, uses: BackendUses) -> list[str]:
    """``torch.compile(backend="<name>")``: the release must register ``<name>``."""
    registered = registered_compile_backends(tree)
    problems = []
    for call in uses.calls:
        backend = call.literal_keywords.get("backend")
        if call.path == "torch.compile" and isinstance(backend, str) and backend not in registered:
            problems.append(f"torch.compile(backend={backend!r}) (backend line {call.line}): not registered (registered: {', '.join(sorted(registered))})")
    return problems


def device_module_problems(tree: SourceTree, uses: BackendUses) -> list[str]:
    """The backend reads ``torch.npu.*`` as ``torch_npu.npu.*``: the release must register that module as ``torch.npu``."""
    if not any(p.startswith("torch.npu") for p in uses.paths()):
        return []
    installed = device_module(tree)
    return [] if "torch_npu.npu" in installed else [f"torch.npu: torch_npu does not register torch_npu.npu as torch's npu module (found {installed or 'none'})"]


def wrapper_accepts(tree: SourceTree) -> set[str] | None:
    """Settable registry options (runtime names) that the release's wrapper accepts as the npu backend
    hands them over: torch_npu's name (``spec.wrapper``) in the table ``sk-run probe`` asks
    (:func:`~sk_runner.backends.torch_npu_options.wrapper_section`) with the value type the backend
    converts to (:data:`~sk_runner.backends.torch_npu_options.WRAPPER_TYPES`). None: no wrapper
    (reported by name_problems)."""
    tables = wrapper_option_types(tree)
    if tables is None:
        return None
    return {spec.name for spec in REGISTRY
            if spec.kind != "not_settable" and tables.get(wrapper_section(spec), {}).get(spec.wrapper) == WRAPPER_TYPES[spec.kind]}


def api_problems(tree: SourceTree, uses: BackendUses) -> list[str]:
    """Every problem of the backend's torch_npu uses against one release."""
    return [*device_module_problems(tree, uses), *name_problems(tree, uses), *call_problems(tree, uses), *compile_backend_problems(tree, uses)]
