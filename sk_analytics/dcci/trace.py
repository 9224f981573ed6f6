"""``dcci-diff --trace-out``: the pair's SK timelines as one Chrome trace (trace event format).

It is in the trace event format that MindStudio Insight, Perfetto and
chrome://tracing open. One process per rank and side (``rank <r> baseline``
above ``rank <r> candidate``), each with a thread of SK launches and a thread
of the children of the SKs that dcci-diff decomposed. Every side's track
starts at 0 µs (its first analysed launch), so the two sides of a rank line
up launch for launch and the candidate's slower SKs push its track to the
right. An SK launch is a
complete event (``ph: X``, ``ts``/``dur`` in µs) named by its structure;
``args`` carry its dcci-diff ``uid``, class and median delta. The SKs
dcci-diff classed ``significantly_slower`` (on that rank) are flagged on both
sides: ``cat`` ``sk,slower``, ``cname`` ``terrible`` and ``args.flag``
``slower``; a significant slower child likewise (``child,slower``, ``bad``).

The result names an SK slot by its metadata folder (``model_dir``,
``model_<rtsModelId>_<callCount>``), a launch by the trace's ``model_id``:
``<rtsModelId>_<callCount>``, or only ``<rtsModelId>`` in a legacy
``sk_event_dev_device`` trace (``args.modelRI``). Launches are matched to slots
through the folder, resolved as the diff resolved it
(:func:`~sk_analytics.dcci.align.model_dirs`), so every analysed launch of both
layouts is on the timeline.

:func:`trace_document` is pure (the result JSON and each side's
``sk_occurrences``/``sk_children`` frames, with their ``model_dir``, in; the
trace text out); :func:`side_timings` derives the frames from a loaded side,
one process (rank) at a time as the diff reads it
(:mod:`sk_analytics.dcci.rank_events`: the same rows, a peak that follows the
largest rank), and :func:`write_trace` writes atomically.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from sk_analytics.dcci.align import model_dirs
from sk_analytics.dcci.rank_events import ProcessEvents, child_timings_by_process, occurrences_by_process

SIDES = ("baseline", "candidate")
SLOWER = "significantly_slower"
SK_THREAD, CHILD_THREAD = 1, 2
SLOT_KEYS = ["process", "model_dir", "sk_id"]
"""What names one SK slot of a side: its process, metadata folder and SK id."""
SK_COLOR, CHILD_COLOR = "terrible", "bad"
"""Reserved color names of the trace viewers for flagged slices."""


def slot_map(result: Mapping[str, Any]) -> pl.DataFrame:
    """One row per (SK slot, side) of the result: which side's ``(process, model_dir, sk_id)`` the slot's
    ``uid`` is on, its rank, label, class and median delta; ``slower`` = classed slower on its rank."""
    rows = []
    for sk in result["sks"]:
        for side in SIDES:
            where = (sk.get("alignment") or {}).get(side)
            if not where or where.get("sk_id") is None:
                continue
            rows.append({
                "side": side, "process": str(where["process"]), "model_dir": str(where["model_dir"]),
                "sk_id": int(where["sk_id"]), "uid": int(sk["uid"]), "rank": int(sk["rank"]), "class": str(sk["class"]),
                "label": f"{sk['scope_name']}: {sk['boundary_first']}..{sk['boundary_last']}",
                "delta_p50_us": sk.get("delta_p50_us"), "slower": sk["class"] == SLOWER,
            })  # fmt: skip
    schema = {"side": pl.Utf8, "process": pl.Utf8, "model_dir": pl.Utf8, "sk_id": pl.Int64, "uid": pl.Int64, "rank": pl.Int64,
              "class": pl.Utf8, "label": pl.Utf8, "delta_p50_us": pl.Float64, "slower": pl.Boolean}  # fmt: skip
    return pl.DataFrame(rows, schema=schema)


def child_flags(result: Mapping[str, Any]) -> pl.DataFrame:
    """One row per decomposed child: ``uid``, ``child_index`` (the sk_prof nodeId), op, and whether it is a
    significant slower child (wall time)."""
    rows = [
        {"uid": int(entry["uid"]), "child_index": int(row["child_index"]), "op": str(row["canonical_op"]),
         "slower": bool(row.get("significant")) and (row.get("wall") or {}).get("class") == SLOWER}
        for entry in result.get("children", []) for row in entry.get("rows", [])
    ]  # fmt: skip
    return pl.DataFrame(rows, schema={"uid": pl.Int64, "child_index": pl.Int64, "op": pl.Utf8, "slower": pl.Boolean})


def side_timings(parts: ProcessEvents, uids_with_children: pl.DataFrame, slots: pl.DataFrame,
                 structure: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(``sk_occurrences``, ``sk_children`` of the decomposed SKs only) of one side's sk_events, given as
    each process's events (:func:`~sk_analytics.dcci.rank_events.process_events`) and read a process at a time,
    each row with the ``model_dir`` its ``(process, model_id)`` launches from (``structure``: the side's
    sk_structure, ``process`` and ``model_dir`` read; null where the diff left it unmapped)."""
    occurrences = occurrences_by_process(parts)
    folders = model_dirs(occurrences, structure)
    occurrences = occurrences.join(folders, on=["process", "model_id"], how="left", maintain_order="left")
    wanted = slots.join(uids_with_children.select("uid").unique(), on="uid").select(*SLOT_KEYS)
    decomposed = occurrences.join(wanted, on=SLOT_KEYS, how="semi", maintain_order="left").drop("model_dir")
    children = child_timings_by_process(parts, decomposed).join(folders, on=["process", "model_id"], how="left", maintain_order="left")
    return occurrences, children


def _meta(pid: int, name: str, sort: int) -> list[dict[str, Any]]:
    return [
        {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": name}},
        {"ph": "M", "name": "process_sort_index", "pid": pid, "tid": 0, "args": {"sort_index": sort}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": SK_THREAD, "args": {"name": "SuperKernels"}},
        {"ph": "M", "name": "thread_name", "pid": pid, "tid": CHILD_THREAD, "args": {"name": "children of decomposed SKs"}},
    ]


def _encode(frame: pl.DataFrame) -> list[str]:
    return frame.select(pl.struct(frame.columns).struct.json_encode()).to_series().to_list() if frame.height else []


def trace_document(result: Mapping[str, Any], occurrences: Mapping[str, pl.DataFrame], children: Mapping[str, pl.DataFrame]) -> str:
    """The Chrome-trace JSON text: ``{"traceEvents": [...], "displayTimeUnit": "ms", "otherData": {...}}``.

    ``occurrences[side]`` / ``children[side]``: that side's ``sk_occurrences`` and ``sk_children``
    frames, each row with its ``model_dir`` (:func:`side_timings`); occurrences before the result's warm-up are
    left out, as the diff left them out."""
    slots = slot_map(result)
    flags = child_flags(result)
    warmup = int(result.get("warmup", 0))
    events: list[str] = []
    meta: list[dict[str, Any]] = []
    keys = SLOT_KEYS
    for side_index, side in enumerate(SIDES):
        occ = (
            occurrences[side].filter(pl.col("occurrence") >= warmup)
            .join(slots.filter(pl.col("side") == side), on=keys)
            .with_columns((pl.col("rank") * 2 + side_index + 1).alias("pid"))
        )  # fmt: skip
        if occ.height == 0:
            continue
        zero = occ.group_by("pid").agg(pl.col("start_ns").min().alias("zero_ns"))
        occ = occ.join(zero, on="pid")
        for pid, rank in occ.select("pid", "rank").unique().sort("pid").iter_rows():
            meta += _meta(pid, f"rank {rank} {side}", pid)
        sk_events = occ.select(
            pl.lit("X").alias("ph"), pl.col("label").alias("name"),
            pl.when(pl.col("slower")).then(pl.lit("sk,slower")).otherwise(pl.lit("sk")).alias("cat"),
            "pid", pl.lit(SK_THREAD).alias("tid"),
            ((pl.col("start_ns") - pl.col("zero_ns")) / 1000.0).alias("ts"), ((pl.col("end_ns") - pl.col("start_ns")) / 1000.0).alias("dur"),
            pl.struct(pl.col("uid"), pl.col("rank"), pl.lit(side).alias("side"), pl.col("class"), pl.col("occurrence"), pl.col("sk_id"),
                      pl.col("delta_p50_us"), pl.when(pl.col("slower")).then(pl.lit("slower")).otherwise(pl.lit("")).alias("flag")).alias("args"),
        )  # fmt: skip
        flagged = sk_events.filter(pl.col("cat") == "sk,slower").with_columns(pl.lit(SK_COLOR).alias("cname"))
        events += _encode(sk_events.filter(pl.col("cat") == "sk")) + _encode(flagged)
        kids = children[side].filter(pl.col("occurrence") >= warmup)
        if kids.height:
            kids = (
                kids.join(occ.select(*keys, "occurrence", "uid", "rank", "pid", "zero_ns"), on=[*keys, "occurrence"])
                .join(flags, left_on=["uid", "node_id"], right_on=["uid", "child_index"])
            )  # fmt: skip
            child_events = kids.select(
                pl.lit("X").alias("ph"), pl.col("op").alias("name"),
                pl.when(pl.col("slower")).then(pl.lit("child,slower")).otherwise(pl.lit("child")).alias("cat"),
                "pid", pl.lit(CHILD_THREAD).alias("tid"),
                ((pl.col("start_ns") - pl.col("zero_ns")) / 1000.0).alias("ts"), ((pl.col("end_ns") - pl.col("start_ns")) / 1000.0).alias("dur"),
                pl.struct(pl.col("uid"), pl.col("rank"), pl.lit(side).alias("side"), pl.col("node_id").alias("child_index"), pl.col("occurrence"),
                          pl.when(pl.col("slower")).then(pl.lit("slower")).otherwise(pl.lit("")).alias("flag")).alias("args"),
            )  # fmt: skip
            slow_kids = child_events.filter(pl.col("cat") == "child,slower").with_columns(pl.lit(CHILD_COLOR).alias("cname"))
            events += _encode(child_events.filter(pl.col("cat") == "child")) + _encode(slow_kids)
    other = {"source": "sk-analyze dcci-diff --trace-out", "warmup": warmup, "time_origin": "each process: its first analysed SK launch",
             "flag": f"cat sk,slower / child,slower, cname {SK_COLOR} / {CHILD_COLOR}: classed {SLOWER} by dcci-diff"}  # fmt: skip
    head = ",\n".join([json.dumps(m, separators=(",", ":")) for m in meta] + events)
    return '{"traceEvents": [\n' + head + '\n], "displayTimeUnit": "ms", "otherData": ' + json.dumps(other) + "}\n"


def write_trace(path: Path, result: Mapping[str, Any], sides: Mapping[str, ProcessEvents],
                structures: Mapping[str, pl.DataFrame]) -> Path:
    """Derive both sides' timings from their sk_events (``sides[side]``: each process's events; ``structures[side]``:
    its sk_structure) and write the trace atomically."""
    from sk_analytics.files.atomic import write_text

    slots = slot_map(result)
    decomposed = child_flags(result)
    timings = {side: side_timings(sides[side], decomposed, slots.filter(pl.col("side") == side), structures[side]) for side in SIDES}
    text = trace_document(result, {s: t[0] for s, t in timings.items()}, {s: t[1] for s, t in timings.items()})
    return write_text(path, text)
