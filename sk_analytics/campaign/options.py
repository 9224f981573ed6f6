"""Per option value across the sessions of a campaign: outcomes, improvements, whether it generalises.

:func:`settled_entries` reads (one row per session and matrix entry: status and
the improvement its last gate measured, within that session only);
:func:`option_summary` is a pure, vectorised fold of those rows. Improvements
are each session's own gate result against its own incumbent, measured on its
own node: the summary counts and spreads them, it never compares two
sessions' times.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sk_analytics.campaign.tables import session_folders
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.fingerprint import canonical_json
from sk_analytics.ledger.chain import read_records

STATUSES = ("accepted", "rejected", "failed", "blocked")
ENTRY_SCHEMA = {"session": pl.Utf8, "node": pl.Utf8, "entry_id": pl.Utf8, "option": pl.Utf8, "value": pl.Utf8,
                "status": pl.Utf8, "improvement_pct": pl.Float64}


def settled_entries(root: str | Path) -> pl.DataFrame:
    """Every settled matrix entry of every finished session (sessions without a settled matrix are skipped)."""
    rows: list[dict[str, object]] = []
    for name, folder in session_folders(root).items():
        settled = folder / "matrix.settled.json"
        if not settled.is_file():
            continue
        gains = {r.data.get("entry_id"): r.data.get("mean_improvement_pct") for r in read_records(folder) if r.kind == "gate_result"}
        identity = load_json_file(folder / "session.json")
        node = (identity.get("placement") or {}).get("node_name")
        for e in load_json_file(settled)["entries"]:
            rows.append({"session": name, "node": node, "entry_id": e["id"], "option": e["option"], "value": canonical_json(e["value"]),
                         "status": e["status"], "improvement_pct": gains.get(e["id"])})
    return pl.DataFrame(rows, schema=ENTRY_SCHEMA)


def option_summary(entries: pl.DataFrame) -> pl.DataFrame:
    """One row per option value: sessions, counts per status, improvement median/min/max, and a verdict.

    ``generalises``: accepted in at least two sessions and never rejected or
    failed; ``mixed``: accepted somewhere, rejected or failed elsewhere;
    ``single``: accepted in one session only; ``never``: trialled, never
    accepted; ``untested``: blocked everywhere.
    """
    counts = [(pl.col("status") == s).sum().cast(pl.Int64).alias(s) for s in STATUSES]
    gain = pl.col("improvement_pct")
    summary = entries.group_by("option", "value", "entry_id").agg(
        pl.col("session").n_unique().alias("sessions"),
        *counts,
        gain.median().alias("improvement_median_pct"),
        gain.min().alias("improvement_min_pct"),
        gain.max().alias("improvement_max_pct"),
    )
    trialled = pl.col("accepted") + pl.col("rejected") + pl.col("failed")
    verdict = (
        pl.when(trialled == 0).then(pl.lit("untested"))
        .when(pl.col("accepted") == 0).then(pl.lit("never"))
        .when((pl.col("rejected") + pl.col("failed")) > 0).then(pl.lit("mixed"))
        .when(pl.col("accepted") >= 2).then(pl.lit("generalises"))
        .otherwise(pl.lit("single"))
    )
    order = {"generalises": 0, "mixed": 1, "single": 2, "never": 3, "untested": 4}
    return (summary.with_columns(verdict.alias("verdict"))
            .with_columns(pl.col("verdict").replace_strict(order, return_dtype=pl.Int8).alias("_order"))
            .sort("_order", "option", "value").drop("_order"))
