"""A copy of a session (``cp -a``) taken while its sweep runs, or before the session went on: resuming the copy must
not fork the session's signed ledger, or the witness would brand whichever copy wrote second as tampered."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from sweep_helpers import small_session

from sk_analytics.cli import cli as analyze_cli
from sk_analytics.cli._base import run_cli
from sk_analytics.errors import IntegrityError
from sk_analytics.ledger.chain import read_records
from sk_analytics.ledger.witness import WITNESS_ENV
from sk_runner.sweep.session import load_session


@pytest.fixture
def witness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "witness.jsonl"
    monkeypatch.setenv(WITNESS_ENV, str(path))
    return path


def test_a_copy_left_behind_by_its_session_is_not_resumed(tmp_path: Path, witness: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """The copy was taken at seq 1; the session went on to seq 2. Resuming the copy would append another seq 2, and
    ``ledger verify`` of the session that went on would then fail (rule witness: diverged): it is refused instead,
    naming the witness and the way forward, and the session that went on still verifies."""
    root = tmp_path / "s"
    small_session(root, ["auto-op-parallel-1"]).append("phase_entry", {"note": "first"})
    copy = tmp_path / "copy"
    shutil.copytree(root, copy, symlinks=True)
    load_session(root).append("phase_entry", {"note": "the session went on"})  # e.g. the sweep was still running

    with pytest.raises(IntegrityError) as info:
        load_session(copy)
    said = info.value.one_line()
    assert f"{copy / 'ledger.jsonl'}: rule witness: " in said and "ends at seq 1" in said, said
    assert "a copy of this session went on past it" in said and "resume the folder that went on" in said, said
    assert len(read_records(copy)) == 2  # nothing appended to the copy
    capsys.readouterr()
    assert run_cli(analyze_cli, "sk-analyze", ["ledger", "verify", str(copy)]) == 2  # verify says the same of the copy,
    assert "or this is a copy taken before the session went on" in capsys.readouterr().err  # not only "rollback"
    load_session(root)  # the session that went on resumes as before
    capsys.readouterr()
    assert run_cli(analyze_cli, "sk-analyze", ["ledger", "verify", str(root)]) == 0, capsys.readouterr().err


def test_a_copy_at_the_witnessed_head_resumes_and_the_one_left_behind_is_refused(tmp_path: Path, witness: Path) -> None:
    """A copy of an interrupted session, resumed in its new folder, is that session from then on: the original, resumed
    later, is the one left behind (diverged at the copy's first record), refused the same way."""
    root = tmp_path / "s"
    small_session(root, ["auto-op-parallel-1"]).append("phase_entry", {"note": "first"})
    copy = tmp_path / "copy"
    shutil.copytree(root, copy, symlinks=True)
    load_session(copy).append("phase_entry", {"note": "the copy went on"})
    load_session(copy)
    with pytest.raises(IntegrityError, match=r"rule witness: .* ends at seq 1"):
        load_session(root)


def test_a_copy_of_a_session_whose_sweep_still_runs_is_not_resumed(tmp_path: Path, witness: Path) -> None:
    """``cp -a`` while the sweep runs, resumed at once (the session has not appended since): the witness cannot tell
    yet, but the copy's process table names the live sk-run writing the original folder: refused, nothing appended,
    and the session itself resumes as before (a live owner recorded for its own folder is no copy)."""
    import socket
    import subprocess
    import sys

    from sk_analytics.errors import UsageError
    from sk_analytics.files.atomic import write_json
    from sk_runner.process.lifetime import TABLE_DIR, start_ticks
    from sk_runner.sweep.driver import run_sweep

    root = tmp_path / "s"
    small_session(root, [])
    copy = tmp_path / "copy"
    sweep = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:  # the running sweep's record, as sk-run writes it into the session it works in (and cp -a copies it)
        record = {"token": "0123456789abcdef", "pid": sweep.pid, "start_ticks": start_ticks(sweep.pid),
                  "host": socket.gethostname(), "argv": ["/venv/bin/sk-run", "sweep", "--task", "task.json"], "groups": []}
        write_json(root / TABLE_DIR / "0123456789abcdef.json", {**record, "folder": str(root)})
        shutil.copytree(root, copy, symlinks=True)
        before = len(read_records(copy))
        with pytest.raises(UsageError) as info:
            run_sweep(load_session(copy), say=lambda _: None)
        said = info.value.one_line()
        assert said.startswith(f"{copy}: this folder is a copy of a session that pid {sweep.pid} (/venv/bin/sk-run sweep "
                               f"--task task.json) in {root} is still writing"), said
        assert len(read_records(copy)) == before
        outcome = run_sweep(load_session(root), say=lambda _: None)  # its own record: the session itself goes on
        assert outcome is not None and outcome.outcome == "base"
    finally:
        assert sweep.stdin is not None
        sweep.stdin.close()
        sweep.wait(timeout=30)


def test_a_moved_workload_folder_is_named_with_what_can_be_done(tmp_path: Path) -> None:
    """A command-workload session whose workload folder was moved stopped with "is not a folder (any more) ... Free the
    cause, then: resume": the user re-created it as a symbolic link, which the source identity (real paths) refuses
    again. The line says that the session cannot be pointed elsewhere and what works: the folder back at its real path,
    or a fresh session."""
    from sk_analytics.errors import EnvironmentBlocker
    from sk_runner.backends.command import CommandBackend

    gone = tmp_path / "model"
    with pytest.raises(EnvironmentBlocker) as info:
        CommandBackend(["python", "infer.py"], cwd=gone).check_command()
    said = info.value.one_line()
    assert said.startswith(f"working directory {gone} of the workload is not a folder (any more): "), said
    assert "cannot be pointed at another folder" in said and "a symbolic link there is another workload" in said, said
    assert "or start a fresh session" in said, said
