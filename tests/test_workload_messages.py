"""Messages a user of their own workload meets, each naming its real cause (issue 37, point 6):
a command given without ``--backend command``, a rerun that changed only the command, a crash (its last
stderr lines), a bad rank log (where the file is now), a script edited between rounds without git, a
probe that wrote no evidence, a rank count that differs from ``--expected-ranks``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from ot_logs import uniform_runs, write_candidate

from sk_analytics.cli import main as analyze_main
from sk_analytics.cli._base import run_cli
from sk_analytics.errors import EnvironmentBlocker, InputError, UsageError
from sk_analytics.files.strict_json import load_json_file
from sk_runner.backends import make_backend
from sk_runner.backends.base import Control, unknown_placeholders
from sk_runner.backends.command import CommandBackend
from sk_runner.cli import cli
from sk_runner.config import parse_set
from sk_runner.trial import TrialSpec, round_dir_of, run_trial

BASE = {"static_kernel_compile": True, "super_kernel_optimize": True, "super_kernel_optimize_options": {"auto_op_parallel": 0}}
CONTROL = Control(ranks=2, warmup=2, timeout_s=30.0)
WORKLOAD = '''
import json, os, sys
run = os.environ["SK_RUN_DIR"]
if os.environ.get("ASCEND_OP_COMPILE_SAVE_KERNEL_META") == "1":
    sys.exit(0)  # no super_kernel.log: this workload ignores probe mode
bad = os.environ.get("BAD_VALUE")
for r in range(int(os.environ["SK_RUN_RANKS"])):
    with open(os.path.join(run, f"log_{r}.log"), "w") as fh:
        fh.writelines(f"Inference time (decode): {bad if (bad and r == 1 and i == 5) else '10.000'} ms\\n" for i in range(6))
json.dump({"passed": True}, open(os.path.join(run, "correctness.json"), "w"))
'''


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("ASCEND_PROF", "SK_RUN", "ASCEND_OP_COMPILE"))}


def _setup(tmp_path: Path) -> Path:
    (tmp_path / "session").mkdir()
    (tmp_path / "base.json").write_text(json.dumps(BASE), encoding="utf-8")
    script = tmp_path / "w.py"
    script.write_text(WORKLOAD, encoding="utf-8")
    return script


def _spec(tmp_path: Path, argv: list[str], round_name: str = "O0-INCUMBENT", **kw: object) -> TrialSpec:
    defaults: dict[str, object] = dict(session=tmp_path / "session", round=round_name, base_config=tmp_path / "base.json",
                                       backend=CommandBackend(argv), incumbent=True, runs=1, control=CONTROL, env=_clean_env(),
                                       cwd=tmp_path)
    defaults.update(kw)
    return TrialSpec(**defaults)  # type: ignore[arg-type]


def test_a_command_after_dashdash_without_backend_command_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UsageError, match=r"'python infer.py' after '--' looks like a workload command, but --backend is sim"):
        make_backend("sim", ["python", "infer.py"])
    assert make_backend("sim", ["--noise", "0"]).name == "sim"  # the simulator's own options still pass
    _setup(tmp_path)
    for args in (["trial", "--session", str(tmp_path / "session"), "--round", "O1", "--base-config", str(tmp_path / "base.json"),
                  "--set", "/super_kernel_optimize_options/auto_op_parallel=1"],
                 ["probe", "--option", "auto_op_parallel", "--value", "1", "--out", str(tmp_path / "p")]):
        assert run_cli(cli, "sk-run", [*args, "--", "python", "infer.py"]) == 2
        assert "add --backend command" in capsys.readouterr().err
    assert not (tmp_path / "p").exists() and not (tmp_path / "session" / "experiments").exists()


def test_unknown_placeholders_are_named() -> None:
    assert unknown_placeholders(["python", "x.py", "{config}", "--out={run_dir}", "{rundir}", "{seed}", "{run-dir}", '{"a": 1}']) == [
        "{run-dir}", "{rundir}"]
    with pytest.raises(UsageError, match=r"unknown placeholder\(s\) \{rundir\}"):
        CommandBackend([sys.executable, "{rundir}"]).check_ready()


def test_a_rerun_that_changed_only_the_command_names_the_command(tmp_path: Path) -> None:
    script = _setup(tmp_path)
    run_trial(_spec(tmp_path, [sys.executable, str(script)]))
    with pytest.raises(InputError) as refused:
        run_trial(_spec(tmp_path, [sys.executable, str(script), "--fast"]))
    message = refused.value.one_line()
    assert "differs in backend.command_template: recorded [" in message and '"--fast"]' in message
    assert "differs in backend," not in message


def test_a_bad_rank_log_is_named_where_it_is_now(tmp_path: Path) -> None:
    """The correctness run's folder moves to INCOMPLETE/ after its scene is sealed: the result names the
    file there, the scene its own copy; neither names the folder that no longer exists."""
    script = _setup(tmp_path)
    res = run_trial(_spec(tmp_path, [sys.executable, str(script)], env={**_clean_env(), "BAD_VALUE": "-1.0"}))
    rd = round_dir_of(tmp_path / "session", "O0-INCUMBENT")
    assert (res.status, res.outcome) == ("failed", "bad_logs")
    [moved] = list((rd / "INCOMPLETE").iterdir())
    assert moved.name.startswith("CORRECTNESS-") and not (rd / "CORRECTNESS").exists()
    assert f"{moved / 'log_1.log'}:" in res.message and f"{rd / 'CORRECTNESS'}{os.sep}" not in res.message
    scene = load_json_file(rd / "FAILURE_SCENES" / "attempt-1" / "scene.json")["observable_failure"]["message"]
    copy = rd / "FAILURE_SCENES" / "attempt-1" / "artifacts" / "run" / "log_1.log"
    assert f"{copy}:" in scene and copy.is_file()


def _in_git(folder: Path) -> bool:
    done = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=folder, capture_output=True, check=False)
    return done.returncode == 0


def test_without_git_an_edited_script_between_rounds_is_recorded_and_blocks_the_next_trial(tmp_path: Path) -> None:
    if _in_git(tmp_path):
        pytest.skip("the temp folder lies in a git checkout")
    script = _setup(tmp_path)
    (tmp_path / "w_probe.py").write_text(  # the O1 probe passes: a workload that writes its option lines
        "import os, pathlib, runpy\nrun = pathlib.Path(os.environ['SK_RUN_DIR'])\n"
        "if os.environ.get('ASCEND_OP_COMPILE_SAVE_KERNEL_META') == '1':\n"
        "    (run / 'super_kernel.log').write_text('OptionName: auto_op_parallel, set value: 1\\n')\n"
        "else:\n    runpy.run_path('w.py')\n", encoding="utf-8")
    argv = [sys.executable, "w_probe.py", "w.py"]
    run_trial(_spec(tmp_path, argv))
    o0 = round_dir_of(tmp_path / "session", "O0-INCUMBENT")
    revision = load_json_file(o0 / "trial.json")["fingerprints"]["source_revision"]
    assert revision["kind"] == "files" and set(revision["files"]) == {str(tmp_path / "w_probe.py"), str(script)}
    script.write_text(WORKLOAD + "# tuned\n", encoding="utf-8")
    with pytest.raises(EnvironmentBlocker) as blocked:
        run_trial(_spec(tmp_path, argv, "O1", incumbent=False, runs=3, same_identity_as=o0,
                        changes=(parse_set("/super_kernel_optimize_options/auto_op_parallel=1"),)))
    assert f"another source_revision.files, source_revision.sources (changed since: {script})" in blocked.value.one_line()
    blockers = (round_dir_of(tmp_path / "session", "O1") / "environment-blockers.jsonl").read_text(encoding="utf-8")
    assert json.loads(blockers)["stage"] == "identity" and str(script) in blockers
    assert not (round_dir_of(tmp_path / "session", "O1") / "PROBE").exists()  # nothing started


def test_a_trial_whose_probe_writes_no_evidence_is_exit_3_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    script = _setup(tmp_path)
    monkeypatch.chdir(tmp_path)
    args = ["trial", "--session", "session", "--round", "O1", "--base-config", "base.json", "--backend", "command",
            "--ranks", "2", "--warmup", "2", "--set", "/super_kernel_optimize_options/auto_op_parallel=1", "--", sys.executable, script.name]
    assert run_cli(cli, "sk-run", args) == 3
    *progress, err = capsys.readouterr().err.strip().splitlines()
    rd = round_dir_of(tmp_path / "session", "O1")
    assert progress == [line for line in progress if line.startswith("[O1] ")]  # the rest is progress
    assert err.startswith("sk-run: error: probe of auto_op_parallel=1: no super_kernel.log below ")
    assert f"{rd / 'PROBE'}" in err and err.endswith("(see docs/runner.md#probe-mode)")
    assert json.loads((rd / "environment-blockers.jsonl").read_text(encoding="utf-8"))["stage"] == "probe"
    assert not (rd / "FAILURE_SCENES").exists() and not (rd / "CORRECTNESS").exists()


def test_option_trial_names_expected_ranks_when_the_rank_count_differs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write_candidate(tmp_path / "base", uniform_runs(["100", "101", "100", "100", "100"]))
    cand = write_candidate(tmp_path / "cand", uniform_runs(["99", "99", "99"]))
    for args in (["option-trial", "--baseline", str(base), "--candidate", f"O1={cand}", "--warmup", "2"],
                 ["stability", str(base), "--warmup", "2"]):
        with pytest.raises(SystemExit) as info:
            analyze_main(args)
        err = capsys.readouterr().err
        assert info.value.code == 2
        assert "found 2 rank logs (expected 8 rank logs per run; pass --expected-ranks N for another rank count)" in err
