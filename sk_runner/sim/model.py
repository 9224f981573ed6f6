"""The noise-free cost model of one decode step under a set of SK options.

Everything here is a pure, vectorized function of a :class:`~sk_runner.sim.network.Graph`
and the :class:`~sk_runner.sim.options.EffectiveOptions`; ``docs/simulator.md``
documents every effect. Noise is added later (:mod:`sk_runner.sim.noise`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from sk_runner.sim.network import Graph, Network, expand
from sk_runner.sim.options import DCCI_AFTER_FUNC, DCCI_BEFORE, EffectiveOptions, dcci_bits, match_any

OutcomeKind = Literal["ok", "wrong_output", "crash", "device_fault", "hang"]

# Option effects (documented in docs/simulator.md; keep the two in sync).
SPLIT_MODE_MIX_FACTOR = {1: 1.12, 2: 1.05, 3: 1.006, 4: 1.0}
PRELOAD_DELTA_US = {0: 0.8, 1: 0.0, 2: -0.1}
CONSTANT_CODEGEN_DELTA_US = -0.04
KERNEL_DELTA_US: dict[str, dict[int, float]] = {
    "preload_code": PRELOAD_DELTA_US,
    "constant_codegen": {0: 0.0, 1: CONSTANT_CODEGEN_DELTA_US},
}
"""Integer options that shift every kernel's time by a fixed amount per value (microseconds; a value not
listed: no shift). A new integer option whose effect is of this kind is one row here."""
UBUF_LOCK_IGNORE_FACTOR = 0.995
AUTO_OP_PARALLEL_OVERLAP = 0.4
EARLY_START_OVERHEAD_FACTOR = 0.5
DEBUG_FACTORS = {
    "debug_sync_all": 1.5,
    "debug_op_exec_trace": 1.6,
    "debug_cross_core_sync_check": 1.35,
    "debug_per_op_max_core_num": 2.2,
}
DEBUG_SYNC_ALL_US = 3.0
DEBUG_EXTEND_FACTOR = 1.1
AIC_LANE_TYPES = ("AIC_ONLY", "MIX_AIC_1_0")
AIV_LANE_TYPES = ("AIV_ONLY", "MIX_AIV_1_0")


@dataclass(frozen=True)
class Outcome:
    """How the process ends; ``detail`` is the device message for failures."""

    kind: OutcomeKind
    detail: str = ""


@dataclass(frozen=True)
class StepModel:
    """Noise-free timing of one decode step (microseconds).

    Member arrays: ``dcci`` task bits, ``child_us`` duration and
    ``child_start_us`` start offset inside its launch (0 for events and
    unfused ops). Launch arrays: ``launch_us`` duration, ``launch_offset_us``
    start inside the step.
    """

    graph: Graph
    options: EffectiveOptions
    dcci: np.ndarray
    child_us: np.ndarray
    child_start_us: np.ndarray
    launch_us: np.ndarray
    launch_offset_us: np.ndarray
    step_us: float
    outcome: Outcome


def outcome_of(options: EffectiveOptions, network: Network) -> Outcome:
    """Failure modes: task breaker crashes, event breaker faults, both value breakers hang, early start corrupts."""
    aggressive = options.aggressive
    if aggressive["task_breaker_bypass"] == 1:
        return Outcome("crash", "EZ9999: Inner Error! aicore exception: task_breaker_bypass fused a task across a breaker, "
                       "rtStreamSynchronize execute failed, reason=[aicore exception], error code 507015")
    if aggressive["event_breaker_bypass"] == 1:
        return Outcome("device_fault", "EE1001: device fault on device 0: event record/wait pair lost after event_breaker_bypass, "
                       "hardware error 0x3 (AICORE_TRAP), the device needs recovery, error code 507033")
    if aggressive["value_breaker_bypass"] == 3:
        return Outcome("hang", "paired and unpaired waits fused into one SK: cross-core event never arrives")
    if options.get("early_start") == 1 and not network.early_start_adapted:
        return Outcome("wrong_output", "early_start=1 without operator-side adaptation: next SK read unfinished outputs")
    return Outcome("ok")


def _exec_us(graph: Graph, options: EffectiveOptions, kernel: np.ndarray) -> np.ndarray:
    """Execution time of each kernel member without DCCI costs."""
    kt = np.array(graph.member_kernel_type, dtype=object)
    is_mix = np.char.startswith(kt.astype(str), "MIX")
    factor = np.where(is_mix, SPLIT_MODE_MIX_FACTOR[options.get("split_mode")], 1.0)
    ubuf = match_any(options.get("ubuf_lock_ignore_kernel"), graph.member_symbol)
    factor = factor * np.where(ubuf, UBUF_LOCK_IGNORE_FACTOR, 1.0)
    for name, f in DEBUG_FACTORS.items():
        if options.get(name):
            factor = factor * f
    if options.get("debug_extend_option"):
        factor = factor * DEBUG_EXTEND_FACTOR
    delta = 0.0
    for name, by_value in KERNEL_DELTA_US.items():
        delta += by_value.get(options.get(name), 0.0)
    delta += DEBUG_SYNC_ALL_US if options.get("debug_sync_all") else 0.0
    return np.where(kernel, np.maximum(graph.member_base_us * factor + delta, 0.5), 0.0)


def _previous_kernel(graph: Graph, in_sk: np.ndarray) -> np.ndarray:
    """Index of the previous kernel member of the same SK, or -1 for the first kernel."""
    idx = np.arange(graph.n_members)
    last_kernel = np.maximum.accumulate(np.where(in_sk, idx, -1))
    prev = np.concatenate([[-1], last_kernel[:-1]])
    same = (prev >= 0) & (graph.member_launch[np.maximum(prev, 0)] == graph.member_launch)
    return np.where(same, prev, -1)


def step_model(graph: Graph, options: EffectiveOptions) -> StepModel:
    """Per-member, per-launch and per-step noise-free times for ``options``."""
    net = graph.network
    timing = net.timing
    in_sk = graph.member_is_kernel & graph.launch_is_sk[graph.member_launch]
    bits = np.where(in_sk, dcci_bits(options, graph.member_symbol), 0)
    exec_us = _exec_us(graph, options, graph.member_is_kernel)

    flush_after = (bits & DCCI_AFTER_FUNC) != 0
    flush_before = (bits & DCCI_BEFORE) != 0
    prev = _previous_kernel(graph, in_sk)
    covered_in = flush_before | (prev < 0) | flush_after[np.maximum(prev, 0)]
    covered_out = flush_after
    penalty = graph.member_penalty_us * (0.5 * ~covered_in + 0.5 * ~covered_out)
    child = exec_us + np.where(in_sk, graph.member_flush_us * (flush_before.astype(float) + flush_after.astype(float)) + penalty, 0.0)

    # auto_op_parallel: a kernel overlaps its predecessor (adjacent member, same SK) on the other lane.
    kt = np.array(graph.member_kernel_type, dtype=str)
    lane = np.where(np.isin(kt, AIC_LANE_TYPES), 1, np.where(np.isin(kt, AIV_LANE_TYPES), 2, 0))
    overlap = np.zeros(graph.n_members)
    if options.get("auto_op_parallel") == 1 and graph.n_members > 1:
        adjacent = in_sk[1:] & in_sk[:-1] & (graph.member_launch[1:] == graph.member_launch[:-1])
        disjoint = (lane[1:] > 0) & (lane[:-1] > 0) & (lane[1:] != lane[:-1])
        overlap[1:] = np.where(adjacent & disjoint, AUTO_OP_PARALLEL_OVERLAP * np.minimum(child[1:], child[:-1]), 0.0)

    overhead = timing.launch_overhead_us * (EARLY_START_OVERHEAD_FACTOR if options.get("early_start") == 1 else 1.0)
    first = graph.launch_first
    cum_d = np.concatenate([[0.0], np.cumsum(child)])
    cum_o = np.concatenate([[0.0], np.cumsum(overlap)])
    launch_of = graph.member_launch
    start = (cum_d[:-1] - cum_d[first][launch_of]) - (cum_o[1:] - cum_o[first][launch_of])
    sk_overhead = np.where(graph.launch_is_sk, overhead + timing.split_sync_us * (graph.launch_split_part > 0), 0.0)
    start = np.where(graph.member_is_kernel, start + sk_overhead[launch_of], 0.0)
    end_sum = np.add.reduceat(child, first) - np.add.reduceat(overlap, first)
    launch_us = sk_overhead + end_sum

    # Multi-stream: a side-stream launch runs beside the preceding main-stream launch (one slot),
    # unless stream_fusion=0 serialises the streams.
    main = graph.launch_stream == 0
    if options.get("stream_fusion") == 0:
        main = np.ones_like(main)
    slot = np.cumsum(main) - 1
    slot = np.maximum(slot, 0)
    slot_us = np.zeros(slot.max() + 1)
    np.maximum.at(slot_us, slot, launch_us)
    slot_start = np.concatenate([[0.0], np.cumsum(slot_us + timing.host_gap_us)[:-1]])
    launch_offset = slot_start[slot] + timing.host_gap_us * (~main)
    step = float(slot_us.sum() + timing.host_gap_us * len(slot_us) + timing.iteration_overhead_us)
    return StepModel(graph, options, bits.astype(np.int64), child, start, launch_us, launch_offset, step, outcome_of(options, net))


def compile_model(network: Network, options: EffectiveOptions, ranks: int = 1) -> StepModel:
    """Expand the graph for the options' breaker bypass bits (and a ``ranks``-rank run's collectives), then time one step."""
    graph = expand(network, options.aggressive["value_breaker_bypass"], network.comm_factor(ranks))
    return step_model(graph, options)
