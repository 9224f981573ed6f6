"""Advice beside every protocol decision: is the protocol's answer likely
noise, and what would settle it?

Never changes a decision. Two situations are flagged (issue 18):

* ``could_be_noise``: the protocol accepts, but the 95 % confidence interval
  of the improvement contains 0;
* ``gain_lost_to_variance_check``: the protocol rejects only by its P90 and/or
  stddev check while the interval lies above 0.

Every other decision is ``consistent`` with the statistics (``no_interval``
when no interval exists). The advice says how many candidate runs would
settle the question, as sk-tune runs them: added against the incumbent's runs
as they are (:mod:`~sk_analytics.option_trial.executable`, Welch, each side's
own variance); when even the family policy's cap of candidate runs falls short
it says so and points to the family policy, which extends the incumbent. The
P90/stddev figures count candidate runs up to :data:`MAX_CANDIDATE_RUNS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from sk_analytics.messages import LANGS, coded, render, text
from sk_analytics.option_trial.executable import NO_SESSION_NOISE, SessionNoise, settle_plan, settle_text
from sk_analytics.option_trial.gate import CANDIDATE_MIN_RUNS
from sk_analytics.option_trial.inference import sps
from sk_analytics.option_trial.planning import NOISE_ASSUMES_MESSAGE, POWER, noise_upper, pooled_sd
from sk_analytics.option_trial.stats_gate import LEVEL, RunFigures

MAX_CANDIDATE_RUNS = 200
VARIANCE_CHECKS = {"p90_no_material_regression": "p90_ms", "stddev_no_material_regression": "stddev_ms"}
"""Protocol check -> its per-run figure (its name in each language: ``advice.check.<check>`` of the catalogs)."""


def candidate_runs_to_resolve(base: np.ndarray, cand: np.ndarray, effect: float, level: float, power: float = POWER) -> int | None:
    """Fewest candidate runs for which a one-sided Welch test at ``level`` shows
    a true difference ``effect`` (units of ``base``/``cand``) with ``power``,
    the baseline keeping its runs. Each side's observed per-run variance is
    scaled up by the factor that takes their pooled sd to its upper confidence
    bound (:func:`~sk_analytics.option_trial.planning.noise_upper`): a spread
    seen in a few runs is too small about half of the time. None when ``effect`` is 0 or no count up to :data:`MAX_CANDIDATE_RUNS`
    suffices (the baseline's own noise is then too large).
    """
    nb, nc = base.size, cand.size
    if effect == 0 or nb < 2 or nc < 2:
        return None
    sd, dof = pooled_sd(base, cand)
    inflate = float(noise_upper(sd, dof) / sd) ** 2 if float(sd) > 0 else 1.0
    vb = inflate * float(base.var(ddof=1)) / nb
    sc2 = inflate * float(cand.var(ddof=1))
    n = np.arange(max(nc, CANDIDATE_MIN_RUNS), MAX_CANDIDATE_RUNS + 1)
    vc = sc2 / n
    se = np.sqrt(vb + vc)
    if not np.any(se > 0):
        return int(n[0])
    with np.errstate(invalid="ignore", divide="ignore"):
        df = np.where(se > 0, (vb + vc) ** 2 / (vb**2 / (nb - 1) + vc**2 / (n - 1)), np.inf)
    detectable = (sps.t.ppf(1 - level, df) + sps.t.ppf(power, df)) * se
    ok = np.nonzero(detectable <= abs(effect))[0]
    return int(n[ok[0]]) if ok.size else None


def _ci_text(ci: list[float] | None) -> str:
    return "-" if ci is None else f"[{ci[0]:+.2f}%, {ci[1]:+.2f}%]"


def _could_be_noise(base: RunFigures, cand: RunFigures, st: Mapping[str, Any], session: SessionNoise) -> dict[str, Any]:
    """Accepted inside the noise: the candidate runs that settle it against the incumbent's runs as they
    are (:mod:`~sk_analytics.option_trial.executable`), or the family policy when its cap falls short."""
    base_logs, cand_logs = np.log(base.mean_ms), np.log(cand.mean_ms)
    plan = settle_plan(base_logs, cand_logs, float(base_logs.mean() - cand_logs.mean()), session=session)
    ci = _ci_text(st["ci_pct"])
    en, zh = settle_text(plan, coded("executable.effect_observed", imp=st["improvement_pct"]))
    settle = {"en": en, "zh": zh}
    return {
        "kind": "could_be_noise",
        "text": text("advice.could_be_noise", "en", ci=ci, settle=settle),
        "text_zh": text("advice.could_be_noise", "zh", ci=ci, settle=settle),
        "settle": [{"for": "mean_improvement", "candidate_runs": plan["candidate_runs"], "incumbent_runs": plan["incumbent_runs"],
                    "settle_by": plan["settle_by"], "family_command": plan["family_command"]}],
    }


def _variance_settle(check: str, base: RunFigures, cand: RunFigures, regression_pct: float | None) -> tuple[dict[str, Any], dict[str, Any]]:
    """What settles one failed variance check: the record, and the sentence as a message."""
    field = VARIANCE_CHECKS[check]
    name = coded(f"advice.check.{check}")
    if regression_pct is None:  # a baseline value of 0: no relative change, the check fails closed whatever the runs
        return {"for": check, "candidate_runs": None}, coded("advice.variance_undefined", name=name)
    b, c = getattr(base, field), getattr(cand, field)
    runs = candidate_runs_to_resolve(b, c, float(c.mean() - b.mean()), LEVEL)
    reg = f"{regression_pct:+.2f}%"
    if runs is None:
        return {"for": check, "candidate_runs": None}, coded("advice.variance_unresolvable", name=name, reg=reg, max_runs=MAX_CANDIDATE_RUNS)
    return ({"for": check, "candidate_runs": runs},
            coded("advice.variance_runs", runs=runs, name=name, reg=reg, power=POWER, level=LEVEL, assumes=NOISE_ASSUMES_MESSAGE))


def _listed(names: list[str], lang: str) -> str:
    """``names`` as a list in words: "a, b and c" ("a、b和c")."""
    return text("advice.and", lang).join(filter(None, [text("advice.list_sep", lang).join(names[:-1]), *names[-1:]]))


def _gain_lost(base: RunFigures, cand: RunFigures, ev: Mapping[str, Any], st: Mapping[str, Any], stats_accepted: bool) -> dict[str, Any]:
    settles, parts = [], []
    for check in ev["failed_checks"]:
        key = "p90_regression_pct" if check.startswith("p90") else "stddev_regression_pct"
        settle, part = _variance_settle(check, base, cand, ev.get(key))
        settles.append(settle)
        parts.append(part)
    ci = _ci_text(st["ci_pct"])
    policy = coded("advice.would_accept" if stats_accepted else "advice.would_reject")

    def sentence(lang: str) -> str:
        names = _listed([text(f"advice.check.{c}", lang) for c in ev["failed_checks"]], lang)
        joined = text("advice.parts_sep", lang).join(render(part, lang) for part in parts)
        return text("advice.gain_lost", lang, names=names, ci=ci, parts=joined, policy=policy)

    words = {lang: sentence(lang) for lang in LANGS}
    return {"kind": "gain_lost_to_variance_check", "text": words["en"], "text_zh": words["zh"], "settle": settles}


def advise(baseline: Mapping[str, Any], candidate: Mapping[str, Any], session: SessionNoise = NO_SESSION_NOISE) -> dict[str, Any]:
    """The ``advice`` block of one candidate (needs its ``option_trial_evaluation``,
    ``statistics`` and ``stats_policy_evaluation``); ``session``: the session's other candidate trials, which
    the runs a figure asks for learn the run-to-run noise from."""
    ev, st = candidate["option_trial_evaluation"], candidate["statistics"]
    stats_accepted = bool(candidate["stats_policy_evaluation"]["accepted"])
    base, cand = RunFigures.of_summary(baseline), RunFigures.of_summary(candidate)
    if st["ci_pct"] is None:
        advice = {"kind": "no_interval", "text": text("advice.no_interval", "en"), "text_zh": text("advice.no_interval", "zh"), "settle": []}
    elif ev["accepted"] and not st["ci_excludes_zero"]:
        advice = _could_be_noise(base, cand, st, session)
    elif (not ev["accepted"] and st["ci_excludes_zero"]
          and set(ev["failed_checks"]) <= set(VARIANCE_CHECKS)):
        advice = _gain_lost(base, cand, ev, st, stats_accepted)
    elif not ev["accepted"] and st["ci_excludes_zero"] and st["ci_pct"][0] > 0:
        advice = _gain_rejected(ev, st)
    else:
        advice = {"kind": "consistent", "text": text("advice.consistent", "en"), "text_zh": text("advice.consistent", "zh"), "settle": []}
    return {"protocol_accepted": bool(ev["accepted"]), **advice}


def _gain_rejected(ev: Mapping[str, Any], st: Mapping[str, Any]) -> dict[str, Any]:
    """A rejection by a check other than P90/stddev alone (the baseline's, the runs', the median run) while the CI lies
    above 0: the decision and the interval disagree, and the protocol's checks decide (never called consistent)."""
    ci = _ci_text(st["ci_pct"])
    words = {lang: text("advice.gain_rejected", lang, ci=ci,
                        names=_listed([text(f"check.{c}", lang) for c in ev["failed_checks"]], lang))
             for lang in LANGS}
    return {"kind": "gain_rejected_by_other_checks", "text": words["en"], "text_zh": words["zh"], "settle": []}
