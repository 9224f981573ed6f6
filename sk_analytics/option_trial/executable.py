"""Runs needed as sk-tune runs them: candidate runs added against the
incumbent's runs as they are (issue 43).

A "runs per side" figure cannot be executed: the protocol's gate needs exactly
five incumbent runs, and keeping them while adding N candidate runs delivers
far less than the promised power once the incumbent's own noise dominates.
This module answers the question sk-tune can act on: how many candidate runs
(the ones already made included), against the incumbent's ``nb`` runs kept as
they are, give a one-sided Welch test at ``level`` the stated :data:`POWER` to
show a true improvement ``effect`` (log scale)?

* **unequal variances**: each side keeps its own variance estimate (Welch,
  Welch-Satterthwaite degrees of freedom); the candidate may be noisier;
* **the noise of a few runs**: the power of a count is predictive, averaged over
  what the runs made leave unknown (the candidate's true variance and the spread
  of the runs to come). Three candidate runs cannot tell a noisier candidate
  from one whose runs came out noisy by chance, so the candidate's variance is
  drawn toward the run-to-run noise the session has measured: the incumbent's
  (a prior worth :data:`PRIOR_DF` degrees of freedom) and the session's other
  candidate trials (:class:`SessionNoise`, each trial's own mean taken out,
  worth their degrees of freedom), and the figure states that
  power at the count it gives, not the 80 % it was planned for: between N and
  N + 1 runs the power jumps by several points. Planning at the observed
  variances alone delivered 6-12 points less than stated with 12 incumbent runs
  (the candidate's 2-degree-of-freedom variance decided the count), a Jeffreys
  predictive 10-15 points more with 5 (docs/option-trial.md has the table);
* **the cap**: no count above :data:`CANDIDATE_RUNS_CAP` (the family policy's
  most candidate runs of one entry) is stated. When even the cap falls short,
  the incumbent's own runs are the limit and only more incumbent runs help:
  the answer points to the family policy, which extends the incumbent
  (``gate: family``; ``sk-run sweep --redecide SESSION --session NEW --gate family``).

Measured by ``benchmarks/bench_runs_executable.py`` (and
``tests/test_option_trial_executable.py``): the stated count, executed against
the incumbent's runs as they are, delivers within 5 points of the power stated
in every cell once the session has two other candidate trials; with the
incumbent's noise alone the simulator's and the heavy-tailed cells deliver
6-9 points more than stated.
Vectorised over leading axes (trials of a Monte Carlo); pure (no I/O).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np

from sk_analytics.lazy_module import lazy_module
from sk_analytics.messages import coded, render, rendered_fields
from sk_analytics.option_trial.gate import CANDIDATE_MIN_RUNS
from sk_analytics.option_trial.modes import FAMILY_CAP
from sk_analytics.option_trial.planning import CONFIDENCE, POWER

sps = lazy_module("scipy.stats")
special = lazy_module("scipy.special")

CANDIDATE_RUNS_CAP = FAMILY_CAP
"""Most candidate runs a stated figure asks for (the family policy's per-entry cap)."""
LEVEL = (1 - CONFIDENCE) / 2
"""One-sided level: the two-sided 95 % interval above 0."""
FAMILY_COMMAND = "sk-run sweep --redecide SESSION --session NEW --gate family"
PRIOR_DF = 2
"""Degrees of freedom the incumbent's observed variance weighs in the candidate's (as much as the protocol's
three candidate runs): an option value moves the step time more often than the run-to-run noise, and a
candidate variance of 2 degrees of freedom alone decides counts by chance (measured in
``benchmarks/bench_runs_executable.py``)."""
DRAWS = 128
SEED = 43


@dataclass(frozen=True)
class SessionNoise:
    """The run-to-run noise of a session's other candidate trials (log run metrics): their pooled within-trial
    sum of squares and its degrees of freedom. Each trial's own mean is taken out, so an option that moves the
    step time does not count as noise; what is left is the workload's and the machine's run-to-run spread, the
    one figure three candidate runs cannot estimate on their own."""

    sum_squares: float = 0.0
    df: int = 0
    trials: int = 0

    @classmethod
    def of_trials(cls, trials: Iterable[Sequence[float]]) -> SessionNoise:
        """Pooled over the trials of at least two runs, every run metric (ms) finite and positive (a trial with
        a run that has no logarithm is left out whole)."""
        ss, df, count = 0.0, 0, 0
        for runs in trials:
            ms = np.asarray(runs, dtype=float)
            if ms.size < 2 or not np.all(np.isfinite(ms) & (ms > 0)):
                continue
            logs = np.log(ms)
            ss += float(((logs - logs.mean()) ** 2).sum())
            df += ms.size - 1
            count += 1
        return cls(ss, df, count)

    def __add__(self, other: SessionNoise) -> SessionNoise:
        return SessionNoise(self.sum_squares + other.sum_squares, self.df + other.df, self.trials + other.trials)

    def to_json(self) -> dict[str, Any]:
        """``trials``, ``df`` and the pooled run-to-run standard deviation in % (``sd_pct``, null without df)."""
        sd = float(np.sqrt(self.sum_squares / self.df)) * 100 if self.df else None
        return {"trials": self.trials, "df": self.df, "sd_pct": sd}


NO_SESSION_NOISE = SessionNoise()


@lru_cache(maxsize=1)
def _draws() -> np.ndarray:
    """:data:`DRAWS` stratified uniforms (a Latin hypercube, seeded) for the two unknowns of
    :func:`predictive_power`: the same data always give the same figure."""
    rng = np.random.default_rng(SEED)
    u = (np.arange(DRAWS)[:, None] + rng.random((DRAWS, 2))) / DRAWS
    for column in u.T:
        rng.shuffle(column)
    return u


@lru_cache(maxsize=8)
def _t_table(level: float) -> tuple[np.ndarray, np.ndarray]:
    """The one-sided ``level`` critical t on a grid of ``1/df`` in [0, 1] (interpolated by :func:`_t_critical`)."""
    x = np.linspace(0.0, 1.0, 4097)
    with np.errstate(divide="ignore"):
        df = np.where(x > 0, 1 / np.where(x > 0, x, 1.0), np.inf)
    return x, np.asarray(sps.t.isf(level, df))


def _t_critical(df: np.ndarray, level: float) -> np.ndarray:
    """The one-sided ``level`` critical t at ``df`` degrees of freedom (a table in ``1/df``: fast over many trials)."""
    x, t = _t_table(level)
    return np.asarray(np.interp(1 / np.maximum(df, 1.0), x, t))


def predictive_power(effect: np.ndarray, vb: np.ndarray, vc: np.ndarray, nb: int, nc: int, counts: np.ndarray,
                     level: float = LEVEL, session_ss: np.ndarray | float = 0.0, session_df: np.ndarray | int = 0) -> np.ndarray:
    """Chance that the one-sided ``level`` Welch test of the incumbent's ``nb`` runs as they are against the
    candidate's ``nc`` runs topped up to each of ``counts`` shows a true improvement ``effect`` (log scale), given
    the observed variances ``vb`` and ``vc``; counts on a new last axis, other axes broadcast.

    Averaged over what the runs made leave unknown (:data:`DRAWS` stratified draws): the candidate's true
    variance (its ``nc - 1`` degrees of freedom, drawn toward the incumbent's observed variance by a prior worth
    :data:`PRIOR_DF` and toward the session's other candidate trials by their pooled ``session_ss`` over
    ``session_df``, :class:`SessionNoise`; both broadcast like ``effect``) and the spread of the runs still to
    come. The incumbent's variance is taken as observed: its runs are kept and the test reads their variance
    (averaging over its uncertainty as well stated 1-2 points less than the benchmark delivered with 5
    incumbent runs). The test reads the candidate's variance of
    all its runs, the ones made included."""
    counts = np.asarray(counts, dtype=float)
    e, sb2, sc2, s_ss, s_df = (np.asarray(a, dtype=float)[..., None] for a in (effect, vb, vc, session_ss, session_df))
    u = _draws()
    prior_ss = (nc - 1) * sc2 + PRIOR_DF * sb2 + s_ss
    prior_df = nc - 1 + PRIOR_DF + s_df
    known_ss = (nc - 1) * sc2
    new = np.maximum(counts - nc, 1)
    acc = np.zeros(np.broadcast_shapes(e.shape, sb2.shape, sc2.shape, counts.shape))
    with np.errstate(invalid="ignore", divide="ignore"):
        for uc, uw in u:
            true_c = prior_ss / sps.chi2.ppf(uc, prior_df)
            future_ss = np.where(counts > nc, true_c * sps.chi2.ppf(uw, new), 0.0)
            mb, mc = sb2 / nb, (known_ss + future_ss) / (counts - 1) / counts
            se = np.sqrt(mb + mc)
            df = (mb + mc) ** 2 / (mb**2 / (nb - 1) + mc**2 / (counts - 1))
            df = np.where(np.isfinite(df) & (df > 0), df, nb + counts - 2)
            sd = np.sqrt(mb + true_c / counts)
            margin = e - _t_critical(df, level) * se
            acc += np.where(sd > 0, special.ndtr(margin / np.where(sd > 0, sd, 1.0)), margin > 0)
    return acc / DRAWS


def candidate_runs(base: np.ndarray, cand: np.ndarray, effect: np.ndarray | float, power: float = POWER,
                   level: float = LEVEL, cap: int = CANDIDATE_RUNS_CAP, session_ss: np.ndarray | float = 0.0,
                   session_df: np.ndarray | int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Fewest candidate runs (at least the runs made and the protocol's 3) against the incumbent's runs
    ``base`` kept as they are whose :func:`predictive_power` to show ``|effect|`` reaches ``power``, and that
    power (the figure stated with the count); NaN beyond ``cap`` (then the power at the cap), with an effect
    of 0 or < 2 runs on a side. Runs on the last axis of ``base``/``cand`` (logs), any leading shape; the
    session's other candidate trials (``session_ss``, ``session_df``: :class:`SessionNoise`) broadcast over it."""
    nb, nc = base.shape[-1], cand.shape[-1]
    lead = np.broadcast_shapes(base.shape[:-1], cand.shape[:-1], np.shape(effect))
    effect = np.broadcast_to(np.abs(np.asarray(effect, dtype=float)), lead)
    first = max(nc, CANDIDATE_MIN_RUNS)
    if nb < 2 or nc < 2 or first > cap:
        return np.full(lead, np.nan), np.full(lead, np.nan)
    n = np.arange(first, cap + 1)
    sb2 = np.broadcast_to(base.var(axis=-1, ddof=1), lead)
    sc2 = np.broadcast_to(cand.var(axis=-1, ddof=1), lead)
    pw = predictive_power(effect, sb2, sc2, nb, nc, n, level, session_ss, session_df)  # lead..., counts
    reached = pw >= power
    index = np.argmax(reached, axis=-1)
    ok = reached.any(axis=-1) & (effect > 0)
    runs = np.where(ok, n[index], np.nan)
    return runs, np.where(ok, np.take_along_axis(pw, index[..., None], axis=-1)[..., 0], pw[..., -1])


def assumes_message(trials: int) -> dict[str, Any]:
    """What the figure assumes, as a message: how many of the session's other candidate trials it drew the
    candidate's noise toward (0: the incumbent's runs alone)."""
    return coded("executable.assumes_session", trials=trials) if trials else coded("executable.assumes")


def settle_plan(base: np.ndarray, cand: np.ndarray, effect: float, power: float = POWER, level: float = LEVEL,
                cap: int = CANDIDATE_RUNS_CAP, session: SessionNoise = NO_SESSION_NOISE) -> dict[str, Any]:
    """The executable figure of one comparison (JSON-ready): ``candidate_runs`` to reach ``power`` against
    the incumbent's runs as they are and the power they give (``power_at_runs``, the figure stated), or
    ``settle_by: "family_policy"`` when the cap falls short; ``session_noise``: the session's other candidate
    trials the candidate's variance was drawn toward (:class:`SessionNoise`)."""
    runs, reached = (float(x) for x in candidate_runs(base, cand, effect, power, level, cap, session.sum_squares, session.df))
    possible = bool(effect != 0 and base.size >= 2 and cand.size >= 2)
    by = "candidate_runs" if not np.isnan(runs) else ("family_policy" if possible else "none")
    return {
        "candidate_runs": None if np.isnan(runs) else int(runs),
        "candidate_runs_now": int(cand.size), "incumbent_runs": int(base.size), "candidate_runs_cap": cap,
        "power": power, "power_at_runs": reached if by == "candidate_runs" else None,
        "power_at_cap": None if by != "family_policy" or np.isnan(reached) else reached,
        "level_one_sided": level, "settle_by": by,
        "family_command": FAMILY_COMMAND if by == "family_policy" else None,
        "session_noise": session.to_json(),
        **rendered_fields("assumes", assumes_message(session.trials)),
    }


def settle_text(plan: dict[str, Any], effect: dict[str, Any]) -> tuple[str, str]:
    """The figure in words (en, zh) for the recorded message ``effect`` (:func:`~sk_analytics.messages.coded`):
    what sk-tune will run, or the family policy when the cap falls short."""
    nb, nc, cap, p = plan["incumbent_runs"], plan["candidate_runs_now"], plan["candidate_runs_cap"], plan["power"]
    if plan["settle_by"] == "candidate_runs":
        n = plan["candidate_runs"]
        message = coded("executable.runs", runs=n, now=nc, more=n - nc, nb=nb, stated=plan["power_at_runs"], power=p, effect=effect,
                        assumes=assumes_message(plan["session_noise"]["trials"]))
    elif plan["settle_by"] == "family_policy":
        at = plan["power_at_cap"]
        reach = {"zh": "", "en": ""} if at is None else coded("executable.reach", at=at)
        message = coded("executable.family", cap=cap, nb=nb, power=p, effect=effect, reach=reach, command=FAMILY_COMMAND)
    else:
        message = coded("executable.none")
    return render(message, "en"), render(message, "zh")
