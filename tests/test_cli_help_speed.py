"""`sk-analyze --help` and `sk-run --help` import no command (issue 14 §4): the group help lists
the commands from their summaries, which must equal each command's own first help paragraph."""

from __future__ import annotations

import ast
import subprocess
import sys
import time

import click
import pytest
from cli_doc import ROOTS

from sk_analytics.cli import SUMMARIES as ANALYZE_SUMMARIES, cli as analyze_cli
from sk_analytics.cli.help_doc import command_contexts, resolve
from sk_runner.cli import SUMMARIES as RUN_SUMMARIES, cli as run_cli_group

GROUPS = [("sk_analytics.cli", analyze_cli, ANALYZE_SUMMARIES), ("sk_runner.commands", run_cli_group, RUN_SUMMARIES)]
HEAVY = ("polars", "pyarrow", "numpy", "scipy", "jsonschema", "adbc_driver_sqlite")


@pytest.mark.parametrize(("module", "group", "summaries"), GROUPS, ids=["sk-analyze", "sk-run"])
def test_summaries_are_the_commands_first_help_paragraph(module: str, group: click.Group, summaries: dict[str, str]) -> None:
    ctx = click.Context(group, **group.context_settings)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None
        first = " ".join((command.help or "").split("\n\n")[0].split())
        assert summaries.get(name, first) == first, f"{name}: update SUMMARIES in {module}"


@pytest.mark.parametrize(("module", "group", "summaries"), GROUPS, ids=["sk-analyze", "sk-run"])
def test_group_help_is_the_same_with_and_without_importing(module: str, group: click.Group, summaries: dict[str, str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    fast = group.get_help(click.Context(group, info_name="x", terminal_width=100, max_content_width=100, **group.context_settings))
    monkeypatch.setattr(group, "summaries", {})
    slow = group.get_help(click.Context(group, info_name="x", terminal_width=100, max_content_width=100, **group.context_settings))
    assert fast == slow


@pytest.mark.parametrize("module", ["sk_analytics.cli", "sk_runner.cli"])
def test_help_imports_no_heavy_library(module: str) -> None:
    code = (f"import sys; from {module} import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    elapsed = time.perf_counter() - started
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
    assert "Commands:" in done.stdout and elapsed < 30  # the timing target is measured by benchmarks/bench_cli_help.py


def _every_command() -> list[tuple[str, list[str]]]:
    """(module, argv) of every command and subcommand of both CLIs: the walk that writes docs/cli.md."""
    modules = {"sk-analyze": "sk_analytics.cli", "sk-run": "sk_runner.cli"}
    paths = [ctx.command_path.split() for ctx in command_contexts({prog: resolve(t) for prog, t in ROOTS.items()})]
    return [(modules[path[0]], path[1:]) for path in paths]


def test_every_command_and_subcommand_help_imports_no_heavy_library() -> None:
    """Issue 26: each command module imports its implementation when it runs, so the --help of any
    command or subcommand costs about what `import click` costs (benchmarks/bench_cli_help.py times it)."""
    commands = _every_command()
    assert len(commands) > 20 and (("sk_runner.cli", ["matrix", "init"]) in commands)
    code = ("import contextlib, io, sys\n"
            "from importlib import import_module\n"
            f"heavy = {HEAVY!r}\n"
            "out = []\n"
            f"for module, argv in {commands!r}:\n"
            "    for name in [m for m in sys.modules if m.split('.')[0] in heavy or m.startswith(('sk_analytics', 'sk_runner'))]:\n"
            "        del sys.modules[name]\n"
            "    with contextlib.redirect_stdout(io.StringIO()) as text:\n"
            "        try:\n"
            "            import_module(module).main([*argv, '--help'])\n"
            "        except SystemExit:\n"
            "            pass\n"
            "    out.append((' '.join(argv), 'Usage:' in text.getvalue(), sorted(m for m in heavy if m in sys.modules)))\n"
            "print(out)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    results = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert [r for r in results if not r[1] or r[2]] == []
    assert len(results) == len(commands)
