"""Every torch_npu name, call and keyword that ``sk_runner/backends/npu.py`` uses, read from its own AST.

The backend reaches torch_npu only through lazily imported modules
(``importlib.import_module("torch_npu")``, ``require_torch_npu()`` which
returns ``torch``) and ``getattr``/``hasattr`` with literal names, so a small
symbolic evaluation of each function finds them all: local variables bound to
such expressions are followed, ``**options`` is expanded to the keys its dict
gets in the same function, and a tuple of names tested with ``hasattr`` in a
comprehension counts as used. A new use in the backend is therefore checked
against the real package without editing the test. ``torch.npu`` is the
module torch_npu registers as torch's ``npu`` device module (``torch_npu.npu``).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

BACKEND = Path(__file__).resolve().parent.parent / "sk_runner" / "backends" / "npu.py"
NOT_LITERAL = Ellipsis
"""Stands for a positional argument that is not a literal."""
ROOTS = ("torch_npu", "torch.npu")
"""Uses under these paths are in torch_npu's sources; ``torch.compile`` and the like are torch's own."""


@dataclass(frozen=True)
class Use:
    """A dotted name the backend reads (``torch_npu.profiler.ExportType.Db``), at a line of the backend."""

    path: str
    line: int
    function: str


@dataclass(frozen=True)
class Call:
    """A call the backend makes on a torch_npu callable: how many positional arguments, which keywords."""

    path: str
    line: int
    function: str
    positional: int
    keywords: frozenset[str]
    literal_keywords: dict[str, object]
    """Keywords passed a literal (``backend="npugraph_ex"``), with their value."""
    positional_literals: tuple[object, ...]
    """Each positional argument's literal value (``None``, ``"optimize_options"``), :data:`NOT_LITERAL` otherwise."""
    unresolved: str | None = None
    """Why the arguments could not be read exactly (``*args``, ``**kwargs`` of unknown keys); None when they could."""


@dataclass(frozen=True)
class BackendUses:
    uses: tuple[Use, ...]
    calls: tuple[Call, ...]

    def paths(self) -> list[str]:
        """Every distinct path used, in order of first use."""
        return list(dict.fromkeys(u.path for u in self.uses))


def in_torch_npu(path: str) -> bool:
    return any(path == root or path.startswith(root + ".") for root in ROOTS)


def torch_npu_path(path: str) -> str:
    """The path in torch_npu's own modules (``torch.npu.X`` -> ``torch_npu.npu.X``)."""
    return "torch_npu.npu" + path[len("torch.npu") :] if path.startswith("torch.npu") else path


def _literal_strings(expr: ast.expr | None) -> list[str] | None:
    """The strings of a tuple/list literal (also ``a + b`` and ``x if c else y`` of such); None otherwise."""
    if isinstance(expr, (ast.Tuple, ast.List)):
        values = [e.value for e in expr.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        return values if len(values) == len(expr.elts) else None
    if isinstance(expr, ast.IfExp):
        body, other = _literal_strings(expr.body), _literal_strings(expr.orelse)
        return None if body is None or other is None else body + other
    if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.Add):
        left, right = _literal_strings(expr.left), _literal_strings(expr.right)
        return None if left is None or right is None else left + right
    return None


class _Function:
    """Symbolic values of one function's local names, in statement order."""

    def __init__(self, node: ast.FunctionDef | ast.AsyncFunctionDef, returns: dict[str, str]) -> None:
        self.node = node
        self.returns = returns
        self.env: dict[str, str] = {}
        self.names: dict[str, list[str]] = {}
        """Locals bound to tuples of literal strings (``needed``), accumulated over ``=`` and ``+=``."""
        self.dict_keys: dict[str, set[str]] = {}
        """Locals bound to dicts, with every literal key they get (``{...}`` and ``d["k"] = ...``)."""
        self.dynamic_dicts: set[str] = set()
        for stmt in sorted((n for n in ast.walk(node) if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign))), key=lambda n: (n.lineno, n.col_offset)):
            self._bind(stmt)

    def _bind(self, stmt: ast.Assign | ast.AnnAssign | ast.AugAssign) -> None:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        for target in targets:
            if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) and target.value.id in self.dict_keys:
                key = target.slice
                if isinstance(key, ast.Constant) and isinstance(key.value, str):
                    self.dict_keys[target.value.id].add(key.value)
                else:
                    self.dynamic_dicts.add(target.value.id)
            if not isinstance(target, ast.Name) or stmt.value is None:
                continue
            name, value = target.id, stmt.value
            if (strings := _literal_strings(value)) is not None:
                self.names[name] = (self.names.get(name, []) if isinstance(stmt, ast.AugAssign) else []) + strings
            if isinstance(value, ast.Dict):
                self.dict_keys[name] = {k.value for k in value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
                if len(self.dict_keys[name]) != len(value.keys):
                    self.dynamic_dicts.add(name)
            if (path := self.value(value)) is not None:
                self.env[name] = path

    def value(self, expr: ast.expr) -> str | None:
        """The dotted path ``expr`` stands for (``torch_npu.profiler``), or None."""
        if isinstance(expr, ast.Name):
            return self.env.get(expr.id)
        if isinstance(expr, ast.Attribute):
            owner = self.value(expr.value)
            return f"{owner}.{expr.attr}" if owner else None
        if isinstance(expr, ast.Call):
            func, args = expr.func, expr.args
            if _is_named(func, "import_module") and args and isinstance(args[0], ast.Constant):
                return str(args[0].value)
            if _is_named(func, "getattr") and len(args) >= 2 and isinstance(args[1], ast.Constant):
                owner = self.value(args[0])
                return f"{owner}.{args[1].value}" if owner else None
            if isinstance(func, ast.Name) and func.id in self.returns:
                return self.returns[func.id]
        return None

    def uses(self) -> list[Use]:
        found = []
        for node in ast.walk(self.node):
            if isinstance(node, (ast.Attribute, ast.Call)) and (path := self.value(node)) is not None:
                found.append(Use(path, node.lineno, self.node.name))
            if isinstance(node, ast.Call) and _is_named(node.func, "hasattr") and len(node.args) == 2:
                found += self._hasattr_uses(node)
            if isinstance(node, ast.comprehension):
                found += self._comprehension_uses(node)
        return found

    def _hasattr_uses(self, node: ast.Call) -> list[Use]:
        owner, name = self.value(node.args[0]), node.args[1]
        if owner is None or not isinstance(name, ast.Constant):
            return []
        return [Use(f"{owner}.{name.value}", node.lineno, self.node.name)]

    def _comprehension_uses(self, comp: ast.comprehension) -> list[Use]:
        """``[n for n in needed if not hasattr(profiler, n)]``: each literal name of ``needed`` on ``profiler``."""
        if not (isinstance(comp.target, ast.Name) and isinstance(comp.iter, ast.Name) and comp.iter.id in self.names):
            return []
        found = []
        for cond in comp.ifs:
            for node in ast.walk(cond):
                if isinstance(node, ast.Call) and _is_named(node.func, "hasattr") and len(node.args) == 2:
                    owner, arg = self.value(node.args[0]), node.args[1]
                    if owner is not None and isinstance(arg, ast.Name) and arg.id == comp.target.id:
                        found += [Use(f"{owner}.{n}", node.lineno, self.node.name) for n in self.names[comp.iter.id]]
        return found

    def calls(self) -> list[Call]:
        found = []
        for node in ast.walk(self.node):
            if isinstance(node, ast.Call) and (path := self.value(node.func)) is not None:
                found.append(self._call(path, node))
        return found

    def _call(self, path: str, node: ast.Call) -> Call:
        keywords: set[str] = set()
        literal: dict[str, object] = {}
        unresolved = "*args" if any(isinstance(a, ast.Starred) for a in node.args) else None
        for kw in node.keywords:
            if kw.arg is not None:
                keywords.add(kw.arg)
                if isinstance(kw.value, ast.Constant):
                    literal[kw.arg] = kw.value.value
            elif isinstance(kw.value, ast.Name) and kw.value.id in self.dict_keys and kw.value.id not in self.dynamic_dicts:
                keywords |= self.dict_keys[kw.value.id]
            else:
                unresolved = f"**{ast.unparse(kw.value)} (keys not literal)"
        positional = tuple(a.value if isinstance(a, ast.Constant) else NOT_LITERAL for a in node.args)
        return Call(path, node.lineno, self.node.name, len(node.args), frozenset(keywords), literal, positional, unresolved)


def _is_named(func: ast.expr, name: str) -> bool:
    """``name(...)`` or ``module.name(...)``."""
    return (isinstance(func, ast.Name) and func.id == name) or (isinstance(func, ast.Attribute) and func.attr == name)


def _functions(tree: ast.Module) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _module_returns(functions: list[ast.FunctionDef | ast.AsyncFunctionDef]) -> dict[str, str]:
    """Module functions whose every ``return`` gives the same module path (``require_torch_npu`` -> ``torch``)."""
    returns: dict[str, str] = {}
    for _ in range(3):  # a helper may return another helper's result
        for fn in functions:
            env = _Function(fn, returns)
            values = {env.value(r.value) for r in ast.walk(fn) if isinstance(r, ast.Return) and r.value is not None}
            if len(values) == 1 and None not in values:
                returns[fn.name] = values.pop()  # type: ignore[assignment]
    return returns


def read_uses(source: str) -> BackendUses:
    """The torch_npu uses and calls of a module's source (default: the npu backend)."""
    tree = ast.parse(source)
    functions = _functions(tree)
    returns = _module_returns(functions)
    uses: list[Use] = []
    calls: list[Call] = []
    for fn in functions:
        env = _Function(fn, returns)
        uses += env.uses()
        calls += env.calls()
    return BackendUses(tuple(sorted(uses, key=lambda u: (u.line, u.path))), tuple(sorted(calls, key=lambda c: c.line)))


def backend_uses(path: Path = BACKEND) -> BackendUses:
    return read_uses(path.read_text(encoding="utf-8"))
