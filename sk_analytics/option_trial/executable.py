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
* **the noise of a few runs**: planned at the observed variances (unbiased
  estimates). An upper bound (as the per-side figure uses) or the power
  averaged over the variances' uncertainty overshot the stated power by
  15-20 points when measured; the point estimates come closer but not yet
  within 5 points everywhere (docs/option-trial.md has the table);
* **the cap**: no count above :data:`CANDIDATE_RUNS_CAP` (the family policy's
  most candidate runs of one entry) is stated. When even the cap falls short,
  the incumbent's own runs are the limit and only more incumbent runs help:
  the answer points to the family policy, which extends the incumbent
  (``gate: family``; ``sk-run sweep --redecide SESSION --session NEW --gate family``).

Measured by ``benchmarks/bench_runs_executable.py`` (and, for the cell within
the bound, ``tests/test_option_trial_executable.py``): the stated count,
executed against the incumbent's runs as they are, against the stated power.
Vectorised over leading axes (trials of a Monte Carlo); pure (no I/O).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from sk_analytics.lazy_module import lazy_module
from sk_analytics.messages import coded, render
from sk_analytics.option_trial.gate import CANDIDATE_MIN_RUNS
from sk_analytics.option_trial.modes import FAMILY_CAP
from sk_analytics.option_trial.planning import CONFIDENCE, POWER

sps = lazy_module("scipy.stats")

CANDIDATE_RUNS_CAP = FAMILY_CAP
"""Most candidate runs a stated figure asks for (the family policy's per-entry cap)."""
LEVEL = (1 - CONFIDENCE) / 2
"""One-sided level: the two-sided 95 % interval above 0."""
FAMILY_COMMAND = "sk-run sweep --redecide SESSION --session NEW --gate family"
ASSUMES_MESSAGE = coded("executable.assumes")
ASSUMES, ASSUMES_ZH = render(ASSUMES_MESSAGE, "en"), render(ASSUMES_MESSAGE, "zh")


def welch_power(effect: np.ndarray, vb: np.ndarray, vc: np.ndarray, nb: int, nc: np.ndarray | int,
                level: float = LEVEL) -> np.ndarray:
    """Chance that a one-sided ``level`` Welch test of ``nb`` incumbent vs ``nc`` candidate runs shows a true
    improvement ``effect`` when the true per-run variances are ``vb`` and ``vc`` (shifted-t approximation,
    Welch-Satterthwaite degrees of freedom); broadcasts."""
    nc = np.asarray(nc, dtype=float)
    mb, mc = vb / nb, vc / nc
    se = np.sqrt(mb + mc)
    with np.errstate(invalid="ignore", divide="ignore"):
        df = (mb + mc) ** 2 / (mb**2 / (nb - 1) + mc**2 / (nc - 1))
        df = np.where(np.isfinite(df) & (df > 0), df, nb + nc - 2)
        shift = np.where(se > 0, effect / np.where(se > 0, se, 1.0), np.inf)
        return np.asarray(sps.t.sf(sps.t.ppf(1 - level, df) - shift, df))


def candidate_runs(base: np.ndarray, cand: np.ndarray, effect: np.ndarray | float, power: float = POWER,
                   level: float = LEVEL, cap: int = CANDIDATE_RUNS_CAP) -> tuple[np.ndarray, np.ndarray]:
    """Fewest candidate runs (at least the runs made and the protocol's 3) against the incumbent's runs
    ``base`` kept as they are, whose Welch power to show ``|effect|`` at the observed variances reaches ``power``, and that
    power; NaN beyond ``cap`` (then the power at the cap), with an effect of 0 or < 2 runs on a side.
    Runs on the last axis of ``base``/``cand`` (logs), any leading shape."""
    nb, nc = base.shape[-1], cand.shape[-1]
    lead = np.broadcast_shapes(base.shape[:-1], cand.shape[:-1], np.shape(effect))
    effect = np.broadcast_to(np.abs(np.asarray(effect, dtype=float)), lead)
    first = max(nc, CANDIDATE_MIN_RUNS)
    if nb < 2 or nc < 2 or first > cap:
        return np.full(lead, np.nan), np.full(lead, np.nan)
    n = np.arange(first, cap + 1)
    sb2 = np.broadcast_to(base.var(axis=-1, ddof=1), lead)
    sc2 = np.broadcast_to(cand.var(axis=-1, ddof=1), lead)
    pw = welch_power(effect[..., None], sb2[..., None], sc2[..., None], nb, n, level)  # lead..., counts
    reached = pw >= power
    index = np.argmax(reached, axis=-1)
    ok = reached.any(axis=-1) & (effect > 0)
    runs = np.where(ok, n[index], np.nan)
    return runs, np.where(ok, np.take_along_axis(pw, index[..., None], axis=-1)[..., 0], pw[..., -1])


def settle_plan(base: np.ndarray, cand: np.ndarray, effect: float, power: float = POWER, level: float = LEVEL,
                cap: int = CANDIDATE_RUNS_CAP) -> dict[str, Any]:
    """The executable figure of one comparison (JSON-ready): ``candidate_runs`` to reach ``power`` against
    the incumbent's runs as they are, or ``settle_by: "family_policy"`` when the cap falls short."""
    runs, reached = (float(x) for x in candidate_runs(base, cand, effect, power, level, cap))
    possible = bool(effect != 0 and base.size >= 2 and cand.size >= 2)
    by = "candidate_runs" if not np.isnan(runs) else ("family_policy" if possible else "none")
    return {
        "candidate_runs": None if np.isnan(runs) else int(runs),
        "candidate_runs_now": int(cand.size), "incumbent_runs": int(base.size), "candidate_runs_cap": cap,
        "power": power, "power_at_cap": None if by != "family_policy" or np.isnan(reached) else reached,
        "level_one_sided": level, "settle_by": by,
        "family_command": FAMILY_COMMAND if by == "family_policy" else None,
        "assumes": ASSUMES, "assumes_zh": ASSUMES_ZH,
    }


def settle_text(plan: dict[str, Any], effect: dict[str, Any]) -> tuple[str, str]:
    """The figure in words (en, zh) for the recorded message ``effect`` (:func:`~sk_analytics.messages.coded`):
    what sk-tune will run, or the family policy when the cap falls short."""
    nb, nc, cap, p = plan["incumbent_runs"], plan["candidate_runs_now"], plan["candidate_runs_cap"], plan["power"]
    if plan["settle_by"] == "candidate_runs":
        n = plan["candidate_runs"]
        message = coded("executable.runs", runs=n, now=nc, more=n - nc, nb=nb, power=p, effect=effect, assumes=ASSUMES_MESSAGE)
    elif plan["settle_by"] == "family_policy":
        at = plan["power_at_cap"]
        reach = {"zh": "", "en": ""} if at is None else coded("executable.reach", at=at)
        message = coded("executable.family", cap=cap, nb=nb, power=p, effect=effect, reach=reach, command=FAMILY_COMMAND)
    else:
        message = coded("executable.none")
    return render(message, "en"), render(message, "zh")
