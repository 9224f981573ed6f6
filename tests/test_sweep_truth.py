"""The simulator's truth of a session's gated rounds (report comparison only)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sk_runner.sim.network import load_network
from sk_runner.sim.truth import ground_truth
from sk_runner.sweep.demo import DEMO_SEED_CONFIG
from sk_runner.sweep.truth import trial_truths, truth_class


def _session(root: Path, backend: dict, options: dict[str, dict]) -> list[tuple[str, dict]]:
    root.mkdir(parents=True)
    (root / "session.json").write_text(json.dumps({"backend": backend}))
    records: list[tuple[str, dict]] = []
    for name, opts in options.items():
        (root / f"{name}.json").write_text(json.dumps({**DEMO_SEED_CONFIG, "super_kernel_optimize_options": opts}))
        records.append(("trial_result", {"round": name, "config_path": f"{name}.json"}))
    records.append(("gate_result", {"round": "O1", "baseline_round": "O0-INCUMBENT"}))
    return records


def test_true_effect_of_a_round_against_its_baseline_round(tmp_path: Path) -> None:
    records = _session(tmp_path / "s", {"name": "sim", "network": None, "command": []},
                       {"O0-INCUMBENT": {}, "O1": {"auto_op_parallel": 1}})
    truths = trial_truths(tmp_path / "s", records)
    expected = -next(e for e in ground_truth(load_network(None))["option_effects"]
                     if e["option"] == "auto_op_parallel" and e["value"] == 1)["delta_pct"]
    assert truths is not None and truths["O1"]["class"] == "gain" and truths["O1"]["neutral_band_pct"] == 0.5
    # the truth module reports the step change rounded to 3 decimals; improvement = -change (to within that rounding)
    assert truths["O1"]["improvement_pct"] == pytest.approx(expected, abs=0.01)


def test_no_truth_off_the_simulator_or_without_its_inputs(tmp_path: Path) -> None:
    options = {"O0-INCUMBENT": {}, "O1": {"auto_op_parallel": 1}}
    assert trial_truths(tmp_path / "a", _session(tmp_path / "a", {"name": "command", "command": ["run.sh"]}, options)) is None
    assert trial_truths(tmp_path / "b", _session(tmp_path / "b", {"name": "sim", "network": "no-such-net"}, options)) is None
    records = _session(tmp_path / "c", {"name": "sim", "network": None}, options)
    (tmp_path / "c" / "O1.json").unlink()
    assert trial_truths(tmp_path / "c", records) is None


def test_truth_class_uses_the_simulator_neutral_band() -> None:
    assert [truth_class(x) for x in (0.49, -0.49, 0.5, -0.5)] == ["neutral", "neutral", "gain", "loss"]
