"""The family policy's pure decision functions (issue 43): error spending, caps, unequal variance, minimum effect."""

from __future__ import annotations

import math

import numpy as np
import pytest
from session_mc import Cell, entry_power

import sk_analytics.option_trial.family as family
from sk_analytics.option_trial.family import (
    FUTILITY_CONFIDENCE,
    FamilyDesign,
    design_boundaries,
    evaluate_family,
    futility_scores,
    replay,
    spent,
)
from sk_analytics.option_trial.modes import family_incumbent_runs
from sk_analytics.option_trial.stats_gate import RunFigures


def _runs(rng: np.random.Generator, shape: tuple[int, ...], sd: float, effect_pct: float = 0.0) -> RunFigures:
    """Per-run figures of normal log run metrics (P90 / stddev proportional: the variance checks see no change)."""
    mean = 50.0 * (1 - effect_pct / 100) * np.exp(rng.normal(0.0, sd, shape))
    return RunFigures(mean, mean * 1.1, mean * 0.01)


def test_the_family_level_is_split_over_the_entries_and_spent_over_the_looks() -> None:
    design = FamilyDesign(15)
    assert design.entry_level == pytest.approx(0.05 / 15)
    assert spent(design.first, design.first, design.cap, 0.01) < spent(design.cap - 1, design.first, design.cap, 0.01)
    assert spent(design.cap, design.first, design.cap, 0.01) == pytest.approx(0.01)
    c = design_boundaries(design)
    assert len(c) == design.cap - design.first + 1 and all(math.isfinite(x) for x in c[-5:])


@pytest.mark.parametrize("entries", [1, 5])
def test_the_false_win_rate_of_an_entry_is_at_most_its_share_of_the_level(entries: int) -> None:
    design = FamilyDesign(entries)
    trials = 40_000
    rng = np.random.default_rng(43 + entries)
    found = replay(_runs(rng, (trials, design.incumbent_runs), 0.01), _runs(rng, (trials, design.cap), 0.01), design)
    rate = float((found.state == "accepted").mean())
    sigma = math.sqrt(design.entry_level * (1 - design.entry_level) / trials)
    assert rate <= design.entry_level + 3 * sigma
    assert set(found.state) <= {"accepted", "rejected"}  # every trial decided by its cap


def test_caps_runs_beyond_the_cap_are_not_read_and_the_cap_rejects() -> None:
    design = FamilyDesign(9, cap=6)
    rng = np.random.default_rng(7)
    base = _runs(rng, (2_000, design.incumbent_runs), 0.01)
    cand = _runs(rng, (2_000, 12), 0.01, effect_pct=1.2)
    found = replay(base, cand, design)
    cut = replay(base, RunFigures(cand.mean_ms[:, :6], cand.p90_ms[:, :6], cand.stddev_ms[:, :6]), design)
    assert (found.state == cut.state).all() and (found.runs_used == cut.runs_used).all() and found.runs_used.max() <= 6
    assert "cap_reached" in set(found.reason)
    assert design.runs_per_entry_cap == max(6, design.incumbent_runs)
    assert design.session_cap == design.incumbent_runs + 9 * design.runs_per_entry_cap
    plan = design.to_json()
    assert plan["cap_runs_per_session"] == design.session_cap and plan["cap_candidate_runs"] == 6


def _summary(means: np.ndarray) -> dict[str, object]:
    return {"run_worst_rank_means_ms": list(means), "runs": [{"decode": {"p90_ms": m * 1.1, "stddev_ms": m * 0.01}} for m in means]}


def test_an_undecided_entry_asks_for_one_more_candidate_run_until_its_cap() -> None:
    design = FamilyDesign(9)
    base = 50.0 * np.exp(np.array([0.01, -0.01, 0.005, -0.005, 0.0, 0.012, -0.012, 0.003, -0.003, 0.0]))
    cand = base[:3] * 0.985  # a 1.5 % gain seen in three runs: neither crossed nor futile yet
    out = evaluate_family(_summary(base), _summary(cand), design)
    assert out["state"] == "undecided" and out["next"] == "add one candidate run and evaluate again"
    assert out["incumbent_runs"] == 10 and out["design"]["entries"] == 9 and out["is_protocol"] is False
    # the same at the cap is a decision, never undecided
    at_cap = evaluate_family(_summary(base), _summary(np.resize(cand, design.cap)), design)
    assert at_cap["state"] in ("accepted", "rejected") and at_cap["next"] is None


def test_a_significant_gain_below_the_minimum_effect_is_not_frozen() -> None:
    rng = np.random.default_rng(11)
    design = FamilyDesign(1, min_effect_pct=1.0)
    base, cand = _runs(rng, (500, design.incumbent_runs), 0.0005), _runs(rng, (500, design.cap), 0.0005, effect_pct=0.5)
    found = replay(base, cand, design)
    assert (found.state == "rejected").all() and set(found.reason) <= {"below_min_effect", "futile"}
    assert (replay(base, cand, FamilyDesign(1, min_effect_pct=0.0)).state == "accepted").mean() > 0.95


def test_power_at_two_percent_holds_when_the_candidate_is_noisier() -> None:
    """Per-side variances: a candidate whose run-to-run drift is 1.5x the incumbent's (1 % drift, 15 entries)."""
    cell = Cell(15, 1.0, "normal", 1.5)
    design = FamilyDesign(cell.entries)
    power, runs = entry_power(design, cell, 2.0, 2_000, 5)
    assert power >= 0.80 and runs <= design.cap
    false, _ = entry_power(design, cell, 0.0, 4_000, 6)
    assert false <= design.entry_level + 3 * math.sqrt(design.entry_level / 4_000)


def test_the_futility_bound_loosens_over_the_looks(monkeypatch: pytest.MonkeyPatch) -> None:
    """75 % at the first look, 25 % at the cap, linear in the normal score: no-effect values stop sooner than
    under a constant 75 % bound (which kept them looking to the cap), and a real +2 % keeps its power."""
    design = FamilyDesign(9)
    z = futility_scores(design)
    assert FUTILITY_CONFIDENCE == (0.75, 0.25) and z.size == design.cap - design.first + 1
    assert z[0] == pytest.approx(0.6745, abs=1e-4) and z[-1] == pytest.approx(-0.6745, abs=1e-4)
    np.testing.assert_allclose(np.diff(z), np.diff(z)[0])
    assert "75% at the first look to 25% at the cap" in design.to_json()["futility"]
    cell = Cell(9, 1.0, "normal", 1.5)
    null_now, power_now = entry_power(design, cell, 0.0, 3_000, 8), entry_power(design, cell, 2.0, 3_000, 9)
    monkeypatch.setattr(family, "FUTILITY_CONFIDENCE", (0.75, 0.75))
    null_before = entry_power(design, cell, 0.0, 3_000, 8)
    assert null_now[1] < null_before[1] - 0.3 and null_now[0] <= null_before[0]
    assert power_now[0] >= 0.80


def test_incumbent_runs_grow_with_the_matrix_within_their_bounds() -> None:
    assert [family_incumbent_runs(m) for m in (1, 6, 9, 13, 15, 40)] == [10, 10, 13, 17, 17, 17]
    assert FamilyDesign(9).incumbent_runs == 13 and FamilyDesign(15).incumbent_runs == 17


def test_design_refuses_what_it_cannot_plan() -> None:
    for bad in ({"entries": 0}, {"entries": 3, "level": 1.0}, {"entries": 3, "min_effect_pct": -1.0}, {"entries": 3, "cap": 2}):
        with pytest.raises(ValueError):
            FamilyDesign(**bad)  # type: ignore[arg-type]
