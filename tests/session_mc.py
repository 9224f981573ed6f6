"""Monte Carlo of whole Stage O sweeps: does the frozen BASE hold exactly the real wins?

Synthetic sessions for ``benchmarks/bench_session_mc.py`` and ``tests/test_session_monte_carlo.py``
only (never the runtime package). A session is a matrix of ``entries`` option values tried in order,
each against the *current* incumbent as the sweep does (a frozen win becomes the next incumbent, with
the runs it was topped up to): one +3 % win, one +2 % win, one -2 % loss, the rest change nothing,
in a random order per session. Runs are drawn by the noise models of :mod:`gate_noise` (run-level
drift plus per-sample jitter; 4 ranks x 50 samples a run); a candidate may be noisier than the
incumbent (``candidate_noise``: its drift scaled).

Every decision is the product's own: ``protocol`` through
:func:`~sk_analytics.option_trial.gate.evaluate_candidate` (one call per session and entry) and the
protocol's five-run stability re-check of an accepted value; ``stats`` through the statistics policy's
vectorised checks; ``sequential`` through :func:`sk_analytics.option_trial.sequential.replay` at the
sweep's cap (the incumbent's five runs); ``family`` through
:func:`sk_analytics.option_trial.family.replay` with its incumbent extension and winner top-ups.
Device runs count every clean run of the session (O0, trials, gate extensions, top-ups).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from gate_noise import STEP_MS, DriftModel, _stable

from sk_analytics.option_trial.family import FamilyDesign, replay as family_replay
from sk_analytics.option_trial.gate import Allowances, evaluate_candidate
from sk_analytics.option_trial.sequential import replay as sequential_replay
from sk_analytics.option_trial.stats_gate import RunFigures, bounds, metric_checks

POLICIES = ("protocol", "stats", "sequential", "family")
SPECIAL_EFFECTS = (3.0, 2.0, -2.0)
"""True improvements (%) of the special entries; every other entry changes nothing."""
PROTOCOL_RUNS = 5
TRIAL_RUNS = 3


@dataclass(frozen=True)
class Cell:
    """One sweep shape and noise."""

    entries: int
    drift_pct: float
    tail: str = "normal"
    candidate_noise: float = 1.0
    """The candidate's run-level drift as a multiple of the incumbent's (1.5: noisier)."""

    @property
    def name(self) -> str:
        noise = f"drift {self.drift_pct:g} %" + (" t(3)" if self.tail == "t3" else "")
        return f"{self.entries} entries, {noise}" + (f", candidate {self.candidate_noise:g}x noisier" if self.candidate_noise != 1 else "")

    @property
    def equal_variance(self) -> bool:
        return self.candidate_noise == 1.0

    def model(self, noisier: bool) -> DriftModel:
        return DriftModel(self.drift_pct * (self.candidate_noise if noisier else 1.0), tail=self.tail)


CELLS = tuple(
    Cell(m, drift, tail, noise)
    for m in (9, 15)
    for drift, tail, noise in ((0.5, "normal", 1.0), (1.0, "normal", 1.0), (1.0, "t3", 1.0), (1.0, "normal", 1.5))
)


@dataclass
class Runs:
    """Unit-level runs of one side (every figure of a side at level L is L times these)."""

    figures: RunFigures
    pooled_p90: dict[int, np.ndarray]
    """Decode P90 of all samples of the first k runs (k = 3, 5), per session."""
    pooled_sd: dict[int, np.ndarray]

    @classmethod
    def draw(cls, model: DriftModel, rng: np.random.Generator, sessions: int, runs: int) -> Runs:
        samples = model.samples(rng, sessions, runs, 1.0) / STEP_MS
        per_run = samples.reshape(sessions, runs, -1)
        figures = RunFigures(samples.mean(axis=-1).max(axis=-1), np.quantile(per_run, 0.9, axis=-1), per_run.std(axis=-1))
        p90, sd = {}, {}
        for k in (TRIAL_RUNS, PROTOCOL_RUNS):
            pooled = per_run[:, :k].reshape(sessions, -1)
            p90[k], sd[k] = np.quantile(pooled, 0.9, axis=-1), pooled.std(axis=-1)
        return cls(figures, p90, sd)


def _scaled(fig: RunFigures, level: np.ndarray, runs: int | None = None, rows: np.ndarray | None = None) -> RunFigures:
    sel = slice(None) if rows is None else rows
    cut = slice(None) if runs is None else slice(0, runs)
    lv = level[sel][:, None]
    return RunFigures(fig.mean_ms[sel, cut] * lv, fig.p90_ms[sel, cut] * lv, fig.stddev_ms[sel, cut] * lv)


def _summary(fig: RunFigures, p90: float, sd: float, i: int) -> dict[str, object]:
    means = fig.mean_ms[i]
    return {"run_count": means.size, "worst_rank_mean_ms": float(means.mean()), "median_run_worst_rank_mean_ms": float(np.median(means)),
            "decode": {"p90_ms": p90, "stddev_ms": sd}}


@dataclass
class Session:
    """One policy's sessions in flight: the incumbent's true level and runs, the BASE, the device runs."""

    sessions: int
    incumbent_runs: int
    level: np.ndarray = field(init=False)
    base_mean: np.ndarray = field(init=False)
    base_p90: np.ndarray = field(init=False)
    base_sd: np.ndarray = field(init=False)
    base_count: np.ndarray = field(init=False)
    pooled_p90: np.ndarray = field(init=False)
    pooled_sd: np.ndarray = field(init=False)
    runs: np.ndarray = field(init=False)

    def start(self, o0: Runs, runs: int) -> None:
        s = self.sessions
        self.level = np.ones(s)
        width = max(runs, 64)
        self.base_mean, self.base_p90, self.base_sd = (np.full((s, width), np.nan) for _ in range(3))
        self.base_mean[:, :runs] = o0.figures.mean_ms[:, :runs]
        self.base_p90[:, :runs] = o0.figures.p90_ms[:, :runs]
        self.base_sd[:, :runs] = o0.figures.stddev_ms[:, :runs]
        self.base_count = np.full(s, runs)
        self.pooled_p90, self.pooled_sd = o0.pooled_p90[PROTOCOL_RUNS].copy(), o0.pooled_sd[PROTOCOL_RUNS].copy()
        self.runs = np.full(s, runs)

    def incumbent(self, rows: np.ndarray, count: int) -> RunFigures:
        return RunFigures(self.base_mean[rows, :count], self.base_p90[rows, :count], self.base_sd[rows, :count])

    def adopt(self, rows: np.ndarray, cand: Runs, cand_level: np.ndarray, count: np.ndarray) -> None:
        """The winners of ``rows`` become the incumbents, with their first ``count`` runs."""
        fig = cand.figures
        self.base_mean[rows], self.base_p90[rows], self.base_sd[rows] = np.nan, np.nan, np.nan
        for n in np.unique(count[rows]):
            r = rows[count[rows] == n]
            lv = cand_level[r][:, None]
            self.base_mean[r, :n], self.base_p90[r, :n], self.base_sd[r, :n] = fig.mean_ms[r, :n] * lv, fig.p90_ms[r, :n] * lv, fig.stddev_ms[r, :n] * lv
        self.base_count[rows] = count[rows]
        self.pooled_p90[rows] = cand.pooled_p90[PROTOCOL_RUNS][rows] * cand_level[rows]
        self.pooled_sd[rows] = cand.pooled_sd[PROTOCOL_RUNS][rows] * cand_level[rows]
        self.level[rows] = cand_level[rows]


def _decide_fixed(policy: str, sess: Session, cand: Runs, cand_level: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gate decision and candidate runs used of protocol / stats / sequential against a five-run incumbent."""
    s = sess.sessions
    rows = np.arange(s)
    inc = sess.incumbent(rows, PROTOCOL_RUNS)
    stable = _stable(inc)
    if policy == "protocol":
        c3 = _scaled(cand.figures, cand_level, TRIAL_RUNS)
        p90, sd = cand.pooled_p90[TRIAL_RUNS] * cand_level, cand.pooled_sd[TRIAL_RUNS] * cand_level
        accepted = np.array([
            evaluate_candidate(_summary(inc, float(sess.pooled_p90[i]), float(sess.pooled_sd[i]), i), {"stable": bool(stable[i])},
                               _summary(c3, float(p90[i]), float(sd[i]), i))["accepted"] for i in range(s)])
        return accepted, np.full(s, TRIAL_RUNS)
    if policy == "stats":
        c3 = _scaled(cand.figures, cand_level, TRIAL_RUNS)
        ok = stable & np.logical_and.reduce(list(metric_checks(bounds(inc, c3, Allowances())).values()))
        return ok, np.full(s, TRIAL_RUNS)
    c5 = _scaled(cand.figures, cand_level, PROTOCOL_RUNS)
    found = sequential_replay(inc, c5, cap=PROTOCOL_RUNS, preconditions=stable)
    return found.state == "accepted", found.runs_used


def _entry_fixed(policy: str, sess: Session, cand: Runs, cand_level: np.ndarray, base: np.ndarray, i: int) -> None:
    """One entry under a five-run policy: the gate, then the protocol's top-up to five and stability re-check."""
    accepted, used = _decide_fixed(policy, sess, cand, cand_level)
    sess.runs += np.where(accepted, PROTOCOL_RUNS, used)
    c5 = _scaled(cand.figures, cand_level, PROTOCOL_RUNS)
    frozen = accepted & _stable(c5)
    rows = np.nonzero(frozen)[0]
    sess.adopt(rows, cand, cand_level, np.full(sess.sessions, PROTOCOL_RUNS))
    base[:, i] = frozen


def _entry_family(design: FamilyDesign, sess: Session, cand: Runs, cand_level: np.ndarray, base: np.ndarray, i: int) -> None:
    """One entry under the family policy: looks until it decides, a winner topped up to the incumbent's runs."""
    s = sess.sessions
    accepted, used = np.zeros(s, dtype=bool), np.zeros(s, dtype=int)
    for nb in np.unique(sess.base_count):
        rows = np.nonzero(sess.base_count == nb)[0]
        found = family_replay(sess.incumbent(rows, int(nb)), _scaled(cand.figures, cand_level, design.cap, rows), design)
        accepted[rows], used[rows] = found.state == "accepted", found.runs_used
    keep = np.where(accepted, np.maximum(used, design.incumbent_runs), used)
    sess.runs += keep
    rows = np.nonzero(accepted)[0]
    sess.adopt(rows, cand, cand_level, keep)
    base[:, i] = accepted


@dataclass(frozen=True)
class Outcome:
    """Per policy: BASE exactly the real wins, any false win, any missed win, mean device runs (shares of sessions)."""

    exact: dict[str, float]
    false_win: dict[str, float]
    missed: dict[str, float]
    runs: dict[str, float]


def effects_of(rng: np.random.Generator, sessions: int, entries: int) -> np.ndarray:
    """True improvement (%) of every entry of every session: the special entries at random places."""
    row = np.zeros(entries)
    row[: len(SPECIAL_EFFECTS)] = SPECIAL_EFFECTS
    return np.stack([rng.permutation(row) for _ in range(sessions)])


def run_cell(cell: Cell, sessions: int, seed: int, design: FamilyDesign | None = None,
             policies: tuple[str, ...] = POLICIES) -> Outcome:
    """``sessions`` seeded sweeps of ``cell`` under every policy, on the same draws (common random numbers)."""
    design = design or FamilyDesign(cell.entries)
    rng = np.random.default_rng(seed)
    effects = effects_of(rng, sessions, cell.entries)
    o0 = Runs.draw(cell.model(False), rng, sessions, max(design.incumbent_runs, PROTOCOL_RUNS))
    states = {p: Session(sessions, 0) for p in policies}
    bases = {p: np.zeros((sessions, cell.entries), dtype=bool) for p in policies}
    for p, sess in states.items():
        sess.start(o0, design.incumbent_runs if p == "family" else PROTOCOL_RUNS)
    width = max(design.cap, design.incumbent_runs, PROTOCOL_RUNS)
    for i in range(cell.entries):
        cand = Runs.draw(cell.model(True), rng, sessions, width)
        for p, sess in states.items():
            cand_level = sess.level * (1 - effects[:, i] / 100)
            if p == "family":
                _entry_family(design, sess, cand, cand_level, bases[p], i)
            else:
                _entry_fixed(p, sess, cand, cand_level, bases[p], i)
    wins = effects > 0
    out: dict[str, dict[str, float]] = {"exact": {}, "false_win": {}, "missed": {}, "runs": {}}
    for p in policies:
        b = bases[p]
        out["exact"][p] = float((b == wins).all(axis=1).mean())
        out["false_win"][p] = float((b & ~wins).any(axis=1).mean())
        out["missed"][p] = float((~b & wins).any(axis=1).mean())
        out["runs"][p] = float(states[p].runs.mean())
    return Outcome(**out)


def entry_power(design: FamilyDesign, cell: Cell, effect_pct: float, trials: int, seed: int) -> tuple[float, float]:
    """Share of single entries the family policy accepts at a true ``effect_pct`` against a fresh incumbent of
    ``design.incumbent_runs`` runs (candidate at ``cell``'s noise), and its mean candidate runs."""
    rng = np.random.default_rng(seed)
    inc = Runs.draw(cell.model(False), rng, trials, design.incumbent_runs).figures
    cand = Runs.draw(cell.model(True), rng, trials, design.cap).figures
    found = family_replay(inc, _scaled(cand, np.full(trials, 1 - effect_pct / 100)), design)
    return float((found.state == "accepted").mean()), float(found.runs_used.mean())
