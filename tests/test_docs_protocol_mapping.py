"""docs/protocol-mapping.md names real code and real tests: every reference must resolve."""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "protocol-mapping.md"
CODE_REF = re.compile(r"`((?:sk_analytics|sk_runner)(?:\.\w+)+):([\w.]+)`")
TEST_REF = re.compile(r"`(tests/\w+\.py)::(\w+)`")


@cache
def _names(path: Path) -> frozenset[str]:
    """Top-level names of a module plus ``Class.member`` for every class member (functions, assignments)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()

    def targets(node: ast.stmt) -> list[str]:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return [node.name]
        if isinstance(node, ast.Assign):
            return [t.id for t in node.targets if isinstance(t, ast.Name)]
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            return [node.target.id]
        return []

    for node in tree.body:
        found.update(targets(node))
        if isinstance(node, ast.ClassDef):
            found.update(f"{node.name}.{name}" for child in node.body for name in targets(child))
    return frozenset(found)


def _module_file(module: str) -> Path | None:
    base = REPO / Path(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def unresolved(text: str) -> list[str]:
    """Every code or test reference of ``text`` that does not exist in the repository."""
    missing = []
    for module, attr in CODE_REF.findall(text):
        path = _module_file(module)
        if path is None or attr not in _names(path):
            missing.append(f"{module}:{attr}")
    for file, test in TEST_REF.findall(text):
        path = REPO / file
        if not path.is_file() or test not in _names(path):
            missing.append(f"{file}::{test}")
    return missing


def test_every_reference_of_the_mapping_exists() -> None:
    text = DOC.read_text(encoding="utf-8")
    assert len(CODE_REF.findall(text)) >= 80 and len(TEST_REF.findall(text)) >= 100
    assert unresolved(text) == []


def test_every_protocol_section_is_mapped() -> None:
    text = DOC.read_text(encoding="utf-8")
    for heading in ("## §2 Phase entry and hand-off", "## §3 The option matrix", "## §4 O0-INCUMBENT", "## §5 One trial",
                    "## §6 DCCI family", "### Fixed order", "### Diagnostic collections and manifests", "### Per-SK attribution",
                    "### Joint repair and the DCCI report", "## §7 Boundary with P / FINAL", "## §8 Failure scenes",
                    "## formats.md §1", "## formats.md §7"):
        assert f"\n{heading}" in text, heading
    for step in range(1, 8):
        assert f"| {step}. " in text, f"§5 step {step}"


def test_checker_reports_missing_code_and_tests() -> None:
    text = (
        "`sk_analytics.stage_o.machine:next_action` `sk_runner.sweep.executor:Executor.do_Gate` "
        "`sk_analytics.option_trial.gate:MAX_SPREAD_PCT` `tests/test_stage_o_machine.py::test_o0_failure_stops` "
        "`sk_analytics.stage_o.machine:no_such_rule` `sk_analytics.nowhere:thing` `sk_runner.sweep.executor:Executor.do_Nothing` "
        "`tests/test_stage_o_machine.py::test_not_written` `tests/test_absent.py::test_x`"
    )
    assert unresolved(text) == [
        "sk_analytics.stage_o.machine:no_such_rule", "sk_analytics.nowhere:thing", "sk_runner.sweep.executor:Executor.do_Nothing",
        "tests/test_stage_o_machine.py::test_not_written", "tests/test_absent.py::test_x",
    ]
