"""The executable runs-needed figure (issue 43): candidate runs against the incumbent's runs as they are.

Unit checks of :mod:`sk_analytics.option_trial.executable` (equal and unequal variances, the cap pointing to
the family policy) and a seeded simulation: the stated count, executed against the incumbent's runs as they
are, delivers the stated power within 5 points (``benchmarks/bench_runs_executable.py`` has every cell).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
import scipy.stats as sps
from gate_noise import DriftModel, executable_cell
from ot_logs import uniform_runs, write_candidate

from sk_analytics.ingest.timings import read_candidate
from sk_analytics.messages import coded
from sk_analytics.option_trial.api import evaluate_option_trial
from sk_analytics.option_trial.executable import (
    CANDIDATE_RUNS_CAP,
    FAMILY_COMMAND,
    LEVEL,
    PRIOR_DF,
    SessionNoise,
    candidate_runs,
    predictive_power,
    settle_plan,
    settle_text,
)
from sk_analytics.option_trial.inference import POWER, trial_statistics
from sk_analytics.option_trial.modes import family_incumbent_runs

BASE = np.array([0.0, 0.01, -0.01, 0.005, -0.005])  # sample variance 6.25e-5
QUIET = np.array([0.0, 0.004, -0.004])  # sample variance 1.6e-5
NOISY = np.array([0.0, 0.02, -0.02])  # sample variance 4e-4


def _power(vb: float, vc: float, n: int, effect: float, nc: int = 3) -> float:
    return float(predictive_power(np.array(effect), np.array(vb), np.array(vc), BASE.size, nc, np.array([n]), LEVEL)[0])


def test_equal_variances_smallest_count_reaching_the_power() -> None:
    cand = BASE[:3] + 0.001  # the first three incumbent runs shifted: variance 1e-4
    plan = settle_plan(BASE, cand, 0.02)
    n = plan["candidate_runs"]
    assert isinstance(n, int) and 3 < n <= CANDIDATE_RUNS_CAP
    vb, vc = float(BASE.var(ddof=1)), float(cand.var(ddof=1))
    assert _power(vb, vc, n, 0.02) >= POWER > _power(vb, vc, n - 1, 0.02)
    # the figure states the power its count gives (a whole run overshoots the 80 % planned for), not the 80 %
    assert plan["power_at_runs"] == pytest.approx(_power(vb, vc, n, 0.02)) and plan["power_at_runs"] >= POWER
    # the incumbent keeps its five runs: a per-side count of the same noise would be smaller than the candidate count
    assert n > 3


def test_unequal_variances_a_noisier_candidate_needs_more_runs() -> None:
    quiet = settle_plan(BASE, QUIET, 0.02)["candidate_runs"]
    noisy = settle_plan(BASE, NOISY, 0.02)["candidate_runs"]
    assert quiet is not None and noisy is not None and noisy > quiet >= 3
    vb = float(BASE.var(ddof=1))
    assert _power(vb, 4e-4, noisy, 0.02) >= POWER > _power(vb, 4e-4, noisy - 1, 0.02)
    # Welch degrees of freedom: the power of the noisy count is not the equal-variance one
    assert _power(vb, 4e-4, noisy, 0.02) != pytest.approx(_power(2.3e-4, 2.3e-4, noisy, 0.02), abs=1e-3)


def test_power_grows_with_runs_and_averages_over_the_candidate_variance() -> None:
    counts = np.arange(3, CANDIDATE_RUNS_CAP + 1)
    pw = predictive_power(np.array(0.02), np.array(6.25e-5), np.array(1e-4), 5, 3, counts)
    assert pw.shape == counts.shape and np.all(np.diff(pw) >= 0) and 0 < pw[0] < pw[-1] < 1
    # a candidate whose three runs came out nearly equal: its variance is drawn toward the incumbent's (PRIOR_DF),
    # so the count is not planned as if the candidate had no noise
    quiet = predictive_power(np.array(0.01), np.array(6.25e-5), np.array(1e-9), 20, 3, counts)
    se_b = np.sqrt(6.25e-5 / 20)
    plug_in = sps.norm.cdf((0.01 - sps.t.isf(LEVEL, 19) * se_b) / se_b)  # the candidate taken as noiseless
    assert plug_in > 0.999 and quiet[0] < 0.95 and PRIOR_DF == 2
    # the same data give the same figure (seeded draws)
    again = predictive_power(np.array(0.02), np.array(6.25e-5), np.array(1e-4), 5, 3, counts)
    np.testing.assert_array_equal(pw, again)


def test_no_noise_on_either_side() -> None:
    pw = predictive_power(np.array([0.01, 0.0]), np.array(0.0), np.array(0.0), 5, 3, np.array([3, 4]))
    np.testing.assert_array_equal(pw, [[1.0, 1.0], [0.0, 0.0]])


def test_never_fewer_than_the_runs_made_and_the_protocol_minimum() -> None:
    assert settle_plan(BASE, QUIET, 0.2)["candidate_runs"] == 3
    many = np.linspace(-0.004, 0.004, 7)
    assert settle_plan(BASE, many, 0.2)["candidate_runs"] == 7


def test_cap_reached_points_to_the_family_policy() -> None:
    # the incumbent's own five runs leave a standard error of 0.35 %: no candidate count shows +0.5 % with 80 % power
    plan = settle_plan(BASE, QUIET, 0.005)
    assert plan["candidate_runs"] is None and plan["settle_by"] == "family_policy" and plan["family_command"] == FAMILY_COMMAND
    assert 0 < plan["power_at_cap"] < POWER and plan["candidate_runs_cap"] == CANDIDATE_RUNS_CAP
    en, zh = settle_text(plan, coded("executable.effect_planned", pct=0.5))
    assert f"no number of candidate runs up to {CANDIDATE_RUNS_CAP}" in en and "gate: family" in en and FAMILY_COMMAND in en
    assert "gate: family" in zh and "0.50%的提升" in zh and "an improvement of 0.50%" in en
    # more incumbent runs (what the family policy adds) make the same effect reachable
    assert settle_plan(np.tile(BASE, 12), QUIET, 0.005)["settle_by"] == "candidate_runs"


def test_nothing_to_plan() -> None:
    assert settle_plan(BASE, QUIET, 0.0)["settle_by"] == "none"
    assert settle_plan(BASE[:1], QUIET, 0.02)["settle_by"] == "none"


def test_vectorised_over_trials_as_one_by_one() -> None:
    rng = np.random.default_rng(5)
    base, cand = rng.normal(0, 0.01, (40, 5)), rng.normal(-0.01, 0.015, (40, 3))
    runs, _ = candidate_runs(base, cand, 0.015)
    one = [settle_plan(base[i], cand[i], 0.015)["candidate_runs"] for i in range(40)]
    assert [None if np.isnan(r) else int(r) for r in runs] == one
    assert any(r is None for r in one) and any(r is not None and r > 3 for r in one)


def test_statistics_record_carries_the_executable_figure() -> None:
    st = trial_statistics([100.0, 100.4, 99.6, 100.2, 99.8], [98.0, 98.5, 97.6])
    ex = st["runs_needed"]["executable"]
    assert ex["incumbent_runs"] == 5 and ex["candidate_runs_now"] == 3 and ex["settle_by"] == "candidate_runs"
    assert f"{ex['candidate_runs']} candidate runs (now 3;" in ex["text"] and "as they are" in ex["text"]
    assert f"about {ex['power_at_runs']:.0%} power" in ex["text"] and f"约{ex['power_at_runs']:.0%}" in ex["text_zh"]
    assert st["runs_needed"]["per_side"] is not None  # the per-side figure keeps its meaning


def test_session_noise_pools_each_trials_own_spread() -> None:
    # two trials whose means differ by 10 %: only the spread around each one's own mean is noise
    noise = SessionNoise.of_trials([[100.0, 101.0, 99.0], [90.0, 90.9, 89.1], [95.0], [100.0, 0.0, 100.0], [100.0, float("nan")]])
    logs = [np.log([100.0, 101.0, 99.0]), np.log([90.0, 90.9, 89.1])]
    assert noise.trials == 2 and noise.df == 4  # one run, a run of 0 ms and a NaN run: no spread to learn from
    assert noise.sum_squares == pytest.approx(sum(float(((x - x.mean()) ** 2).sum()) for x in logs))
    assert noise.to_json() == {"trials": 2, "df": 4, "sd_pct": pytest.approx(np.sqrt(noise.sum_squares / 4) * 100)}
    assert SessionNoise().to_json() == {"trials": 0, "df": 0, "sd_pct": None}
    both = noise + SessionNoise.of_trials([[100.0, 100.5]])
    assert (both.trials, both.df) == (3, 5) and both.sum_squares > noise.sum_squares


def test_a_quiet_session_plans_a_candidate_noisy_by_chance_at_the_session_noise() -> None:
    # the candidate's three runs came out 4x the incumbent's spread; eight other candidate trials of the session
    # show the incumbent's spread: the figure draws the candidate's variance toward them and asks for fewer runs
    session = SessionNoise.of_trials([np.exp(BASE[:3] + 4.6) * k for k in (1.0, 0.98, 1.02, 0.97, 1.03, 0.99, 1.01, 0.96)])
    alone, pooled = settle_plan(BASE, NOISY, 0.03), settle_plan(BASE, NOISY, 0.03, session=session)
    assert alone["candidate_runs"] is not None and pooled["candidate_runs"] is not None
    assert pooled["candidate_runs"] < alone["candidate_runs"]
    assert pooled["session_noise"] == session.to_json() and pooled["session_noise"]["df"] == 16
    assert alone["session_noise"] == {"trials": 0, "df": 0, "sd_pct": None}
    assert "the session's other candidate trials, 8 so far" in pooled["assumes"] and "其他候选试验（已有8个）" in pooled["assumes_zh"]
    assert "no other candidate trial of the session" in alone["assumes"]
    en, zh = settle_text(pooled, coded("executable.effect_planned", pct=3.0))
    assert "the session's other candidate trials, 8 so far" in en and "其他候选试验（已有8个）" in zh
    # the power stated is the predictive power with the session's noise in the prior
    vb, vc = float(BASE.var(ddof=1)), float(NOISY.var(ddof=1))
    n = pooled["candidate_runs"]
    with_session = predictive_power(np.array(0.03), np.array(vb), np.array(vc), 5, 3, np.array([n]), LEVEL, session.sum_squares, session.df)
    assert pooled["power_at_runs"] == pytest.approx(float(with_session[0]))


def _side(folder: Path, scale: float, logs: np.ndarray) -> pl.DataFrame:
    values = [f"{100 * scale * float(np.exp(x)):.3f}" for x in logs]
    return read_candidate(write_candidate(folder, uniform_runs(values)), expected_ranks=2, warmup=2)


def test_candidates_given_together_learn_the_noise_from_each_other(tmp_path: Path) -> None:
    base = _side(tmp_path / "base", 1.0, BASE)
    cands = {name: _side(tmp_path / name, 0.98 * k, NOISY) for name, k in (("a", 1.0), ("b", 1.01), ("c", 0.99))}
    one = evaluate_option_trial(base, {"a": cands["a"]}, warmup=2, expected_ranks=2)
    three = evaluate_option_trial(base, cands, warmup=2, expected_ranks=2)
    more = evaluate_option_trial(base, cands, warmup=2, expected_ranks=2, session_noise=SessionNoise.of_trials([[100.0, 100.2, 99.8]]))

    def noise(summary: dict[str, Any], name: str) -> dict[str, Any]:
        figure: dict[str, Any] = summary["candidates"][name]["statistics"]["runs_needed"]["executable"]
        return figure["session_noise"]

    assert noise(one, "a")["trials"] == 0
    assert [noise(three, n)["trials"] for n in "abc"] == [2, 2, 2] and noise(three, "a")["df"] == 4
    assert noise(more, "b")["trials"] == 3 and noise(more, "b")["df"] == 6
    # decisions never read it
    assert [three["candidates"][n]["gate"] for n in "abc"] == [more["candidates"][n]["gate"] for n in "abc"]


TRIALS = 4_000
TOLERANCE = 0.05
"""Issue 43's bound. Each cell's delivered power is a share of about 2,000 executed figures (standard error
under 1 point), so 5 points is over five standard errors: seeded, it cannot flake."""


@pytest.mark.parametrize(("nb", "effect"), [(5, 2.0), (family_incumbent_runs(9), 1.5)])
def test_stated_count_delivers_its_power_against_the_incumbent_as_it_is(nb: int, effect: float) -> None:
    """1 % drift, the candidate 1.5x noisier, 5 incumbent runs and the family policy's of 9 entries (that cell delivered 9 points under
    the stated power before the candidate's variance was averaged over): delivered within 5 points of the mean
    power the executed figures state (benchmarks/README.md has every cell)."""
    cell = executable_cell(DriftModel(1.0), 45, TRIALS, effect, nb=nb, candidate_model=DriftModel(1.5))
    assert cell["figures"] >= 1_500, cell
    assert cell["stated_power"] >= POWER
    assert abs(cell["power"] - cell["stated_power"]) <= TOLERANCE, f"stated {cell['stated_power']:.3f}, delivered {cell['power']:.3f}"


def test_heavy_tailed_drift_delivers_its_power_with_the_session_noise() -> None:
    """t(3) drift, 5 incumbent runs: the cell that delivered 6 points over the power stated when the figure knew the
    incumbent's noise alone; each situation an entry of a 9-entry sweep whose earlier candidate trials the figure
    learns the noise from (benchmarks/README.md has every cell)."""
    cell = executable_cell(DriftModel(1.0, tail="t3"), 46, TRIALS, 2.0)
    assert cell["figures"] >= 1_200, cell
    assert abs(cell["power"] - cell["stated_power"]) <= TOLERANCE, f"stated {cell['stated_power']:.3f}, delivered {cell['power']:.3f}"

