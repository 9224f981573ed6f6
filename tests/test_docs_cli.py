"""docs/cli.md is generated from the commands' own --help and must not drift from it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click
import pytest
from cli_doc import ROOTS, help_doc

from sk_analytics.cli import cli as analyze_cli
from sk_analytics.cli._base import LazyGroup, run_cli
from sk_analytics.cli.help_doc import command_contexts, render_cli_markdown, resolve
from sk_runner.cli import cli as run_cli_group

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "cli.md"
ALL_COMMANDS = [
    "sk-analyze", "sk-analyze campaign", "sk-analyze contract", "sk-analyze contract begin", "sk-analyze contract finalize",
    "sk-analyze contract validate-set", "sk-analyze contract verify", "sk-analyze dcci-diff", "sk-analyze ingest",
    "sk-analyze ledger", "sk-analyze ledger hand-over", "sk-analyze ledger show", "sk-analyze ledger verify", "sk-analyze option-trial",
    "sk-analyze schema", "sk-analyze stability",
    "sk-run", "sk-run campaign", "sk-run campaign cancel", "sk-run campaign resume", "sk-run campaign run",
    "sk-run campaign status", "sk-run demo", "sk-run matrix", "sk-run matrix freeze", "sk-run matrix init", "sk-run options",
    "sk-run probe", "sk-run profile", "sk-run sim", "sk-run sweep", "sk-run task", "sk-run task init", "sk-run trial",
]


def _rendered() -> str:
    return render_cli_markdown({prog: resolve(target) for prog, target in ROOTS.items()})


def test_committed_cli_doc_matches_the_help() -> None:
    assert DOC.read_text(encoding="utf-8") == _rendered(), "run `python tests/cli_doc.py` and commit docs/cli.md"
    assert run_cli(help_doc, "help-doc", ["--check", "--out", str(DOC)]) == 0


def test_every_command_and_sub_command_is_documented_in_order() -> None:
    contexts = command_contexts({"sk-analyze": analyze_cli, "sk-run": run_cli_group})
    assert [ctx.command_path for ctx in contexts] == ALL_COMMANDS
    text = _rendered()
    for path in ALL_COMMANDS:
        assert f"\n## {path}\n\n```text\nUsage: {path} [OPTIONS]" in text, path
        assert f"[`{path}`](#{path.replace(' ', '-')})" in text
    assert "| 2 | bad input or usage:" in text and "| 3 | environment" in text and "| 130 | interrupted" in text


def test_help_is_verbatim_and_independent_of_the_terminal(tmp_path: Path) -> None:
    """The block of `sk-run sim` is exactly what `sk-run sim --help` prints in a wide terminal."""
    env = {"PATH": "/usr/bin:/bin", "COLUMNS": "120", "SK_RUN_SEED": "7"}
    out = subprocess.run(
        [sys.executable, "-c", "from sk_runner.cli import main; main(['sim', '--help'])"],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=False,
    )
    assert out.returncode == 0
    block = _rendered().split("\n## sk-run sim\n\n```text\n", 1)[1].split("\n```", 1)[0]
    assert block == out.stdout.rstrip()
    assert "  -h, --help " in block


def test_check_fails_on_drift_and_generation_fixes_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    copy = tmp_path / "cli.md"
    copy.write_text(DOC.read_text(encoding="utf-8").replace("--warmup", "--warm-up", 1), encoding="utf-8")
    assert run_cli(help_doc, "help-doc", ["--check", "--out", str(copy)]) == 1
    assert "out of date" in capsys.readouterr().err
    assert run_cli(help_doc, "help-doc", ["--check", "--out", str(tmp_path / "absent.md")]) == 1
    assert run_cli(help_doc, "help-doc", ["--out", str(copy)]) == 0
    assert copy.read_text(encoding="utf-8") == DOC.read_text(encoding="utf-8")
    assert run_cli(help_doc, "help-doc", ["--check", "--out", str(copy)]) == 0


def test_a_new_lazy_sub_command_and_hidden_ones() -> None:
    """A lazily registered command appears with its help; hidden commands and missing modules do not."""

    @click.command("shown")
    @click.option("--n", type=int, default=3, show_default=True, help="How many.")
    def shown(n: int) -> int:
        """Do a visible thing."""
        return n

    @click.command("secret", hidden=True)
    def secret() -> None:
        """Internal."""

    group = LazyGroup("tool", lazy_commands={"ghost": "no_such_module_xyz:cmd"}, commands=[shown, secret], help="A tool.")
    text = render_cli_markdown({"tool": group})
    assert "\n## tool shown\n\n```text\nUsage: tool shown [OPTIONS]\n\n  Do a visible thing.\n\nOptions:\n  --n INTEGER  How many.  [default: 3]\n" in text
    assert "secret" not in text and "ghost" not in text
    assert "* [`tool`](#tool)\n  * [`tool shown`](#tool-shown)\n" in text


@pytest.mark.parametrize(("command", "option", "bounds"), [
    ("sk-run trial", "--ranks", "1<=x<=1024"), ("sk-run trial", "--iterations", "1<=x<=100000"),
    ("sk-run probe", "--ranks", "1<=x<=1024"), ("sk-run profile", "--ranks", "1<=x<=1024"),
    ("sk-run profile", "--iterations", "1<=x<=100000"), ("sk-run task init", "--ranks", "1<=x<=1024"),
    ("sk-run task init", "--iterations", "1<=x<=100000"), ("sk-run sweep", "--ranks", "1<=x<=1024"),
    ("sk-run sweep", "--iterations", "10<=x<=100000"),
])
def test_the_help_of_a_run_size_shows_both_its_bounds(command: str, option: str, bounds: str) -> None:
    """sk_runner.limits bounds every run size; the help shows both ends, not only ``x>=1`` (a larger value is refused)."""
    block = _rendered().split(f"\n## {command}\n\n```text\n", 1)[1].split("\n```", 1)[0]
    entry = block.split(f"  {option} ", 1)[1].split("\n  -", 1)[0]
    assert bounds in " ".join(entry.split()), entry


def test_trial_iterations_help_says_what_it_sets_on_every_backend() -> None:
    """``sk-run trial --iterations`` sets SK_RUN_ITERATIONS for a command workload too (docs/runner.md), not only the simulator."""
    block = _rendered().split("\n## sk-run trial\n\n```text\n", 1)[1].split("\n```", 1)[0]
    entry = " ".join(block.split("  --iterations ", 1)[1].split("\n  --", 1)[0].split())
    assert "(sim)" not in entry and "SK_RUN_ITERATIONS" in entry, entry
