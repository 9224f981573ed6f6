"""Hostile input: each is a one-line error, exit 2, no traceback, nothing written (docs/faults.md "Hostile inputs")."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from runner_fake import write_fake

from sk_analytics.cli import cli as analyze_cli
from sk_analytics.cli._base import run_cli
from sk_analytics.contract import MANIFEST_NAME
from sk_analytics.errors import IntegrityError
from sk_analytics.files.strict_json import MAX_DEPTH
from sk_analytics.ledger.chain import Ledger, read_records
from sk_runner.cli import cli as run_cli_group
from sk_runner.limits import MAX_ITERATIONS, MAX_RANKS, MAX_SAMPLES

ALIAS_BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join(['*' + p] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True))


def _one_line_exit_2(capsys: pytest.CaptureFixture[str], code: int, *needles: str) -> str:
    err = capsys.readouterr().err
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert all(n in err for n in needles), err
    return err


def _files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


@pytest.mark.parametrize(("name", "text", "needle"), [
    ("deep.json", "[" * 100_000 + "]" * 100_000, f"nested deeper than {MAX_DEPTH} levels"),
    ("deep.yaml", "a: " + "[" * 5000 + "]" * 5000 + "\n", f"nested deeper than {MAX_DEPTH} levels"),
    ("bomb.yaml", ALIAS_BOMB, "bomb.yaml:2: YAML alias (*name) refused"),
])
def test_hostile_config_is_refused_before_anything_is_written(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                             name: str, text: str, needle: str) -> None:
    argv = write_fake(tmp_path)
    config = tmp_path / name
    config.write_text(text, encoding="utf-8")
    before = _files(tmp_path / "session")
    code = run_cli(run_cli_group, "sk-run", ["trial", "--session", str(tmp_path / "session"), "--round", "O1",
                                             "--base-config", str(config), "--set=/super_kernel_optimize_options/auto_op_parallel=1",
                                             "--backend", "command", "--ranks", "2", "--warmup", "2", "--", *argv])
    _one_line_exit_2(capsys, code, needle)
    assert _files(tmp_path / "session") == before


def test_deeply_nested_ledger_line_and_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = Ledger(tmp_path)
    ledger.append("event", {"i": 0})
    with open(ledger.path, "a", encoding="utf-8") as fh:
        fh.write('{"data": ' + "[" * 50_000 + "]" * 50_000 + "}\n")
    with pytest.raises(IntegrityError, match=f"nested deeper than {MAX_DEPTH} levels"):
        read_records(tmp_path)
    code = run_cli(analyze_cli, "sk-analyze", ["ledger", "verify", str(tmp_path)])
    err = capsys.readouterr()
    assert code in (1, 2) and "Traceback" not in err.err + err.out and "nested deeper" in err.err + err.out


@pytest.mark.parametrize("command", [
    ["contract", "verify", "{root}"],
    ["contract", "verify", "--archive", "{manifest}"],
    ["contract", "validate-set", "--manifest", "baseline_profile={root}", "--manifest", "candidate_profile={manifest}",
     "--json-out", "{out}"],
])
def test_deeply_nested_manifest_through_the_contract_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         command: list[str]) -> None:
    """A collection manifest nested 100 000 levels deep: one line naming the manifest, exit 2, nothing written."""
    root = tmp_path / "root"
    root.mkdir()
    manifest = root / MANIFEST_NAME
    manifest.write_text('{"files": ' + '{"a": ' * 100_000 + "1" + "}" * 100_001, encoding="utf-8")
    before = _files(tmp_path)
    places = {"root": str(root), "manifest": str(manifest), "out": str(tmp_path / "out" / "set.json")}
    code = run_cli(analyze_cli, "sk-analyze", [arg.format(**places) for arg in command])
    _one_line_exit_2(capsys, code, f"{manifest}: nested deeper than {MAX_DEPTH} levels")
    assert _files(tmp_path) == before


@pytest.mark.parametrize(("args", "needle"), [
    (["--ranks", "100000000"], f"--ranks 100000000: expected at most {MAX_RANKS}"),
    (["--iterations", str(MAX_ITERATIONS + 1)], f"expected at most {MAX_ITERATIONS}"),
    (["--ranks", "1024", "--iterations", "10000"], f"expected at most {MAX_SAMPLES} decode samples per process"),
])
def test_sim_sizes_have_bounds(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], needle: str) -> None:
    config = tmp_path / "c.json"
    config.write_text(json.dumps({"super_kernel_optimize_options": {}}), encoding="utf-8")
    code = run_cli(run_cli_group, "sk-run", ["sim", "--config", str(config), "--run-dir", str(tmp_path / "run"), *args])
    _one_line_exit_2(capsys, code, needle)
    assert not (tmp_path / "run").exists()


def test_trial_sizes_have_the_same_bounds(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = write_fake(tmp_path)
    code = run_cli(run_cli_group, "sk-run", ["trial", "--session", str(tmp_path / "session"), "--round", "O1",
                                             "--base-config", str(tmp_path / "base.json"), "--incumbent", "--backend", "command",
                                             "--ranks", "100000000", "--", *argv])
    _one_line_exit_2(capsys, code, f"'--ranks': 100000000 is not in the range 1<=x<={MAX_RANKS}")
    assert _files(tmp_path / "session") == []
