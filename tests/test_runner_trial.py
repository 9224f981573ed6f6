"""sk_runner.trial end-to-end with a contract-following fake workload (tests/runner_fake.py)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import sys
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from runner_fake import write_fake

from sk_analytics.errors import EnvironmentBlocker, InputError, UsageError
from sk_analytics.ingest.timings import parse_rank_log
from sk_analytics.schema import TIMINGS
from sk_analytics.tables import scan_table, write_table
from sk_runner.backends.base import Control
from sk_runner.backends.command import CommandBackend
from sk_runner.config import parse_set
from sk_runner.process import ProcessResult, group_alive, process_alive
from sk_runner.process.faults import EnvironmentFault
from sk_runner.trial import TrialSpec, derive_seed, run_trial

CONTROL = Control(ranks=2, iterations=None, warmup=2, timeout_s=30.0)


def _spec(tmp_path: Path, *sets: str, **kw) -> TrialSpec:
    argv = write_fake(tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASCEND_PROF", "SK_RUN"))}
    defaults = dict(session=tmp_path / "session", round="O1", base_config=tmp_path / "base.json",
                    backend=CommandBackend(argv), changes=tuple(parse_set(s) for s in sets), control=CONTROL, env=env,
                    cwd=tmp_path)
    defaults.update(kw)
    return TrialSpec(**defaults)


def _tree_hashes(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_three_run_trial_then_top_up_to_five(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1")
    with pytest.raises(UsageError, match="no trial to top up"):
        run_trial(_spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1", top_up_to=5))
    res = run_trial(spec)
    assert (res.status, res.exit_code, res.runs_completed, res.new_runs) == ("ok", 0, [1, 2, 3], [1, 2, 3])
    rd = tmp_path / "session/experiments/Sbest/O1"
    assert json.loads((rd / "config.diff.json").read_text()) == [
        {"op": "replace", "path": "/super_kernel_optimize_options/auto_op_parallel", "value": 1}
    ]
    assert json.loads((rd / "config.json").read_text())["super_kernel_optimize_options"]["auto_op_parallel"] == 1
    assert json.loads((rd / "probe.json").read_text())["ready"] is True
    trial = json.loads((rd / "trial.json").read_text())
    assert trial["change_set"]["allowed_json_pointers"] == ["/super_kernel_optimize_options/auto_op_parallel"]
    assert trial["change_set"]["originals"] == [0]
    assert set(trial["fingerprints"]["fingerprints"]) == {"source_revision", "config", "control", "workload", "environment"}
    meta1 = json.loads((rd / "CLEAN/run-1/meta.json").read_text())
    assert meta1["status"] == "ok" and meta1["process"]["exit_code"] == 0
    assert meta1["seed"] == derive_seed(0, "O1", "run-1")
    assert meta1["command"][-1].endswith("fake_workload.py")
    assert [r["decode_samples"] for r in meta1["rank_logs"]] == [12, 12]
    assert (rd / "CORRECTNESS/meta.json").is_file() and (rd / "CLEAN/run-1/stdout.txt").read_text() == "done\n"
    timings = scan_table(tmp_path / "session/data", "timings").collect()
    # 3 runs x 2 ranks x (1 prefill + 12 decode)
    assert timings.height == 78
    assert sorted(timings["run"].unique().to_list()) == ["run-1", "run-2", "run-3"]
    assert timings.filter(pl.col("phase") == "prefill")["value_text"].sort().to_list() == ["47.500", "47.500", "47.500", "48.500", "48.500", "48.500"]
    runs = scan_table(tmp_path / "session/data", "runs").collect().sort("run_index")
    assert runs["status"].to_list() == ["ok"] * 3 and runs["fingerprint"][0] == meta1["fingerprint"]
    before = _tree_hashes(rd / "CLEAN/run-1")

    # same command again: nothing to do
    again = run_trial(spec)
    assert again.new_runs == [] and again.runs_completed == [1, 2, 3]
    topped = run_trial(_spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1", top_up_to=5))
    assert topped.runs_completed == [1, 2, 3, 4, 5] and topped.new_runs == [4, 5]
    assert _tree_hashes(rd / "CLEAN/run-1") == before
    assert scan_table(tmp_path / "session/data", "timings").collect().height == 130
    with pytest.raises(UsageError, match="more than --top-up-to 4"):
        run_trial(_spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1", top_up_to=4))


def test_resume_refuses_a_different_trial_in_the_same_round(tmp_path: Path) -> None:
    run_trial(_spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1"))
    with pytest.raises(InputError, match="already holds a different trial .*changes"):
        run_trial(_spec(tmp_path, "/super_kernel_optimize_options/early_start=1"))


def _scene(rd: Path, n: int = 1) -> dict:
    folder = rd / f"FAILURE_SCENES/attempt-{n}"
    doc = json.loads((folder / "scene.json").read_text())
    assert set(doc) == {"schema_version", "identity", "invocation", "observable_failure", "artifacts", "gate_progress",
                        "preliminary_judgement", "control_and_rollback", "follow_up"}
    md = (folder / "scene.md").read_text()
    for heading in ("## 1. 身份与阶段", "## 2. 冻结的调用", "## 3. 可观察的失败", "## 4. 现场产物", "## 5. 门禁进度",
                    "## 6. 初步判断", "## 7. 控制与回滚", "## 8. 后续入口"):
        assert heading in md
    assert not (folder / "scene.json").stat().st_mode & stat.S_IWUSR  # sealed read-only
    return doc


def test_crash_seals_scene_and_a_retry_gets_a_new_attempt(tmp_path: Path) -> None:
    spec = _spec(tmp_path, '/super_kernel_optimize_options/aggressive_opt_strategies={"task_breaker_bypass": 1}')
    res = run_trial(spec)
    assert (res.status, res.outcome, res.exit_code) == ("failed", "crash", 1)
    rd = tmp_path / "session/experiments/Sbest/O1"
    doc = _scene(rd)
    assert doc["identity"]["stage"] == "correctness" and doc["identity"]["attempt"] == 1
    assert doc["observable_failure"]["signal_name"] == "SIGABRT"
    assert "EZ9999" in doc["observable_failure"]["stderr_tail"]
    assert doc["gate_progress"]["correctness"] == "failed" and doc["gate_progress"]["last_gate_passed"] == "probe"
    assert doc["control_and_rollback"]["action"] == "restore_incumbent"
    paths = {f["path"] for f in doc["artifacts"]["files"]}
    assert "artifacts/run/stderr.txt" in paths and "artifacts/config.json" in paths
    first = _tree_hashes(rd / "FAILURE_SCENES/attempt-1")
    again = run_trial(spec)
    assert again.outcome == "crash" and again.scene_dir == rd / "FAILURE_SCENES/attempt-2"
    assert _tree_hashes(rd / "FAILURE_SCENES/attempt-1") == first
    assert _scene(rd, 2)["identity"]["attempt"] == 2


CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")


def test_english_trial_seals_an_english_scene_and_never_rewords_it(tmp_path: Path) -> None:
    """issue 46: a trial in English writes its failure scene (scene.json and scene.md) without one Chinese
    character; a retry in Chinese seals attempt-2 in Chinese and leaves attempt-1 as it was."""
    sets = '/super_kernel_optimize_options/aggressive_opt_strategies={"task_breaker_bypass": 1}'
    assert run_trial(_spec(tmp_path, sets, lang="en")).outcome == "crash"
    rd = tmp_path / "session/experiments/Sbest/O1"
    folder = rd / "FAILURE_SCENES/attempt-1"
    doc = json.loads((folder / "scene.json").read_text(encoding="utf-8"))
    md = (folder / "scene.md").read_text(encoding="utf-8")
    assert [line for line in (json.dumps(doc, ensure_ascii=False) + "\n" + md).splitlines() if CJK.search(line)] == []
    assert doc["preliminary_judgement"]["judgement_en"].startswith("The process exited non-zero")
    assert doc["control_and_rollback"]["note_en"] and doc["follow_up"]["next_step_en"]
    for heading in ("## 1. Identity and stage", "## 2. Frozen invocation", "## 3. Observable failure", "## 4. Scene artifacts",
                    "## 5. Gate progress", "## 6. Preliminary judgement", "## 7. Control and rollback", "## 8. Follow-up"):
        assert heading in md
    assert "# Failure scene: O1 / correctness run / CORRECTNESS / attempt 1" in md
    first = _tree_hashes(folder)
    assert run_trial(_spec(tmp_path, sets, lang="zh")).scene_dir == rd / "FAILURE_SCENES/attempt-2"
    assert _scene(rd, 2)["preliminary_judgement"]["judgement_zh"].startswith("进程非零退出")
    assert _tree_hashes(folder) == first


def test_failure_in_a_clean_run_then_resume(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1")
    stale_log = tmp_path / "stale" / "run-2" / "log_0.log"  # timings an interrupted earlier attempt of run-2 left
    stale_log.parent.mkdir(parents=True)
    stale_log.write_text("Inference time (decode): 9.5 ms\n", encoding="utf-8")
    stale = write_table(parse_rank_log(stale_log).frame, TIMINGS, tmp_path / "session/data",
                        {"round": "O1", "role": spec.role_name, "run": "run-2"})
    res = run_trial(_spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1", env={**(spec.env or {}), "FAKE_FAIL_RUN": "run-2"}))
    assert (res.status, res.outcome, res.message, res.runs_completed) == ("failed", "crash", "run-2: exit status 3; last stderr: injected failure", [1])
    rd = tmp_path / "session/experiments/Sbest/O1"
    doc = _scene(rd)
    assert (doc["identity"]["stage"], doc["identity"]["run"]) == ("clean", "run-2")
    assert doc["gate_progress"] == {"correctness": "passed", "clean_runs_completed": [1], "clean_runs_target": 3,
                                    "probe": "ready", "last_gate_passed": "correctness"}
    data = tmp_path / "session/data"
    runs = scan_table(data, "runs").collect().sort("run_index")
    assert runs.select("run_index", "status", "exit_code").rows() == [(1, "ok", 0), (2, "crash", 3)]
    assert scan_table(data, "timings").collect()["run"].unique().to_list() == ["run-1"]
    assert not stale.exists()  # removed, not replaced by a file of no rows: the failed run has no timings
    scene_before = _tree_hashes(rd / "FAILURE_SCENES/attempt-1")
    again = run_trial(spec)
    assert again.status == "ok" and again.new_runs == [2, 3]
    assert _tree_hashes(rd / "FAILURE_SCENES/attempt-1") == scene_before
    assert [p.name.rsplit("-", 1)[0] for p in (rd / "INCOMPLETE").iterdir()] == ["run-2"]
    assert scan_table(data, "runs").collect().sort("run_index")["status"].to_list() == ["ok", "ok", "ok"]


def _timed_from_the_hang(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """Each run's timeout starts once the fake has written its hanging child's pid (or has ended: the probe): a 2 s
    timeout must not end a run whose Python a loaded machine has not started yet (the bound only matters when broken).
    Returns the pid files of the runs that hung (filled as they do)."""
    from sk_runner.hosts import base

    run_process = base.run_process

    def run(argv: list[str], *, env: dict[str, str], **kw: Any) -> ProcessResult:
        child_pid = Path(env["SK_RUN_DIR"]) / "child.pid"

        def started(pid: int) -> None:
            deadline = time.monotonic() + 60
            while process_alive(pid) and not child_pid.is_file():
                assert time.monotonic() < deadline, "the fake neither hung nor ended"
                time.sleep(0.02)
            if child_pid.is_file():
                hung.append(child_pid)

        return run_process(argv, env=env, on_start=started, **kw)

    hung: list[Path] = []
    monkeypatch.setattr(base, "run_process", run)
    return hung


def test_hang_is_killed_at_timeout_with_no_process_left(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hung = _timed_from_the_hang(monkeypatch)
    ctl = Control(ranks=2, warmup=2, timeout_s=2.0)
    res = run_trial(_spec(tmp_path, '/super_kernel_optimize_options/aggressive_opt_strategies={"value_breaker_bypass": 3}', control=ctl))
    assert len(hung) == 1  # the hook saw the hanging run start its child
    assert (res.status, res.outcome) == ("failed", "timeout")
    rd = tmp_path / "session/experiments/Sbest/O1"
    doc = _scene(rd)
    assert doc["observable_failure"]["timed_out"] is True and doc["invocation"]["timeout_s"] == 2.0
    assert doc["preliminary_judgement"]["category"] == "hang"
    assert not group_alive(doc["observable_failure"]["pid"])
    child = int((rd / "FAILURE_SCENES/attempt-1/artifacts/run/child.pid").read_text())
    assert not process_alive(child)


def test_wrong_output_fails_the_correctness_gate(tmp_path: Path) -> None:
    res = run_trial(_spec(tmp_path, "/super_kernel_optimize_options/early_start=1"))
    assert (res.status, res.outcome) == ("failed", "wrong_output")
    doc = _scene(tmp_path / "session/experiments/Sbest/O1")
    assert doc["identity"]["stage"] == "correctness"
    assert doc["preliminary_judgement"]["category"] == "correctness"


def test_missing_rank_log_is_bad_logs(tmp_path: Path) -> None:
    res = run_trial(_spec(tmp_path, "/super_kernel_optimize_options/split_mode=2"))
    assert (res.outcome, res.message) == ("bad_logs", "rank log log_1.log missing")


def test_invalid_value_defaulted_by_runtime_is_a_probe_scene(tmp_path: Path) -> None:
    res = run_trial(_spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=5"))
    assert (res.status, res.outcome) == ("failed", "invalid_value")
    rd = tmp_path / "session/experiments/Sbest/O1"
    doc = _scene(rd)
    assert doc["identity"]["stage"] == "probe" and "set value is invalid" in doc["observable_failure"]["message"]
    assert not (rd / "CORRECTNESS").exists() and not (rd / "CLEAN").exists()


def test_value_rejected_by_wrapper_is_an_environment_blocker_not_a_scene(tmp_path: Path) -> None:
    with pytest.raises(EnvironmentBlocker, match="wrapper rejects"):
        run_trial(_spec(tmp_path, '/super_kernel_optimize_options/auto_op_parallel="fast"'))
    rd = tmp_path / "session/experiments/Sbest/O1"
    line = json.loads((rd / "environment-blockers.jsonl").read_text().splitlines()[0])
    assert line["stage"] == "probe" and "not an unsigned integer" in line["message"]
    assert not (rd / "FAILURE_SCENES").exists()


def test_dirty_env_refused_and_child_env_scrubbed(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1")
    dirty = dict(spec.env or {}, ASCEND_PROF_SK_ON="1024")
    with pytest.raises(EnvironmentBlocker, match="ASCEND_PROF_SK_ON=1024"):
        run_trial(_spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1", env=dirty))
    off = dict(spec.env or {}, ASCEND_OP_COMPILE_SAVE_KERNEL_META="0")
    run_trial(_spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1", env=off))
    child_env = json.loads((tmp_path / "session/experiments/Sbest/O1/CLEAN/run-1/env.json").read_text())
    assert "ASCEND_OP_COMPILE_SAVE_KERNEL_META" not in child_env and child_env["SK_RUN_SEED"].isdigit()


def test_refusals_second_pointer_and_debug_options(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="exactly one"):
        run_trial(_spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1", "/super_kernel_optimize_options/early_start=1"))
    with pytest.raises(InputError, match="debug options are not allowed"):
        run_trial(_spec(tmp_path, "/super_kernel_optimize_options/debug_sync_all=1"))
    with pytest.raises(UsageError, match="at least 3 clean runs"):
        run_trial(_spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1", runs=2))
    assert not (tmp_path / "session/experiments").exists()


def test_incumbent_copy_runs_five_with_empty_diff(tmp_path: Path) -> None:
    res = run_trial(_spec(tmp_path, round="O0-INCUMBENT", incumbent=True, runs=5))
    rd = tmp_path / "session/experiments/Sbest/O0-INCUMBENT"
    assert res.runs_completed == [1, 2, 3, 4, 5]
    assert json.loads((rd / "config.diff.json").read_text()) == []
    assert not (rd / "probe.json").exists()
    roles = scan_table(tmp_path / "session/data", "runs").collect()["role"].unique().to_list()
    assert roles == ["baseline"]


def test_joint_dcci_trial_probes_both_options_and_diff_has_two_pointers(tmp_path: Path) -> None:
    before = '/super_kernel_optimize_options/dcci_before_kernel_start=["MatMulV3.*"]'
    after = '/super_kernel_optimize_options/dcci_after_kernel_end=["MatMulV3.*"]'
    res = run_trial(_spec(tmp_path, before, after, joint_dcci=True))
    assert res.status == "ok"
    rd = tmp_path / "session/experiments/Sbest/O1"
    assert sorted(op["path"] for op in json.loads((rd / "config.diff.json").read_text())) == [
        "/super_kernel_optimize_options/dcci_after_kernel_end", "/super_kernel_optimize_options/dcci_before_kernel_start"]
    probe = json.loads((rd / "probe.json").read_text())
    assert probe["options"] == {"dcci_before_kernel_start": ["MatMulV3.*"], "dcci_after_kernel_end": ["MatMulV3.*"]}
    assert len(probe["runtime"]["option_lines"]) == 2


def test_run_that_died_of_a_full_disk_is_a_blocker_not_a_scene(tmp_path: Path) -> None:
    """A workload killed by ENOSPC failed for the machine: recorded as an environment blocker, no scene,
    no RUNS row; the same trial run again continues with that run (protocol §8)."""
    spec = _spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1")
    full = {**(spec.env or {}), "FAKE_FAIL_RUN": "run-2",
            "FAKE_FAIL_MESSAGE": "OSError: [Errno 28] No space left on device: 'log_1.log'"}
    with pytest.raises(EnvironmentFault, match=r"died of an environment fault \(ENOSPC: OSError: \[Errno 28\]"):
        run_trial(_spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1", env=full))
    rd = tmp_path / "session/experiments/Sbest/O1"
    blocker = json.loads((rd / "environment-blockers.jsonl").read_text())
    assert blocker["stage"] == "clean" and "No space left on device" in blocker["message"]
    assert not (rd / "FAILURE_SCENES").exists()
    assert [p.name.rsplit("-", 1)[0] for p in (rd / "INCOMPLETE").iterdir()] == ["run-2"]
    # the message names the stderr where the run was moved, not the CLEAN/run-2 it left
    stderr = Path(blocker["message"].rsplit("; its stderr: ", 1)[1])
    assert stderr.parent.parent == rd / "INCOMPLETE" and "No space left on device" in stderr.read_text()
    assert scan_table(tmp_path / "session/data", "runs").collect()["status"].to_list() == ["ok"]
    again = run_trial(spec)
    assert again.status == "ok" and again.new_runs == [2, 3]


def test_missing_workload_executable_is_a_recorded_blocker(tmp_path: Path) -> None:
    spec = _spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1", backend=CommandBackend([str(tmp_path / "no-such-tool")]))
    with pytest.raises(EnvironmentBlocker, match="not found"):
        run_trial(spec)
    rd = tmp_path / "session/experiments/Sbest/O1"
    assert json.loads((rd / "environment-blockers.jsonl").read_text())["stage"] == "environment"
    assert sorted(p.name for p in rd.iterdir()) == ["environment-blockers.jsonl"]


def test_a_round_runs_under_one_sk_run_at_a_time(tmp_path: Path) -> None:
    from filelock import FileLock

    spec = _spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1")
    rd = tmp_path / "session/experiments/Sbest/O1"
    rd.mkdir(parents=True)
    with FileLock(rd / ".sk-run.lock"):
        with pytest.raises(UsageError, match="being run by another sk-run"):
            run_trial(spec)
    assert run_trial(spec).status == "ok"


def test_each_rank_log_is_parsed_once_and_ingested_as_validated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import sk_analytics.ingest.timings as timings_mod

    parsed: list[str] = []
    real = timings_mod._parse_logs

    def counting(logs):  # every rank-log parse of the product goes through _parse_logs
        parsed.extend(log.path.relative_to(tmp_path / "session/experiments/Sbest/O0").as_posix() for log in logs)
        return real(logs)

    monkeypatch.setattr(timings_mod, "_parse_logs", counting)
    res = run_trial(_spec(tmp_path, round="O0", incumbent=True, runs=2))
    assert res.status == "ok"
    # correctness is validated (not ingested); each clean run: one parse of both ranks, reused by the ingest
    assert parsed == ["CORRECTNESS/log_0.log", "CORRECTNESS/log_1.log",
                      "CLEAN/run-1/log_0.log", "CLEAN/run-1/log_1.log", "CLEAN/run-2/log_0.log", "CLEAN/run-2/log_1.log"]
    timings = scan_table(tmp_path / "session/data", "timings").collect()
    assert timings.height == 2 * 2 * 13
    assert sorted(timings["source_file"].unique().to_list()) == ["log_0.log", "log_1.log"]  # relative to the run folder
    assert timings.filter((pl.col("run") == "run-2") & (pl.col("rank") == 1) & (pl.col("phase") == "decode"))["sample_index"].to_list() == list(range(12))


def _script_backend(tmp_path: Path, body: str) -> CommandBackend:
    script = tmp_path / "logs_workload.py"
    script.write_text("import json, os\nrun = os.environ['SK_RUN_DIR']\n" + body
                      + "json.dump({'passed': True}, open(os.path.join(run, 'correctness.json'), 'w'))\n")
    return CommandBackend([sys.executable, str(script)])


def test_unparsable_rank_log_is_bad_logs_naming_file_and_line(tmp_path: Path) -> None:
    body = ("for r in range(2):\n"
            "    text = 'Inference time (decode): 1.5 ms\\n' * 5 + ('Inference time (decode): 1.2.3 ms\\n' if r == 1 else '')\n"
            "    open(os.path.join(run, f'log_{r}.log'), 'w').write(text)\n")
    res = run_trial(_spec(tmp_path, round="O0", incumbent=True, backend=_script_backend(tmp_path, body)))
    assert (res.status, res.outcome) == ("failed", "bad_logs")
    assert res.message.startswith("rank log unparsable: ") and "log_1.log:6" in res.message and "'1.2.3'" in res.message


@pytest.mark.parametrize(("line", "needle"), [
    ("Inference time (decode): 12.5 ms 13.0 ms", "text after the unit: ' 13.0 ms'"),
    ("Inference time (decode): 12.5 msec", "text after the unit: 'ec'"),
    ("Inference time (decode): 1 ms, Inference time (decode): 2 ms", "2 timings on one line"),
    ("x" * (1 << 20) + "y", "line longer than 1048576 bytes"),
])
def test_the_sweeps_own_ingest_refuses_what_option_trial_refuses(tmp_path: Path, line: str, needle: str) -> None:
    """Issue 38: the runner parses a run's rank logs with the one parser of option-trial and ingest:
    a dropped second value, a guessed unit or an over-long line make the run bad_logs naming file:line."""
    body = ("for r in range(2):\n"
            f"    text = 'Inference time (decode): 1.5 ms\\n' * 5 + ({line!r} + '\\n' if r == 1 else '')\n"
            "    open(os.path.join(run, f'log_{r}.log'), 'w').write(text)\n")
    res = run_trial(_spec(tmp_path, round="O0", incumbent=True, backend=_script_backend(tmp_path, body)))
    assert (res.status, res.outcome) == ("failed", "bad_logs")
    assert res.message.startswith("rank log unparsable: ") and "log_1.log:6: " in res.message and needle in res.message


def test_too_few_decode_samples_is_bad_logs_and_a_missing_later_rank_comes_after(tmp_path: Path) -> None:
    # rank 0 has 2 decode samples (not more than warm-up 2), rank 1 has no log: rank 0 is reported, in rank order
    body = "open(os.path.join(run, 'log_0.log'), 'w').write('Inference time (decode): 1.5 ms\\n' * 2)\n"
    res = run_trial(_spec(tmp_path, round="O0", incumbent=True, backend=_script_backend(tmp_path, body)))
    assert (res.outcome, res.message) == ("bad_logs", "log_0.log has 2 decode samples, not more than warm-up 2")


@pytest.mark.parametrize(("control", "needle"), [
    (Control(ranks=0, warmup=2), "--ranks 0: expected at least 1"),
    (Control(ranks=2, warmup=-1), "--warmup -1: expected 0 or more"),
    (Control(ranks=2, warmup=8, iterations=8), "--iterations 8: expected more than --warmup 8"),
    (Control(ranks=2, warmup=2, timeout_s=0.0), "--timeout 0.0: expected a positive number"),
])
def test_impossible_controls_are_refused_before_anything_starts(tmp_path: Path, control: Control, needle: str) -> None:
    with pytest.raises(UsageError, match=needle):
        run_trial(_spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1", control=control))
    assert not (tmp_path / "session/experiments").exists()  # no probe, no scene


def test_missing_workload_cwd_is_bad_input_before_anything_starts(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="working directory not found"):
        run_trial(_spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1", cwd=tmp_path / "gone"))
    assert not (tmp_path / "session/experiments").exists()


def test_top_up_in_a_changed_environment_is_an_environment_blocker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = _spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1")
    assert run_trial(spec).status == "ok"
    real = CommandBackend.environment
    monkeypatch.setattr(CommandBackend, "environment", lambda self: {**real(self), "device": "another-card"})
    with pytest.raises(EnvironmentBlocker, match=r"O1/trial.json: .*environment\.device"):
        run_trial(_spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1", top_up_to=5))
    rd = tmp_path / "session/experiments/Sbest/O1"
    assert sorted(p.name for p in (rd / "CLEAN").iterdir()) == ["run-1", "run-2", "run-3"]  # nothing started
    assert "identity" in (rd / "environment-blockers.jsonl").read_text(encoding="utf-8")


def test_new_round_must_share_the_identity_of_its_baseline_round(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert run_trial(_spec(tmp_path, incumbent=True, round="O0-INCUMBENT", runs=5)).status == "ok"
    o0 = tmp_path / "session/experiments/Sbest/O0-INCUMBENT"
    real = CommandBackend.workload
    monkeypatch.setattr(CommandBackend, "workload", lambda self, control: {**real(self, control), "batch": 64})
    with pytest.raises(EnvironmentBlocker, match=r"O0-INCUMBENT/trial.json: .*workload\.batch"):
        run_trial(_spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1", same_identity_as=o0))
    assert not (tmp_path / "session/experiments/Sbest/O1/trial.json").exists()
    monkeypatch.setattr(CommandBackend, "workload", real)
    assert run_trial(_spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1", same_identity_as=o0)).status == "ok"


@pytest.mark.parametrize("site", ["read", "parquet"])
def test_machine_fault_mid_trial_is_a_recorded_blocker(tmp_path: Path, site: str) -> None:
    """A standalone `sk-run trial` whose read of a run's log (or write of a table) the machine fails
    records the blocker in the round, like a sweep does, decides nothing, and the same trial run again completes."""
    import errno

    from sk_analytics.files.io_seam import Fault, inject

    spec = _spec(tmp_path, "/super_kernel_optimize_options/auto_op_parallel=1")
    with inject(Fault(errno.EIO, site, nth=2, sticky=False)), pytest.raises(EnvironmentBlocker, match="EIO"):
        run_trial(spec)
    rd = tmp_path / "session/experiments/Sbest/O1"
    blocker = json.loads((rd / "environment-blockers.jsonl").read_text())
    assert (blocker["stage"], blocker["errno"]) == ("trial", "EIO") and "EIO" in blocker["message"]
    assert not (rd / "FAILURE_SCENES").exists()  # nothing decided: no scene, no failed run
    again = run_trial(spec)
    assert again.status == "ok"


def test_a_runtime_that_logs_another_value_is_a_value_differs_scene_that_says_so(tmp_path: Path,
                                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The probe's set-value line logs 3 for the probed 2: the trial stops at its probe with a failure of its own
    kind, ``value_differs`` (it shared ``invalid_value`` with a value the runtime defaulted), whose scene says so."""
    from sk_analytics.cli._base import run_cli
    from sk_runner.cli import cli

    write_fake(tmp_path)
    script = tmp_path / "other_value.py"
    script.write_text("import os, pathlib\n"
                      "pathlib.Path(os.environ['SK_RUN_DIR'], 'super_kernel.log').write_text('OptionName: split_mode, set value: 3\\n')\n")
    code = run_cli(cli, "sk-run", ["trial", "--session", str(tmp_path / "session"), "--round", "O1", "--base-config",
                                   str(tmp_path / "base.json"), "--set", "/super_kernel_optimize_options/split_mode=2", "--backend",
                                   "command", "--ranks", "1", "--warmup", "2", "--lang", "en", "--", sys.executable, str(script)])
    out = capsys.readouterr().out
    assert code == 1 and out.splitlines()[0] == (
        "O1: failed (value_differs) — another value than the one set took effect "
        "(the runtime logged another value than the probed one: OptionName: split_mode, set value: 3)")
    scene = (tmp_path / "session/experiments/Sbest/O1/FAILURE_SCENES/attempt-1/scene.md").read_text()
    assert "logged another value of the option than the one set" in scene and "fell back to the default" not in scene
    doc = json.loads((tmp_path / "session/experiments/Sbest/O1/FAILURE_SCENES/attempt-1/scene.json").read_text())
    assert doc["observable_failure"]["outcome"] == doc["preliminary_judgement"]["outcome"] == "value_differs"
    assert doc["preliminary_judgement"]["category"] == "option_value"


@pytest.mark.parametrize(("stage", "run"), [("probe", "PROBE"), ("correctness", "CORRECTNESS"), ("clean", "run-2")])
def test_a_trial_that_settles_sealed_runs_returns_the_sealed_failure_never_a_retry(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                                    stage: str, run: str) -> None:
    """``settle_sealed_run`` (every trial of a sweep): a step that failed and sealed its scene (the probe, the
    correctness run, a clean run; its caller killed before recording it) is the result of the trial run again, the
    result the failed invocation returned, and nothing runs again, though the step would pass now (it failed once:
    FAKE_FAIL_RUN, or a runtime that judged the value invalid). Without the flag (``sk-run trial`` again) the step is
    retried, attempt-1 untouched."""
    from sweep_helpers import failing_probe

    sets = "/super_kernel_optimize_options/auto_op_parallel=1"
    spec = _spec(tmp_path, sets, settle_sealed_run=True)
    if stage == "probe":
        failing_probe(monkeypatch, "O1")
    first = run_trial(_spec(tmp_path, sets, settle_sealed_run=True, env={**(spec.env or {}), "FAKE_FAIL_RUN": run}))
    monkeypatch.undo()
    rd = tmp_path / "session/experiments/Sbest/O1"
    assert first.status == "failed" and first.scene_dir == rd / "FAILURE_SCENES/attempt-1"
    assert (_scene(rd)["identity"]["stage"], _scene(rd)["identity"]["run"]) == (stage, run)
    sealed, runs = _tree_hashes(rd / "FAILURE_SCENES"), sorted(p.name for p in rd.rglob("*") if p.name == "meta.json")
    (rd / "INCOMPLETE" / f"{run}-old").mkdir(parents=True, exist_ok=True)  # named by hand: not a move of the trial's (it crashed)
    again = run_trial(spec)
    assert again == replace(first, new_runs=[])  # the same failure (outcome, message, words, scene, runs), no new run
    assert _tree_hashes(rd / "FAILURE_SCENES") == sealed and not (rd / "FAILURE_SCENES/attempt-2").exists()
    assert sorted(p.name for p in rd.rglob("*") if p.name == "meta.json") == runs  # nothing ran
    retried = run_trial(_spec(tmp_path, sets))
    assert retried.status == "ok" and _tree_hashes(rd / "FAILURE_SCENES") == sealed


def test_a_scene_killed_while_sealing_is_no_scene_and_its_run_is_made_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Killed while sealing the failure scene of run 2 (before ``scene.json``, written last): there is no sealed
    scene, so the trial that settles sealed runs makes run 2 again; the half-written scene is kept as it was."""
    from sweep_helpers import killed_while_sealing

    sets = "/super_kernel_optimize_options/auto_op_parallel=1"
    spec = _spec(tmp_path, sets, settle_sealed_run=True)
    killed_while_sealing(monkeypatch, "O1", "run-2")
    with pytest.raises(KeyboardInterrupt):
        run_trial(_spec(tmp_path, sets, settle_sealed_run=True, env={**(spec.env or {}), "FAKE_FAIL_RUN": "run-2"}))
    monkeypatch.undo()
    rd = tmp_path / "session/experiments/Sbest/O1"
    half = rd / "FAILURE_SCENES/attempt-1"
    assert (half / "scene.md").is_file() and not (half / "scene.json").exists()
    again = run_trial(spec)
    assert again.status == "ok" and again.new_runs == [2, 3] and not (half / "scene.json").exists()


def test_a_sealed_scene_of_another_trial_is_not_this_runs(tmp_path: Path) -> None:
    """A sealed scene of run 2 whose trial fingerprint is another's (the round's recorded trial changed since) is not
    a failure of the run about to be made: the trial that settles sealed runs makes run 2."""
    sets = "/super_kernel_optimize_options/auto_op_parallel=1"
    spec = _spec(tmp_path, sets, settle_sealed_run=True)
    assert run_trial(_spec(tmp_path, sets, env={**(spec.env or {}), "FAKE_FAIL_RUN": "run-2"})).status == "failed"
    scene = tmp_path / "session/experiments/Sbest/O1/FAILURE_SCENES/attempt-1/scene.json"
    doc = json.loads(scene.read_text(encoding="utf-8"))
    doc["identity"]["trial_fingerprint"] = "0" * 64
    scene.chmod(0o644)
    scene.write_text(json.dumps(doc), encoding="utf-8")
    again = run_trial(spec)
    assert again.status == "ok" and again.new_runs == [2, 3]
