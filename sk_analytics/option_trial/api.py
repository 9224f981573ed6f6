"""Python API of the option-trial decision (called by the CLI and the sweep).

``evaluate_option_trial`` returns the summary JSON of formats.md §1 (every
legacy key kept) plus, per candidate, ``statistics`` (figures beside the gate),
``stats_policy_evaluation`` (the statistics policy's answer),
``sequential_policy_evaluation`` (its sequential form's), ``advice`` (is
the protocol's answer likely noise, what would settle it) and ``gate`` (the
effective decision of the chosen gate mode).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from sk_analytics.errors import UsageError
from sk_analytics.ingest.rank_log_defaults import DEFAULT_EXPECTED_RANKS, DEFAULT_WARMUP
from sk_analytics.messages import text
from sk_analytics.option_trial.advice import advise
from sk_analytics.option_trial.executable import NO_SESSION_NOISE, SessionNoise
from sk_analytics.option_trial.family import FamilyDesign, evaluate_family
from sk_analytics.option_trial.gate import (
    INCUMBENT,
    PROTOCOL_ALLOWANCES,
    Allowances,
    evaluate_candidate,
    evaluate_stability,
    improvement_pct,
    selection,
)
from sk_analytics.option_trial.inference import trial_statistics
from sk_analytics.option_trial.modes import GATE_MODES, GateMode
from sk_analytics.option_trial.sequential import CAP as SEQUENTIAL_CAP, evaluate_sequential
from sk_analytics.option_trial.sources import check_candidate
from sk_analytics.option_trial.stats import Samples
from sk_analytics.option_trial.stats_gate import evaluate_stats
from sk_analytics.option_trial.summary import RunMetric, summarize, summarize_samples


class _GateLabels(Mapping[str, tuple[str, str]]):
    """(en, zh) name of what decides under each gate mode (``gate_label.<mode>`` of the catalogs), worded when read."""

    def __getitem__(self, mode: str) -> tuple[str, str]:
        if mode not in GATE_MODES:
            raise KeyError(mode)
        return text(f"gate_label.{mode}", "en"), text(f"gate_label.{mode}", "zh")

    def __iter__(self) -> Iterator[str]:
        return iter(GATE_MODES)

    def __len__(self) -> int:
        return len(GATE_MODES)


GATE_LABELS: Mapping[str, tuple[str, str]] = _GateLabels()
"""(en, zh) name of what decides under each gate mode; ``stats`` says it is not the protocol."""


def _per_run(metrics: list[RunMetric]) -> list[dict[str, Any]]:
    return [{"run": m.run, "worst_rank": m.worst_rank, "mean_ms": m.mean_ms, "mean_exact_ms": m.mean_exact_ms} for m in metrics]


@dataclass(frozen=True)
class SideSummary:
    """One source's summary computed ahead of the decision, so that its samples
    can be released before the next source is read (the CLI reads and
    summarises one source at a time: memory holds one side's samples, not all)."""

    label: str
    warmup: int
    summary: dict[str, Any]
    metrics: list[RunMetric]


def summarize_side(samples: Samples, *, label: str, warmup: int) -> SideSummary:
    """The summary of one source's :func:`~sk_analytics.option_trial.stats.split_samples`
    (of a validated frame), for :func:`evaluate_option_trial`."""
    summary, metrics = summarize_samples(samples, warmup=warmup, path=label)
    return SideSummary(label, warmup, summary, metrics)


def _summarize_frame(
    frame: pl.DataFrame, *, label: str, warmup: int, expected_ranks: int | None
) -> tuple[dict[str, Any], list[RunMetric]]:
    if warmup < 0:
        raise UsageError(f"warm-up {warmup} is negative (expected >= 0)")
    if expected_ranks is not None:
        check_candidate(frame, label=label, expected_ranks=expected_ranks, warmup=warmup)
    return summarize(frame, warmup=warmup, path=label)


def _summarize_checked(
    frame: pl.DataFrame | SideSummary, *, label: str, warmup: int, expected_ranks: int | None
) -> tuple[dict[str, Any], list[RunMetric]]:
    """Summary and run metrics of a frame, or of a :class:`SideSummary` made
    with the same label and warm-up (a copy: the caller adds keys to it)."""
    if not isinstance(frame, SideSummary):
        return _summarize_frame(frame, label=label, warmup=warmup, expected_ranks=expected_ranks)
    if (frame.label, frame.warmup) != (label, warmup):
        raise UsageError(f"summary of {frame.label!r} (warm-up {frame.warmup}) given for {label!r} (warm-up {warmup})")
    return dict(frame.summary), list(frame.metrics)


def stability(
    frame: pl.DataFrame,
    warmup: int = DEFAULT_WARMUP,
    *,
    path: str = "baseline",
    expected_ranks: int | None = DEFAULT_EXPECTED_RANKS,
) -> dict[str, Any]:
    """Five-run stability check of one folder: ``{baseline, baseline_stability}``
    with the same numbers as in the option-trial summary."""
    summary, metrics = _summarize_checked(frame, label=path, warmup=warmup, expected_ranks=expected_ranks)
    summary["per_run_metrics"] = _per_run(metrics)
    return {"baseline": summary, "baseline_stability": evaluate_stability(summary)}


def gate_policy(gate: str, allowances: Allowances) -> dict[str, Any]:
    """What decided: the gate mode and the allowances, and whether that is the protocol as written."""
    en, zh = GATE_LABELS[gate]
    return {
        "mode": gate, **allowances.to_json(), "protocol_allowances": allowances.is_protocol,
        "is_protocol": gate == "protocol" and allowances.is_protocol, "label": en, "label_zh": zh,
    }


def decides(gate: str, protocol_accepted: bool, ci_excludes_zero: bool, stats_accepted: bool, sequential_accepted: bool = False,
            family_accepted: bool = False) -> bool:
    """The effective decision of ``gate`` from the answers computed for every candidate."""
    return {"protocol": protocol_accepted, "strict": protocol_accepted and ci_excludes_zero, "stats": stats_accepted,
            "sequential": sequential_accepted, "family": family_accepted}[gate]


def evaluate_option_trial(
    baseline: pl.DataFrame | SideSummary,
    candidates: Mapping[str, pl.DataFrame | SideSummary],
    warmup: int = DEFAULT_WARMUP,
    gate: GateMode = "protocol",
    *,
    baseline_path: str = "baseline",
    candidate_paths: Mapping[str, str] | None = None,
    expected_ranks: int | None = DEFAULT_EXPECTED_RANKS,
    allowances: Allowances = PROTOCOL_ALLOWANCES,
    sequential_cap: int = SEQUENTIAL_CAP,
    family: FamilyDesign | None = None,
    session_noise: SessionNoise = NO_SESSION_NOISE,
) -> dict[str, Any]:
    """The option-trial summary JSON of ``candidates`` against ``baseline``.

    Frames are timings frames with a ``run`` column (``read_candidate`` or a
    Parquet selection), or their :func:`summarize_side` (made with the same
    path and warm-up). ``expected_ranks=None`` skips the rank-count check
    (frames validated by the caller). ``gate="strict"`` additionally requires
    the 95 % CI of the improvement to exclude zero; ``gate="stats"`` decides
    by the statistics policy (:mod:`~sk_analytics.option_trial.stats_gate`,
    not the protocol); ``gate="sequential"`` by its sequential form
    (:mod:`~sk_analytics.option_trial.sequential`, looks at 3 .. ``sequential_cap``
    candidate runs; undecided = not accepted yet); ``gate="family"`` by the family policy
    (:mod:`~sk_analytics.option_trial.family`; ``family`` is the sweep's design, default: one family of
    the candidates given). The protocol checks and ``option_trial_evaluation``
    are never changed by the mode. ``allowances``
    are the reference tool's P90/stddev regression allowances (default 0 %). The runs-needed figures learn the
    run-to-run noise from the other candidates given and from ``session_noise`` (the session's other candidate
    trials, :class:`~sk_analytics.option_trial.executable.SessionNoise`); decisions never read it.
    """
    if gate not in GATE_MODES:
        raise UsageError(f"unknown gate {gate!r} (expected one of {', '.join(GATE_MODES)})")
    if not candidates:
        raise UsageError("option-trial needs at least one candidate")
    if INCUMBENT in candidates:
        # selection.recommended == "baseline" means "keep the incumbent": a candidate of that name would be indistinguishable
        raise UsageError(f"a candidate may not be named {INCUMBENT!r} (it is the name of the retained incumbent)")
    paths = dict(candidate_paths or {})
    policy = gate_policy(gate, allowances)
    base_summary, base_metrics = _summarize_checked(
        baseline, label=baseline_path, warmup=warmup, expected_ranks=expected_ranks
    )
    base_summary["per_run_metrics"] = _per_run(base_metrics)
    base_stability = evaluate_stability(base_summary)
    summaries: dict[str, dict[str, Any]] = {}
    effective: dict[str, bool] = {}
    checked = {name: _summarize_checked(frame, label=paths.get(name, name), warmup=warmup, expected_ranks=expected_ranks)
               for name, frame in candidates.items()}
    for name, (summary, metrics) in checked.items():
        summary["per_run_metrics"] = _per_run(metrics)
        session = session_noise + SessionNoise.of_trials(other["run_worst_rank_means_ms"]
                                                         for other_name, (other, _) in checked.items() if other_name != name)
        summary["improvement_pct"] = improvement_pct(base_summary["worst_rank_mean_ms"], summary["worst_rank_mean_ms"])
        evaluation = evaluate_candidate(base_summary, base_stability, summary, allowances)
        summary["option_trial_evaluation"] = evaluation
        extra = trial_statistics(base_summary["run_worst_rank_means_ms"], summary["run_worst_rank_means_ms"], session)
        summary["statistics"] = extra
        stats_ev = evaluate_stats(evaluation, base_summary, summary, allowances)
        summary["stats_policy_evaluation"] = stats_ev
        seq_ev = evaluate_sequential(evaluation, base_summary, summary, allowances, sequential_cap)
        summary["sequential_policy_evaluation"] = seq_ev
        fam_ev = None
        if gate == "family":  # calibrated per design: computed only where it decides
            fam_ev = evaluate_family(base_summary, summary, family or FamilyDesign(len(candidates)), allowances)
            summary["family_policy_evaluation"] = fam_ev
        summary["advice"] = advise(base_summary, summary, session)
        strict_ok = bool(extra["ci_excludes_zero"])
        effective[name] = decides(gate, evaluation["accepted"], strict_ok, stats_ev["accepted"], seq_ev["accepted"],
                                  bool(fam_ev and fam_ev["accepted"]))
        summary["gate"] = {
            "mode": gate,
            "accepted": effective[name],
            "is_protocol": policy["is_protocol"],
            "label": policy["label"],
            "protocol_accepted": evaluation["accepted"],
            "ci_excludes_zero": strict_ok,
            "stats_accepted": stats_ev["accepted"],
            "sequential_accepted": seq_ev["accepted"],
            "sequential_state": seq_ev["state"],
            **({} if fam_ev is None else {"family_accepted": fam_ev["accepted"], "family_state": fam_ev["state"]}),
            **allowances.to_json(),
        }
        summaries[name] = summary
    return {
        "schema_version": "sk-tune-option-trial-v1",
        "warmup": warmup,
        "gate_policy": policy,
        "baseline": base_summary,
        "baseline_stability": base_stability,
        "candidates": summaries,
        "selection": selection(summaries, effective, gate),
    }
