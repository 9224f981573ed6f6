"""The CLI error mapping: product errors become one line and their exit code."""

from __future__ import annotations

import click
import pytest

from sk_analytics.cli._base import LazyGroup, run_cli
from sk_analytics.errors import EnvironmentBlocker, InputError


def _group_raising(exc: Exception) -> click.Group:
    @click.group(cls=LazyGroup)
    def grp() -> None:
        pass

    @grp.command()
    def boom() -> None:
        raise exc

    return grp


def test_input_error_is_one_line_with_file_and_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = run_cli(_group_raising(InputError("a/b.log", "bad value\nsecond", line=7, expected="a number")), "x", ["boom"])
    err = capsys.readouterr().err
    assert code == 2
    assert err == "x: error: a/b.log:7: bad value second (expected a number)\n"


def test_environment_blocker_exits_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(_group_raising(EnvironmentBlocker("torch_npu is not importable")), "x", ["boom"]) == 3
    assert "torch_npu" in capsys.readouterr().err


def test_unknown_option_is_usage_error_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(_group_raising(InputError(None, "x")), "x", ["boom", "--nope"]) == 2
    assert "--nope" in capsys.readouterr().err
