"""Exit codes are written once, on the error classes, and nowhere else as numbers."""

from __future__ import annotations

import ast
import signal
from pathlib import Path

import pytest

from sk_analytics import errors, interrupts
from sk_analytics.cli.doc_tables import render_exit_codes
from sk_analytics.errors import (
    EXIT_NEGATIVE,
    EXIT_OK,
    OUTCOMES,
    EnvironmentBlocker,
    InputError,
    IntegrityError,
    InternalError,
    ReadFault,
    SkTuneError,
    UsageError,
    exit_codes,
)
from sk_runner.campaign.job import JobResult

REPO = Path(__file__).resolve().parents[1]
PACKAGES = ("sk_analytics", "sk_runner")
CODE_HOMES = {Path("sk_analytics/errors.py"), Path("sk_analytics/interrupts.py")}
"""The only modules that may write an exit number."""


def test_every_code_once_with_its_meaning() -> None:
    rows = exit_codes()
    codes = [code for code, _ in rows]
    assert codes == sorted(set(codes)) == [0, 1, 2, 3, 70, 128 + signal.SIGINT, 141, 128 + signal.SIGTERM] == [0, 1, 2, 3, 70, 130, 141, 143]
    assert all(meaning and "\n" not in meaning for _, meaning in rows)
    for cls in (SkTuneError, InputError, UsageError, IntegrityError, EnvironmentBlocker, ReadFault, InternalError):
        assert (cls.exit_code, cls.meaning) in rows, cls
    assert {code for code, _ in rows} >= set(OUTCOMES) | set(interrupts.Interrupted.MEANINGS)
    assert interrupts.Interrupted(signal.SIGTERM).exit_code == interrupts.EXIT_SIGTERM
    assert render_exit_codes().splitlines()[2:] == [f"| {c} | {m} |" for c, m in rows]


def test_a_subclass_with_its_own_code_needs_its_own_meaning() -> None:
    """Every SkTuneError subclass that changes the code also changes the meaning (no row says the wrong thing)."""
    def subclasses(cls: type[SkTuneError]) -> list[type[SkTuneError]]:
        return [cls, *(s for sub in cls.__subclasses__() for s in subclasses(sub))]

    for cls in subclasses(SkTuneError):
        parent = cls.__mro__[1]
        if issubclass(parent, SkTuneError) and cls.exit_code != parent.exit_code:
            assert cls.meaning != parent.meaning, cls


@pytest.mark.parametrize(("code", "outcome"), [(EXIT_OK, "base"), (EXIT_NEGATIVE, "stopped"), (2, "failed"), (70, "failed")])
def test_a_campaign_job_reads_the_sweeps_exit_code(code: int, outcome: str) -> None:
    fields = {f: None for f in JobResult.__dataclass_fields__}
    result = JobResult(**{**fields, "exit_code": code, "signal": None, "timed_out": False})  # type: ignore[arg-type]
    assert result.outcome == outcome


def _magic_exits(tree: ast.AST) -> list[tuple[int, str]]:
    """``sys.exit(<int>)``, ``SystemExit(<int>)``, ``exit_code=<int>`` and ``exit_code = <int>`` with a number literal."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
            if name in ("exit", "SystemExit") and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, int):
                found.append((node.lineno, ast.unparse(node)))
            found += [(node.lineno, ast.unparse(k)) for k in node.keywords
                      if k.arg == "exit_code" and isinstance(k.value, ast.Constant) and isinstance(k.value.value, int)]
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, int):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(getattr(t, "id", getattr(t, "attr", None)) == "exit_code" for t in targets):
                found.append((node.lineno, ast.unparse(node)))
    return found


def _cli_returns(tree: ast.AST) -> list[tuple[int, str]]:
    """``return <int>`` (also in a conditional expression) in a command module: a command's exit code."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Return) and node.value is not None:
            values = [node.value.body, node.value.orelse] if isinstance(node.value, ast.IfExp) else [node.value]
            if any(isinstance(v, ast.Constant) and type(v.value) is int for v in values):
                found.append((node.lineno, ast.unparse(node)))
    return found


def _command_modules() -> list[Path]:
    return sorted({*REPO.glob("sk_analytics/cli/*.py"), *REPO.glob("sk_runner/*/cli.py"), REPO / "sk_runner/cli.py",
                   REPO / "sk_runner/sweep/matrix_cli.py"})


def test_no_magic_exit_numbers() -> None:
    problems = []
    for package in PACKAGES:
        for path in sorted((REPO / package).rglob("*.py")):
            if path.relative_to(REPO) not in CODE_HOMES:
                problems += [f"{path.relative_to(REPO)}:{line}: {text}" for line, text in _magic_exits(ast.parse(path.read_text("utf-8")))]
    for path in _command_modules():
        problems += [f"{path.relative_to(REPO)}:{line}: {text}" for line, text in _cli_returns(ast.parse(path.read_text("utf-8")))]
    assert problems == [], "use the codes of sk_analytics.errors:\n" + "\n".join(problems)


def test_the_checker_finds_planted_numbers() -> None:
    code = ("import sys\ndef f(ok):\n    sys.exit(2)\n    raise SystemExit(3)\n    g(exit_code=1)\n    return 0 if ok else 1\n"
            "class E:\n    exit_code = 4\n")
    tree = ast.parse(code)
    assert sorted(line for line, _ in _magic_exits(tree)) == [3, 4, 5, 8]
    assert _cli_returns(tree) == [(6, "return 0 if ok else 1")]
    assert _magic_exits(ast.parse("sys.exit(EXIT_OK)\nraise SystemExit(main())\n")) == []
    assert errors.EXIT_INTERNAL == InternalError.exit_code


@pytest.mark.parametrize("tool", ["sk-analyze", "sk-run"])
def test_a_closed_output_pipe_is_141_not_a_negative_decision(tool: str) -> None:
    """``… | head`` closing the pipe: click answers EPIPE with sys.exit(1), which would read as "decision
    negative"; the tools end with 141 (what a shell reports for a program SIGPIPE ended) and no traceback.
    The reading end is closed before the command starts, so its first write fails: no timing decides it."""
    import os
    import subprocess
    import sys

    module = "sk_analytics.cli" if tool == "sk-analyze" else "sk_runner.cli"
    args = ["schema"] if tool == "sk-analyze" else ["--help"]
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        done = subprocess.run([sys.executable, "-c", f"from {module} import main; main()", *args], stdout=write_end,
                              stderr=subprocess.PIPE, text=True, timeout=120, check=False)
    finally:
        os.close(write_end)
    assert done.returncode == errors.EXIT_BROKEN_PIPE == 141, done.stderr
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr
    assert "closed pipe" in dict(exit_codes())[errors.EXIT_BROKEN_PIPE] and errors.EXIT_BROKEN_PIPE == 128 + signal.SIGPIPE
