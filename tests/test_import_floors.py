"""Imports point down: the floors of docs/design.md, checked over every import of both packages.

Counted by folder: each subpackage and each top-level module of ``sk_analytics/``
and ``sk_runner/`` is one node, and every import is an edge (also those inside
functions and under ``TYPE_CHECKING``), and so is every string in code that names
a module of the packages the way ``importlib`` takes it (``"pkg.mod"``,
``"pkg.mod:attr"``: lazy sub-commands, ``python -m`` targets, lazy parsers), which
is an import made later. The node graph must have no cycle, and
no edge may point to a higher floor than the one it starts on. The floors are
read from the table in docs/design.md, so the document and the test cannot
drift apart; a node the table does not name fails too.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("sk_analytics", "sk_runner")
DESIGN = REPO / "docs" / "design.md"
MODULE_STRING = re.compile(r"^(?P<module>(?:sk_analytics|sk_runner)(?:\.\w+)+|(?:sk_analytics|sk_runner)(?=:))(?::[\w.]+)?$")
"""A string naming a module of the packages: ``"pkg.mod"`` or ``"pkg.mod:attr"`` (``"pkg:attr"`` too)."""
FLOOR_ROW = re.compile(r"^\|\s*(\d+)\s*\|[^|]*\|([^|]*)\|\s*$")
"""A row of the floors table: ``| <number> | <name> | `node`, `node` … |``."""


@dataclass(frozen=True)
class Edge:
    """``source`` imports ``target`` (both nodes) at ``where`` (``file:line``)."""

    source: str
    target: str
    where: str


def _module_name(path: Path, root: Path) -> tuple[str, bool]:
    """Dotted name of a source file and whether it is a package face (``__init__.py``)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    face = parts[-1] == "__init__"
    return ".".join(parts[:-1] if face else parts), face


def node_of(module: str, root: Path, packages: Iterable[str] = PACKAGES) -> str | None:
    """The node a module belongs to: its package's subpackage or top-level module, the package
    itself for its face; None outside the packages (the standard library, third parties)."""
    parts = module.split(".")
    if parts[0] not in packages:
        return None
    if len(parts) == 1:
        return parts[0]
    base = root / parts[0] / parts[1]
    return ".".join(parts[:2]) if base.is_dir() or base.with_suffix(".py").is_file() else parts[0]


def _targets(node: ast.Import | ast.ImportFrom, module: str, face: bool, root: Path) -> list[str]:
    """Absolute names of the modules one import statement reads (``from a import b``: ``a.b`` when it is a module)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if node.level:
        package = module.split(".") if face else module.split(".")[:-1]
        package = package[: len(package) - node.level + 1]
        base = ".".join(package + ([node.module] if node.module else []))
    else:
        base = node.module or ""
    found = []
    for alias in node.names:
        sub = f"{base}.{alias.name}"
        path = root / Path(*sub.split("."))
        found.append(sub if path.is_dir() or path.with_suffix(".py").is_file() else base)
    return found


def _docstrings(tree: ast.Module) -> set[int]:
    """ids of the docstring constants of a module and its classes and functions (prose, not references)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def string_targets(tree: ast.Module) -> list[tuple[int, str]]:
    """``(line, module)`` of every string constant (docstrings aside) that names a module as ``"pkg.mod[:attr]"``."""
    docs = _docstrings(tree)
    return [(node.lineno, match["module"]) for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs
            and (match := MODULE_STRING.match(node.value)) is not None]


def import_edges(root: Path, packages: Iterable[str] = PACKAGES) -> list[Edge]:
    """Every import between two different nodes of ``packages`` under ``root``, with its file and line; a string
    that names a module (:func:`string_targets`) counts as an import of it."""
    packages = tuple(packages)
    edges: dict[Edge, None] = {}  # one edge per statement, in file order, even when it names several modules
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            module, face = _module_name(path, root)
            source = node_of(module, root, packages)
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            found = [(node.lineno, target) for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))
                     for target in _targets(node, module, face, root)]
            for line, target in sorted(found + string_targets(tree)):
                dest = node_of(target, root, packages)
                if dest is not None and source is not None and dest != source:
                    edges[Edge(source, dest, f"{path.relative_to(root)}:{line}")] = None
    return list(edges)


def cycles(edges: Iterable[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        graph.setdefault(edge.source, set()).add(edge.target)
        graph.setdefault(edge.target, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def read_floors(text: str) -> dict[str, int]:
    """node -> floor number from the floors table of a design document (0 is the ground floor)."""
    floors: dict[str, int] = {}
    for line in text.splitlines():
        row = FLOOR_ROW.match(line.strip())
        if row:
            for node in re.findall(r"`([\w.]+)`", row.group(2)):
                assert node not in floors, f"{node} is on two floors of the table"
                floors[node] = int(row.group(1))
    return floors


def floor_problems(edges: Iterable[Edge], floors: Mapping[str, int]) -> list[str]:
    """One line per import that points up (or at a node the table does not place), and per cycle."""
    edges = list(edges)
    problems = []
    for edge in edges:
        missing = [n for n in (edge.source, edge.target) if n not in floors]
        if missing:
            problems.append(f"{edge.where}: {', '.join(missing)} is on no floor of docs/design.md")
        elif floors[edge.target] > floors[edge.source]:
            problems.append(f"{edge.where}: {edge.source} (floor {floors[edge.source]}) imports {edge.target} "
                            f"(floor {floors[edge.target]}): imports point down")
    for component in cycles(edges):
        where = [e.where for e in edges if e.source in component and e.target in component]
        problems.append(f"cycle {' <-> '.join(component)}: {'; '.join(where)}")
    return problems


def _nodes(root: Path, packages: Iterable[str] = PACKAGES) -> set[str]:
    """Every node of the packages: their faces, subpackages and top-level modules."""
    found = set()
    for package in packages:
        found.add(package)
        for path in (root / package).iterdir():
            if (path.is_dir() and (path / "__init__.py").is_file()) or (path.suffix == ".py" and path.stem != "__init__"):
                found.add(f"{package}.{path.stem}")
    return found


def test_every_import_points_down_and_no_folder_imports_itself_back() -> None:
    floors = read_floors(DESIGN.read_text(encoding="utf-8"))
    problems = floor_problems(import_edges(REPO), floors)
    assert not problems, "\n".join(problems)


def test_the_floors_table_names_every_node_once_and_no_more() -> None:
    floors = read_floors(DESIGN.read_text(encoding="utf-8"))
    nodes = _nodes(REPO)
    assert sorted(nodes - set(floors)) == [], "nodes missing from the floors table of docs/design.md"
    assert sorted(set(floors) - nodes) == [], "the floors table of docs/design.md names nodes that do not exist"
    runner = min(floors[n] for n in nodes if n.split(".")[0] == "sk_runner")
    assert runner > max(floors[n] for n in nodes if n.split(".")[0] == "sk_analytics"), "sk_runner stands on sk_analytics"


def test_sk_runner_keeps_at_most_six_modules_at_its_top() -> None:
    top = sorted(p.name for p in (REPO / "sk_runner").glob("*.py"))
    assert len(top) <= 6, top


def _tree(root: Path, files: Mapping[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root


SYNTHETIC = {
    "sk_analytics/__init__.py": "",
    "sk_analytics/base.py": "import os\n",
    "sk_analytics/deep/__init__.py": "from .work import run\n",
    "sk_analytics/deep/work.py": "from sk_analytics import base\n\ndef run():\n    from ..base import os\n",
    "sk_runner/__init__.py": "",
    "sk_runner/cli.py": "from sk_analytics.deep import run\n",
}
SYNTHETIC_FLOORS = "| floor | name | nodes |\n|---|---|---|\n| 0 | ground | `sk_analytics`, `sk_analytics.base` |\n" \
                   "| 1 | work | `sk_analytics.deep` |\n| 2 | top | `sk_runner`, `sk_runner.cli` |\n"


def test_checker_passes_a_tree_whose_imports_point_down(tmp_path: Path) -> None:
    root = _tree(tmp_path, SYNTHETIC)
    edges = import_edges(root)
    assert {(e.source, e.target) for e in edges} == {("sk_analytics.deep", "sk_analytics.base"), ("sk_runner.cli", "sk_analytics.deep")}
    assert floor_problems(edges, read_floors(SYNTHETIC_FLOORS)) == []


def test_checker_names_a_planted_upward_import_inside_a_function(tmp_path: Path) -> None:
    root = _tree(tmp_path, {**SYNTHETIC, "sk_analytics/base.py": "import os\n\n\ndef late():\n    from sk_analytics.deep.work import run\n"})
    problems = floor_problems(import_edges(root), read_floors(SYNTHETIC_FLOORS))
    assert problems == [
        "sk_analytics/base.py:5: sk_analytics.base (floor 0) imports sk_analytics.deep (floor 1): imports point down",
        "cycle sk_analytics.base <-> sk_analytics.deep: sk_analytics/base.py:5; sk_analytics/deep/work.py:1; sk_analytics/deep/work.py:4",
    ]


def test_checker_finds_a_cycle_on_one_floor_and_an_unplaced_node(tmp_path: Path) -> None:
    root = _tree(tmp_path, {**SYNTHETIC, "sk_analytics/side.py": "from sk_analytics.base import os\n",
                            "sk_analytics/base.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from sk_analytics import side\n"})
    floors = read_floors(SYNTHETIC_FLOORS.replace("`sk_analytics.base` |", "`sk_analytics.base`, `sk_analytics.side` |"))
    problems = floor_problems(import_edges(root), floors)
    assert problems == ["cycle sk_analytics.base <-> sk_analytics.side: sk_analytics/base.py:3; sk_analytics/side.py:1"]
    assert floor_problems(import_edges(root), read_floors(SYNTHETIC_FLOORS))[0] == \
        "sk_analytics/base.py:3: sk_analytics.side is on no floor of docs/design.md"


def test_package_faces_load_no_heavy_library() -> None:
    """Importing a package face (or a command's module, for --help) must not load Polars: the faces are lazy (PEP 562)."""
    faces = ["sk_runner.trial", "sk_runner.probe", "sk_runner.profile", "sk_runner.process", "sk_runner.demo", "sk_runner.sweep",
             "sk_runner.campaign", "sk_analytics.ingest", "sk_analytics.report", "sk_analytics.handoff", "sk_analytics.stage_o",
             "sk_runner.commands", "sk_runner.limits"]
    code = (f"import importlib, sys\nfor face in {faces!r}:\n    importlib.import_module(face)\n"
            "print(sorted(m for m in ('polars', 'pyarrow', 'numpy', 'scipy') if m in sys.modules))\n"
            "from sk_runner.trial import run_trial, TrialSpec\nfrom sk_runner.process import run_process\n"
            "from sk_runner.profile import collect_profile, DEFAULT_PROFILE_ITERATIONS\nfrom sk_runner.probe import probe_value\n"
            "print('polars' in sys.modules)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert done.stdout.splitlines() == ["[]", "True"], done.stdout + done.stderr


def test_a_module_named_in_a_string_is_an_import(tmp_path: Path) -> None:
    """``"pkg.mod:attr"`` (a lazy command, an importlib target) points the same way as an import: the CLI reference
    generator of sk_analytics named ``"sk_runner.cli:cli"``, an upward edge the walk of imports did not see."""
    root = _tree(tmp_path, {**SYNTHETIC, "sk_analytics/base.py": '"""Docs may name sk_runner.cli."""\nROOTS = {"run": "sk_runner.cli:cli"}\n'
                                                                   'LAZY = "sk_analytics.deep.work"\nTEXT = "sk_runner.cli is not a name"\n'})
    assert sorted(string_targets(ast.parse((root / "sk_analytics/base.py").read_text()))) == [(2, "sk_runner.cli"), (3, "sk_analytics.deep.work")]
    problems = floor_problems(import_edges(root), read_floors(SYNTHETIC_FLOORS))
    assert problems[:2] == [
        "sk_analytics/base.py:2: sk_analytics.base (floor 0) imports sk_runner.cli (floor 2): imports point down",
        "sk_analytics/base.py:3: sk_analytics.base (floor 0) imports sk_analytics.deep (floor 1): imports point down",
    ]
