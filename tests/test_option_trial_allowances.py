"""The reference tool's P90/stddev regression allowances, against hand-computed cases.

Logs of ``uniform_runs``: each run's two ranks log two warm-up samples and then
two copies of the run's value, so the pooled decode samples are every run
value four times.

Baseline runs 100, 102.5, 97.5, 100, 100: pooled P90 = 102.5 (position
19 * 0.9 = 17.1 falls between two 102.5 samples), stddev = sqrt(2.5).
Candidate runs 96, 97, 103: P90 = 103 (position 11 * 0.9 = 9.9 between two
103 samples), so P90 regresses by 0.5 / 102.5 = 0.4878... %; the population
variance of 96, 97, 103 (each four times) is 86 / 9, so the stddev regresses
by sqrt(86 / 9 / 2.5) - 1 = 95.50... %.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import pytest
from ot_logs import uniform_runs, write_candidate

from sk_analytics.cli import main
from sk_analytics.ingest.timings import read_candidate
from sk_analytics.option_trial import evaluate_option_trial
from sk_analytics.option_trial.gate import Allowances, regression_within

BASE = ["100", "102.5", "97.5", "100", "100"]
CAND = ["96", "97", "103"]
P90_REGRESSION = 0.5 / 102.5 * 100  # 0.4878...
STDDEV_REGRESSION = (math.sqrt(86 / 9 / 2.5) - 1) * 100  # 95.50...


def trial(tmp_path: Path, allowances: Allowances) -> dict:
    base = read_candidate(write_candidate(tmp_path / "base", uniform_runs(BASE)), expected_ranks=2, warmup=2)
    cand = read_candidate(write_candidate(tmp_path / "cand", uniform_runs(CAND)), expected_ranks=2, warmup=2)
    return evaluate_option_trial(base, {"O1": cand}, warmup=2, expected_ranks=2, allowances=allowances)


def test_hand_values_of_the_case(tmp_path: Path) -> None:
    ev = trial(tmp_path, Allowances())["candidates"]["O1"]["option_trial_evaluation"]
    assert ev["p90_regression_pct"] == pytest.approx(P90_REGRESSION, rel=1e-12)
    assert ev["stddev_regression_pct"] == pytest.approx(STDDEV_REGRESSION, rel=1e-12)
    assert ev["failed_checks"] == ["p90_no_material_regression", "stddev_no_material_regression"]
    assert ev["allow_p90_regression_pct"] == 0.0 and ev["allow_stddev_regression_pct"] == 0.0


@pytest.mark.parametrize(
    ("p90", "stddev", "failed"),
    [
        (0.48, 96.0, ["p90_no_material_regression"]),  # 0.4878 % > 0.48 %
        (0.49, 96.0, []),  # both regressions within their allowance
        (0.49, 95.5, ["stddev_no_material_regression"]),  # 95.50... % > 95.5 %
        (0.49, 95.51, []),
        (5.0, 0.0, ["stddev_no_material_regression"]),
    ],
)
def test_allowance_decides_each_check(tmp_path: Path, p90: float, stddev: float, failed: list[str]) -> None:
    result = trial(tmp_path, Allowances(p90, stddev))
    cand = result["candidates"]["O1"]
    ev = cand["option_trial_evaluation"]
    assert ev["failed_checks"] == failed and ev["accepted"] is (not failed)
    assert ev["allow_p90_regression_pct"] == p90 and ev["allow_stddev_regression_pct"] == stddev
    assert cand["gate"]["allow_p90_regression_pct"] == p90 and cand["gate"]["allow_stddev_regression_pct"] == stddev
    assert result["gate_policy"] == {"mode": "protocol", "allow_p90_regression_pct": p90,
                                     "allow_stddev_regression_pct": stddev, "protocol_allowances": False,
                                     "is_protocol": False, "label": "Stage O protocol gate", "label_zh": "Stage O 协议门禁"}


def test_exact_boundary_passes_where_float_arithmetic_fails() -> None:
    # 809.393 * 1.007 = 815.058751 exactly: a regression of exactly 0.7 %
    assert Fraction("815.058751") == Fraction("809.393") * Fraction("1.007")
    assert (815.058751 - 809.393) / 809.393 * 100 > 0.7  # the reference's float formula: 0.7000000000000001
    assert regression_within(815.058751, 809.393, 0.7) is True
    assert regression_within(815.058752, 809.393, 0.7) is False  # 1 microsecond more is over
    # and the other way round: float says 1.1 exactly, the decimals say so too
    assert regression_within(118.056492, 116.772, 1.1) is True


def test_zero_allowance_is_the_protocol_comparison() -> None:
    assert regression_within(10.0, 10.0, 0.0) is True  # equal is "not worse"
    assert regression_within(10.000000000000002, 10.0, 0.0) is False
    assert regression_within(9.0, 10.0, 0.0) is True
    assert regression_within(1.0, 0.0, 50.0) is False  # undefined against a zero baseline: fails closed
    assert regression_within(0.0, 0.0, 50.0) is False


@pytest.mark.parametrize("bad", [-0.1, math.inf, math.nan])
def test_bad_allowance_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="not a finite number >= 0"):
        Allowances(bad, 0.0)


def test_cli_records_allowances_in_json_and_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = write_candidate(tmp_path / "base", uniform_runs(BASE))
    cand = write_candidate(tmp_path / "cand", uniform_runs(CAND))
    out = tmp_path / "s.json"
    args = ["option-trial", "--baseline", str(base), "--candidate", f"O1={cand}", "--warmup", "2", "--expected-ranks", "2",
            "--allow-p90-regression-pct", "0.5", "--allow-stddev-regression-pct", "96", "--json-out", str(out), "--lang", "en"]
    with pytest.raises(SystemExit) as info:
        main(args)
    text = capsys.readouterr().out
    assert info.value.code == 0
    assert "allowed regression: P90 <= +0.5%, stddev <= +96%" in text
    data = json.loads(out.read_text())
    assert data["gate_policy"]["allow_p90_regression_pct"] == 0.5
    assert data["candidates"]["O1"]["option_trial_evaluation"]["accepted"] is True
    with pytest.raises(SystemExit) as info:
        main([*args[:-1], "zh"])
    assert info.value.code == 0 and "允许退化：P90 ≤ +0.5%，标准差 ≤ +96%" in capsys.readouterr().out
    for bad in ("-1", "nan", "inf", "x"):
        with pytest.raises(SystemExit) as info:
            main([*args[:9], "--allow-p90-regression-pct", bad])
        assert info.value.code == 2
        err = capsys.readouterr().err
        assert "Traceback" not in err and ("allow" in err.lower())
