"""The CLI error mapping: product errors become one line and their exit code."""

from __future__ import annotations

import errno
import os
import tempfile
from pathlib import Path

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


@pytest.mark.parametrize(("code", "exit_code"), [
    (errno.EIO, 3), (errno.ENOSPC, 3), (errno.EROFS, 3), (errno.EMFILE, 3),  # the machine or its storage
    (errno.ENOENT, 2), (errno.EACCES, 2), (errno.EISDIR, 2), (errno.EINVAL, 2),  # the user can fix it
])
def test_unanticipated_os_error_exits_as_read_error_would(code: int, exit_code: int, capsys: pytest.CaptureFixture[str]) -> None:
    """An OSError no reader wrapped gets the exit code :func:`read_error` gives the same errno (one classification)."""
    from sk_analytics.files.io_seam import read_error

    exc = OSError(code, os.strerror(code), "some/file")
    assert run_cli(_group_raising(exc), "x", ["boom"]) == exit_code
    if code not in (errno.ENOSPC, errno.EROFS):  # a read never fails with a full or read-only disk; a write does
        assert read_error("some/file", exc).exit_code == exit_code
    assert capsys.readouterr().err == f"x: error: some/file: {os.strerror(code)}\n"


def test_unexpected_exception_exits_70_with_saved_traceback(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    assert run_cli(_group_raising(KeyError(None)), "sk-run", ["boom"]) == 70
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("sk-run boom: internal error (KeyError: None); traceback saved to ")
    saved = Path(err.split("traceback saved to ")[1].split(". This is a bug")[0])
    assert saved.parent == tmp_path and "raise exc" in saved.read_text(encoding="utf-8")
    assert "Traceback" not in err


def test_internal_error_without_a_writable_temp_folder(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "absent"))
    assert run_cli(_group_raising(RecursionError("deep")), "sk-analyze", ["boom"]) == 70
    assert "the traceback could not be saved" in capsys.readouterr().err


def test_unknown_option_is_usage_error_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(_group_raising(InputError(None, "x")), "x", ["boom", "--nope"]) == 2
    assert "--nope" in capsys.readouterr().err


def test_usage_error_is_one_line_pointing_at_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(_group_raising(InputError(None, "x")), "x", ["boom", "--nope"]) == 2
    err = capsys.readouterr().err
    assert err == "x boom: error: No such option '--nope'. (see x boom --help)\n"


def test_bare_group_still_shows_its_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(_group_raising(InputError(None, "x")), "x", []) == 2
    assert "Usage: x [OPTIONS] COMMAND" in capsys.readouterr().err


def test_unanticipated_unreadable_file_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    """chmod 000 / a folder where a file belongs: the OS error, with its file, never a traceback."""
    code = run_cli(_group_raising(PermissionError(13, "Permission denied", "/data/log_0.log")), "x", ["boom"])
    assert code == 2
    assert capsys.readouterr().err == "x: error: /data/log_0.log: Permission denied\n"


def test_other_os_errors_are_environment_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(_group_raising(OSError(28, "No space left on device", "/out/part-0.parquet")), "x", ["boom"]) == 3
    assert capsys.readouterr().err == "x: error: /out/part-0.parquet: No space left on device\n"


def _loop(tmp_path: Path, name: str = "loop") -> Path:
    link = tmp_path / name
    link.symlink_to(name)
    return link


def _one_line(err: str, path: Path) -> None:
    assert err.count("\n") == 1 and str(path) in err and "internal error" not in err, err


def test_symlink_loops_as_inputs_and_outputs_are_bad_input_naming_the_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 29: a symlink loop given as --base-config, --session, ingest --out, option-trial --json-out or
    schema --out --check is exit 2 naming it (was exit 70, "out of date", or the link replaced)."""
    from ot_logs import uniform_runs, write_candidate

    from sk_analytics.cli import cli
    from sk_runner.cli import cli as run_group

    loop = _loop(tmp_path)
    base = tmp_path / "base.json"
    base.write_text("{}")
    source = write_candidate(tmp_path / "b", uniform_runs(["100", "101", "100", "99", "100"]))
    cases = [
        (run_group, "sk-run", ["trial", "--session", str(tmp_path / "s"), "--round", "O0-INCUMBENT", "--incumbent",
                               "--base-config", str(loop), "--runs", "1"]),
        (run_group, "sk-run", ["trial", "--session", str(loop), "--round", "O0-INCUMBENT", "--incumbent", "--base-config", str(base), "--runs", "1"]),
        (cli, "sk-analyze", ["ingest", str(source), "--out", str(loop)]),
        (cli, "sk-analyze", ["stability", str(source), "--expected-ranks", "2", "--warmup", "2", "--json-out", str(loop)]),
        (cli, "sk-analyze", ["schema", "--out", str(loop), "--check"]),
        (cli, "sk-analyze", ["schema", "--out", str(loop)]),
    ]
    for group, prog, argv in cases:
        assert run_cli(group, prog, argv) == 2, argv
        _one_line(capsys.readouterr().err, loop)
        assert os.readlink(loop) == "loop", argv  # never replaced
    assert not (tmp_path / "s").exists()


def test_symlink_loops_as_existing_path_arguments_are_named_as_loops(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Arguments that must exist (ledger verify/show, dcci-diff --session, contract files, sk-run matrix --session,
    sk-run profile --config): a loop is named a loop, not "does not exist" (docs/faults.md); a missing path still is."""
    from sk_analytics.cli import cli
    from sk_runner.cli import cli as run_group

    loop = _loop(tmp_path)
    cases = [
        (cli, "sk-analyze", ["ledger", "verify", str(loop)]),
        (cli, "sk-analyze", ["ledger", "show", str(loop)]),
        (cli, "sk-analyze", ["dcci-diff", "--session", str(loop)]),
        (run_group, "sk-run", ["matrix", "freeze", "--session", str(loop)]),
    ]
    for group, prog, argv in cases:
        assert run_cli(group, prog, argv) == 2, argv
        err = capsys.readouterr().err
        _one_line(err, loop)
        assert "symbolic link loop" in err and "does not exist" not in err, err
    assert run_cli(cli, "sk-analyze", ["ledger", "verify", str(tmp_path / "missing")]) == 2
    assert "does not exist" in capsys.readouterr().err
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    assert run_cli(cli, "sk-analyze", ["ledger", "verify", str(dangling)]) == 2
    assert "symbolic link loop" not in capsys.readouterr().err  # a dangling link is not a loop


def test_an_output_is_never_written_through_a_link(tmp_path: Path) -> None:
    from sk_analytics.files.atomic import write_json

    target = tmp_path / "real.json"
    target.write_text("kept")
    link = tmp_path / "out.json"
    link.symlink_to(target)
    with pytest.raises(InputError, match="out.json: is a symbolic link"):
        write_json(link, {"a": 1})
    assert target.read_text() == "kept" and link.is_symlink()
    plain = tmp_path / "plain.json"
    write_json(plain, {"a": 1})
    write_json(plain, {"a": 2})  # replacing its own regular file is what an atomic write is for
    assert plain.read_text() == '{\n  "a": 2\n}\n'


def test_an_append_never_follows_a_link(tmp_path: Path) -> None:
    from sk_analytics.files.io_seam import append_bytes

    target = tmp_path / "elsewhere.jsonl"
    target.write_text("")
    link = tmp_path / "ledger.jsonl"
    link.symlink_to(target)
    with pytest.raises(OSError) as info:
        append_bytes(link, b"{}\n")
    assert info.value.errno == errno.ELOOP and target.read_text() == ""


def test_ledger_show_of_an_empty_ledger_is_refused_as_verify_refuses_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An emptied ledger printed nothing and exited 0 (a history of no event); `verify` names it, `show` now alike."""
    from sk_analytics.cli import cli

    empty = tmp_path / "ledger.jsonl"
    empty.write_bytes(b"")
    for argv in (["ledger", "show", str(empty)], ["ledger", "show", "--json", str(tmp_path)]):
        assert run_cli(cli, "sk-analyze", argv) == 2
        said = capsys.readouterr()
        assert said.out == "" and said.err == (f"sk-analyze: error: {empty}: rule identity: the ledger holds no records: "
                                               "nothing to show (emptied, or not a session)\n")


def test_ledger_show_names_the_file_that_fails_verification(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sk_analytics.cli import cli
    from sk_analytics.ledger.chain import Ledger

    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.append("event", {"i": 1})
    bad = ledger.path
    with open(bad, "ab") as fh:
        fh.write(b"{}\n")
    assert run_cli(cli, "sk-analyze", ["ledger", "show", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"WARNING: {bad}:2: ledger fails verification (1 problem(s); first: rule ") and err.count("\n") == 1
