"""A Python package read with ``ast``, never imported: what a dotted name is, and what a call may pass.

Used to check the npu backend against the real torch_npu sources
(``tests/test_torch_npu_api.py``), which cannot be imported without the Ascend
libraries. Names are resolved the way Python binds them at import time:
top-level definitions, assignments and imports (also inside top-level ``if`` /
``try`` blocks, the last binding winning), submodules of a package, class
members (also through base classes that are in the sources). A name imported
from a module that is not a ``.py`` file of the package (a compiled extension
such as ``torch_npu._C``, or another package) resolves to a ``compiled``
definition: the sources cannot say more about it.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Literal

Kind = Literal["module", "class", "function", "value", "compiled"]


@dataclass(frozen=True)
class Definition:
    """What a dotted name is bound to in the sources."""

    kind: Kind
    module: str
    """The module whose source holds the definition (for ``compiled``: the module it is imported from)."""
    name: str
    """The qualified name inside that module (``profile``, ``ProfilerLevel.Level1``; ``""`` for a module)."""
    node: ast.AST | None = field(default=None, compare=False, repr=False)
    in_class: bool = False
    """A function or value defined in a class body (a method, a class attribute)."""

    @property
    def where(self) -> str:
        """``module:line`` (or the module alone), for messages."""
        line = getattr(self.node, "lineno", None)
        return f"{self.module}:{line}" if line else self.module


@dataclass(frozen=True)
class Params:
    """The parameters a function accepts (``self``/``cls`` already dropped where the call binds it)."""

    positional: tuple[str, ...]
    required_positional: int
    keyword_only: tuple[str, ...]
    required_keyword_only: tuple[str, ...]
    var_positional: bool
    var_keyword: bool

    def problems(self, positional: int, keywords: frozenset[str]) -> list[str]:
        """Why a call with ``positional`` arguments and these keywords would fail to bind (empty: it binds)."""
        out = []
        if positional > len(self.positional) and not self.var_positional:
            out.append(f"{positional} positional arguments given, at most {len(self.positional)} accepted {self.positional}")
        named = set(self.positional) | set(self.keyword_only)
        unknown = sorted(k for k in keywords if k not in named)
        if unknown and not self.var_keyword:
            out.append(f"unknown keyword(s) {', '.join(unknown)} (accepted: {', '.join(sorted(named)) or 'none'})")
        doubled = sorted(k for k in keywords if k in self.positional[:positional])
        if doubled:
            out.append(f"{', '.join(doubled)} given both by position and by keyword")
        missing = [p for p in self.positional[positional : self.required_positional] if p not in keywords]
        missing += [k for k in self.required_keyword_only if k not in keywords]
        if missing:
            out.append(f"required parameter(s) {', '.join(missing)} not given")
        return out


def params_of(function: ast.FunctionDef | ast.AsyncFunctionDef, *, drop_first: bool) -> Params:
    """The :class:`Params` of a ``def``; ``drop_first`` for the ``self``/``cls`` a bound call supplies."""
    a = function.args
    positional = [p.arg for p in (*a.posonlyargs, *a.args)]
    required = len(positional) - len(a.defaults)
    if drop_first and positional:
        positional, required = positional[1:], max(required - 1, 0)
    required_kw = tuple(p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is None)
    return Params(tuple(positional), required, tuple(p.arg for p in a.kwonlyargs), required_kw, a.vararg is not None, a.kwarg is not None)


def decorator_names(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The bare names of a ``def``'s decorators (``staticmethod``, ``classmethod``, ``wraps``...)."""
    names = set()
    for deco in function.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if isinstance(target, ast.Name):
            names.add(target.id)
        elif isinstance(target, ast.Attribute):
            names.add(target.attr)
    return names


def reads_name(function: ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> list[int]:
    """Lines where the body of ``function`` reads the local ``name`` (e.g. its ``self``)."""
    return sorted({n.lineno for stmt in function.body for n in ast.walk(stmt) if isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load)})


def _bindings(body: list[ast.stmt]) -> dict[str, ast.stmt]:
    """The statement that binds each name at this level (last one wins), looking into ``if``/``try``/``with`` blocks."""
    bound: dict[str, ast.stmt] = {}
    for stmt in body:
        if isinstance(stmt, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            bound[stmt.name] = stmt
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                for node in ast.walk(target):
                    if isinstance(node, ast.Name):
                        bound[node.id] = stmt
        elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and isinstance(stmt.target, ast.Name):
            if not isinstance(stmt, ast.AnnAssign) or stmt.value is not None:
                bound[stmt.target.id] = stmt
        elif isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                if alias.name != "*":
                    bound[alias.asname or alias.name.split(".")[0]] = stmt
        elif isinstance(stmt, (ast.If, ast.Try, ast.With)):
            inner = [*stmt.body, *getattr(stmt, "orelse", [])]
            if isinstance(stmt, ast.Try):
                inner += [s for h in stmt.handlers for s in h.body] + stmt.finalbody
            bound.update(_bindings(inner))
    return bound


def _star_imports(body: list[ast.stmt]) -> list[ast.ImportFrom]:
    return [s for s in body if isinstance(s, ast.ImportFrom) and any(a.name == "*" for a in s.names)]


class SourceTree:
    """The ``.py`` files of one or more top-level packages under ``root`` (read, parsed and cached on demand)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._texts: dict[str, list[tuple[Path, bytes]]] = {}

    def module_file(self, dotted: str) -> Path | None:
        """``a/b.py`` or ``a/b/__init__.py`` for ``a.b``, if it is in the sources."""
        base = self.root.joinpath(*dotted.split("."))
        for candidate in (base.with_suffix(".py"), base / "__init__.py"):
            if candidate.is_file():
                return candidate
        return None

    def is_package(self, dotted: str) -> bool:
        return (self.root.joinpath(*dotted.split(".")) / "__init__.py").is_file()

    def parse(self, dotted: str) -> ast.Module | None:
        """The parsed module ``dotted``, or None when it is not in the sources."""
        return _parse(self.module_file(dotted))

    def files(self, package: str, containing: str | None = None) -> list[Path]:
        """Every ``.py`` file of ``package``, sorted; with ``containing`` (a regex), only those whose text matches it
        (a cheap pre-filter: parsing all of torch_npu takes seconds)."""
        if package not in self._texts:  # read once: the pre-filter runs several times per check
            self._texts[package] = [(p, p.read_bytes()) for p in sorted(self.root.joinpath(*package.split(".")).rglob("*.py"))]
        needle = re.compile(containing.encode()) if containing is not None else None
        return [p for p, text in self._texts[package] if needle is None or needle.search(text)]

    def modules(self, package: str, containing: str | None = None) -> Iterator[tuple[Path, ast.Module]]:
        """:meth:`files` parsed, lazily (files with a syntax error are left out)."""
        parsed = ((path, _parse(path)) for path in self.files(package, containing))
        return ((path, tree) for path, tree in parsed if tree is not None)

    def absolute(self, module: str, node: ast.ImportFrom) -> str:
        """The absolute module name of ``from <node.module> import ...`` written in ``module``."""
        if not node.level:
            return node.module or ""
        package = module if self.is_package(module) else module.rpartition(".")[0]
        parts = package.split(".")
        base = parts[: len(parts) - (node.level - 1)]
        return ".".join([*base, *([node.module] if node.module else [])])

    def resolve(self, dotted: str) -> Definition | None:
        """What ``dotted`` (``torch_npu.profiler.ProfilerLevel.Level1``) is bound to; None when nothing binds it."""
        first, *rest = dotted.split(".")
        if self.module_file(first) is None:
            return None
        current: Definition | None = Definition("module", first, "")
        for part in rest:
            current = self.member(current, part) if current is not None else None
        return current

    def member(self, owner: Definition, name: str, _seen: frozenset[str] = frozenset()) -> Definition | None:
        """The attribute ``name`` of a module or class definition; None when the sources do not bind it."""
        key = f"{owner.module}:{owner.name}.{name}"
        if key in _seen:
            return None
        seen = _seen | {key}
        if owner.kind == "compiled":
            return Definition("compiled", owner.module, f"{owner.name}.{name}".lstrip("."))
        if owner.kind == "module":
            return self._module_member(owner.module, name, seen)
        if owner.kind == "class" and isinstance(owner.node, ast.ClassDef):
            return self._class_member(owner, name, seen)
        return None

    def _module_member(self, module: str, name: str, seen: frozenset[str]) -> Definition | None:
        key = f"{module}:{name}"
        tree = self.parse(module)
        if tree is None or key in seen:
            return None  # not in the sources, or an import cycle
        seen = seen | {key}
        stmt = _bindings(tree.body).get(name)
        if stmt is not None:
            return self._bound(module, name, stmt, seen)
        if self.module_file(f"{module}.{name}") is not None:
            return Definition("module", f"{module}.{name}", "")
        for star in _star_imports(tree.body):
            found = self._from_module(self.absolute(module, star), name, seen)
            if found is not None:
                return found
        return None

    def _from_module(self, module: str, name: str, seen: frozenset[str]) -> Definition | None:
        """``from module import name``: the member, else the submodule; ``compiled`` when ``module`` is not in the sources."""
        if self.module_file(module) is None:
            return Definition("compiled", module, name)
        found = self._module_member(module, name, seen)
        if found is None and self.module_file(f"{module}.{name}") is not None:
            return Definition("module", f"{module}.{name}", "")
        return found

    def _bound(self, module: str, name: str, stmt: ast.stmt, seen: frozenset[str]) -> Definition | None:
        if isinstance(stmt, ast.ClassDef):
            return Definition("class", module, stmt.name, stmt)
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return Definition("function", module, stmt.name, stmt)
        if isinstance(stmt, ast.ImportFrom):
            alias = next(a for a in stmt.names if (a.asname or a.name) == name)
            return self._from_module(self.absolute(module, stmt), alias.name, seen)
        if isinstance(stmt, ast.Import):
            alias = next(a for a in stmt.names if (a.asname or a.name.split(".")[0]) == name)
            target = alias.name if alias.asname else alias.name.split(".")[0]
            return Definition("module", target, "") if self.module_file(target) else Definition("compiled", target, "")
        value = getattr(stmt, "value", None)
        if isinstance(value, (ast.Name, ast.Attribute)):
            aliased = self._expression(module, value, seen)
            if aliased is not None:
                return aliased
        return Definition("value", module, name, stmt)

    def _expression(self, module: str, expr: ast.expr, seen: frozenset[str]) -> Definition | None:
        """A ``Name``/``Attribute`` expression of a module's top level, resolved (``X = other.Y`` aliases)."""
        if isinstance(expr, ast.Name):
            return self._module_member(module, expr.id, seen)
        if isinstance(expr, ast.Attribute):
            owner = self._expression(module, expr.value, seen)
            return self.member(owner, expr.attr, seen) if owner is not None else None
        return None

    def _class_member(self, owner: Definition, name: str, seen: frozenset[str]) -> Definition | None:
        cls = owner.node
        assert isinstance(cls, ast.ClassDef)
        stmt = _bindings(cls.body).get(name)
        qualified = f"{owner.name}.{name}"
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return Definition("function", owner.module, qualified, stmt, in_class=True)
        if isinstance(stmt, ast.ClassDef):
            return Definition("class", owner.module, qualified, stmt, in_class=True)
        if stmt is not None:
            return Definition("value", owner.module, qualified, stmt, in_class=True)
        for base in cls.bases:
            resolved = self._expression(owner.module, base, seen)
            if resolved is not None and resolved.kind in ("class", "compiled"):
                found = self.member(resolved, name, seen)
                if found is not None:
                    return found
        return None

    def params(self, definition: Definition) -> Params | None:
        """What calling ``definition`` accepts: a function's parameters, a class's ``__init__`` (without ``self``).

        A method reached through its class (``Cls.method``) keeps its first
        parameter unless it is a ``classmethod``; None when the sources do not
        say (compiled code, an ``__init__`` inherited from outside the sources).
        """
        if definition.kind == "function" and isinstance(definition.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return params_of(definition.node, drop_first=definition.in_class and "classmethod" in decorator_names(definition.node))
        if definition.kind == "class":
            init = self.member(definition, "__init__")
            if init is None:
                return Params((), 0, (), (), False, False)
            if isinstance(init.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return params_of(init.node, drop_first=True)
        return None

    def attribute_use(self, package: str, chain: str) -> str | None:
        """``file:line`` of the first attribute expression ending in ``chain`` (``ProfilerActivity.NPU``) in ``package``.

        Evidence for members of compiled classes, which the sources only use.
        """
        *head, last = chain.split(".")
        for path, tree in self.modules(package, containing=re.escape(chain)):
            for node in ast.walk(tree):
                if isinstance(node, ast.Attribute) and node.attr == last and _ends_with(node.value, head):
                    return f"{path.relative_to(self.root)}:{node.lineno}"
        return None


def _ends_with(expr: ast.expr, names: list[str]) -> bool:
    """Is ``expr`` a ``Name``/``Attribute`` chain whose last parts are ``names``?"""
    for name in reversed(names):
        if isinstance(expr, ast.Attribute) and expr.attr == name:
            expr = expr.value
        elif isinstance(expr, ast.Name) and expr.id == name:
            return name == names[0]
        else:
            return False
    return True


@cache
def _parse(path: Path | None) -> ast.Module | None:
    if path is None:
        return None
    try:
        return ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError:
        return None
