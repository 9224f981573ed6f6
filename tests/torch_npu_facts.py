"""Facts about torch_npu read from its real sources (never imported): where the profiler writes, what it registers.

``tensorboard_trace_handler(dir_name)`` makes ``<dir_name>/<span>/`` with
``span = "{}_{}_ascend_pt".format(worker_name, <clock>.strftime(<fmt>)[:<cut>])``
and ``worker_name = "{}_{}".format(<host>, <pid>)`` (``ProfPathCreator.create_prof_dir``).
:func:`folder_rule` finds that expression in the sources and turns it into a
:class:`FolderRule`, which names the folder for a given host, pid and instant
exactly as the real code would; the simulator and the ingest discovery are
checked against it (``tests/test_torch_npu_api.py``). The output folder and the
file names the discovery looks for are read from the sources too, and so are
the ``torch.compile`` backends torch_npu registers and the module it makes
``torch.npu``.
"""

from __future__ import annotations

import ast
import datetime as dt
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from py_sources import SourceTree

SPAN_SUFFIX = "_ascend_pt"


@dataclass(frozen=True)
class FolderRule:
    """The ``*_ascend_pt`` folder name as one torch_npu release builds it."""

    source: str
    """``file:line`` of the expression it was read from."""
    span_template: str
    worker_template: str
    worker_parts: tuple[Literal["host", "pid"], ...]
    clock: Literal["local", "utc"]
    strftime: str
    cut: int | None
    """The slice end applied to the formatted time (``-3``: microseconds to milliseconds)."""

    def name(self, host: str, pid: int, when_ns: int) -> str:
        """The folder name for a process on ``host`` with ``pid`` that starts the profiler at ``when_ns`` (epoch ns)."""
        seconds, rest_ns = divmod(when_ns, 1_000_000_000)
        moment = dt.datetime.fromtimestamp(seconds, tz=dt.timezone.utc).replace(microsecond=rest_ns // 1000)
        if self.clock == "local":
            moment = moment.astimezone()
        stamp = moment.strftime(self.strftime)[: self.cut]
        worker = self.worker_template.format(*({"host": host, "pid": str(pid)}[p] for p in self.worker_parts))
        return self.span_template.format(worker, stamp)


class RuleNotFound(AssertionError):
    """The sources do not build the folder name in a form this reader knows (the rule changed: read it anew)."""


def _format_call(node: ast.AST) -> tuple[str, list[ast.expr]] | None:
    """``"<template>".format(args)`` -> (template, args)."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr == "format"
        and isinstance(node.func.value, ast.Constant)
        and isinstance(node.func.value.value, str)
    ):
        return node.func.value.value, list(node.args)
    return None


def _assigned(function: ast.AST, name: str) -> ast.expr | None:
    """The value last assigned to the local ``name`` in ``function``."""
    values = [n.value for n in ast.walk(function) if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in n.targets)]
    return values[-1] if values else None


def _clock(expr: ast.expr) -> Literal["local", "utc"]:
    """``datetime.now(tz=utc).astimezone()`` / ``datetime.now()`` are local time; ``utcnow()`` / ``now(tz=utc)`` are UTC."""
    text = ast.unparse(expr)
    if re.fullmatch(r"(?:datetime\.)?datetime\.now\((?:tz=)?timezone\.utc\)\.astimezone\(\)|(?:datetime\.)?datetime\.now\(\)", text):
        return "local"
    if re.fullmatch(r"(?:datetime\.)?datetime\.utcnow\(\)|(?:datetime\.)?datetime\.now\((?:tz=)?timezone\.utc\)", text):
        return "utc"
    raise RuleNotFound(f"unknown clock expression {text!r}")


def _worker(expr: ast.expr | None, where: str) -> tuple[str, tuple[Literal["host", "pid"], ...]]:
    call = _format_call(expr) if expr is not None else None
    if call is None:
        raise RuleNotFound(f"{where}: worker name is not a str.format call")
    template, args = call
    parts: list[Literal["host", "pid"]] = []
    for arg in args:
        text = ast.unparse(arg)
        if "gethostname" in text:
            parts.append("host")
        elif "getpid" in text:
            parts.append("pid")
        else:
            raise RuleNotFound(f"{where}: unknown worker name part {text!r}")
    return template, tuple(parts)


def _stamp(expr: ast.expr, function: ast.AST, where: str) -> tuple[Literal["local", "utc"], str, int | None]:
    """``<clock>.strftime(fmt)[:cut]`` -> (clock, fmt, cut)."""
    cut = None
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Slice) and expr.slice.lower is None and expr.slice.step is None:
        cut = ast.literal_eval(expr.slice.upper) if expr.slice.upper is not None else None
        expr = expr.value
    if not (isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "strftime" and isinstance(expr.args[0], ast.Constant)):
        raise RuleNotFound(f"{where}: the time part is not <clock>.strftime(<format>)[:n]")
    clock_expr = expr.func.value
    if isinstance(clock_expr, ast.Name):
        clock_expr = _assigned(function, clock_expr.id) or clock_expr
    return _clock(clock_expr), str(expr.args[0].value), cut


def folder_rule(tree: SourceTree, package: str = "torch_npu.profiler") -> FolderRule:
    """The rule of the ``"..._ascend_pt".format(worker, stamp)`` expression in ``package``'s sources."""
    found = []
    for path, module in tree.modules(package, containing=re.escape(SPAN_SUFFIX)):
        for function in (n for n in ast.walk(module) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
            for node in ast.walk(function):
                call = _format_call(node)
                if call is not None and call[0].endswith(SPAN_SUFFIX):
                    found.append((f"{path.relative_to(tree.root)}:{node.lineno}", call, function))
    if len(found) != 1:
        raise RuleNotFound(f"expected one '...{SPAN_SUFFIX}'.format(...) in {package}, found {[f[0] for f in found]}")
    where, (template, args), function = found[0]
    if len(args) != 2:
        raise RuleNotFound(f"{where}: expected format(worker_name, stamp)")
    worker_expr = _assigned(function, args[0].id) if isinstance(args[0], ast.Name) else args[0]
    worker_template, parts = _worker(worker_expr, where)
    clock, fmt, cut = _stamp(args[1], function, where)
    return FolderRule(where, template, worker_template, parts, clock, fmt, cut)


def string_constants(tree: SourceTree, package: str, pattern: str, *, containing: str, fill: str = "0") -> dict[str, str]:
    """Every string literal in ``package`` (files matching ``containing``) that fully matches ``pattern``, f-strings rendered with ``fill``
    for their fields: ``{value: file:line}`` (e.g. the kernel_details and DB file names)."""
    compiled = re.compile(pattern)
    found: dict[str, str] = {}
    for path, module in tree.modules(package, containing):
        for node in ast.walk(module):
            if isinstance(node, ast.JoinedStr):
                text = "".join(v.value if isinstance(v, ast.Constant) else fill for v in node.values)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                text = node.value
            else:
                continue
            if compiled.fullmatch(text):
                found.setdefault(text, f"{path.relative_to(tree.root)}:{node.lineno}")
    return found


def output_dir_name(tree: SourceTree) -> str:
    """The ``ASCEND_PROFILER_OUTPUT`` folder name (``Constant.OUTPUT_DIR`` of the profiler's analysis package)."""
    definition = tree.resolve("torch_npu.profiler.analysis.prof_common_func._constant.Constant.OUTPUT_DIR")
    node = getattr(definition, "node", None)
    if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Constant):
        raise RuleNotFound("Constant.OUTPUT_DIR is not a string constant in torch_npu.profiler.analysis.prof_common_func._constant")
    return str(node.value.value)


def module_of(tree: SourceTree, path: Path) -> str:
    """The dotted module name of a source file."""
    parts = path.relative_to(tree.root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _calls_named(tree: SourceTree, package: str, pattern: str, containing: str) -> list[tuple[Path, ast.Call]]:
    """Every call in ``package`` (files holding ``containing``) whose callee's last name fully matches ``pattern``."""
    compiled = re.compile(pattern)
    found = []
    for path, module in tree.modules(package, containing):
        for node in ast.walk(module):
            if isinstance(node, ast.Call):
                callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
                if compiled.fullmatch(callee):
                    found.append((path, node))
    return found


def _string_value(tree: SourceTree, module: str, expr: ast.expr) -> str | None:
    """A string literal, or a module-level name bound to one (``NPUGRAPH_EX_BACKEND = "npugraph_ex"``)."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if isinstance(expr, ast.Name):
        definition = tree.resolve(f"{module}.{expr.id}")
        node = getattr(definition, "node", None)
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return node.value.value
    return None


def registered_compile_backends(tree: SourceTree, package: str = "torch_npu") -> dict[str, str]:
    """Names passed to a ``*register*backend*`` call in ``package`` (``torch.compile(backend=...)`` names,
    but also distributed backends such as ``hccl``): ``{name: file:line}``."""
    found: dict[str, str] = {}
    for path, call in _calls_named(tree, package, r"_?register\w*_backend", r"register\w*_backend\s*\("):
        module = module_of(tree, path)
        for arg in (*call.args, *(k.value for k in call.keywords)):
            if (name := _string_value(tree, module, arg)) is not None:
                found.setdefault(name, f"{path.relative_to(tree.root)}:{call.lineno}")
    return found


def device_module(tree: SourceTree, device: str = "npu", package: str = "torch_npu") -> dict[str, str]:
    """What ``torch._register_device_module(device, <module>)`` installs as ``torch.<device>``: ``{module: file:line}``."""
    return {
        ast.unparse(call.args[1]): f"{path.relative_to(tree.root)}:{call.lineno}"
        for path, call in _calls_named(tree, package, "_register_device_module", "_register_device_module")
        if len(call.args) == 2 and isinstance(call.args[0], ast.Constant) and call.args[0].value == device
    }


def wrapper_options(tree: SourceTree) -> dict[str, set[str]] | None:
    """The option tables of ``NPUGraph._validate_options`` (``{"optimize_options": {names}, "debug_options": {...}}``):
    the dict literal in its body keyed by ``"optimize_options"``; None when the release has no such method."""
    types = wrapper_option_types(tree)
    return None if types is None else {section: set(table) for section, table in types.items()}


def wrapper_option_types(tree: SourceTree) -> dict[str, dict[str, str]] | None:
    """``{section: {name: type}}`` of ``NPUGraph._validate_options``'s tables, each type as the wrapper checks
    it: ``int``, ``str``, ``list of str`` (an ``element_type``), ``dict of int`` (``sub_options`` all int), or the
    bare ``value_type``; None when the release has no such method."""
    definition = tree.resolve("torch_npu.npu.NPUGraph._validate_options")
    if definition is None or definition.node is None:
        return None
    for node in ast.walk(definition.node):
        if isinstance(node, ast.Dict) and any(isinstance(k, ast.Constant) and k.value == "optimize_options" for k in node.keys):
            return {
                str(k.value): {str(n.value): _option_type(t) for n, t in zip(v.keys, v.values, strict=True) if isinstance(n, ast.Constant)}
                for k, v in zip(node.keys, node.values, strict=True)
                if isinstance(k, ast.Constant) and isinstance(v, ast.Dict)
            }
    raise RuleNotFound(f"{definition.where}: no option table keyed by 'optimize_options'")


def _option_type(spec: ast.expr) -> str:
    """The type text of one option entry (``{'value_type': list, 'element_type': str}`` -> ``list of str``)."""
    fields = dict(zip((k.value for k in spec.keys if isinstance(k, ast.Constant)), spec.values, strict=False)) if isinstance(spec, ast.Dict) else {}
    base = ast.unparse(fields["value_type"]) if "value_type" in fields else "?"
    if "element_type" in fields:
        return f"{base} of {ast.unparse(fields['element_type'])}"
    subs = fields.get("sub_options")
    if isinstance(subs, ast.Dict):
        inner = {_option_type(v) for v in subs.values}
        return f"{base} of {inner.pop()}" if len(inner) == 1 else base
    return base
