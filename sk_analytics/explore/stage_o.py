"""Stage O questions as Polars frames: run metrics, gate checks, O0 stability, the accepted path.

Two sources, never mixed in one function:

* the session's Parquet ``timings`` (:func:`rank_means`, :func:`run_metrics`,
  :func:`slowest_ranks`): recomputed with the gate's own statistics code
  (:mod:`sk_analytics.option_trial.stats`), so a run metric here is
  bit-identical to the one the gate recorded;
* the session's evidence as the report reads it (a
  :class:`~sk_analytics.session_view.SessionView`: ledger, stability files,
  gate records): :func:`rounds`, :func:`gate_checks`, :func:`o0_runs`,
  :func:`accepted_path`. The report renders these same frames.

Presentation only: nothing here decides; numbers come from the evidence.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from sk_analytics.errors import InputError
from sk_analytics.explore.frames import round_index
from sk_analytics.explore.runsets import ALL_CLEAN, GATE, round_metrics
from sk_analytics.ingest.rank_log_defaults import DEFAULT_WARMUP
from sk_analytics.option_trial.gate import (
    ALLOW_P90_REGRESSION_PCT,
    ALLOW_STDDEV_REGRESSION_PCT,
    BASELINE_REQUIRED_RUNS,
    CANDIDATE_MIN_RUNS,
    CHECK_NAMES,
    MAX_SPREAD_PCT,
    MIN_IMPROVEMENT_PCT,
)
from sk_analytics.option_trial.stats import collect_stats, split_samples, stats_query
from sk_analytics.session_view import (
    RoundInfo,
    SessionView,
    load_view,
    trial_round,
)
from sk_analytics.stage_o.state import O0

PARTITIONS = ("round", "role", "run")
BASE_LABEL = "Sbest-BASE"


def load_session(path: str | Path) -> SessionView:
    """A session folder's evidence (ledger, matrix, gate and stability files, DCCI diff), loaded once."""
    return load_view(Path(path))


# --------------------------------------------------------------------------- ordering


def round_order() -> pl.Expr:
    """Sort key of round names: ``O0-INCUMBENT``, ``O1``, ``O2``, … ``O10`` (others last, by name)."""
    return round_index()


def run_order() -> pl.Expr:
    """Sort key of run folders: ``run-2`` before ``run-10``."""
    return pl.col("run").str.extract(r"(\d+)$", 1).cast(pl.Int64)


# --------------------------------------------------------------------------- Parquet timings


def rank_means(timings: pl.LazyFrame | pl.DataFrame, warmup: int = DEFAULT_WARMUP) -> pl.DataFrame:
    """Post-warm-up decode statistics of every (round, role, run, rank), with the slowest rank of each run marked.

    ``timings`` is the session's ``timings`` table (``ska.open_session(s)["timings"]``),
    filtered or not. Columns: round, round_index, role, run, rank (Int32, as in
    the Parquet), count, mean_ms, p50_ms,
    p90_ms, stddev_ms, is_worst. ``mean_ms`` comes from exact integer sums, as
    in the gate; ``is_worst`` marks the run's worst rank (largest mean, the
    lowest rank on a tie), whose ``mean_ms`` is the run metric.
    """
    needed = (*PARTITIONS, "rank", "phase", "sample_index", "value_ms", "value_text")
    names = timings.lazy().collect_schema().names()
    missing = [name for name in needed if name not in names]
    if missing:
        raise InputError(None, f"timings frame lacks column(s) {', '.join(missing)}",
                         expected="the session's timings table with its round/role/run partitions")
    frame = timings.lazy().select(needed)
    samples = split_samples(frame, warmup, keys=(*PARTITIONS, "rank"))
    (stats,) = collect_stats([stats_query(samples.decode, [*PARTITIONS, "rank"], samples.scale)])
    worst = (pl.col("mean_ms") == pl.col("mean_ms").max().over(PARTITIONS)) & (
        pl.col("rank") == pl.col("rank").filter(pl.col("mean_ms") == pl.col("mean_ms").max()).min().over(PARTITIONS))
    return (
        stats.with_columns(worst.alias("is_worst"))
        .sort(round_order(), "round", "role", run_order(), "run", "rank", nulls_last=True)
        .select("round", round_index(), "role", "run", pl.col("rank").cast(pl.Int32), "count", "mean_ms", "p50_ms", "p90_ms",
                "stddev_ms", "is_worst")
    )


def run_metrics(timings: pl.LazyFrame | pl.DataFrame, warmup: int = DEFAULT_WARMUP) -> pl.DataFrame:
    """The gate's run metric of every run: its worst rank and that rank's post-warm-up mean decode time.

    Columns: round, round_index, role, run, worst_rank (Int32), worst_rank_mean_ms
    (round order, then run number).
    """
    return (
        rank_means(timings, warmup)
        .filter(pl.col("is_worst"))
        .select("round", "round_index", "role", "run", pl.col("rank").alias("worst_rank"),
                pl.col("mean_ms").alias("worst_rank_mean_ms"))
    )


def slowest_ranks(metrics: pl.DataFrame) -> pl.DataFrame:
    """How often each rank was a run's slowest, per round (from :func:`run_metrics`).

    Columns: round, round_index, worst_rank, runs (runs it was slowest in), share (of the
    round's runs); most frequent first within a round.
    """
    return (
        metrics.group_by("round", "worst_rank")
        .agg(pl.len().cast(pl.Int64).alias("runs"))
        .with_columns(round_index(), pl.col("worst_rank").cast(pl.Int32))
        .with_columns((pl.col("runs") / pl.col("runs").sum().over("round")).alias("share"))
        .sort(round_order(), "round", pl.col("runs"), "worst_rank", descending=[False, False, True, False], nulls_last=True)
        .select("round", "round_index", "worst_rank", "runs", "share")
    )


# --------------------------------------------------------------------------- ledger evidence


def round_outcome(view: SessionView, info: RoundInfo) -> str:
    """What a round came to: incumbent, accepted, rejected, diagnosis, failed or pending
    (the report's run-metrics colours are keyed by it: ``figures.OUTCOME_COLOURS``)."""
    if any(tr.get("failure") for tr in info.trials) or (info.stability is not None and not info.stability.get("stable")):
        return "failed"
    if info.name == O0:
        return "incumbent"
    settled = view.state.settled.get(info.entry_id or "")
    if settled is not None and settled["status"] == "accepted" and settled.get("incumbent_round") == info.name:
        return "accepted"
    if info.gate is None or info.gate.get("accepted"):
        return "pending"
    if info.phase == "trial" and trial_round(view, info.entry_id or "", "repair") is not None:
        return "diagnosis"
    return "rejected"


def rounds(view: SessionView) -> pl.DataFrame:
    """One row per round in ledger order: what it tried and came to, and its widest set of clean runs.

    Columns: round, round_index, entry_id, phase, base_round, outcome (see
    :func:`round_outcome`), run_set (``all_clean`` when the round has a
    stability check, else ``gate``; null without a clean run), runs,
    run_metrics_ms (list), mean_ms, label (``5 after top-up``, ``3 gate runs``).
    The numbers are :func:`~sk_analytics.explore.runsets.round_metrics`' row of
    that run set; the gate's own numbers of a topped-up round are its ``gate`` row there.
    """
    widest = (round_metrics(view).with_columns(pl.col("run_set").replace_strict({GATE: 0, ALL_CLEAN: 1}).alias("_width"))
              .sort("_width").group_by("round", maintain_order=True).last().drop("_width", "round_index", "entry_id"))
    rows = [{"round": info.name, "entry_id": info.entry_id, "phase": info.phase,
             "base_round": info.trials[0].get("base_round") if info.trials else None,
             "outcome": round_outcome(view, info)} for info in view.rounds.values()]
    schema = {"round": pl.String, "entry_id": pl.String, "phase": pl.String, "base_round": pl.String, "outcome": pl.String}
    return (pl.DataFrame(rows, schema=schema).join(widest, on="round", how="left", maintain_order="left")
            .select("round", round_index(), *list(schema)[1:], "run_set",
                    pl.col("runs").fill_null(0), pl.col("run_metrics_ms").fill_null([]), "mean_ms", "label"))


# (check, the gate record's field holding its value or None for a computed one, rule, limit)
_CHECKS: dict[str, tuple[str | None, str, float]] = {
    "baseline_stable": (None, "<=", MAX_SPREAD_PCT),
    "baseline_min_runs": (None, "==", float(BASELINE_REQUIRED_RUNS)),
    "candidate_min_runs": (None, ">=", float(CANDIDATE_MIN_RUNS)),
    "mean_improvement": ("mean_improvement_pct", ">", MIN_IMPROVEMENT_PCT),
    "median_run_direction": ("median_run_improvement_pct", ">", 0.0),
    "p90_no_material_regression": ("p90_regression_pct", "<=", ALLOW_P90_REGRESSION_PCT),
    "stddev_no_material_regression": ("stddev_regression_pct", "<=", ALLOW_STDDEV_REGRESSION_PCT),
}
METRIC_CHECKS = tuple(name for name, (field, _, _) in _CHECKS.items() if field is not None)
"""The four checks on the run metrics and decode samples (the other three count runs and the baseline's spread)."""


# the key of a check's limit in the gate summary's ``option_trial_evaluation`` (it records the limits it used)
_LIMIT_KEYS = {"baseline_min_runs": "baseline_required_runs", "candidate_min_runs": "candidate_min_runs",
               "mean_improvement": "min_improvement_pct", "p90_no_material_regression": "allow_p90_regression_pct",
               "stddev_no_material_regression": "allow_stddev_regression_pct"}


def _check_limit(name: str, info: RoundInfo) -> float:
    """The limit the gate applied: as its summary recorded it, else the protocol's constant."""
    evaluation = (((info.summary or {}).get("candidates") or {}).get(info.name) or {}).get("option_trial_evaluation") or {}
    recorded = evaluation.get(_LIMIT_KEYS.get(name, ""))
    return float(recorded) if isinstance(recorded, (int, float)) and not isinstance(recorded, bool) else _CHECKS[name][2]


def _check_value(name: str, gate: Mapping[str, Any], summary: Mapping[str, Any] | None) -> float | None:
    field = _CHECKS[name][0]
    if field is not None:
        value = gate.get(field)
    elif name == "baseline_stable":
        value = ((summary or {}).get("baseline_stability") or {}).get("spread_pct")
    elif name == "baseline_min_runs":
        value = len(gate.get("baseline_run_metrics") or [])
    else:
        value = len(gate.get("candidate_run_metrics") or [])
    return None if value is None else float(value)


def _protocol_check_value(name: str, verdict: Mapping[str, Any]) -> float | None:
    """A check's figure as the protocol's verdict recorded it (on the protocol's runs)."""
    field = _CHECKS[name][0] or {"baseline_stable": "baseline_spread_pct", "baseline_min_runs": "baseline_runs",
                                 "candidate_min_runs": "candidate_runs"}[name]
    value = verdict.get(field)
    return None if value is None else float(value)


def _protocol_checks(gate: Mapping[str, Any], info: RoundInfo) -> tuple[Mapping[str, Any], Callable[[str], float | None]]:
    """The protocol's checks of a gate and how to read each one's figure: its ``protocol_verdict``'s, taken on the
    protocol's runs (a non-protocol gate may have added runs to either side); a record from before the verdict
    carried them: the gate's own."""
    verdict = gate.get("protocol_verdict") or {}
    if isinstance(verdict.get("checks"), Mapping):
        return verdict["checks"], lambda name: _protocol_check_value(name, verdict)
    return gate.get("checks") or {}, lambda name: _check_value(name, gate, info.summary)


def gate_checks(view: SessionView) -> pl.DataFrame:
    """Every gated round's seven protocol checks with their values, limits and margins, on the protocol's runs
    (the incumbent's first five, the candidate's first three, whichever gate decided).

    Columns: round, round_index, entry_id, baseline_round, check, value, rule, limit,
    margin, passed. ``limit`` is the one the gate applied (its summary's
    ``option_trial_evaluation``; the protocol's constant without a summary).
    ``value`` is a percentage for the spread and the four
    metric checks (:data:`METRIC_CHECKS`: improvements, P90 and stddev
    regressions) and a run count for the two count checks. ``margin`` is how
    far the value lies on the passing side of the limit (negative: on the
    failing side; for the strict ``>`` rules a margin of 0 fails).
    ``passed`` is the gate's recorded decision, never recomputed here; a
    recorded check this API does not know comes last, with null value, rule,
    limit and margin.
    """
    rows = []
    for info in view.rounds.values():
        gate = info.gate
        if gate is None:
            continue
        recorded, value_of = _protocol_checks(gate, info)
        known = [name for name in CHECK_NAMES if name in recorded]
        for name in known + [name for name in recorded if name not in CHECK_NAMES]:  # a check this API does not know: no value
            rows.append({"round": info.name, "entry_id": info.entry_id, "baseline_round": gate.get("baseline_round"),
                         "check": name, "value": value_of(name) if name in _CHECKS else None,
                         "rule": _CHECKS[name][1] if name in _CHECKS else None,
                         "limit": _check_limit(name, info) if name in _CHECKS else None,
                         "passed": bool(recorded[name])})
    schema = {"round": pl.String, "entry_id": pl.String, "baseline_round": pl.String, "check": pl.String,
              "value": pl.Float64, "rule": pl.String, "limit": pl.Float64, "passed": pl.Boolean}
    margin = (pl.when(pl.col("rule") == "<=").then(pl.col("limit") - pl.col("value"))
              .when(pl.col("rule") == "==").then(pl.lit(0.0) - (pl.col("value") - pl.col("limit")).abs())
              .otherwise(pl.col("value") - pl.col("limit")))
    return (pl.DataFrame(rows, schema=schema).with_columns(margin.alias("margin"))
            .select("round", round_index(), "entry_id", "baseline_round", "check", "value", "rule", "limit", "margin", "passed"))


def o0_runs(view: SessionView) -> pl.DataFrame:
    """O0-INCUMBENT's clean runs the decisions used: the five its stability check (and the protocol's verdicts)
    saw, and every further run a gate compared against it (a non-protocol gate extends the incumbent).

    Columns: run, worst_rank, worst_rank_mean_ms, deviation_pct (from the
    mean of the listed runs), protocol (the run is one of the five the protocol's
    checks read). The spread the protocol limits to 5 % is
    ``(max - min) / mean * 100`` of ``worst_rank_mean_ms`` over the protocol's runs. Empty before O0 ran.
    """
    schema = {"run": pl.String, "worst_rank": pl.Int32, "mean_ms": pl.Float64}
    o0 = view.rounds.get(O0)
    checked = ((o0.stability_file or {}).get("baseline") or {}).get("per_run_metrics") if o0 else None
    compared = [((info.summary or {}).get("baseline") or {}).get("per_run_metrics") or [] for info in view.rounds.values()
                if info.gate is not None and info.gate.get("baseline_round") == O0]
    frames = [pl.DataFrame(rows, schema=schema).with_columns(pl.lit(protocol).alias("protocol"))
              for rows, protocol in ((checked or [], True), *((rows, False) for rows in compared))]
    mean = pl.col("worst_rank_mean_ms").mean()
    return (pl.concat(frames).unique("run", keep="first", maintain_order=True)
            .sort(pl.col("run").str.extract(r"(\d+)$").cast(pl.Int64, strict=False), maintain_order=True)
            .rename({"mean_ms": "worst_rank_mean_ms"})
            .with_columns(((pl.col("worst_rank_mean_ms") - mean) / mean * 100).alias("deviation_pct"))
            .select("run", "worst_rank", "worst_rank_mean_ms", "deviation_pct", "protocol"))


def _change_text(change: Mapping[str, Any]) -> str:
    """``option=value`` of one accepted pointer change (the value as compact JSON)."""
    option = str(change.get("pointer", "")).rsplit("/", 1)[-1]
    return f"{option}={json.dumps(change.get('value'), ensure_ascii=False, separators=(',', ':'))}"


def _five_run_mean(view: SessionView, round_name: str | None) -> float | None:
    info = view.rounds.get(round_name or "")
    value = (info.stability or {}).get("mean_ms") if info else None
    return None if value is None else float(value)


def accepted_path(view: SessionView) -> pl.DataFrame:
    """The path from O0-INCUMBENT through each accepted entry to Sbest-BASE.

    One row per incumbent in the order it was accepted, then ``Sbest-BASE``
    (when frozen; the same round as the last incumbent). Columns: step,
    label (O0-INCUMBENT, the entry id, Sbest-BASE), round, round_index, changes (list of
    ``option=value``), mean_ms (the round's five-run worst-rank mean),
    step_improvement_pct (against the previous row), total_improvement_pct
    (against O0), both ``(old - new) / old * 100``, total_delta_ms (``mean_ms``
    minus O0's: negative is faster).
    """
    rows: list[dict[str, Any]] = []
    if O0 in view.rounds:
        rows.append({"label": O0, "round": O0, "changes": [], "mean_ms": _five_run_mean(view, O0)})
    for entry_id, settled in view.state.settled.items():
        if settled.get("status") == "accepted":
            rows.append({"label": entry_id, "round": settled.get("incumbent_round"),
                         "changes": [_change_text(c) for c in settled.get("accepted_changes") or []],
                         "mean_ms": _five_run_mean(view, settled.get("incumbent_round"))})
    if view.base is not None:
        rows.append({"label": BASE_LABEL, "round": view.base.get("round"),
                     "changes": [_change_text(c) for c in view.base.get("option_changes") or []],
                     "mean_ms": _five_run_mean(view, view.base.get("round"))})
    schema: dict[str, pl.DataType | type[pl.DataType]] = {"label": pl.String, "round": pl.String, "changes": pl.List(pl.String), "mean_ms": pl.Float64}
    previous, first = pl.col("mean_ms").shift(1), pl.col("mean_ms").first()
    return (pl.DataFrame(rows, schema=schema).with_row_index("step")
            .with_columns(pl.col("step").cast(pl.Int64), round_index(),
                          ((previous - pl.col("mean_ms")) / previous * 100).alias("step_improvement_pct"),
                          ((first - pl.col("mean_ms")) / first * 100).alias("total_improvement_pct"),
                          (pl.col("mean_ms") - first).alias("total_delta_ms"))
            .select("step", "label", "round", "round_index", "changes", "mean_ms", "step_improvement_pct", "total_improvement_pct",
                    "total_delta_ms"))
