"""``sk_prof_device_<id>.json`` of one profiled device (formats.md §3), with the fill-once per-core buffer.

One Chrome-trace complete event per participating core per launch: SK span
events ``[i/n] <skName>`` (no nodeId) and child events ``[i/n]<funcName>``
with ``args.nodeId`` = the child's index in the SK task list. Times are the
device clock, 6 decimals. Each core's buffer holds ``KB * 1024 /
BYTES_PER_EVENT`` events for the whole process; once full, later events of
that core are lost and the host logs the buffer-full line. File order is by
100 ms poll, then core, then per-core time order. Builds before 2026-05 wrote
the same events as ``sk_event_dev_device_<id>.json`` with the integer
``args.modelRI`` (the rts model id) instead of ``args.modelId``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from sk_runner.sim.model import StepModel
from sk_runner.sim.naming import GraphNames, member_cores
from sk_runner.sim.network import AIC_CORES, AIV_CORES
from sk_runner.sim.noise import NoiseParams, relative_jitter
from sk_runner.sim.timeline import Timeline

BYTES_PER_EVENT = 32
"""Device record size: start and end cycle counters (2 x 8 B) plus packed ids (16 B)."""
POLL_US = 100_000.0
CHUNK_ITERATIONS = 8
CORE_COUNT = AIC_CORES + AIV_CORES


@dataclass(frozen=True)
class SkProfTrace:
    text: str
    full_cores: list[int]
    events_written: int
    events_dropped: int


def file_name(device_id: int, *, legacy: bool = False) -> str:
    """``sk_prof_device_<id>.json``, or the legacy ``sk_event_dev_device_<id>.json``."""
    return f"{'sk_event_dev_device' if legacy else 'sk_prof_device'}_{device_id}.json"


def capacity_events(kb: int) -> int:
    return kb * 1024 // BYTES_PER_EVENT


def _span_cores(model: StepModel, mc_member: np.ndarray, mc_core: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(launch, core) of every SK span event: the union of its children's cores."""
    launch = model.graph.member_launch[mc_member]
    key = np.unique(launch * CORE_COUNT + mc_core)
    return key // CORE_COUNT, key % CORE_COUNT


def _chunk_events(model: StepModel, names: GraphNames, tl: Timeline, mc: tuple[np.ndarray, np.ndarray, np.ndarray], spans: tuple[np.ndarray, np.ndarray],
                  rng: np.random.Generator, params: NoiseParams) -> dict[str, np.ndarray]:
    """All events of the timeline's iterations (before the buffer limit), flat arrays."""
    graph = model.graph
    mc_member, mc_core, mc_block = mc
    sp_launch, sp_core = spans
    n_it = tl.iterations
    launch_end = tl.launch_start + tl.launch_dur
    # child events
    c_launch = graph.member_launch[mc_member]
    c_ts = tl.child_start[:, mc_member] + rng.uniform(0.0, 0.15, size=(n_it, mc_member.size)) * min(params.factor, 1.0)
    c_dur = tl.child_dur[:, mc_member] * relative_jitter(rng, (n_it, mc_member.size), params.core_sigma, params.factor)
    c_dur = np.minimum(c_dur, launch_end[:, c_launch] - c_ts)
    # span events
    s_skew = rng.uniform(0.0, 0.1, size=(2, n_it, sp_launch.size)) * min(params.factor, 1.0)
    s_ts = tl.launch_start[:, sp_launch] + s_skew[0]
    s_dur = tl.launch_dur[:, sp_launch] - s_skew[0] - s_skew[1]
    block_num = names.sk_block_num[sp_launch]
    s_block = np.where(sp_core < AIC_CORES, sp_core, sp_core - AIC_CORES) % np.maximum(block_num, 1)

    def tile(values: np.ndarray) -> np.ndarray:
        return np.tile(values, n_it)

    return {
        "core": np.concatenate([tile(mc_core), tile(sp_core)]),
        "ts": np.concatenate([c_ts.ravel(), s_ts.ravel()]),
        "dur": np.concatenate([c_dur.ravel(), s_dur.ravel()]),
        "block": np.concatenate([tile(mc_block), tile(s_block)]),
        "block_num": np.concatenate([tile(graph.member_blocks[mc_member]), tile(block_num)]),
        "sk_id": np.concatenate([tile(names.scope_id[c_launch]), tile(names.scope_id[sp_launch])]),
        "node_id": np.concatenate([tile(graph.member_child[mc_member]), np.full(n_it * sp_launch.size, -1)]),
        "name_idx": np.concatenate([tile(mc_member), tile(graph.n_members + sp_launch)]),
    }


def _keep_within_buffer(ev: dict[str, np.ndarray], used: np.ndarray, capacity: int) -> np.ndarray:
    """Mask of the events that still fit their core's buffer; updates ``used`` (per-core counts)."""
    order = np.lexsort((ev["ts"], ev["core"]))
    core_sorted = ev["core"][order]
    starts = np.searchsorted(core_sorted, core_sorted, side="left")
    rank = np.arange(order.size) - starts + used[core_sorted]
    keep = np.zeros(order.size, dtype=bool)
    keep[order] = rank < capacity
    np.add.at(used, ev["core"], 1)
    return keep


def sk_prof_trace(model: StepModel, names: GraphNames, timeline: Timeline, *, kb: int, model_id: str,
                  device_base_ps: int, rng: np.random.Generator, params: NoiseParams, legacy: bool = False) -> SkProfTrace:
    """The trace text of the timeline's decode steps (stops generating once every core is full);
    ``legacy``: ``args.modelRI`` (the rts model id of ``model_id``) instead of ``args.modelId``."""
    graph = model.graph
    in_sk = graph.launch_is_sk[graph.member_launch]
    mc_member, mc_core, mc_block = member_cores(graph)
    sel = in_sk[mc_member]
    mc = (mc_member[sel], mc_core[sel], mc_block[sel])
    spans = _span_cores(model, mc[0], mc[1])
    participating = np.unique(mc[1])
    capacity = capacity_events(kb)
    used = np.zeros(CORE_COUNT, dtype=np.int64)
    kept: list[pl.DataFrame] = []
    dropped = 0
    for first in range(0, timeline.iterations, CHUNK_ITERATIONS):
        if (used[participating] >= capacity).all():
            break
        tl = timeline.slice(first, first + CHUNK_ITERATIONS)
        ev = _chunk_events(model, names, tl, mc, spans, rng, params)
        keep = _keep_within_buffer(ev, used, capacity)
        dropped += int((~keep).sum())
        kept.append(pl.DataFrame({k: v[keep] for k, v in ev.items()}))
    full = [int(c) for c in np.flatnonzero(used >= capacity)]
    frame = pl.concat(kept) if kept else pl.DataFrame({k: [] for k in ("core", "ts", "dur", "block", "block_num", "sk_id", "node_id", "name_idx")})
    model_arg = f'"modelRI":{model_id.split("_")[0]}' if legacy else f'"modelId":"{model_id}"'
    return SkProfTrace(_format(frame, graph.member_symbol + names.sk_name, model_arg, device_base_ps), full, frame.height, dropped)


def _us6(ps: pl.Expr) -> pl.Expr:
    """Integer picoseconds -> µs text with exactly 6 decimals."""
    return pl.concat_str([(ps // 1_000_000).cast(pl.Utf8), pl.lit("."), (ps % 1_000_000).cast(pl.Utf8).str.zfill(6)])


def _format(frame: pl.DataFrame, texts: list[str], model_arg: str, device_base_ps: int) -> str:
    """Sort by (100 ms poll, core, time) and render one event per line; the array ends with ``{}``."""
    if frame.height == 0:
        return "[{}]\n"
    table = pl.DataFrame({"name_idx": np.arange(len(texts)), "text": texts})
    lines = (
        frame.lazy()
        .with_columns(
            ((pl.col("ts") + pl.col("dur")) // POLL_US).cast(pl.Int64).alias("poll"),
            (pl.col("ts") * 1e6).round().cast(pl.Int64).alias("ts_ps"),
            (pl.col("dur").clip(lower_bound=0.0) * 1e6).round().cast(pl.Int64).alias("dur_ps"),
        )
        .sort(["poll", "core", "ts_ps"])
        .join(table.lazy(), on="name_idx", how="left", maintain_order="left")
        .select(
            pl.concat_str(
                [
                    pl.lit('{"ph":"X","name":"['),
                    pl.col("block").cast(pl.Utf8),
                    pl.lit("/"),
                    pl.col("block_num").cast(pl.Utf8),
                    pl.when(pl.col("node_id") < 0).then(pl.lit("] ")).otherwise(pl.lit("]")),
                    pl.col("text"),
                    pl.lit('","pid":"'),
                    pl.when(pl.col("core") < AIC_CORES).then(pl.lit("AIC")).otherwise(pl.lit("AIV")),
                    pl.lit('","tid":'),
                    pl.col("core").cast(pl.Utf8),
                    pl.lit(',"ts":'),
                    _us6(pl.col("ts_ps") + device_base_ps),
                    pl.lit(',"dur":'),
                    _us6(pl.col("dur_ps")),
                    pl.lit(f',"args":{{{model_arg},"skId":'),
                    pl.col("sk_id").cast(pl.Utf8),
                    pl.when(pl.col("node_id") < 0).then(pl.lit("}},"))
                    .otherwise(pl.concat_str([pl.lit(',"nodeId":'), pl.col("node_id").cast(pl.Utf8), pl.lit("}},")])),
                ]
            ).alias("line")
        )
        .collect()
    )
    return "[\n" + "\n".join(lines.get_column("line").to_list()) + "\n{}\n]\n"
