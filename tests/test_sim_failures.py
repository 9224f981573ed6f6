"""Failure modes of the simulated device, as separate processes: crash, device fault, hang, wrong output, invalid value."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path


def clean_env() -> dict[str, str]:
    """The test's environment without run switches, read when a test starts (conftest's session fixtures,
    such as the simulated-device registry, are set after this module is imported)."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("ASCEND_", "SK_RUN_"))}


def _config(tmp_path: Path, options: dict) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"super_kernel_optimize_options": options}))
    return path


def _sim(tmp_path: Path, options: dict, *extra: str, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "sk_runner.sim", "--config", str(_config(tmp_path, options)), "--run-dir", str(tmp_path / "run"),
           "--ranks", "2", "--iterations", "20", "--seed", "1", *extra]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env={**clean_env(), **(env or {})})


def test_task_breaker_bypass_crashes_with_device_error(tmp_path: Path) -> None:
    proc = _sim(tmp_path, {"aggressive_opt_strategies": {"task_breaker_bypass": 1, "value_breaker_bypass": 0}})
    assert proc.returncode == 1
    assert "EZ9999" in proc.stderr and "aicore exception" in proc.stderr
    assert not (tmp_path / "run" / "correctness.json").exists()
    lines = (tmp_path / "run" / "log_0.log").read_text().count("Inference time (decode)")
    assert lines == 3  # partial logs up to the crash


def test_event_breaker_bypass_is_a_device_fault(tmp_path: Path) -> None:
    proc = _sim(tmp_path, {"aggressive_opt_strategies": {"event_breaker_bypass": 1}})
    assert proc.returncode == 134
    assert "device fault" in proc.stderr and "EZ9999" not in proc.stderr


def test_both_value_breakers_hang_until_killed(tmp_path: Path) -> None:
    cmd = [sys.executable, "-m", "sk_runner.sim", "--config", str(_config(tmp_path, {"aggressive_opt_strategies": {"value_breaker_bypass": 3}})),
           "--run-dir", str(tmp_path / "run"), "--ranks", "1", "--iterations", "50"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=clean_env(), start_new_session=True)
    try:
        assert proc.stdout is not None
        # It says when it starts to wait (after its logs are written); a loaded machine may take seconds to get there.
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready and b"waiting for cross-core event" in proc.stdout.readline()
        assert proc.poll() is None
        log = tmp_path / "run" / "log_0.log"
        assert log.exists() and log.read_text().count("Inference time (decode)") == 3
        size = log.stat().st_size
        time.sleep(0.5)
        assert log.stat().st_size == size and proc.poll() is None  # no progress, still alive
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL
    assert not (tmp_path / "run" / "correctness.json").exists()


def test_early_start_without_adaptation_exits_zero_with_wrong_output(tmp_path: Path) -> None:
    proc = _sim(tmp_path, {"early_start": 1})
    assert proc.returncode == 0
    assert "Correctness check: FAIL" in proc.stdout
    result = json.loads((tmp_path / "run" / "correctness.json").read_text())
    assert result["passed"] is False
    assert abs(result["checksum"] - result["reference"]) > result["tolerance"]
    assert "精度校验失败" in result["detail_zh"]


def test_invalid_value_is_visible_in_super_kernel_log_and_default_used(tmp_path: Path) -> None:
    proc = _sim(tmp_path, {"split_mode": 9, "auto_op_parallel": 1}, "--probe-only")
    assert proc.returncode == 0
    logs = list((tmp_path / "run" / "sk_meta").glob("*/model_*_*/super_kernel.log"))
    assert len(logs) == 1
    text = logs[0].read_text()
    assert "OptionName: split_mode, set value is invalid, value is 9, valid range is [1, 4], the process will use default value: 4" in text
    assert "OptionName: auto_op_parallel, set value: 1" in text
    assert "Begin aclskOptimize" in text and "End aclskOptimize" in text
    assert not list((tmp_path / "run").glob("log_*.log"))  # probe only: no inference
    assert "set value is invalid" in proc.stderr


def test_invalid_value_runs_like_the_default(tmp_path: Path) -> None:
    a = tmp_path / "a"
    b = tmp_path / "b"
    a.mkdir()
    b.mkdir()
    _sim(a, {"split_mode": 9}, "--noise", "0")
    _sim(b, {}, "--noise", "0")
    def samples(folder: Path) -> list[str]:
        return [line for line in (folder / "run" / "log_1.log").read_text().splitlines() if line.startswith("Inference time")]

    assert samples(a) == samples(b) and len(samples(a)) == 21


def test_bad_config_is_exit_2_one_line(tmp_path: Path) -> None:
    bad = tmp_path / "c.json"
    bad.write_text("{nope")
    proc = subprocess.run([sys.executable, "-m", "sk_runner.sim", "--config", str(bad), "--run-dir", str(tmp_path / "r")],
                          capture_output=True, text=True, env=clean_env(), timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "c.json" in proc.stderr and "Traceback" not in proc.stderr


def test_sk_run_group_exposes_sim(tmp_path: Path) -> None:
    exe = Path(sys.executable).with_name("sk-run")
    proc = subprocess.run([str(exe), "sim", "--config", str(_config(tmp_path, {})), "--run-dir", str(tmp_path / "r"), "--ranks", "1", "--iterations", "9"],
                          capture_output=True, text=True, env=clean_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "r" / "log_0.log").read_text().count("Inference time (decode)") == 9


def test_a_crashing_profile_leaves_a_truncated_sk_prof(tmp_path: Path) -> None:
    from sk_analytics.ingest.sk_prof import parse_sk_prof

    env = {"ASCEND_PROF_SK_ON": "1024", "ASCEND_OP_COMPILE_SAVE_KERNEL_META": "1"}
    proc = _sim(tmp_path, {"aggressive_opt_strategies": {"task_breaker_bypass": 1}}, env=env)
    assert proc.returncode == 1
    traces = sorted((tmp_path / "run" / "sk_meta").glob("*/sk_prof_device_*.json"), key=lambda p: p.name)
    assert [p.name for p in traces] == ["sk_prof_device_0.json", "sk_prof_device_1.json"]  # every rank died mid-write
    assert not any(p.read_text().rstrip().endswith("]") for p in traces)
    trace = traces[0]
    result = parse_sk_prof(trace)
    assert result.rows > 1000 and len(result.warnings) == 1 and "truncated in record" in result.warnings[0]
    assert next((tmp_path / "run" / "sk_meta").glob("*/model_*/sk_fused_nodes.log")).exists()  # metadata is written at compile time
