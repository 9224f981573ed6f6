"""Issue 38: a symbolic link loop is named "…: symbolic link loop" by every command that takes a path.

The commands and their path parameters are discovered from the click command trees of
``sk-run`` and ``sk-analyze``, so a new command or option is covered without touching
this file: a path parameter must be typed ``PathArg`` (or ``ExistingPath``), which refuses
a loop before the command runs. Values that hold a path inside a string (``NAME=PATH``,
a Parquet source) and paths read from inside sessions and campaigns are named by the
CLIs' error mapping (``sk_analytics.files.link_loop.loop_behind``); they are listed below.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import click
import pytest

from sk_analytics.cli import cli as analyze_cli
from sk_analytics.cli._base import PathArg, run_cli
from sk_runner.cli import cli as run_group

GROUPS = {"sk-analyze": analyze_cli, "sk-run": run_group}


def _leaves(group: click.Group, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    """Every command under ``group`` (hidden ones too), with its words after the program name."""
    ctx = click.Context(group, info_name=path[0] if path else None)
    for name in group.list_commands(ctx):
        command = group.get_command(ctx, name)
        assert command is not None, name
        if isinstance(command, click.Group):
            yield from _leaves(command, (*path, name))
        else:
            yield (*path, name), command


COMMANDS = [(prog, words, command) for prog, group in GROUPS.items() for words, command in _leaves(group, ())]
PATH_PARAMS = [
    pytest.param(prog, words, param, id=f"{prog} {' '.join(words)} {param.opts[0] if isinstance(param, click.Option) else param.name}")
    for prog, words, command in COMMANDS for param in command.params if isinstance(param.type, click.Path)
]


def _loop(tmp_path: Path) -> Path:
    loop = tmp_path / "loop"
    loop.symlink_to("loop")
    return loop


def _argv(words: tuple[str, ...], param: click.Parameter, value: str) -> list[str]:
    """The command with only ``param`` given (click converts given parameters first, so its type
    refuses the value before any missing required option is noticed)."""
    return [*words, *((param.opts[0], value) if isinstance(param, click.Option) else (value,))]


def _says_loop(capsys: pytest.CaptureFixture[str], code: int, loop: Path) -> None:
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and f"{loop}: symbolic link loop" in err, err
    assert "Traceback" not in err and "internal error" not in err, err


def test_the_walk_finds_the_commands_of_both_programs() -> None:
    """The discovery is not vacuous: both programs, nested groups, and every kind of path parameter."""
    names = {(prog, " ".join(words)) for prog, words, _ in COMMANDS}
    assert {("sk-run", "sim"), ("sk-run", "campaign status"), ("sk-run", "matrix freeze"), ("sk-analyze", "ingest"),
            ("sk-analyze", "ledger verify"), ("sk-analyze", "contract verify")} <= names
    assert len(PATH_PARAMS) >= 45


@pytest.mark.parametrize(("prog", "words", "param"), PATH_PARAMS)
def test_every_path_parameter_names_a_loop(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                           prog: str, words: tuple[str, ...], param: click.Parameter) -> None:
    """A loop as the path, or as a folder on the way to it, is one line naming the loop, exit 2,
    before the command runs (nothing is created: ``sim --run-dir loop`` said "File exists")."""
    monkeypatch.chdir(tmp_path)
    assert isinstance(param.type, PathArg), f"{prog} {' '.join(words)} {param.name}: type it PathArg (sk_analytics.cli._base)"
    loop = _loop(tmp_path)
    for value in (loop, loop / "inside" / "file.json"):
        _says_loop(capsys, run_cli(GROUPS[prog], prog, _argv(words, param, str(value))), loop)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["loop"]


def _candidate(folder: Path) -> Path:
    """A valid five-run candidate folder (2 ranks) for the commands that need a good side beside the loop."""
    from ot_logs import uniform_runs, write_candidate

    return write_candidate(folder, uniform_runs(["100", "101", "100", "99", "100"]))


_SMALL = ["--expected-ranks", "2", "--warmup", "2"]
STRING_PATHS: dict[str, Callable[[Path, Path], tuple[str, list[str]]]] = {
    "option-trial --baseline": lambda t, loop: ("sk-analyze", ["option-trial", "--baseline", str(loop), "--candidate", f"X={_candidate(t / 'c')}", *_SMALL]),
    "option-trial --candidate NAME=PATH": lambda t, loop: ("sk-analyze", ["option-trial", "--baseline", str(_candidate(t / "b")),
                                                                          "--candidate", f"X={loop}", *_SMALL]),
    "option-trial --candidate parquet:": lambda t, loop: ("sk-analyze", ["option-trial", "--baseline", str(_candidate(t / "b")),
                                                                          "--candidate", f"X=parquet:{loop}#round=O1", *_SMALL]),
    "stability SOURCE": lambda t, loop: ("sk-analyze", ["stability", str(loop)]),
    "stability parquet:": lambda t, loop: ("sk-analyze", ["stability", f"parquet:{loop}/data#round=O1"]),
    "contract validate-set --manifest ROLE=PATH": lambda t, loop: ("sk-analyze", ["contract", "validate-set", "--manifest", f"baseline_profile={loop}",
                                                                                   "--manifest", f"candidate_profile={loop}"]),
    "trial --source": lambda t, loop: ("sk-run", ["trial", "--session", str(_folder(t / "s")), "--round", "O0", "--incumbent",
                                                  "--base-config", str(_json(t / "base.json")), "--backend", "command",
                                                  "--cwd", str(t), "--source", str(loop), "--", "python3", "-c", "pass"]),
    "task init --source": lambda t, loop: ("sk-run", ["task", "init", "--seed-config", str(_json(t / "seed.json")), "--out", str(t / "task"),
                                                      "--cwd", str(t), "--source", str(loop), "--", "python3", "-c", "pass"]),
}
"""Parameters whose string value holds a path: named by the error mapping when the command reaches the path."""


def _folder(path: Path) -> Path:
    path.mkdir()
    return path


def _json(path: Path) -> Path:
    path.write_text("{}", encoding="utf-8")
    return path

NOT_PATHS = {"round_", "profile_ranks", "foreign_load"}  # foreign_load: device ids (its help names the registry folder)
"""String parameters whose help mentions a file or folder without taking one (ingest's partition names,
the simulator's rank list)."""


@pytest.mark.parametrize("case", sorted(STRING_PATHS))
def test_paths_inside_string_values_name_a_loop(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    """``option-trial``/``stability`` used to say "not a folder" for a loop. The refusal creates nothing
    (``trial --source`` left ``<session>/experiments/Sbest/<round>/`` and ``.processes`` behind)."""
    loop = _loop(tmp_path)
    prog, argv = STRING_PATHS[case](tmp_path, loop)
    before = sorted(tmp_path.rglob("*"))
    _says_loop(capsys, run_cli(GROUPS[prog], prog, argv), loop)
    assert sorted(tmp_path.rglob("*")) == before


def test_every_string_parameter_that_takes_a_path_is_covered() -> None:
    """A string parameter whose help says it takes a file, folder or PATH is either typed PathArg
    (covered by the walk above) or listed here, so a new one cannot slip past the loop check."""
    said = re.compile(r"\bPATH\b|\bDIR\b|\bfile\b|\bfolder\b")
    missed = []
    for prog, words, command in COMMANDS:
        for param in command.params:
            if isinstance(param.type, click.Path) or not isinstance(param.type, click.types.StringParamType):
                continue
            text = f"{getattr(param, 'help', None) or ''} {param.metavar or ''}"
            name = f"{' '.join(words)} {param.opts[0] if isinstance(param, click.Option) else param.name.upper()}"
            if said.search(text) and param.name not in NOT_PATHS and not any(case.startswith(f"{name} ") or case == name for case in STRING_PATHS):
                missed.append(f"{prog} {name}")
    assert not missed, f"string parameters taking a path, not covered by STRING_PATHS: {missed}"


def _session_with_loop(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / "s"
    folder.mkdir()
    (folder / name).symlink_to(name)
    return folder / name


INSIDE: dict[str, Callable[[Path], tuple[str, list[str], Path]]] = {
    "sweep --resume: session.json": lambda t: ("sk-run", ["sweep", "--resume", str(t / "s")], _session_with_loop(t, "session.json")),
    "campaign status: campaign.json": lambda t: ("sk-run", ["campaign", "status", str(t / "s")], _session_with_loop(t, "campaign.json")),
    "campaign resume: campaign.json": lambda t: ("sk-run", ["campaign", "resume", str(t / "s"), "--local"], _session_with_loop(t, "campaign.json")),
    "campaign cancel: campaign.json": lambda t: ("sk-run", ["campaign", "cancel", str(t / "s")], _session_with_loop(t, "campaign.json")),
    "sk-analyze campaign: sessions": lambda t: ("sk-analyze", ["campaign", str(t / "s")], _session_with_loop(t, "sessions")),
    "contract verify: manifest": lambda t: ("sk-analyze", ["contract", "verify", str(t / "s")], _session_with_loop(t, "collection-manifest.json")),
}
"""A file sk-tune reads from inside a session, campaign or collection folder, replaced by a loop."""


@pytest.mark.parametrize("case", sorted(INSIDE))
def test_paths_inside_sessions_and_campaigns_name_a_loop(tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str) -> None:
    """``sweep --resume`` said "session.json missing", ``campaign status`` "not a campaign"."""
    prog, argv, loop = INSIDE[case](tmp_path)
    _says_loop(capsys, run_cli(GROUPS[prog], prog, argv), loop)


def test_a_task_in_a_campaign_spec_that_is_a_loop_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    loop = _loop(tmp_path)
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"schema_version": "sk-tune-campaign-v1", "name": "c", "root": str(tmp_path / "root"),
                                "tasks": [{"id": "t0", "task": str(loop / "task.json")}]}), encoding="utf-8")
    _says_loop(capsys, run_cli(run_group, "sk-run", ["campaign", "run", str(spec), "--local"]), loop)
    assert not (tmp_path / "root").exists()


def test_a_dangling_link_or_a_missing_path_is_not_called_a_loop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "nowhere")
    for path in (dangling, tmp_path / "missing"):
        assert run_cli(analyze_cli, "sk-analyze", ["ledger", "verify", str(path)]) == 2
        err = capsys.readouterr().err
        assert "does not exist" in err and "symbolic link loop" not in err, err
        assert run_cli(analyze_cli, "sk-analyze", ["stability", str(path)]) == 2
        assert "symbolic link loop" not in capsys.readouterr().err
