"""``collect_profile`` with the command backend: a small producer script written by the test.

The script writes a profile the way the real runtime does (profiler output,
``sk_meta/<pid>/…``) into its run dir, and misbehaves on request (buffer-full
line above an iteration threshold, exit code, a symlink, metadata copied in
with old times), so every outcome of a collection is exercised.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from zh_words import stray_english

from sk_analytics.contract import MANIFEST_NAME, MARKER_NAME, ContractInputError, load_manifest, load_session
from sk_analytics.errors import UsageError
from sk_runner.backends import make_backend
from sk_runner.backends.base import Control
from sk_runner.profile import ProfileSpec, collect_profile, profile_workload, shorter_window

PRODUCER = r'''
import json, os, shutil, sys
from pathlib import Path
run = Path(os.environ["SK_RUN_DIR"])
iterations = int(os.environ["SK_RUN_ITERATIONS"])
mode = sys.argv[1]
pid = os.getpid()
(run / "env.json").write_text(json.dumps({k: v for k, v in os.environ.items() if k.startswith(("ASCEND", "SK_RUN"))}))
out = run / f"host_{pid}_20261129_ascend_pt" / "ASCEND_PROFILER_OUTPUT"
out.mkdir(parents=True)
for name in ("kernel_details.csv", "trace_view.json", "task_time.csv"):
    (out / name).write_text(name)
meta = run / "sk_meta" / str(pid) / "model_1_1"
meta.mkdir(parents=True)
for name in ("sk_graph_origin.json", "sk_graph_updated.json", "sk_fused_nodes.log", "sk_scope_split.log"):
    (meta / name).write_text(name)
log = "Begin aclskOptimize\nEnd aclskOptimize\n"
if mode == "overflow-above-10" and iterations > 10:
    log += "[sk time profiling]  device 0 core 7 buffer is full, stop dump the time of nodes on device 0 core 7\n"
if mode == "always-overflow":
    log += "[sk time profiling]  device 0 core 1 buffer is full, stop dump the time of nodes on device 0 core 1\n"
(meta / "super_kernel.log").write_text(log)
(run / "sk_meta" / str(pid) / "sk_prof_device_0.json").write_text("[{}]")
ranks = int(os.environ["SK_RUN_RANKS"])
for rank in range(ranks):  # the rank logs of SK_RUN_ITERATIONS steps (the last rank ends early on request)
    steps = iterations - 5 if mode == "short-rank" and rank == ranks - 1 else iterations
    (run / f"log_{rank}.log").write_text("Inference time (prefill): 120.50 ms\n" + "Inference time (decode): 10.25 ms\n" * steps)
if mode == "short-rank":
    print("rank 1 lost its device", file=sys.stderr)
if mode == "symlink":
    (run / "linked.csv").symlink_to(sys.argv[0])
if mode == "copied":
    os.remove(meta / "sk_fused_nodes.log")
    shutil.copy2(sys.argv[2], meta / "sk_fused_nodes.log")
if mode == "crash":
    sys.exit(3)
'''

CONFIG = {"super_kernel_optimize": True, "super_kernel_optimize_options": {}}
WORKLOAD = {"model": "tiny", "input": "prompts", "batch_size": 1, "mode": "decode", "runtime": "test-producer"}


@pytest.fixture()
def setup(tmp_path: Path) -> tuple[Path, Path, Path]:
    script = tmp_path / "producer.py"
    script.write_text(PRODUCER)
    config = tmp_path / "config.json"
    config.write_text(json.dumps(CONFIG))
    (tmp_path / "session").mkdir()
    return tmp_path / "session", config, script


def _spec(setup: tuple[Path, Path, Path], mode: str, *extra: str, iterations: int = 40, **kw: object) -> ProfileSpec:
    session, config, script = setup
    backend = make_backend("command", [sys.executable, str(script), mode, *extra])
    args = dict(session=session, round="DCCI", role="candidate_profile", config=config, backend=backend,
                control=Control(ranks=1, iterations=iterations, warmup=2, timeout_s=60), workload=WORKLOAD,
                ingest=False)
    args.update(kw)
    return ProfileSpec(**args)  # type: ignore[arg-type]


def test_complete_collection(setup: tuple[Path, Path, Path]) -> None:
    result = collect_profile(_spec(setup, "ok"))
    assert result.status == "complete", result.reason
    diag = setup[0] / "experiments" / "Sbest" / "DCCI" / "diag" / "candidate_profile"
    root = diag / "attempt-1"
    assert result.root == str(root) and result.iterations == 40 and len(result.attempts) == 1
    manifest = load_manifest(root, require_sk_prof=True)
    assert manifest["manifest_fingerprint"] == result.manifest_fingerprint
    producer_pid = manifest["producer"]["native_pid"]
    assert (root / "sk_meta" / str(producer_pid) / "sk_prof_device_0.json").is_file()
    assert manifest["config"] == CONFIG
    assert manifest["workload"] == {"batch": 1, "input": "prompts", "iterations": 40, "mode": "decode", "model": "tiny",
                                    "rank": 1, "runtime": "test-producer", "warmup": 2}
    assert manifest["control"]["profile_env"] == {
        "ASCEND_PROF_SK_ON": "1024", "ASCEND_OP_COMPILE_SAVE_KERNEL_META": "1", "SK_RUN_PROFILE": "1"}
    assert manifest["source_revision"].startswith(("git-tree:", "files:"))  # the producer script, hashed where there is no git
    env = json.loads((root / "env.json").read_text())
    assert env["ASCEND_PROF_SK_ON"] == "1024" and env["ASCEND_OP_COMPILE_SAVE_KERNEL_META"] == "1"
    assert env["SK_RUN_PROFILE"] == "1" and env["SK_RUN_ITERATIONS"] == "40" and env["SK_RUN_DIR"] == str(root)
    session = load_session(diag / "attempt-1.session.json")
    assert session["capture_root"] == str(root) and session["session_fingerprint"] == result.attempts[0].session_fingerprint
    assert sorted(p.name for p in diag.iterdir()) == [
        "attempt-1", "attempt-1.config.json", "attempt-1.json", "attempt-1.session.json",
        "attempt-1.stderr.log", "attempt-1.stdout.log"]
    assert json.loads((diag / "attempt-1.json").read_text())["status"] == "complete"
    assert {MANIFEST_NAME, MARKER_NAME} <= {p.name for p in root.iterdir()}


def test_buffer_full_recollects_into_new_roots(setup: tuple[Path, Path, Path]) -> None:
    result = collect_profile(_spec(setup, "overflow-above-10", iterations=40))
    assert result.status == "complete"
    assert [(a.attempt, a.iterations, a.status) for a in result.attempts] == [
        (1, 40, "child_incomplete"), (2, 20, "child_incomplete"), (3, 10, "complete")]
    first_pid = result.attempts[0].producer["pid"]  # type: ignore[index]
    assert result.attempts[0].buffer_full == [f"sk_meta/{first_pid}/model_1_1/super_kernel.log"]
    assert result.attempts[2].buffer_full == []
    assert len({a.root for a in result.attempts}) == 3
    assert result.root == result.attempts[-1].root and result.iterations == 10
    assert load_manifest(result.root)["workload"]["iterations"] == 10
    # the incomplete roots stay sealed and untouched, never reused
    assert load_manifest(result.attempts[0].root)["workload"]["iterations"] == 40
    assert "buffer is full" in result.attempts[0].reason_zh


def test_buffer_full_until_the_shortest_window_is_blocked(setup: tuple[Path, Path, Path]) -> None:
    result = collect_profile(_spec(setup, "always-overflow", iterations=12, max_attempts=5))
    # 12 -> 6 -> 5 (warm-up 2 + 3) -> cannot get shorter
    assert [a.iterations for a in result.attempts] == [12, 6, 5]
    assert result.status == "blocked" and "still full after 3 attempt(s)" in result.reason
    assert "缓冲区仍满" in result.reason_zh


def test_max_attempts_bounds_recollection(setup: tuple[Path, Path, Path]) -> None:
    result = collect_profile(_spec(setup, "always-overflow", iterations=40, max_attempts=2))
    assert [a.iterations for a in result.attempts] == [40, 20] and result.status == "blocked"


def test_producer_failure_is_blocked_without_manifest(setup: tuple[Path, Path, Path]) -> None:
    result = collect_profile(_spec(setup, "crash"))
    assert result.status == "blocked" and result.reason == "producer exited with code 3"
    assert not (Path(result.attempts[0].root) / MANIFEST_NAME).exists()


def test_a_rank_that_ended_early_blocks_the_collection_as_a_trial_calls_it_a_crash(setup: tuple[Path, Path, Path]) -> None:
    """A rank log with fewer decode samples than the others (and than SK_RUN_ITERATIONS) while the launcher exits 0:
    the trial's check (sk_runner.trial.outcome.read_rank_logs) blocks the attempt before the root is sealed."""
    result = collect_profile(_spec(setup, "short-rank", iterations=12, control=Control(ranks=2, iterations=12, warmup=2, timeout_s=60)))
    assert result.status == "blocked" and len(result.attempts) == 1
    expected = ("rank logs refused (crash): ended early: rank 1 (log_1.log: 7 decode samples), expected 12 "
                "(SK_RUN_ITERATIONS=12); a rank that stops early is a failed run")
    assert result.reason.startswith(expected) and "rank 1 lost its device" in result.reason  # and the workload's stderr
    assert result.reason_zh.startswith("rank 日志不符合要求（crash），采集不得用于分析：提前结束：rank 1（log_1.log：7 个 decode 样本）")
    assert stray_english(result.reason_zh.replace("crash", "").replace("rank 1 lost its device", "")) == []
    assert not (Path(result.attempts[0].root) / MANIFEST_NAME).exists()
    complete = collect_profile(_spec(setup, "ok", iterations=12, control=Control(ranks=2, iterations=12, warmup=2, timeout_s=60)))
    assert complete.status == "complete", complete.reason  # the same logs, every rank whole


def test_progress_lines_in_chinese(setup: tuple[Path, Path, Path]) -> None:
    """A sweep's DCCI collections speak its language (``lang``); English stays the default of ``sk-run profile``."""
    said: list[str] = []
    assert collect_profile(_spec(setup, "ok", iterations=12, lang="zh"), said.append).status == "complete"
    assert said[0].startswith("candidate_profile 第 1 次采集：12 次迭代，写入 ")
    assert said[1] == "candidate_profile 第 1 次采集：完成——采集完成，清单已封存并通过校验"
    assert [stray_english(line) for line in said] == [[], []]
    said.clear()
    collect_profile(_spec(setup, "ok", iterations=12), said.append)
    assert said[1] == "candidate_profile attempt 2: complete — collection complete and sealed"


def test_symlink_from_producer_is_blocked(setup: tuple[Path, Path, Path]) -> None:
    result = collect_profile(_spec(setup, "symlink"))
    assert result.status == "blocked" and "rule no-symlinks" in result.reason
    assert "规则 no-symlinks" in result.reason_zh


def test_metadata_copied_from_a_shared_folder_is_blocked(setup: tuple[Path, Path, Path], tmp_path: Path) -> None:
    shared = tmp_path / "shared" / "sk_fused_nodes.log"
    shared.parent.mkdir()
    shared.write_text("from another process")
    os.utime(shared, ns=(10**18, 10**18))  # 2001: long before the session
    result = collect_profile(_spec(setup, "copied", str(shared)))
    assert result.status == "blocked" and "rule created-in-window" in result.reason


def test_a_new_attempt_never_reuses_a_root(setup: tuple[Path, Path, Path]) -> None:
    first = collect_profile(_spec(setup, "ok"))
    second = collect_profile(_spec(setup, "ok"))
    assert first.root != second.root and second.root.endswith("attempt-2")
    load_manifest(first.root)
    load_manifest(second.root)


def test_without_sk_prof_requirement_for_compat_role(setup: tuple[Path, Path, Path]) -> None:
    spec = _spec(setup, "ok", role="candidate_compat")
    assert spec.sk_prof_required is False
    assert _spec(setup, "ok").sk_prof_required is True


@pytest.mark.parametrize(("iterations", "warmup", "expected"),
                         [(40, 8, 20), (20, 8, 11), (11, 8, None), (12, 2, 6), (6, 2, 5), (5, 2, None)])
def test_shorter_window(iterations: int, warmup: int, expected: int | None) -> None:
    assert shorter_window(iterations, warmup) == expected


def test_profile_workload_merges_and_refuses_contradictions() -> None:
    control = Control(ranks=8, iterations=20, warmup=4)
    backend = {"model": "sim:default", "input": "synthetic", "batch": 1, "ranks": 8, "mode": "decode",
               "iterations": 20, "warmup": 4, "runtime": "sk_runner.sim 0.1.0"}
    merged = profile_workload(backend, {"model_name": "moe", "seed": 7}, control)
    assert merged["model"] == "moe" and merged["rank"] == 8 and merged["seed"] == 7
    with pytest.raises(UsageError, match="--workload says iterations=50 but the collection runs iterations=20"):
        profile_workload(backend, {"iters": 50}, control)


def test_incomplete_workload_fails_before_any_root(setup: tuple[Path, Path, Path]) -> None:
    with pytest.raises(ContractInputError, match="rule workload-fields: workload lacks model"):
        collect_profile(_spec(setup, "ok", workload={"input": "p", "batch": 1, "mode": "decode", "runtime": "r"}))
    assert not (setup[0] / "experiments" / "Sbest" / "DCCI" / "diag" / "candidate_profile").exists()


def test_bad_requests(setup: tuple[Path, Path, Path]) -> None:
    with pytest.raises(UsageError, match="--iterations must be at least"):
        collect_profile(_spec(setup, "ok", iterations=4))
    with pytest.raises(UsageError, match="--round"):
        collect_profile(_spec(setup, "ok", round="../x"))
    with pytest.raises(UsageError, match="--sk-prof-kb"):
        collect_profile(_spec(setup, "ok", sk_prof_kb=6000))
    with pytest.raises(UsageError, match="--ranks 0: expected at least 1"):
        collect_profile(_spec(setup, "ok", control=Control(ranks=0, iterations=40, warmup=2)))
    assert not (setup[0] / "experiments").exists()
