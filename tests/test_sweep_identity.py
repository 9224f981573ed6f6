"""Protocol §5.1 in the sweep: a trial whose source/workload/controls/environment
would differ from its baseline's never runs, and is never gated against it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from sweep_helpers import settled_statuses, small_session

from sk_analytics.errors import EnvironmentBlocker, IntegrityError
from sk_analytics.ledger.chain import read_records
from sk_runner.backends import sim as sim_backend
from sk_runner.sweep.driver import run_sweep
from sk_runner.sweep.session import load_session


def test_environment_change_mid_session_blocks_the_trial_before_it_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = tmp_path / "s"
    session = small_session(root, ["auto-op-parallel-1"])
    assert run_sweep(session, say=lambda _: None, max_actions=3) is None  # freeze, O0 runs, O0 stability

    real = sim_backend.environment_record

    def upgraded(*args: Any, **kwargs: Any) -> dict[str, Any]:
        record = real(*args, **kwargs)
        return {**record, "packages": {**record["packages"], "polars": "99.0.0"}}

    monkeypatch.setattr(sim_backend, "environment_record", upgraded)
    with pytest.raises(EnvironmentBlocker, match=r"O0-INCUMBENT/trial.json: .*environment\.packages"):
        run_sweep(load_session(root), say=lambda _: None)
    assert not (root / "experiments/Sbest/O1/trial.json").exists()  # nothing started
    assert "gate_result" not in {r.kind for r in read_records(root)}

    # with the recorded environment restored the same session finishes
    monkeypatch.setattr(sim_backend, "environment_record", real)
    assert run_sweep(load_session(root), say=lambda _: None) is not None
    assert set(settled_statuses(root)) == {"auto-op-parallel-1"}
    # protocol §8: the environment blocker is in the parent report, not a failure scene
    report = (root / "EXPERIMENT_REPORT.md").read_text(encoding="utf-8")
    section = report[report.index("## 环境阻断"):]
    assert "| O1 | identity |" in section and "environment.packages" in section
    assert not (root / "experiments/Sbest/O1/FAILURE_SCENES").exists()


def test_gate_refuses_rounds_with_different_recorded_identities(tmp_path: Path) -> None:
    root = tmp_path / "s"
    session = small_session(root, ["auto-op-parallel-1"])
    assert run_sweep(session, say=lambda _: None, max_actions=4) is None  # ... and the O1 trial
    assert [r.kind for r in read_records(root)][-1] == "trial_result"
    trial_json = root / "experiments/Sbest/O1/trial.json"
    record = json.loads(trial_json.read_text(encoding="utf-8"))
    record["fingerprints"]["workload"]["batch"] = 64
    trial_json.write_text(json.dumps(record), encoding="utf-8")
    with pytest.raises(IntegrityError, match=r"O1 differs from O0-INCUMBENT .*workload\.batch"):
        run_sweep(load_session(root), say=lambda _: None)
    assert "gate_result" not in {r.kind for r in read_records(root)}
