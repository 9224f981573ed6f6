"""Import floors of the reading side: the session view below explore, explore below the report."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "sk_analytics"


def _imports(path: Path) -> set[str]:
    """Every module ``path`` imports (absolute names)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_explore_reads_the_session_view_and_never_the_report() -> None:
    for path in sorted((ROOT / "explore").glob("*.py")):
        higher = {m for m in _imports(path) if m.startswith(("sk_analytics.report", "sk_analytics.handoff"))}
        assert not higher, f"{path.name} imports a higher floor: {sorted(higher)}"


def test_the_session_view_imports_neither_explore_nor_the_report() -> None:
    imported = _imports(ROOT / "session_view.py")
    assert not {m for m in imported if m.startswith(("sk_analytics.explore", "sk_analytics.report", "sk_analytics.handoff"))}
    assert "sk_analytics.stage_o.state" in imported  # it reads the decision floor only
    assert not (ROOT / "stage_o" / "session_view.py").exists()


def test_the_report_builds_on_explore() -> None:
    assert "sk_analytics.explore.stage_o" in _imports(ROOT / "report" / "render.py")
