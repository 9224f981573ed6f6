"""The docs say what the code is: generated tables (SK options, exit codes) match their sources, the
module tables of docs/design.md name every module, and every lazy package face uses the one helper."""

from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

import pytest

from sk_analytics.cli._base import run_cli
from sk_analytics.cli.doc_tables import BLOCK, doc_tables, render_blocks, render_exit_codes, render_option_table
from sk_analytics.stage_o.options import REGISTRY

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
PACKAGES = ("sk_analytics", "sk_runner")
ROOM_ROW = re.compile(r"^\| `(?P<folder>\w+)/` \|[^|]*\|(?P<modules>[^|]*)\|$")


def test_the_generated_tables_of_the_docs_match_their_sources() -> None:
    assert run_cli(doc_tables, "doc-tables", ["--check", "--docs", str(DOCS)]) == 0
    blocks = {page.name: [m["name"] for m in BLOCK.finditer(page.read_text("utf-8"))] for page in DOCS.glob("*.md")}
    assert blocks["runner.md"] == ["sk-options"]
    assert blocks["design.md"] == blocks["faults.md"] == blocks["index.md"] == ["exit-codes"]
    runner = (DOCS / "runner.md").read_text("utf-8")
    assert render_option_table() in runner and all(f"| `{spec.name}` |" in runner for spec in REGISTRY)
    assert render_exit_codes() in (DOCS / "index.md").read_text("utf-8")
    assert "| 130 | interrupted" in (DOCS / "index.md").read_text("utf-8")  # index.md listed only 0-3


def test_a_hand_edit_is_found_and_generation_fixes_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    shutil.copytree(DOCS, tmp_path / "docs")
    page = tmp_path / "docs" / "faults.md"
    page.write_text(page.read_text("utf-8").replace("| 3 | environment", "| 4 | environment", 1), encoding="utf-8")
    assert run_cli(doc_tables, "doc-tables", ["--check", "--docs", str(tmp_path / "docs")]) == 1
    assert f"{page} is out of date" in capsys.readouterr().err
    assert run_cli(doc_tables, "doc-tables", ["--docs", str(tmp_path / "docs")]) == 0
    assert page.read_text("utf-8") == (DOCS / "faults.md").read_text("utf-8")


def test_an_unknown_block_is_named() -> None:
    text = "x\n<!-- BEGIN generated nope: a -->\nold\n<!-- END generated nope -->\n"
    with pytest.raises(Exception, match="generated block 'nope' is unknown"):
        render_blocks(text, source="p.md")
    assert render_blocks(text, {"nope": lambda: "new\n"}) == "x\n<!-- BEGIN generated nope: a -->\nnew\n<!-- END generated nope -->\n"


def _room_tables() -> dict[str, dict[str, list[str]]]:
    """``{package: {folder: [modules]}}`` from the tables under the "rooms of" headings of docs/design.md."""
    rooms: dict[str, dict[str, list[str]]] = {}
    package = None
    for line in (DOCS / "design.md").read_text("utf-8").splitlines():
        heading = re.match(r"^#+ The rooms of `(\w+)/`", line)
        if heading:
            package = heading.group(1)
            rooms[package] = {}
        elif line.startswith("#"):
            package = None
        elif package and (row := ROOM_ROW.match(line)):
            assert row["folder"] not in rooms[package], f"{package}/{row['folder']}/ has two rows"
            rooms[package][row["folder"]] = re.findall(r"`([\w.]+)`", row["modules"])
    return rooms


def test_the_module_tables_name_every_module_of_every_room() -> None:
    rooms = _room_tables()
    assert sorted(rooms) == sorted(PACKAGES)
    for package in PACKAGES:
        folders = sorted(p.name for p in (REPO / package).iterdir() if (p / "__init__.py").is_file())
        assert sorted(rooms[package]) == folders, f"docs/design.md: the rooms of {package}/"
        for folder in folders:
            modules = sorted(p.stem for p in (REPO / package / folder).glob("*.py") if p.stem != "__init__")
            listed = rooms[package][folder]
            assert len(listed) == len(set(listed)) and sorted(listed) == modules, f"docs/design.md: {package}/{folder}/"


def test_every_lazy_face_uses_lazy_face() -> None:
    """A package face re-exports lazily only through ``sk_analytics.lazy_module.lazy_face`` (no hand-written ``__getattr__``)."""
    lazy = []
    for package in PACKAGES:
        for face in sorted((REPO / package).rglob("__init__.py")):
            tree = ast.parse(face.read_text("utf-8"))
            assert not any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in tree.body), face
            assigned = [n for n in tree.body if isinstance(n, ast.Assign) and any(getattr(t, "id", "") == "__getattr__" for t in n.targets)]
            if assigned:
                assert ast.unparse(assigned[0].value).startswith("lazy_face(__name__"), face
                lazy.append(face.parent.name)
    assert {"ingest", "campaign", "option_trial", "probe", "trial"} <= set(lazy)


def test_the_simulator_page_names_the_effect_of_every_settable_option() -> None:
    """A new option needs its simulated effect documented (docs/simulator.md), even "no effect"."""
    text = (DOCS / "simulator.md").read_text("utf-8")
    missing = [spec.name for spec in REGISTRY if spec.kind != "not_settable" and f"`{spec.name}" not in text]
    assert missing == []
