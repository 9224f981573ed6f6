"""The write seam and the classification of environment faults (disk full, I/O error, …)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from sk_analytics.errors import EnvironmentBlocker, InputError, ReadFault
from sk_analytics.files.atomic import write_json, write_text
from sk_analytics.files.io_seam import (
    FAULT_ENV,
    Fault,
    append_bytes,
    environment_errno,
    inject,
    move,
    parse_fault,
    read_error,
)
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.ledger.chain import Ledger, read_records, verify
from sk_analytics.schema import RUNS
from sk_analytics.tables import write_table
from sk_runner.process import run_process
from sk_runner.process.faults import COMMAND_CHARS, LOW_SPACE_BYTES, EnvironmentFault, classify_fault, command_text


def test_environment_errno_tells_machine_faults_from_bugs() -> None:
    assert environment_errno(OSError(errno.ENOSPC, "No space left on device")) == "ENOSPC"
    assert environment_errno(OSError(errno.EIO, "Input/output error")) == "EIO"
    assert environment_errno(OSError(errno.EMFILE, "Too many open files")) == "EMFILE"
    assert environment_errno(OSError(errno.ENOENT, "No such file")) is None  # a missing input: bad input, not the machine
    assert environment_errno(ValueError("x")) is None


def test_parse_fault_and_refusals() -> None:
    assert parse_fault("ENOSPC:parquet:2") == Fault(errno.ENOSPC, "parquet", 2)
    assert parse_fault("eio:*:1") == Fault(errno.EIO, None, 1)
    assert parse_fault("EIO:read:3") == Fault(errno.EIO, "read", 3)
    for bad in ("ENOSPC:disk:1", "NOPE:atomic:1", "ENOSPC:atomic:0", "ENOSPC:atomic"):
        with pytest.raises(ValueError):
            parse_fault(bad)


def test_atomic_write_fault_leaves_old_file_and_no_temp(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    write_json(target, {"v": 1})
    with inject(Fault(errno.ENOSPC, "atomic")) as plan, pytest.raises(OSError) as err:
        write_json(target, {"v": 2})
    assert err.value.errno == errno.ENOSPC and plan.fired == 1
    assert target.read_text(encoding="utf-8") == '{\n  "v": 1\n}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json"]  # the temp file was removed


def test_sticky_fault_keeps_failing_until_cleared(tmp_path: Path) -> None:
    with inject(Fault(errno.EIO, "atomic", nth=2)) as plan:
        write_text(tmp_path / "1.txt", "one")
        for name in ("2.txt", "3.txt"):
            with pytest.raises(OSError):
                write_text(tmp_path / name, "x")
    assert plan.fired == 2 and [s for s, _ in plan.writes] == ["atomic"] * 3
    write_text(tmp_path / "2.txt", "two")  # the fault is gone with the plan
    assert sorted(p.name for p in tmp_path.iterdir()) == ["1.txt", "2.txt"]


def test_parquet_site_is_its_own(tmp_path: Path) -> None:
    frame = pl.DataFrame(schema=RUNS.schema)
    with inject(Fault(errno.ENOSPC, "parquet")) as plan, pytest.raises(OSError):
        write_table(frame, RUNS, tmp_path, {"round": "O1", "role": "trial", "run": "run-1"})
    assert plan.writes[0][0] == "parquet"
    assert not list(tmp_path.rglob("*.parquet")) and not list(tmp_path.rglob("*.tmp"))


def test_torn_append_leaves_half_a_line(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    append_bytes(path, b"first\n")
    with inject(Fault(errno.ENOSPC, "append", torn=True)), pytest.raises(OSError):
        append_bytes(path, b"0123456789\n")
    assert path.read_bytes() == b"first\n01234"


def test_torn_ledger_append_is_recovered_by_the_next_append(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path)
    ledger.append("a", {"n": 1})
    with inject(Fault(errno.ENOSPC, "ledger", torn=True)), pytest.raises(OSError):
        ledger.append("b", {"n": 2})
    assert not verify(tmp_path).ok  # the torn line is there until the next append
    ledger.append("b", {"n": 2})
    assert verify(tmp_path).ok
    kinds = [r.kind for r in read_records(tmp_path)]
    assert kinds == ["a", "b"]
    assert len(list(tmp_path.glob("ledger.jsonl.torn-*"))) == 1


@pytest.mark.parametrize(("code", "machine"), [
    (errno.EIO, True), (errno.EMFILE, True), (errno.ENFILE, True), (errno.ENOMEM, True), (errno.ESTALE, True),
    (errno.ENOENT, False), (errno.EACCES, False), (errno.EISDIR, False), (errno.ENOTDIR, False),
])
def test_read_error_tells_the_machine_from_the_input(code: int, machine: bool) -> None:
    err = read_error("/d/log_0.log", OSError(code, os.strerror(code)), "rank log")
    assert isinstance(err, ReadFault if machine else InputError)
    assert err.exit_code == (3 if machine else 2)
    assert err.one_line().startswith("/d/log_0.log: cannot read rank log: ")
    if machine:
        assert err.errno_name == errno.errorcode[code] and f"({errno.errorcode[code]})" in err.one_line()


def test_reads_are_injected_only_at_the_read_site(tmp_path: Path) -> None:
    """A fault at any write site never hits a read, and a read fault never hits a write."""
    path = tmp_path / "a.json"
    write_json(path, {"v": 1})
    with inject(Fault(errno.EIO, None)) as plan:
        assert load_json_file(path) == {"v": 1}
    assert plan.fired == 0 and plan.reads == [str(path)] and plan.writes == []
    with inject(Fault(errno.EIO, "read", nth=2)) as plan:
        write_json(tmp_path / "b.json", {"v": 2})
        assert load_json_file(path) == {"v": 1}
        with pytest.raises(ReadFault) as err:
            load_json_file(tmp_path / "b.json")
    assert plan.fired == 1 and err.value.errno_name == "EIO" and err.value.path == str(tmp_path / "b.json")
    with inject(Fault(errno.ENOENT, "read")), pytest.raises(InputError, match="a.json: cannot read: file not found"):
        load_json_file(path)


def test_move_site(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    with inject(Fault(errno.EROFS, "move")), pytest.raises(OSError) as err:
        move(tmp_path / "a", tmp_path / "b")
    assert err.value.errno == errno.EROFS and (tmp_path / "a").is_dir()


@pytest.mark.parametrize(("stderr", "expected"), [
    ("Traceback ...\nOSError: [Errno 28] No space left on device: '/x/log_0.log'\n", "ENOSPC"),
    ("sk-run: error: /s/run/log_1.log: No space left on device\n", "ENOSPC"),
    ("IOError: [Errno 5] Input/output error\n", "EIO"),
    ("cannot write: Read-only file system\n", "EROFS"),
    ("OSError: [Errno 24] Too many open files\n", "EMFILE"),
    ("PermissionError: [Errno 13] Permission denied: '/dev/davinci0'\n", "EACCES"),
])
def test_classify_fault_reads_stderr(stderr: str, expected: str) -> None:
    found = classify_fault(stderr, free_bytes=10 << 30)
    assert found is not None and found.errno_name == expected
    assert "\n" not in found.evidence


def test_command_text_quotes_and_cuts() -> None:
    assert command_text(["python", "-m", "infer", "--config", "a b.json"]) == "python -m infer --config 'a b.json'"
    long = command_text(["torchrun", "--nproc-per-node", "8", *[f"--arg{n}=value" for n in range(40)]])
    assert len(long) == COMMAND_CHARS and long.endswith("…") and long.startswith("torchrun --nproc-per-node 8 --arg0=value")


def test_classify_fault_other_failures_and_full_disk() -> None:
    assert classify_fault("RuntimeError: option value 3 crashes the kernel\n", free_bytes=10 << 30) is None
    assert classify_fault("", free_bytes=None) is None
    found = classify_fault("", free_bytes=LOW_SPACE_BYTES - 1)  # stderr itself could not be written
    assert found is not None and found.errno_name == "ENOSPC"


def _run(tmp_path: Path, code: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return run_process([sys.executable, "-c", code], cwd=tmp_path, env={**os.environ, **(env or {})},
                       stdout_path=tmp_path / "out.txt", stderr_path=tmp_path / "err.txt", timeout_s=60)


def test_process_that_died_of_enospc_is_an_environment_fault(tmp_path: Path) -> None:
    script = "import errno, os; raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), 'log_0.log')"
    with pytest.raises(EnvironmentFault) as err:
        _run(tmp_path, script)
    assert isinstance(err.value, EnvironmentBlocker) and err.value.exit_code == 3
    assert err.value.evidence.errno_name == "ENOSPC" and "No space left on device" in err.value.one_line()
    # the message names the command as configured (not only the interpreter) and where its stderr is
    line = err.value.one_line()
    assert line.startswith(f"{command_text([sys.executable, '-c', script])} died of an environment fault (ENOSPC: ")
    assert f"{sys.executable} -c 'import errno, os;" in line
    assert line.endswith(f"; its stderr: {tmp_path / 'err.txt'}") and "log_0.log" in (tmp_path / "err.txt").read_text()
    # a crash of the workload itself stays a result, to be decided on
    result = _run(tmp_path, "raise SystemExit('option 3 crashes')")
    assert result.exit_code == 1


def test_producer_fault_injected_through_the_environment(tmp_path: Path) -> None:
    code = "from sk_analytics.cli import main; main()"
    argv = [sys.executable, "-c", code, "schema", "--out", str(tmp_path / "schema.md")]
    env = {**os.environ, FAULT_ENV: "ENOSPC:atomic:1"}
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3 and "No space left on device" in done.stderr
    assert not (tmp_path / "schema.md").exists()


def test_read_fault_injected_through_the_environment(tmp_path: Path) -> None:
    """``SK_TUNE_INJECT_FAULT=EIO:read:1`` in a fresh process: its first read (the ledger) fails; exit 3, one line."""
    Ledger(tmp_path).append("event", {"i": 0})
    argv = [sys.executable, "-c", "from sk_analytics.cli import main; main()", "ledger", "verify", str(tmp_path)]
    done = subprocess.run(argv, env={**os.environ, FAULT_ENV: "EIO:read:1"}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 3 and done.stderr.count("\n") == 1, done.stderr
    assert f"{tmp_path / 'ledger.jsonl'}: cannot read ledger: Input/output error (injected) (EIO)" in done.stderr
    plain = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert plain.returncode == 0, plain.stderr


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_written_files_respect_the_umask(tmp_path: Path, umask: int, mode: int) -> None:
    """Reports and other results are as readable as any file the user creates (they were always 0600)."""
    old = os.umask(umask)
    try:
        write_text(tmp_path / "report.md", "# r\n")
        write_table(pl.DataFrame(schema=RUNS.schema), RUNS, tmp_path / "data", {"round": "O1", "role": "trial", "run": "run-1"})
    finally:
        os.umask(old)
    assert (tmp_path / "report.md").stat().st_mode & 0o777 == mode
    assert next((tmp_path / "data").rglob("*.parquet")).stat().st_mode & 0o777 == mode
