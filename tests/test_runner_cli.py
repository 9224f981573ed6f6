"""sk-run trial / probe through the CLI: exit codes, --json, and kill-and-resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from runner_fake import write_fake

from sk_analytics.cli._base import run_cli
from sk_runner.cli import cli
from sk_runner.process import process_alive

SET = "--set=/super_kernel_optimize_options/auto_op_parallel=1"


def _args(tmp_path: Path, *extra: str) -> list[str]:
    argv = write_fake(tmp_path)
    return ["trial", "--session", str(tmp_path / "session"), "--round", "O1", "--base-config", str(tmp_path / "base.json"),
            "--backend", "command", "--ranks", "2", "--warmup", "2", "--timeout", "30", *extra, "--", *argv]


def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in list(os.environ):
        if key.startswith(("ASCEND_PROF", "SK_RUN", "ASCEND_OP_COMPILE")):
            monkeypatch.delenv(key)


def test_json_output_and_exit_codes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _clean_env(monkeypatch)
    assert run_cli(cli, "sk-run", _args(tmp_path, SET, "--json")) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "ok" and out["runs_completed"] == [1, 2, 3]
    # second pointer: usage error, exit 2, one line
    code = run_cli(cli, "sk-run", _args(tmp_path, SET, "--set=/super_kernel_optimize_options/early_start=1"))
    err = capsys.readouterr().err
    assert code == 2 and "exactly one RFC 6901 pointer" in err and len(err.strip().splitlines()) == 1
    # joint DCCI pair with different lists: refused
    code = run_cli(cli, "sk-run", _args(tmp_path, "--joint-dcci", '--set=/super_kernel_optimize_options/dcci_before_kernel_start=["a.*"]',
                                        '--set=/super_kernel_optimize_options/dcci_after_kernel_end=["b.*"]', "--round", "O2"))
    assert code == 2 and "exactly the same list" in capsys.readouterr().err
    # dirty environment: exit 3
    monkeypatch.setenv("ASCEND_OP_COMPILE_SAVE_KERNEL_META", "1")
    code = run_cli(cli, "sk-run", _args(tmp_path, SET, "--round", "O3"))
    assert code == 3 and "ASCEND_OP_COMPILE_SAVE_KERNEL_META=1" in capsys.readouterr().err
    monkeypatch.delenv("ASCEND_OP_COMPILE_SAVE_KERNEL_META")
    # a failing trial: exit 1 and the scene path printed
    code = run_cli(cli, "sk-run", _args(tmp_path, "--set=/super_kernel_optimize_options/early_start=1", "--round", "O4"))
    out = capsys.readouterr().out
    assert code == 1 and "wrong_output" in out and "FAILURE_SCENES/attempt-1" in out


def test_probe_cli_reports_accepted_and_rejected_values(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _clean_env(monkeypatch)
    argv = write_fake(tmp_path)
    code = run_cli(cli, "sk-run", ["probe", "--option", "auto_op_parallel", "--value", "1", "--value", "5", "--value", '"x"',
                                   "--backend", "command", "--out", str(tmp_path / "probes"), "--json", "--", *argv])
    out = json.loads(capsys.readouterr().out)
    assert code == 1 and out["ready"] is False
    assert out["accepted_values"] == [1] and out["rejected_values"] == [5, "x"]
    by_value = {json.dumps(r["value"]): r for r in out["records"]}
    assert by_value["5"]["evidence"]["runtime"]["status"] == "invalid_default"
    assert by_value['"x"']["evidence"]["runtime"] is None  # the wrapper rejected it: no process started
    assert run_cli(cli, "sk-run", ["probe", "--option", "auto_op_parallel", "--value", "1", "--backend", "command",
                                   "--out", str(tmp_path / "probes"), "--", *argv]) == 0
    assert "ready=true" in capsys.readouterr().out


def test_killing_sk_run_keeps_finished_runs_and_resume_completes(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASCEND_PROF", "SK_RUN", "ASCEND_OP_COMPILE"))}
    hold = tmp_path / "hold-run-2"  # run-2 waits while it exists: sk-run is killed mid-run, whatever the machine's pace
    hold.touch()
    env.update(FAKE_HOLD_RUN="run-2", FAKE_HOLD_FILE=str(hold))
    cmd = [sys.executable, "-c", "from sk_runner.cli import main; main()", *_args(tmp_path, SET)]
    rd = tmp_path / "session/experiments/Sbest/O1/CLEAN"
    proc = subprocess.Popen(cmd, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300  # the bound only matters when something is broken
    while not ((rd / "run-1/meta.json").is_file() and (rd / "run-2/pid.txt").is_file()):
        assert time.monotonic() < deadline and proc.poll() is None
        time.sleep(0.05)
    workload_pid = int((rd / "run-2/pid.txt").read_text())
    meta1 = (rd / "run-1/meta.json").read_bytes()
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    deadline = time.monotonic() + 30  # its keeper and watchdog end it after sk-run's death, not at the same instant
    while process_alive(workload_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not process_alive(workload_pid)  # the workload died with sk-run (no orphan)
    assert not (rd / "run-2/meta.json").exists()
    hold.unlink()  # the resume's run-2 runs through
    resume = [sys.executable, "-c", "from sk_runner.cli import main; main()", *_args(tmp_path, "--json", SET)]
    done = subprocess.run(resume, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["runs_completed"] == [1, 2, 3] and result["new_runs"] == [2, 3]
    assert (rd / "run-1/meta.json").read_bytes() == meta1
    leftovers = list((tmp_path / "session/experiments/Sbest/O1/INCOMPLETE").iterdir())
    assert [p.name.split("-")[0] + "-" + p.name.split("-")[1] for p in leftovers] == ["run-2"]


def test_npu_backend_without_torch_npu_is_exit_3(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    _clean_env(monkeypatch)
    monkeypatch.setitem(sys.modules, "torch_npu", None)
    code = run_cli(cli, "sk-run", ["probe", "--option", "auto_op_parallel", "--value", "1", "--backend", "npu",
                                   "--out", str(tmp_path / "p"), "--", sys.executable, "infer.py"])
    assert code == 3 and "torch_npu" in capsys.readouterr().err


def test_unknown_options_are_refused_not_passed_to_the_workload(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    _clean_env(monkeypatch)
    (tmp_path / "session").mkdir()
    (tmp_path / "base.json").write_text('{"super_kernel_optimize_options": {}}')
    # a mistyped option used to become a simulator argument and end in a failure scene
    code = run_cli(cli, "sk-run", ["probe", "--option", "auto_op_parallel", "--value", "1", "--base-config", "x.json",
                                   "--out", str(tmp_path / "probes")])
    assert code == 2 and "No such option '--base-config'" in capsys.readouterr().err
    trial = ["trial", "--session", str(tmp_path / "session"), "--round", "O1", "--base-config", str(tmp_path / "base.json"), SET]
    assert run_cli(cli, "sk-run", [*trial, "--iteration", "30"]) == 2
    assert "No such option '--iteration'" in capsys.readouterr().err
    assert run_cli(cli, "sk-run", [*trial, "--ranks", "0"]) == 2
    assert "'--ranks': 0 is not in the range 1<=x<=1024" in capsys.readouterr().err
    assert run_cli(cli, "sk-run", ["probe", "--option", " ", "--value", "1", "--out", str(tmp_path / "probes")]) == 2
    assert "--option needs an SK option name" in capsys.readouterr().err
    assert not (tmp_path / "probes").exists() and not (tmp_path / "session/experiments").exists()


def test_missing_session_folder_is_refused_alike_by_trial_probe_and_profile(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One behaviour for all: a mistyped session path is an error, never a new empty session."""
    missing = tmp_path / "no-such-session"
    argv = write_fake(tmp_path)
    commands = {
        "trial": ["trial", "--session", str(missing), "--round", "O1", "--base-config", str(tmp_path / "base.json"), SET,
                  "--backend", "command", "--ranks", "2", "--warmup", "2", "--", *argv],
        "probe": ["probe", "--session", str(missing), "--option", "auto_op_parallel", "--value", "1", "--backend", "command",
                  "--", *argv],
        "profile": ["profile", "--session", str(missing), "--round", "DCCI", "--role", "baseline_profile",
                    "--config", str(tmp_path / "base.json"), "--backend", "command", "--", *argv],
    }
    for name, args in commands.items():
        assert run_cli(cli, "sk-run", args) == 2, name
        err = capsys.readouterr().err
        assert err == f"sk-run: error: {missing}: session folder not found (expected an existing session directory)\n", (name, err)
        assert not missing.exists()


def test_scene_rerun_command_works_from_any_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Relative --session/--base-config on the command line; the scene's rerun command holds absolute paths and the cwd."""
    _clean_env(monkeypatch)
    monkeypatch.setenv("SK_LANG", "en")
    argv = write_fake(tmp_path)
    monkeypatch.chdir(tmp_path)
    failing = ["trial", "--session", "session", "--round", "O4", "--base-config", "base.json",
               "--set=/super_kernel_optimize_options/early_start=1", "--backend", "command", "--ranks", "2", "--warmup", "2",
               "--timeout", "30", "--", *argv]
    assert run_cli(cli, "sk-run", failing) == 1
    capsys.readouterr()
    scene = json.loads((tmp_path / "session/experiments/Sbest/O4/FAILURE_SCENES/attempt-1/scene.json").read_text(encoding="utf-8"))
    rerun = scene["follow_up"]["rerun_trial"]
    assert rerun[:2] == ["sk-run", "trial"]
    for flag in ("--session", "--base-config", "--cwd"):
        assert Path(rerun[rerun.index(flag) + 1]).is_absolute(), flag
    assert rerun[rerun.index("--lang") + 1] == "en"  # the language the trial spoke (SK_LANG's, by the default rule), pinned
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert run_cli(cli, "sk-run", rerun[1:]) == 1  # the same trial again, from another folder: a new attempt
    assert (tmp_path / "session/experiments/Sbest/O4/FAILURE_SCENES/attempt-2/scene.json").is_file()
    assert list(elsewhere.iterdir()) == []
