"""docs/schema.md is generated from sk_analytics/schema.py and must not drift from it."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

from sk_analytics.cli import cli
from sk_analytics.cli._base import run_cli
from sk_analytics.cli.schema_doc import render_schema_markdown
from sk_analytics.schema import KERNELS, SCHEMA_VERSION, TABLES, Column, Table

DOC = Path(__file__).resolve().parents[1] / "docs" / "schema.md"


def test_committed_schema_doc_matches_the_constants() -> None:
    assert DOC.read_text(encoding="utf-8") == render_schema_markdown(), "run `sk-analyze schema` and commit docs/schema.md"
    assert run_cli(cli, "sk-analyze", ["schema", "--check", "--out", str(DOC)]) == 0


def test_check_fails_on_drift_and_generation_fixes_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "schema.md"
    copy.write_text(DOC.read_text(encoding="utf-8").replace("exact integer nanoseconds", "nanoseconds"), encoding="utf-8")
    assert run_cli(cli, "sk-analyze", ["schema", "--check", "--out", str(copy)]) == 1
    assert "out of date" in capsys.readouterr().err
    assert run_cli(cli, "sk-analyze", ["schema", "--check", "--out", str(tmp_path / "absent.md")]) == 1
    assert run_cli(cli, "sk-analyze", ["schema", "--out", str(copy)]) == 0
    assert run_cli(cli, "sk-analyze", ["schema", "--check", "--out", str(copy)]) == 0


def test_every_table_and_column_is_documented_with_dtype_and_nullability() -> None:
    text = render_schema_markdown()
    assert f"`schema_version = {SCHEMA_VERSION}`" in text
    for name, table in TABLES.items():
        assert f"\n### {name}\n" in text
        for column in table.columns:
            nullable = "yes" if column.nullable else "no"
            assert f"| `{column.name}` | {column.dtype} | {nullable} |" in text, (name, column.name)
    assert "| `start_ns` | Int64 | no | `Start Time(us)` as exact integer nanoseconds (host clock) |" in text
    assert KERNELS.name in TABLES


def test_table_cells_escape_pipes_and_angle_brackets() -> None:
    table = Table("t", "Doc with <id> and `a|b`.", (Column("c", pl.Utf8, "x|y with <n> and `<k>`"),))
    text = render_schema_markdown({"t": table})
    row = next(line for line in text.splitlines() if line.startswith("| `c`"))
    assert row == "| `c` | String | yes | x\\|y with &lt;n> and `<k>` |"
    assert len(re.findall(r"(?<!\\)\|", row)) == 5
    assert "\nDoc with &lt;id> and `a|b`.\n" in text


def test_without_out_it_prints_and_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """`sk-analyze schema` in any folder prints the document; it used to write ./docs/schema.md there."""
    monkeypatch.chdir(tmp_path)
    assert run_cli(cli, "sk-analyze", ["schema"]) == 0
    assert capsys.readouterr().out == render_schema_markdown()
    assert list(tmp_path.iterdir()) == []
    assert run_cli(cli, "sk-analyze", ["schema", "--check"]) == 2  # nothing to compare without --out
    assert "--check needs --out" in capsys.readouterr().err and list(tmp_path.iterdir()) == []


def test_role_and_round_values_are_the_ones_a_sweep_writes() -> None:
    from sk_analytics.schema import PARTITION_DOC

    assert "diag-baseline" not in PARTITION_DOC["role"]
    for value in ("`baseline`", "`trial`", "`baseline_profile`", "`candidate_profile`"):
        assert value in PARTITION_DOC["role"]
    assert "`DCCI`" in PARTITION_DOC["round"] and "`round_index`" in PARTITION_DOC["round"]
