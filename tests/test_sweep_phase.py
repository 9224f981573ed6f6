"""Phase entry: the manifest and the dispatched task are validated field by field; the plan is emitted."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sk_analytics.cli._base import run_cli
from sk_analytics.fingerprint import fingerprint
from sk_analytics.ledger.chain import read_records
from sk_analytics.messages import render
from sk_analytics.stage_o.matrix import protocol_candidates
from sk_runner.cli import cli
from sk_runner.sweep.phase import resolve_tool, validate_phase_manifest

SEED = {"static_kernel_compile": True, "super_kernel_optimize": True, "super_kernel_optimize_options": {}}
MANIFEST = {
    "schema_version": "superkernel-phase-manifest-v1",
    "phase": "stage_o_option_tuning",
    "agent_id": "sk-stage-o-option-tuning",
    "skill": "superkernel-stage-o",
    "runtime_tools": ["analyze_performance", "artifact_contract", "dcci_diff", "sk-run trial"],
}


def _write(tmp_path: Path, manifest: dict[str, Any] | None = None, **task_changes: Any) -> Path:
    (tmp_path / "phase.json").write_text(json.dumps(manifest or MANIFEST), encoding="utf-8")
    (tmp_path / "seed.json").write_text(json.dumps(SEED), encoding="utf-8")
    s0 = tmp_path / "S0" / "run-1"
    s0.mkdir(parents=True, exist_ok=True)
    (s0 / "log_0.log").write_text("Inference time (decode): 10.0 ms\n", encoding="utf-8")
    task: dict[str, Any] = {
        "schema_version": "superkernel-stage-o-task-v1",
        "agent_id": "sk-stage-o-option-tuning",
        "phase_manifest": "phase.json",
        "seed": {"name": "Sbest-SEED", "frozen": True, "config": "seed.json", "config_fingerprint": fingerprint(SEED)},
        "accepted_option_values": [{"option": "auto_op_parallel", "value": 1}],
        "clean_artifacts": {"bound_to": "S0", "path": "S0"},
        "workload": {"backend": "sim", "ranks": 2, "iterations": 30, "warmup": 8, "seed": 3},
        "policy": {"risky_timeout_s": 5.0},
        "session": "session",
    }
    task.update(task_changes)
    path = tmp_path / "task.json"
    path.write_text(json.dumps(task), encoding="utf-8")
    return path


def test_plan_only_creates_session_and_prints_plan(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    task = _write(tmp_path)
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--plan-only"]) == 0
    out = capsys.readouterr().out
    plan = json.loads(out[out.index("{"):])
    session = (tmp_path / "session").resolve()
    assert plan["phase"] == "stage_o_option_tuning" and plan["agent_id"] == "sk-stage-o-option-tuning"
    assert plan["commands"][0]["argv"] == ["sk-run", "sweep", "--resume", str(session)]
    assert plan["handoff"] == {"schema_version": "superkernel-stage-o-handoff-v1", "session_path": str(session),
                               "step_id": "stage_o_option_tuning", "seal_after_agent_result": True}
    assert plan["task_fingerprint"] == fingerprint(json.loads(task.read_text()))
    kinds = [r.kind for r in read_records(session)]
    assert kinds == ["session_started", "phase_entry"]
    session_json = json.loads((session / "session.json").read_text())
    assert session_json["task"]["accepted_option_values"] == [{"option": "auto_op_parallel", "value": 1}]
    assert session_json["policy"]["risky_timeout_s"] == 5.0 and session_json["control"]["ranks"] == 2
    # entering the same task again re-opens the same session, records nothing new
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--plan-only"]) == 0
    assert [r.kind for r in read_records(session)] == kinds


@pytest.mark.parametrize(
    ("manifest_change", "needle"),
    [
        ({"schema_version": "v0"}, "schema_version"),
        ({"phase": "stage_p"}, "phase is 'stage_p'"),
        ({"agent_id": "other"}, "agent_id"),
        ({"skill": " "}, "skill is empty"),
        ({"runtime_tools": []}, "non-empty list"),
        ({"runtime_tools": ["analyze_performance", "msprof_magic"]}, "msprof_magic"),
    ],
)
def test_bad_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str], manifest_change: dict[str, Any], needle: str) -> None:
    task = _write(tmp_path, {**MANIFEST, **manifest_change})
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--plan-only"]) == 2
    err = capsys.readouterr().err
    assert "phase.json" in err and needle in err
    assert not (tmp_path / "session").exists()


def test_manifest_missing_field(tmp_path: Path) -> None:
    (tmp_path / "phase.json").write_text(json.dumps({k: v for k, v in MANIFEST.items() if k != "skill"}))
    from sk_analytics.errors import InputError

    with pytest.raises(InputError, match="has no 'skill'"):
        validate_phase_manifest(tmp_path / "phase.json")


@pytest.mark.parametrize(
    ("task_change", "code", "needle"),
    [
        ({"agent_id": "sk-stage-p"}, 2, "not a stage-O task"),
        ({"seed": {"name": "Sbest-SEED", "frozen": False, "config": "seed.json", "config_fingerprint": "0" * 64}}, 2, "frozen Sbest-SEED"),
        ({"seed": {"name": "Sbest-SEED", "frozen": True, "config": "seed.json", "config_fingerprint": "0" * 64}}, 2,
         f"task.json (the SEED is not frozen): its canonical fingerprint is {fingerprint(SEED)}, "
         f"the task says {'0' * 64}"),
        ({"clean_artifacts": {"bound_to": "S1", "path": "S0"}}, 2, "not bound to S0"),
        ({"clean_artifacts": {"bound_to": "S0", "path": "nowhere"}}, 2, "S0 clean artifacts not found"),
        ({"accepted_option_values": [{"option": "debug_sync_all", "value": 1}]}, 2, "debug option"),
        ({"accepted_option_values": [{"option": "bogus", "value": 1}]}, 2, "registered option"),
        ({"workload": {"backend": "command"}}, 2, "needs a workload command"),
        ({"workload": {"backend": "command", "command": ["python", "{rundir}"]}}, 2,
         "(record /workload/command/1): workload/command argument '{rundir}' has unknown placeholder(s) {rundir}"),
        ({"session": None}, 2, "no session folder"),
        ({"session": "phase.json"}, 2, "phase.json' is not a folder (expected a new folder or an existing session folder)"),
        # every workload/policy field is type-checked at entry (a bad seed used to raise a traceback)
        ({"workload": {"backend": "sim", "seed": "x"}}, 2,
         "(record /workload/seed): task: /workload/seed is \"x\" (expected an integer from 0 to 9223372036854775807)"),
        ({"workload": {"backend": "sim", "ranks": 2.5}}, 2, "/workload/ranks is 2.5 (expected an integer from 1 to 1024)"),
        ({"workload": {"backend": "sim", "ranks": True}}, 2, "/workload/ranks is true"),
        ({"workload": {"backend": "sim", "iterations": "30"}}, 2, "/workload/iterations is \"30\" (expected an integer from 1 to 100000 or null)"),
        ({"workload": {"backend": "sim", "iterations": 8, "warmup": 8}}, 2, "workload/iterations 8 is not more than workload/warmup 8"),
        ({"workload": {"backend": "sim", "noise": "loud"}}, 2, "/workload/noise is \"loud\""),
        ({"workload": {"backend": "command", "command": "python x.py"}}, 2, "/workload/command is \"python x.py\" (expected a list of strings)"),
        ({"policy": {"timeout_s": 0}}, 2, "/policy/timeout_s is 0 (expected a number > 0 and <= 604800)"),
        ({"policy": {"max_collect_attempts": "2"}}, 2, "/policy/max_collect_attempts is \"2\" (expected an integer from 1 to 100)"),
        ({"policy": {"min_trial_runs": 2}}, 2, "/policy/min_trial_runs is 2 (expected an integer from 3 to 1000)"),
        ({"policy": {"budget_runs": 0}}, 2, "/policy/budget_runs is 0"),
        ({"policy": {"bogus": 1}}, 2, "unknown key 'bogus' in /policy"),
        ({"policy": [1]}, 2, "/policy is [1] (expected a JSON object)"),
        ({"policy": {"authorisations": "aggressive"}}, 2, "/policy/authorisations is \"aggressive\" (expected a list of strings)"),
        ({"policy": {"operator_adaptation": "yes"}}, 2, "/policy/operator_adaptation is \"yes\" (expected true or false)"),
        ({"policy": {"max_risk": "extreme"}}, 2, "/policy/max_risk is \"extreme\" (expected low or medium or high)"),
        ({"policy": {"gate": "lenient"}}, 2, "/policy/gate is \"lenient\" (expected protocol or strict"),
        ({"policy": {"allow_p90_regression_pct": -1}}, 2, "/policy/allow_p90_regression_pct is -1 (expected a number from 0 to 100)"),
        ({"policy": {"allow_stddev_regression_pct": "2"}}, 2, "/policy/allow_stddev_regression_pct is \"2\" (expected a number from 0 to 100)"),
    ],
)
def test_bad_task(tmp_path: Path, capsys: pytest.CaptureFixture[str], task_change: dict[str, Any], code: int, needle: str) -> None:
    task = _write(tmp_path, **task_change)
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--plan-only"]) == code
    err = capsys.readouterr().err
    assert needle in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("gate", ["strict", "stats"])
def test_gate_policy_is_recorded(tmp_path: Path, capsys: pytest.CaptureFixture[str], gate: str) -> None:
    policy = {"gate": gate, "allow_p90_regression_pct": 2, "allow_stddev_regression_pct": 5.5}
    task = _write(tmp_path, policy=policy)
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--plan-only"]) == 0
    capsys.readouterr()
    recorded = json.loads((tmp_path / "session" / "session.json").read_text())["policy"]
    assert {k: recorded[k] for k in policy} == {"gate": gate, "allow_p90_regression_pct": 2.0, "allow_stddev_regression_pct": 5.5}
    started = next(r for r in read_records(tmp_path / "session") if r.kind == "session_started")
    assert started.data["policy"]["gate"] == gate


def test_usage_errors(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert run_cli(cli, "sk-run", ["sweep"]) == 2
    assert "exactly one of" in capsys.readouterr().err
    assert run_cli(cli, "sk-run", ["sweep", "--demo", "--plan-only"]) == 2
    assert run_cli(cli, "sk-run", ["sweep", "--resume", str(tmp_path)]) == 2
    assert "session.json missing" in capsys.readouterr().err


def test_resolve_tool() -> None:
    assert resolve_tool("analyze_performance") == ("sk-analyze", "option-trial")
    assert resolve_tool("sk-analyze dcci-diff") == ("sk-analyze", "dcci-diff")
    assert resolve_tool("Artifact-Contract") == ("sk-analyze", "contract")
    assert resolve_tool("nope") is None


@pytest.mark.slow
def test_task_sweep_probes_only_listed_values_and_blocks_the_others_as_not_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    task = _write(tmp_path, accepted_option_values=[{"option": "split_mode", "value": 3}])
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--quiet"]) == 0
    session = tmp_path / "session"
    out = capsys.readouterr().out
    assert f"报告：{session / 'EXPERIMENT_REPORT.md'}" in out
    probes = json.loads((session / "PROBES" / "probes.json").read_text())
    n = len(protocol_candidates())
    assert len(probes) == n and [(p["option"], p["value"]) for p in probes if p["evidence"]["wrapper"]] == [("split_mode", 3)]
    assert {p["evidence"]["cause"]["kind"] for p in probes if not p["ready"]} == {"not_listed"}
    assert len(list((session / "PROBES").rglob("probe.json"))) == 1  # a value the task does not list starts no process
    ready = [(p["option"], p["value"]) for p in probes if p["ready"]]
    assert ready == [("split_mode", 3)]
    settled = {e["id"]: e for e in json.loads((session / "matrix.settled.json").read_text())["entries"]}
    assert settled["split-mode-3"]["status"] in ("accepted", "rejected")
    blocked = {k for k, e in settled.items() if e["status"] == "blocked"}
    assert blocked == set(settled) - {"split-mode-3"}
    reason = settled["auto-op-parallel-1"]["settlement"]["reason"]  # a message id and its facts, worded by the reader
    assert reason["code"] == "reason.not_ready" and reason["params"]["cause"] == {"code": "probe_cause.not_listed", "params": {}}
    assert "ready=false" in render(reason, "zh") and "未列出该取值" in render(reason, "zh")
    assert render(reason, "en") == ("auto_op_parallel=1 is not ready (probe ready=false): not listed in the task's accepted_option_values "
                                    "(not probed, no process started)")
    assert [r.kind for r in read_records(session)][:4] == ["session_started", "phase_entry", "matrix_built", "matrix_frozen"]
    built = next(r.data for r in read_records(session) if r.kind == "matrix_built")
    assert (built["probed"], built["not_listed"], built["ready"]) == (n, n - 1, 1)


def _result_lines(session: Path) -> list[str]:
    return [f"会话：{session}", f"报告：{session / 'EXPERIMENT_REPORT.md'}", f"HTML：{session / 'report.html'}",
            f"交接：{session / 'handoff.json'}"]


@pytest.mark.slow
def test_a_task_sweeps_stdout_holds_only_its_result_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """docs/sweep.md "Streams": the plan JSON is stdout only with --plan-only; a running sweep's plan and progress go to
    stderr (none with --quiet), so stdout is the four result lines, quiet or not."""
    task = _write(tmp_path, accepted_option_values=[{"option": "split_mode", "value": 3}])
    session = tmp_path / "session"
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--plan-only"]) == 0
    planned = capsys.readouterr()
    assert json.loads(planned.out)["matrix"] and planned.err == ""  # --plan-only: the plan is the result
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--quiet"]) == 0
    quiet = capsys.readouterr()
    assert quiet.out.splitlines() == _result_lines(session) and "phase_manifest" not in quiet.err
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task)]) == 0  # entered again, not quiet: the finished session
    loud = capsys.readouterr()
    assert loud.out.splitlines() == _result_lines(session)
    assert loud.err.startswith("{") and '"phase_manifest"' in loud.err and "完成（" in loud.err  # plan, then progress


def test_second_sweep_on_a_session_is_refused(tmp_path: Path) -> None:
    from filelock import FileLock

    from sk_analytics.errors import UsageError
    from sk_runner.sweep.driver import run_sweep
    from sk_runner.sweep.session import load_session

    task = _write(tmp_path)
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--plan-only"]) == 0
    session = load_session(tmp_path / "session")
    with FileLock(str(session.root / ".sweep.lock")):
        with pytest.raises(UsageError, match="another sweep is running"):
            run_sweep(session, say=lambda _: None)


def test_a_refused_resume_prints_nothing_on_stdout(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``sk-run sweep --resume S`` while another sweep holds S: the one error line on stderr, no ``Session:`` line
    on stdout (it used to come before the refusal, as if the sweep had started)."""
    from filelock import FileLock

    task = _write(tmp_path)
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--plan-only"]) == 0
    capsys.readouterr()
    session = tmp_path / "session"
    with FileLock(str(session / ".sweep.lock")):
        code = run_cli(cli, "sk-run", ["sweep", "--resume", str(session)])
    refused = capsys.readouterr()
    assert code == 2 and refused.out == ""
    assert refused.err.strip().endswith(f"sk-run: error: {session}: another sweep is running on this session")


def test_a_resume_refused_by_a_lock_holder_that_is_not_sk_run_names_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A stray ``flock`` (a backup, an editor, ``flock(1)``) on ``.sweep.lock``: the refusal said "another sweep is
    running on this session", which is not so and sent the user looking for a sweep; it names the process, as
    ``ledger verify`` does."""
    import sys

    from test_ledger_attacks import HOLD, _holding

    task = _write(tmp_path)
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--plan-only"]) == 0
    capsys.readouterr()
    session = tmp_path / "session"
    with _holding([sys.executable, "-c", HOLD, str(session / ".sweep.lock")]) as holder:
        code = run_cli(cli, "sk-run", ["sweep", "--resume", str(session)])
    refused = capsys.readouterr()
    assert code == 2 and refused.out == ""
    assert f"sk-run: error: {session}: .sweep.lock is held by pid {holder.pid} ({sys.executable} -c import fcntl" in refused.err
    assert "which is not sk-run: no sweep is running on this session" in refused.err
    assert "another sweep is running" not in refused.err, refused.err


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_a_stopped_sweep_says_its_cause_on_the_console(tmp_path: Path, capsys: pytest.CaptureFixture[str], lang: str) -> None:
    """A workload that prints its timings on stderr only stops the session at O0 (no rank log, no correctness.json). With --quiet, and on
    every --resume, the console said only that the session stopped, a scene path and "the failure scene above says
    it": the cause was in a file. The stop's reason is now said on stderr, in the reader's language, before the way
    forward."""
    import sys

    from sweep_helpers import small_session
    from zh_words import stray_english

    from sk_runner.sweep.cli import run_and_print
    from sk_runner.sweep.session import BackendSpec

    script = tmp_path / "stderr_only.py"
    script.write_text("import sys\nprint('Inference time (decode): 10.0 ms', file=sys.stderr)\n", encoding="utf-8")
    session = small_session(tmp_path / "s", [], backend=BackendSpec("command", command=(sys.executable, str(script)),
                                                                      cwd=str(tmp_path), sources=(script.name,)))
    for _ in range(2):  # the sweep, then a --resume that shows the same stop
        assert run_and_print(session, lang, quiet=True) == 1
        err = capsys.readouterr().err
        cause = {"en": "sk-run: O0-INCUMBENT failed, Stage O cannot start: logs missing or unparsable (correctness.json missing)",
                 "zh": "sk-run: O0-INCUMBENT 失败，Stage O 无法开始：日志缺失或无法解析（缺少 correctness.json）"}[lang]
        assert cause in err.splitlines(), err
        assert err.index(cause) < err.index("this session stopped and stays stopped"), err
        if lang == "zh":
            assert stray_english(cause.replace("sk-run", "")) == []


@pytest.mark.parametrize(("lang", "cause"), [("zh", "sk-run: 旧会话记录的停止原因"),
                                             ("en", "sk-run: (recorded reason, in Chinese) 旧会话记录的停止原因")])
def test_a_resumed_stop_recorded_before_stops_were_messages_says_its_cause(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                          lang: str, cause: str) -> None:
    """A session stopped by an older sk-tune recorded its reason as ``reason_zh`` text, not as a message: a --resume
    said only "the cause (said above)" with nothing above it. It says the cause as the report does."""
    from sweep_helpers import small_session

    from sk_runner.sweep.cli import run_and_print

    session = small_session(tmp_path / "s", [])
    session.append("session_stopped", {"reason_zh": "旧会话记录的停止原因", "evidence": {}})
    assert run_and_print(session, lang, quiet=True) == 1
    err = capsys.readouterr().err.splitlines()
    assert cause in err, err
    assert err.index(cause) < next(i for i, line in enumerate(err) if "this session stopped and stays stopped" in line), err


@pytest.mark.parametrize("how", [["--task", "{task}"], ["--task", "{task}", "--plan-only"], ["--demo", "--ranks", "2", "--session", "{session}"]])
def test_more_ranks_than_leased_devices_is_refused_before_the_session_exists(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], how: list[str]) -> None:
    """Two ranks on one leased NPU: refused before the session folder exists. It used to create the session with that
    lease recorded and then refuse, leaving a session no --resume could run (each one takes the recorded lease again)."""
    task, session = _write(tmp_path), tmp_path / "session"
    args = [a.format(task=task, session=session) for a in how]
    code = run_cli(cli, "sk-run", ["sweep", *args, "--quiet", "--lease-root", str(tmp_path / "locks"), "--device-id", "0"])
    err = capsys.readouterr().err
    assert code == 2 and err.strip() == "sk-run: error: --ranks 2 needs 2 leased devices (rank i runs on the i-th), the lease holds 1 (0)"
    assert not session.exists()
