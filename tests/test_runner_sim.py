"""sk-run trial end-to-end on the shipped simulator (sk_runner.sim)."""

from __future__ import annotations

import json
import os
from dataclasses import replace
from pathlib import Path

import pytest

from sk_analytics.tables import scan_table
from sk_runner.backends.base import Control
from sk_runner.backends.sim import SimBackend
from sk_runner.config import parse_set
from sk_runner.process import group_alive
from sk_runner.trial import TrialSpec, run_trial

BASE = {"static_kernel_compile": True, "super_kernel_optimize": True, "super_kernel_optimize_options": {}}
OPT = "/super_kernel_optimize_options"


def _spec(tmp_path: Path, *sets: str, timeout: float = 60.0, **kw) -> TrialSpec:
    (tmp_path / "session").mkdir(exist_ok=True)
    (tmp_path / "base.json").write_text(json.dumps(BASE))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASCEND_PROF", "SK_RUN", "ASCEND_OP_COMPILE"))}
    return TrialSpec(session=tmp_path / "session", round="O1", base_config=tmp_path / "base.json", backend=SimBackend(),
                     changes=tuple(parse_set(s) for s in sets), control=Control(ranks=2, iterations=30, warmup=8, timeout_s=timeout),
                     env=env, cwd=tmp_path, **kw)


def _scene(tmp_path: Path) -> dict:
    return json.loads((tmp_path / "session/experiments/Sbest/O1/FAILURE_SCENES/attempt-1/scene.json").read_text())


def test_sim_three_runs_then_top_up_to_five(tmp_path: Path) -> None:
    res = run_trial(_spec(tmp_path, f"{OPT}/auto_op_parallel=1"))
    assert res.status == "ok" and res.runs_completed == [1, 2, 3]
    probe = json.loads((tmp_path / "session/experiments/Sbest/O1/probe.json").read_text())
    assert probe["runtime"]["option_lines"] and not probe["runtime"]["invalid_lines"]
    top = run_trial(_spec(tmp_path, f"{OPT}/auto_op_parallel=1", top_up_to=5))
    assert top.runs_completed == [1, 2, 3, 4, 5] and top.new_runs == [4, 5]
    timings = scan_table(tmp_path / "session/data", "timings").collect()
    assert sorted(timings["run"].unique().to_list()) == [f"run-{k}" for k in range(1, 6)]
    assert set(timings["rank"].unique().to_list()) == {0, 1}


@pytest.mark.parametrize(
    ("value", "outcome", "stage"),
    [
        ('{"task_breaker_bypass": 1}', "crash", "correctness"),
        ('{"event_breaker_bypass": 1}', "crash", "correctness"),
    ],
)
def test_sim_crash_and_device_fault(tmp_path: Path, value: str, outcome: str, stage: str) -> None:
    res = run_trial(_spec(tmp_path, f"{OPT}/aggressive_opt_strategies={value}"))
    assert (res.status, res.outcome) == ("failed", outcome)
    doc = _scene(tmp_path)
    assert doc["identity"]["stage"] == stage and doc["observable_failure"]["exit_code"] not in (0, None)


def test_sim_hang_killed_at_timeout(tmp_path: Path) -> None:
    res = run_trial(_spec(tmp_path, f'{OPT}/aggressive_opt_strategies={{"value_breaker_bypass": 3}}', timeout=3.0))
    assert (res.status, res.outcome) == ("failed", "timeout")
    assert not group_alive(_scene(tmp_path)["observable_failure"]["pid"])


def test_sim_wrong_output(tmp_path: Path) -> None:
    res = run_trial(_spec(tmp_path, f"{OPT}/early_start=1"))
    assert (res.status, res.outcome) == ("failed", "wrong_output")
    assert _scene(tmp_path)["preliminary_judgement"]["category"] == "correctness"


def test_sim_invalid_value_is_caught_by_the_runtime_probe(tmp_path: Path) -> None:
    res = run_trial(_spec(tmp_path, f"{OPT}/split_mode=9"))
    assert (res.status, res.outcome) == ("failed", "invalid_value")
    doc = _scene(tmp_path)
    assert doc["identity"]["stage"] == "probe"
    assert "valid range is [1, 4]" in doc["observable_failure"]["message"]
    assert any(f["path"].endswith("super_kernel.log") for f in doc["artifacts"]["files"])


def test_unknown_network_is_bad_input_before_anything_starts(tmp_path: Path) -> None:
    from sk_analytics.errors import InputError

    with pytest.raises(InputError, match="no such network spec file or built-in scenario"):
        run_trial(replace(_spec(tmp_path, f"{OPT}/auto_op_parallel=1"), backend=SimBackend(network="no-such-net")))
    assert not (tmp_path / "session/experiments").exists()


def test_network_spec_file_is_passed_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sk_runner.backends.base import RunRequest

    monkeypatch.chdir(tmp_path)
    (tmp_path / "net.yaml").write_text("inherits: moe-decode\n")
    backend = SimBackend(network="net.yaml")
    argv = backend.argv(RunRequest(tmp_path / "c.json", tmp_path / "run", 1, Control(ranks=2)))
    assert argv[argv.index("--network") + 1] == str(tmp_path / "net.yaml")  # a profile runs the simulator in its root
    assert SimBackend(network="moe-decode").network == "moe-decode"
