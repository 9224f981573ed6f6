"""Advice beside every protocol decision: is the protocol's answer likely
noise, and what would settle it?

Never changes a decision. Two situations are flagged (issue 18):

* ``could_be_noise``: the protocol accepts, but the 95 % confidence interval
  of the improvement contains 0;
* ``gain_lost_to_variance_check``: the protocol rejects only by its P90 and/or
  stddev check while the interval lies above 0.

Every other decision is ``consistent`` with the statistics (``no_interval``
when no interval exists). The advice says
how many candidate runs would settle the question for the observed spread
(the baseline keeps its five runs, as the protocol asks), or that no number
of candidate runs up to :data:`MAX_CANDIDATE_RUNS` would.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from sk_analytics.option_trial.gate import CANDIDATE_MIN_RUNS
from sk_analytics.option_trial.inference import sps
from sk_analytics.option_trial.planning import CONFIDENCE, NOISE_ASSUMES, NOISE_ASSUMES_ZH, POWER, noise_upper, pooled_sd
from sk_analytics.option_trial.stats_gate import LEVEL, RunFigures

MAX_CANDIDATE_RUNS = 200
VARIANCE_CHECKS = {"p90_no_material_regression": ("p90_ms", "P90", "P90"),
                   "stddev_no_material_regression": ("stddev_ms", "stddev", "标准差")}
"""Protocol check -> (per-run figure, English name, Chinese name)."""


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


def _could_be_noise(base: RunFigures, cand: RunFigures, st: Mapping[str, Any]) -> dict[str, Any]:
    d = float(np.log(base.mean_ms).mean() - np.log(cand.mean_ms).mean())
    runs = candidate_runs_to_resolve(np.log(base.mean_ms), np.log(cand.mean_ms), d, (1 - CONFIDENCE) / 2)
    ci, imp, nc, nb = _ci_text(st["ci_pct"]), st["improvement_pct"], cand.mean_ms.size, base.mean_ms.size
    if runs is None:
        settle_en = (f"no number of candidate runs up to {MAX_CANDIDATE_RUNS} settles it against {nb} baseline runs of this spread: "
                     f"the observed {imp:+.2f}% is within the noise")
        settle_zh = f"在当前噪声下，基线{nb}次时候选运行增至{MAX_CANDIDATE_RUNS}次也无法分辨：观测到的{imp:+.2f}%在噪声之内"
    else:
        settle_en = (f"{runs} candidate runs (now {nc}; the protocol asks for at least {CANDIDATE_MIN_RUNS}) would put the interval "
                     f"above 0 with {POWER:.0%} power if the observed {imp:+.2f}% is real ({NOISE_ASSUMES})")
        settle_zh = (f"若观测到的{imp:+.2f}%为真，候选运行增至{runs}次（当前{nc}次；协议要求至少{CANDIDATE_MIN_RUNS}次）"
                     f"可有{POWER:.0%}把握使区间高于0（{NOISE_ASSUMES_ZH}）")
    return {
        "kind": "could_be_noise",
        "text": f"accepted by the protocol, but the 95% CI of the improvement {ci} contains 0: this could be noise. To settle it: {settle_en}.",
        "text_zh": f"协议接受，但提升的95%置信区间{ci}包含0：可能只是噪声。如何确认：{settle_zh}。",
        "settle": [{"for": "mean_improvement", "candidate_runs": runs}],
    }


def _variance_settle(check: str, base: RunFigures, cand: RunFigures, regression_pct: float | None) -> tuple[dict[str, Any], str, str]:
    field, en, zh = VARIANCE_CHECKS[check]
    b, c = getattr(base, field), getattr(cand, field)
    runs = candidate_runs_to_resolve(b, c, float(c.mean() - b.mean()), LEVEL)
    reg = "?" if regression_pct is None else f"{regression_pct:+.2f}%"
    if runs is None:
        return ({"for": check, "candidate_runs": None},
                f"the pooled {en} regression of {reg} is within the run-to-run spread of the per-run {en}: no number of candidate runs up to "
                f"{MAX_CANDIDATE_RUNS} would show it as real",
                f"汇总{zh}退化{reg}在各次运行{zh}的波动之内：候选运行增至{MAX_CANDIDATE_RUNS}次也无法显示其为真")
    return ({"for": check, "candidate_runs": runs},
            f"{runs} candidate runs would show whether the pooled {en} regression of {reg} is real ({POWER:.0%} power, one-sided {LEVEL:.0%}; {NOISE_ASSUMES})",
            f"候选运行增至{runs}次可判断汇总{zh}退化{reg}是否为真（{POWER:.0%}把握，单侧{LEVEL:.0%}；{NOISE_ASSUMES_ZH}）")


def _gain_lost(base: RunFigures, cand: RunFigures, ev: Mapping[str, Any], st: Mapping[str, Any], stats_accepted: bool) -> dict[str, Any]:
    settles, parts_en, parts_zh = [], [], []
    for check in ev["failed_checks"]:
        key = "p90_regression_pct" if check.startswith("p90") else "stddev_regression_pct"
        settle, en, zh = _variance_settle(check, base, cand, ev.get(key))
        settles.append(settle)
        parts_en.append(en)
        parts_zh.append(zh)
    names_en = " and ".join(VARIANCE_CHECKS[c][1] for c in ev["failed_checks"])
    names_zh = "和".join(VARIANCE_CHECKS[c][2] for c in ev["failed_checks"])
    ci = _ci_text(st["ci_pct"])
    policy_en = "would accept" if stats_accepted else "would also reject"
    policy_zh = "会接受" if stats_accepted else "同样会拒绝"
    return {
        "kind": "gain_lost_to_variance_check",
        "text": (f"rejected by the protocol only by its {names_en} check while the 95% CI of the improvement {ci} is above 0: likely a "
                 f"real gain lost to the variance check. To settle it: {'; '.join(parts_en)}. The statistics policy (not the protocol) "
                 f"{policy_en}."),
        "text_zh": (f"协议仅因{names_zh}检查拒绝，而提升的95%置信区间{ci}高于0：很可能是被方差检查否掉的真实提升。"
                    f"如何确认：{'；'.join(parts_zh)}。统计策略（非协议）{policy_zh}。"),
        "settle": settles,
    }


def advise(baseline: Mapping[str, Any], candidate: Mapping[str, Any]) -> dict[str, Any]:
    """The ``advice`` block of one candidate (needs its ``option_trial_evaluation``,
    ``statistics`` and ``stats_policy_evaluation``)."""
    ev, st = candidate["option_trial_evaluation"], candidate["statistics"]
    stats_accepted = bool(candidate["stats_policy_evaluation"]["accepted"])
    base, cand = RunFigures.of_summary(baseline), RunFigures.of_summary(candidate)
    if st["ci_pct"] is None:
        advice = {"kind": "no_interval", "text": "no confidence interval exists (fewer than two runs on a side, or a run metric <= 0).",
                  "text_zh": "无法给出置信区间（某侧少于两次运行，或运行指标 <= 0）。", "settle": []}
    elif ev["accepted"] and not st["ci_excludes_zero"]:
        advice = _could_be_noise(base, cand, st)
    elif (not ev["accepted"] and st["ci_excludes_zero"]
          and set(ev["failed_checks"]) <= set(VARIANCE_CHECKS)):
        advice = _gain_lost(base, cand, ev, st, stats_accepted)
    else:
        advice = {"kind": "consistent", "text": "the protocol's decision agrees with the confidence interval of the improvement.",
                  "text_zh": "协议结论与提升的置信区间一致。", "settle": []}
    return {"protocol_accepted": bool(ev["accepted"]), **advice}
