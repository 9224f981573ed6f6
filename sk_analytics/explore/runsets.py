"""Each round metric over a named set of runs: the one source of every figure the report, HTML and notebooks show.

A round is measured over two different sets of clean runs, and a number means
nothing without saying which:

* ``gate``: the runs the gate compared (a candidate's first three; its
  baseline's five). Every number of a gate decision is over these, except
  the protocol's view where the gate compared more (the family gate): the
  protocol's verdict and the statistics and advice beside it are over the
  protocol's runs, the first five / three (:func:`gate_decisions` counts them).
* ``all_clean``: every clean run the round has (O0's five; a candidate
  accepted and topped up to five). The stability check, the next gate's
  baseline and the run-metrics chart use these.

:func:`round_metrics` gives both sets per round; :func:`gate_sides` the two
sides of every gate with their decode statistics (as the option-trial summary
and the gate record kept them); :func:`gate_decisions` what each gate decided and its
advisory statistics; :func:`simulator_truth` the simulator's truth per gated
round. The report renders only these frames, so a notebook and the report
cannot disagree. ``label`` is the English caption of a run set (``3 gate
runs``, ``5 after top-up``, ``5 clean runs``); the report words it in its
language from ``run_set`` and ``runs``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from sk_analytics.explore.frames import round_index
from sk_analytics.session_view import RoundInfo, SessionView
from sk_analytics.stage_o.state import O0

GATE, ALL_CLEAN = "gate", "all_clean"
RUN_SETS = (GATE, ALL_CLEAN)


def run_set_label(run_set: str, runs: int, round_name: str) -> str:
    """English caption of a run set: ``3 gate runs``, ``5 after top-up``, ``5 clean runs`` (O0, never topped up)."""
    if run_set == GATE:
        return f"{runs} gate runs"
    return f"{runs} clean runs" if round_name == O0 else f"{runs} after top-up"


def _spread_pct(values: Sequence[float]) -> float | None:
    """``(max - min) / mean * 100`` (the protocol's spread); null under two runs."""
    if len(values) < 2:
        return None
    mean = sum(values) / len(values)
    return (max(values) - min(values)) / mean * 100 if mean else None


def _median(values: Sequence[float]) -> float | None:
    ordered = sorted(values)
    if not ordered:
        return None
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _sets_of(info: RoundInfo) -> list[tuple[str, list[float], float | None, float | None]]:
    """(run set, run metrics, recorded mean, recorded spread) of a round: its gate's candidate runs, then every clean run."""
    found: list[tuple[str, list[float], float | None, float | None]] = []
    if info.gate and info.gate.get("candidate_run_metrics"):
        found.append((GATE, [float(v) for v in info.gate["candidate_run_metrics"]], info.gate.get("candidate_mean_ms"), None))
    if info.stability and info.stability.get("run_metrics"):
        found.append((ALL_CLEAN, [float(v) for v in info.stability["run_metrics"]], info.stability.get("mean_ms"),
                      info.stability.get("spread_pct")))
    return found


_METRICS: dict[str, pl.DataType | type[pl.DataType]] = {"round": pl.String, "entry_id": pl.String, "run_set": pl.String, "runs": pl.Int64,
            "run_metrics_ms": pl.List(pl.Float64), "mean_ms": pl.Float64, "median_ms": pl.Float64,
            "spread_pct": pl.Float64, "label": pl.String}


def round_metrics(view: SessionView) -> pl.DataFrame:
    """Every round's run metric over each set of runs it has (ledger order, ``gate`` before ``all_clean``).

    Columns: round, round_index, entry_id, run_set (``gate``/``all_clean``),
    runs, run_metrics_ms (each run's worst-rank mean), mean_ms (as the gate
    or the stability check recorded it; the runs' mean where neither did),
    median_ms, spread_pct (the stability check's, else ``(max - min) / mean * 100``), label.
    """
    rows = [{"round": info.name, "entry_id": info.entry_id, "run_set": run_set, "runs": len(values),
             "run_metrics_ms": values, "mean_ms": sum(values) / len(values) if recorded is None else float(recorded),
             "median_ms": _median(values), "spread_pct": _spread_pct(values) if spread is None else float(spread),
             "label": run_set_label(run_set, len(values), info.name)}
            for info in view.rounds.values() for run_set, values, recorded, spread in _sets_of(info)]
    frame = pl.DataFrame(rows, schema=_METRICS)
    return frame.select("round", round_index(), *list(_METRICS)[1:])


def round_metric(view: SessionView, round_name: str, run_set: str) -> Mapping[str, Any] | None:
    """One row of :func:`round_metrics` as a dict (None when the round has no such run set)."""
    rows = round_metrics(view).filter(round=round_name, run_set=run_set).to_dicts()
    return rows[0] if rows else None


_SIDES: dict[str, pl.DataType | type[pl.DataType]] = {
    "round": pl.String, "entry_id": pl.String, "side": pl.String, "side_round": pl.String, "run_set": pl.String,
    "runs": pl.Int64, "run_metrics_ms": pl.List(pl.Float64), "worst_rank_mean_ms": pl.Float64, "median_run_ms": pl.Float64,
    "decode_p50_ms": pl.Float64, "decode_p90_ms": pl.Float64, "decode_stddev_ms": pl.Float64, "spread_pct": pl.Float64,
    "label": pl.String,
}


def _side_row(info: RoundInfo, side: str, side_round: str, record: Mapping[str, Any], run_set: str) -> dict[str, Any]:
    """One side of a gate: the gate record's run metrics and means, the summary's decode statistics (and its
    run metrics where the record lacks them)."""
    gate = info.gate or {}
    recorded = gate.get(f"{side}_run_metrics")
    values = [float(v) for v in (recorded if recorded else record.get("run_worst_rank_means_ms") or [])]
    mean = gate.get(f"{side}_mean_ms", record.get("worst_rank_mean_ms"))
    median = gate.get(f"{side}_median_run_ms", record.get("median_run_worst_rank_mean_ms"))
    decode = record.get("decode") or {}
    return {"round": info.name, "entry_id": info.entry_id, "side": side, "side_round": side_round, "run_set": run_set,
            "runs": len(values), "run_metrics_ms": values, "worst_rank_mean_ms": sum(values) / len(values) if mean is None and values else mean,
            "median_run_ms": _median(values) if median is None else median, "decode_p50_ms": decode.get("p50_ms"),
            "decode_p90_ms": decode.get("p90_ms"), "decode_stddev_ms": decode.get("stddev_ms"),
            "spread_pct": _spread_pct(values), "label": run_set_label(run_set, len(values), side_round)}


def gate_sides(view: SessionView) -> pl.DataFrame:
    """Both sides of every gate: the numbers the gate compared, over the runs it compared.

    One row per (gated round, side): round, round_index, entry_id, side
    (``baseline``/``candidate``), side_round (the round the side's runs belong
    to), run_set (the baseline's every clean run; the candidate's gate runs),
    runs, run_metrics_ms (each of those runs' worst-rank mean), worst_rank_mean_ms (the gate's ``baseline_mean_ms``/``candidate_mean_ms``),
    median_run_ms, decode_p50_ms, decode_p90_ms, decode_stddev_ms (over the
    post-warm-up decode samples of those runs, from the option-trial summary;
    null without one), spread_pct, label.
    """
    rows = []
    for info in view.rounds.values():
        if info.gate is None:
            continue
        summary = info.summary or {}
        base_round = str(info.gate.get("baseline_round"))
        rows.append(_side_row(info, "baseline", base_round, summary.get("baseline") or {}, ALL_CLEAN))
        rows.append(_side_row(info, "candidate", info.name, (summary.get("candidates") or {}).get(info.name) or {}, GATE))
    return pl.DataFrame(rows, schema=_SIDES).select("round", round_index(), *list(_SIDES)[1:])


_DECISIONS = {"round": pl.String, "entry_id": pl.String, "baseline_round": pl.String, "gate_mode": pl.String,
              "accepted": pl.Boolean, "protocol_accepted": pl.Boolean, "stats_accepted": pl.Boolean,
              "mean_improvement_pct": pl.Float64, "delta_ms": pl.Float64, "verdict": pl.String,
              "ci_low_pct": pl.Float64, "ci_high_pct": pl.Float64, "advice": pl.String,
              "protocol_baseline_runs": pl.Int64, "protocol_candidate_runs": pl.Int64}


def _protocol_statistics(gate: Mapping[str, Any]) -> Mapping[str, Any]:
    """The statistics beside the protocol's verdict of a gate record (``verdict``, ``ci_pct``), on the runs that verdict
    read: its ``protocol_verdict``'s where the record has them (under the family gate, the incumbent's first five and
    the candidate's first three runs), else the record's own (the gate's runs, which are the protocol's under it)."""
    verdict = gate.get("protocol_verdict") or {}
    return verdict if "verdict" in verdict else gate


def gate_decisions(view: SessionView) -> pl.DataFrame:
    """One row per gate: what it decided, by which policy, and its advisory statistics.

    Columns: round, round_index, entry_id, baseline_round, gate_mode,
    accepted (the decision that counted), protocol_accepted, stats_accepted
    (null without a statistics policy), mean_improvement_pct, delta_ms
    (candidate minus baseline mean; both over the gate's runs, :func:`gate_sides`), verdict, ci_low_pct/ci_high_pct (95 %
    interval of the improvement), advice (its kind), protocol_baseline_runs/protocol_candidate_runs.
    protocol_accepted, stats_accepted, verdict, the interval and the advice are the protocol's view: on the runs
    its verdict read (protocol_baseline_runs/protocol_candidate_runs: under the family gate the incumbent's first
    five and the candidate's first three, where the gate itself compared more).
    """
    rows = []
    for info in view.rounds.values():
        gate = info.gate
        if gate is None:
            continue
        base, cand = gate.get("baseline_mean_ms"), gate.get("candidate_mean_ms")
        stats, verdict = _protocol_statistics(gate), gate.get("protocol_verdict") or {}
        ci = list(stats.get("ci_pct") or [None, None])
        rows.append({"round": info.name, "entry_id": info.entry_id, "baseline_round": gate.get("baseline_round"),
                     "gate_mode": str(gate.get("gate_mode") or "protocol"), "accepted": bool(gate.get("accepted")),
                     "protocol_accepted": bool(gate.get("protocol_accepted", gate.get("accepted"))),
                     "stats_accepted": gate.get("stats_accepted"), "mean_improvement_pct": gate.get("mean_improvement_pct"),
                     "delta_ms": None if base is None or cand is None else float(cand) - float(base),
                     "verdict": stats.get("verdict"), "ci_low_pct": ci[0], "ci_high_pct": ci[-1],
                     "advice": (gate.get("advice") or {}).get("kind"),
                     "protocol_baseline_runs": verdict.get("baseline_runs", len(gate.get("baseline_run_metrics") or ()) or None),
                     "protocol_candidate_runs": verdict.get("candidate_runs", len(gate.get("candidate_run_metrics") or ()) or None)})
    return pl.DataFrame(rows, schema=_DECISIONS).select("round", round_index(), *list(_DECISIONS)[1:])


def simulator_truth(view: SessionView) -> pl.DataFrame:
    """The simulator's noise-free truth per gated round (sessions on the simulator; empty otherwise).

    Columns: round, round_index, improvement_pct, class (gain/neutral/loss),
    neutral_band_pct. Shown beside the decisions only, never used by one.
    """
    rows = [{"round": name, "improvement_pct": t.get("improvement_pct"), "class": t.get("class"),
             "neutral_band_pct": t.get("neutral_band_pct")} for name, t in (view.truth or {}).items()]
    schema = {"round": pl.String, "improvement_pct": pl.Float64, "class": pl.String, "neutral_band_pct": pl.Float64}
    return pl.DataFrame(rows, schema=schema).select("round", round_index(), *list(schema)[1:])
