"""The sequential statistics policy (``--gate sequential``) on hand-made cases.

Runs of :func:`spread_runs` (see ``test_option_trial_stats_gate``): a run's
metric is ``m``, its decode stddev ``d`` and its decode P90 ``m + d``.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from ot_logs import write_candidate
from test_option_trial_stats_gate import BASE_MEANS, spread_runs

from sk_analytics.cli import main
from sk_analytics.ingest.timings import read_candidate
from sk_analytics.option_trial import evaluate_option_trial
from sk_analytics.option_trial.sequential import CAP, FIRST_LOOK, boundaries, replay
from sk_analytics.option_trial.stats_gate import RunFigures


def _figures(means: list[float] | np.ndarray, sd: float = 1.0) -> RunFigures:
    m = np.asarray(means, dtype=float)
    return RunFigures(m, m + sd, np.full(m.shape, sd))


def test_boundaries_spend_the_level_and_decrease() -> None:
    c = boundaries(5, 8)
    assert len(c) == 8 - FIRST_LOOK + 1 and all(a > b for a, b in zip(c, c[1:], strict=False))
    # the last look is near the one-sided 5 % Welch critical value, the first well above it (alpha spent early is small)
    assert 1.9 < c[-1] < 2.3 and c[0] > 3.0
    assert boundaries(5, 8) is boundaries(5, 8)  # cached: the CLI and the sweep calibrate once per design
    with pytest.raises(ValueError):
        boundaries(5, 2)


def test_replay_accepts_rejects_and_waits() -> None:
    base = _figures(BASE_MEANS)
    clear = replay(base, _figures([97.0, 97.3, 96.8]))
    assert clear.state == "accepted" and clear.runs_used == 3 and clear.reason == "crossed"
    slower = replay(base, _figures([100.5, 100.9, 100.1]))
    assert slower.state == "rejected" and slower.runs_used == 3 and slower.reason == "not_faster"
    # a small gain: not yet significant at 3 runs, so one more run is asked for
    small = [99.5, 99.9, 99.2]
    wait = replay(base, _figures(small))
    assert wait.state == "undecided" and wait.reason == "add_a_run" and wait.runs_used == 3
    # the same runs at the cap: undecided becomes a rejection
    assert replay(base, _figures(small), cap=3).state == "rejected"
    assert replay(base, _figures(small), cap=3).reason == "cap_reached"
    # failed preconditions reject without a look
    assert replay(base, _figures([97.0, 97.3, 96.8]), preconditions=False).reason == "preconditions"


def test_replay_does_not_read_runs_beyond_the_cap_and_is_vectorised() -> None:
    base = _figures(BASE_MEANS)
    runs = [99.5, 99.9, 99.2, 99.6, 99.9, 99.3]  # t = 1.89, 2.23, 1.96 at looks 3-5, then 2.34 with the 6th run
    at_five = replay(base, _figures(runs), cap=5)
    assert at_five.state == "rejected" and at_five.reason == "cap_reached" and at_five.runs_used == 5
    assert replay(base, _figures(runs), cap=6).state == "accepted"
    assert replay(base, _figures(runs[:5]), cap=5).t.tolist() == at_five.t.tolist()
    many = replay(RunFigures(*(np.stack([getattr(base, f)] * 2) for f in ("mean_ms", "p90_ms", "stddev_ms"))),
                  RunFigures(*(np.stack([getattr(_figures(r), f) for r in ([97.0, 97.3, 96.8], [100.5, 100.9, 100.1])])
                               for f in ("mean_ms", "p90_ms", "stddev_ms"))))
    assert list(many.state) == ["accepted", "rejected"] and list(many.runs_used) == [3, 3]


def test_variance_regression_keeps_it_undecided() -> None:
    """The mean crosses, but the candidate's per-run stddev is significantly worse: not accepted at that look."""
    base = _figures(BASE_MEANS, sd=1.0)
    cand = RunFigures(np.array([97.0, 97.3, 96.8]), np.array([98.0, 98.3, 97.8]), np.array([1.5, 1.51, 1.49]))
    assert replay(base, cand).state == "undecided"


def _write(tmp_path: Path, name: str, means: list[float]) -> Path:
    return write_candidate(tmp_path / name, spread_runs(means, [1.0] * len(means)))


def _exit_code(args: list[str]) -> int:
    with pytest.raises(SystemExit) as info:
        main(args)
    return int(info.value.code)


def test_evaluate_and_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _write(tmp_path, "base", BASE_MEANS)
    small = _write(tmp_path, "small", [99.5, 99.9, 99.2])
    frame = read_candidate(base, expected_ranks=2, warmup=2)
    result = evaluate_option_trial(frame, {"O1": read_candidate(small, expected_ranks=2, warmup=2)}, warmup=2, gate="sequential",
                                   expected_ranks=2)
    cand = result["candidates"]["O1"]
    seq = cand["sequential_policy_evaluation"]
    assert seq["state"] == "undecided" and seq["is_protocol"] is False and seq["cap"] == CAP and len(seq["looks"]) == 1
    assert cand["gate"]["accepted"] is False and cand["gate"]["sequential_state"] == "undecided"
    # the protocol's own decision and figures are exactly those of a protocol-gate run
    protocol = evaluate_option_trial(frame, {"O1": read_candidate(small, expected_ranks=2, warmup=2)}, warmup=2, expected_ranks=2)
    assert cand["option_trial_evaluation"] == protocol["candidates"]["O1"]["option_trial_evaluation"]
    assert protocol["candidates"]["O1"]["gate"]["accepted"] == protocol["candidates"]["O1"]["option_trial_evaluation"]["accepted"]
    out = tmp_path / "summary.json"
    code = _exit_code(["option-trial", "--baseline", str(base), "--candidate", f"O1={small}", "--gate", "sequential",
                 "--expected-ranks", "2", "--warmup", "2", "--lang", "en", "--json-out", str(out)])
    text = capsys.readouterr().out
    assert code == 1 and "undecided after 3 candidate runs: add one candidate run" in text and "NOT the protocol" in text
    assert "decision: undecided (add one candidate run)" in text
    assert json.loads(out.read_text())["gate_policy"]["mode"] == "sequential"
    win = _write(tmp_path, "win", [97.0, 97.3, 96.8])
    assert _exit_code(["option-trial", "--baseline", str(base), "--candidate", f"O1={win}", "--gate", "sequential",
                       "--expected-ranks", "2", "--warmup", "2", "--lang", "en"]) == 0
    assert "accepted at 3 candidate runs" in capsys.readouterr().out
    assert _exit_code(["option-trial", "--baseline", str(base), "--candidate", f"O1={win}", "--gate", "sequential",
                       "--sequential-cap", "2", "--expected-ranks", "2", "--warmup", "2"]) == 2


def test_noise_free_runs_give_strict_json(tmp_path: Path) -> None:
    """Constant sides: the Welch t is infinite (a clear win) or undefined (a tie); the JSON stays strict."""
    from ot_logs import uniform_runs

    base = read_candidate(write_candidate(tmp_path / "b", uniform_runs(["100"] * 5)), expected_ranks=2, warmup=2)
    for name, value, state in (("win", "90", "accepted"), ("tie", "100", "rejected")):
        cand = read_candidate(write_candidate(tmp_path / name, uniform_runs([value] * 3)), expected_ranks=2, warmup=2)
        seq = evaluate_option_trial(base, {"O1": cand}, warmup=2, gate="sequential", expected_ranks=2)["candidates"]["O1"][
            "sequential_policy_evaluation"]
        json.dumps(seq, allow_nan=False)
        assert seq["state"] == state and len(seq["looks"]) == 1
    assert seq["looks"][0]["welch_t"] is None and seq["reason"] == "not_faster"


def test_a_sequential_state_this_version_does_not_know_is_shown_as_recorded(tmp_path: Path) -> None:
    """A summary from another sk-tune version with a state this one has no words for: the report shows the state as
    recorded (it raised KeyError), in both languages; a known state keeps its words."""
    from sk_analytics.option_trial.report import render_option_trial

    base = read_candidate(_write(tmp_path, "base", BASE_MEANS), expected_ranks=2, warmup=2)
    small = read_candidate(_write(tmp_path, "small", [99.5, 99.9, 99.2]), expected_ranks=2, warmup=2)
    result = evaluate_option_trial(base, {"O1": small}, warmup=2, gate="sequential", expected_ranks=2)
    assert "undecided after 3 candidate runs" in render_option_trial(result, "en")
    seq = result["candidates"]["O1"]["sequential_policy_evaluation"]
    seq.update(state="paused", reason="operator_hold")
    for lang in ("en", "zh"):
        [line] = [line for line in render_option_trial(result, lang).splitlines() if line.startswith("[O1]") and "paused" in line]
        assert line.endswith(": paused"), line
