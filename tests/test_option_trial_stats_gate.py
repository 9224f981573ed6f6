"""The statistics policy (``--gate stats``) against hand-computed cases.

Each rank of :func:`spread_runs` logs two warm-up samples and then
``[m - d, m + d]`` twice, so a run's metric is ``m``, its decode stddev is
``d`` and its decode P90 is ``m + d`` (position 7 * 0.9 = 6.3 lies between two
``m + d`` samples).
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from ot_logs import write_candidate
from scipy import stats as sps

from sk_analytics.cli import main
from sk_analytics.ingest.timings import read_candidate
from sk_analytics.option_trial import evaluate_option_trial
from sk_analytics.option_trial.gate import Allowances
from sk_analytics.option_trial.inference import welch_lower_bound
from sk_analytics.option_trial.stats_gate import LEVEL, RunFigures, bounds, metric_checks

BASE_MEANS = [100.0, 100.4, 99.6, 100.2, 99.8]
CAND_MEANS = [97.0, 97.3, 96.8]


def spread_runs(means: list[float], sds: list[float], ranks: int = 2) -> list[dict[int, list[str]]]:
    return [{r: ["999", "999"] + [f"{m - d:.3f}", f"{m + d:.3f}"] * 2 for r in range(ranks)} for m, d in zip(means, sds, strict=True)]


def trial(tmp_path: Path, cand_sds: list[float], gate: str = "stats", allowances: Allowances = Allowances()) -> dict:
    base = read_candidate(write_candidate(tmp_path / "base", spread_runs(BASE_MEANS, [1.0] * 5)), expected_ranks=2, warmup=2)
    cand = read_candidate(write_candidate(tmp_path / "cand", spread_runs(CAND_MEANS, cand_sds)), expected_ranks=2, warmup=2)
    return evaluate_option_trial(base, {"O1": cand}, warmup=2, gate=gate, expected_ranks=2, allowances=allowances)  # type: ignore[arg-type]


def test_welch_lower_bound_hand_values_and_vectorised() -> None:
    x = np.array([0.0, 0.02, -0.02, 0.01, -0.01])
    y = np.array([-0.05, -0.03, -0.04])
    # se^2 = 2.5e-4/5 + 1e-4/3 = 1/12000; df = 100/17 (see test_option_trial_inference)
    expected = 0.04 - sps.t.ppf(0.95, 100 / 17) * math.sqrt(1 / 12000)
    assert float(welch_lower_bound(x, y, 0.05)) == pytest.approx(expected, rel=1e-9)
    many = welch_lower_bound(np.stack([x, x + 1, -x]), np.stack([y, y + 1, y]), 0.05)
    assert many.shape == (3,) and many[0] == pytest.approx(expected, rel=1e-9) and many[1] == pytest.approx(expected, rel=1e-9)
    assert many[2] == pytest.approx(expected, rel=1e-9)  # mean(-x) = mean(x) = 0, same variance


def test_welch_lower_bound_constant_sides_and_too_few_runs() -> None:
    tie = welch_lower_bound(np.array([0.1, 0.1, 0.1]), np.array([0.1] * 5), 0.05)
    assert float(tie) == 0.0  # exact, although mean([0.1] * 3) is not exactly 0.1
    assert float(welch_lower_bound(np.array([2.0, 2.0]), np.array([1.5, 1.5]), 0.05)) == 0.5
    assert math.isnan(float(welch_lower_bound(np.array([1.0]), np.array([1.0, 2.0]), 0.05)))


def test_variance_neutral_win_protocol_rejects_stats_accepts(tmp_path: Path) -> None:
    # pooled stddev: base sqrt(1 + 0.08) = 1.0392, cand sqrt(mean(1.03², 0.99², 1.04²) + var(means)) = 1.0407 -> protocol fails;
    # per-run stddev 1.02 ± 0.0265 against exactly 1: lower bound 0.02 - 2.92 * 0.0153 < 0 -> not significantly worse
    result = trial(tmp_path, [1.03, 0.99, 1.04])
    cand = result["candidates"]["O1"]
    assert cand["option_trial_evaluation"]["failed_checks"] == ["stddev_no_material_regression"]
    sp = cand["stats_policy_evaluation"]
    assert sp["accepted"] is True and sp["failed_checks"] == [] and sp["is_protocol"] is False
    assert list(sp["checks"]) == ["baseline_stable", "baseline_min_runs", "candidate_min_runs", "mean_improvement_significant",
                                  "p90_not_significantly_worse", "stddev_not_significantly_worse"]
    assert sp["level_one_sided"] == LEVEL == 0.05
    assert sp["mean_improvement_lower_bound_pct"] > 2.0 and sp["stddev_excess_lower_bound_pct"] < 0
    assert cand["gate"]["accepted"] is True and cand["gate"]["protocol_accepted"] is False and cand["gate"]["is_protocol"] is False
    assert "NOT the Stage O protocol" in cand["gate"]["label"]
    assert result["gate_policy"]["is_protocol"] is False and "不是 Stage O 协议" in result["gate_policy"]["label_zh"]
    assert result["selection"]["recommended"] == "O1" and result["selection"]["protocol_accepted_candidates"] == []


def test_significantly_worse_stddev_rejected_unless_allowed(tmp_path: Path) -> None:
    worse = [1.5, 1.52, 1.48]
    cand = trial(tmp_path / "a", worse)["candidates"]["O1"]
    assert cand["stats_policy_evaluation"]["failed_checks"] == ["stddev_not_significantly_worse"]
    assert cand["gate"]["accepted"] is False
    allowed = trial(tmp_path / "b", worse, allowances=Allowances(stddev_pct=60.0))["candidates"]["O1"]
    assert allowed["stats_policy_evaluation"]["accepted"] is True  # 1.5 ± 0.02 is far below 1.6


def test_protocol_mode_records_stats_answer_but_decides_by_protocol(tmp_path: Path) -> None:
    result = trial(tmp_path, [1.03, 0.99, 1.04], gate="protocol")
    cand = result["candidates"]["O1"]
    assert cand["stats_policy_evaluation"]["accepted"] is True
    assert cand["gate"]["accepted"] is False and cand["gate"]["is_protocol"] is True
    assert result["selection"]["recommended"] == "baseline"


def test_metric_checks_fail_closed_on_undefined_bounds() -> None:
    one = RunFigures(np.array([100.0]), np.array([101.0]), np.array([1.0]))
    base = RunFigures(np.array([100.0, 101.0]), np.array([101.0, 102.0]), np.array([1.0, 1.1]))
    assert not any(metric_checks(bounds(base, one, Allowances())).values())
    zero = RunFigures(np.array([0.0, 90.0]), np.array([91.0, 92.0]), np.array([1.0, 1.0]))
    assert bool(metric_checks(bounds(base, zero, Allowances()))["mean_improvement_significant"]) is False


def test_cli_stats_gate_is_labelled_not_protocol(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write_candidate(tmp_path / "base", spread_runs(BASE_MEANS, [1.0] * 5))
    cand = write_candidate(tmp_path / "cand", spread_runs(CAND_MEANS, [1.03, 0.99, 1.04]))
    out_file = tmp_path / "s.json"
    args = ["option-trial", "--baseline", str(base), "--candidate", f"O1={cand}", "--warmup", "2", "--expected-ranks", "2",
            "--gate", "stats", "--json-out", str(out_file)]
    for lang, needle in (("zh", "不是 Stage O 协议"), ("en", "NOT the Stage O protocol")):
        with pytest.raises(SystemExit) as info:
            main([*args, "--lang", lang])
        out = capsys.readouterr().out
        assert info.value.code == 0
        assert out.splitlines()[0].endswith(f"{needle}）" if lang == "zh" else f"{needle})")
    data = json.loads(out_file.read_text())
    assert data["gate_policy"]["mode"] == "stats" and data["selection"]["gate"] == "stats"
    assert "statistics policy (NOT the protocol, one-sided 5% tests)" in out and "would be accepted" in out
