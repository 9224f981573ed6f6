"""Per-process names and ids of one compiled graph: scope ids, SK names, node/stream/task ids, cores.

Symbols (kernel funcNames) come from the network build and are stable; every
number here is drawn from the process's :class:`~sk_runner.sim.identity.ProcessIds`
and differs between processes, as on real hardware.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sk_runner.sim.identity import ProcessIds
from sk_runner.sim.network import AIC_CORES, Graph

#: (AIC cores per block, AIV cores per block) of each kernel type = taskRatio.
TASK_RATIO = {
    "AIC_ONLY": (1, 0),
    "AIV_ONLY": (0, 1),
    "MIX_AIC_1_0": (1, 0),
    "MIX_AIV_1_0": (0, 1),
    "MIX_1_1": (1, 1),
    "MIX_1_2": (1, 2),
}


@dataclass(frozen=True)
class GraphNames:
    """Ids and names of one process's graph. Launch arrays per launch, member arrays per member."""

    scope_id: np.ndarray  # per launch (SK id = scope id; -1 for unfused ops)
    sk_name: list[str]  # per launch; the unfused op's kernel name for unfused launches
    stream_id: np.ndarray  # per launch
    member_node_id: np.ndarray
    member_node_idx_in_stream: np.ndarray
    member_event_id: np.ndarray
    launch_node_id: np.ndarray  # node id of the SK launch node in the updated graph
    sk_block_num: np.ndarray  # per launch: max numBlocks of its kernels
    sk_mix_block_num: np.ndarray  # per launch: AIV cores used next to AIC ones
    sk_has_cube: np.ndarray  # per launch


def member_cores(graph: Graph) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(member index, core id, block index) of every core a kernel member runs on.

    A kernel with ``n`` blocks and taskRatio ``[a, b]`` uses AIC cores ``0..a*n-1``
    and AIV cores ``25..25+b*n-1``; an AIV core of a 1:2 kernel belongs to block ``k // 2``.
    """
    rows_m, rows_c, rows_b = [], [], []
    for m in np.flatnonzero(graph.member_is_kernel):
        kt = graph.member_kernel_type[m]
        n = int(graph.member_blocks[m])
        a, b = TASK_RATIO.get(kt, (0, 1))
        aic = np.arange(a * n)
        aiv = np.arange(b * n)
        rows_c.append(np.concatenate([aic, AIC_CORES + aiv]))
        rows_b.append(np.concatenate([aic, aiv // max(b, 1)]))
        rows_m.append(np.full(aic.size + aiv.size, m))
    if not rows_m:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    return np.concatenate(rows_m), np.concatenate(rows_c), np.concatenate(rows_b)


def name_graph(graph: Graph, ids: ProcessIds) -> GraphNames:
    """Draw this process's ids and build the SK names ``sk_<scopeId>_<scope|none>_start_<first>_end_<last>``."""
    rng = ids.rng()
    n_l, n_m = graph.n_launches, graph.n_members
    is_sk = graph.launch_is_sk
    scope_id = np.full(n_l, -1, dtype=np.int64)
    gaps = rng.integers(1, 3, size=int(is_sk.sum()))
    scope_id[is_sk] = ids.scope_id_base + np.cumsum(gaps)
    streams = np.unique(graph.launch_stream)
    stream_ids = ids.stream_id_base + rng.permutation(len(streams) * 3)[: len(streams)] * 2
    stream_id = stream_ids[np.searchsorted(streams, graph.launch_stream)]
    node_id = ids.node_id_base + np.cumsum(rng.integers(1, 3, size=n_m + n_l))
    member_stream = graph.launch_stream[graph.member_launch]
    idx_in_stream = np.zeros(n_m, dtype=np.int64)
    for s in streams:
        mask = member_stream == s
        idx_in_stream[mask] = np.arange(int(mask.sum()))
    kernel_m = np.flatnonzero(graph.member_is_kernel)
    last_k = np.full(n_l, -1)
    np.maximum.at(last_k, graph.member_launch[kernel_m], kernel_m)
    first_k = np.full(n_l, n_m)
    np.minimum.at(first_k, graph.member_launch[kernel_m], kernel_m)
    names = []
    for launch in range(n_l):
        first_sym, last_sym = graph.member_symbol[first_k[launch]], graph.member_symbol[last_k[launch]]
        if is_sk[launch]:
            names.append(f"sk_{scope_id[launch]}_{graph.launch_scope[launch]}_start_{first_sym}_end_{last_sym}")
        elif graph.member_kernel_type[first_k[launch]] == "COMMUNICATION":
            names.append(f"{graph.member_op[first_k[launch]]}_{int(rng.integers(100, 1000))}_{launch}_1")
        else:
            names.append(first_sym)
    kt = graph.member_kernel_type
    ratio = np.array([TASK_RATIO.get(t, (0, 0)) for t in kt]).reshape(n_m, 2)
    blocks = graph.member_blocks
    sk_block = np.zeros(n_l, dtype=np.int64)
    np.maximum.at(sk_block, graph.member_launch, np.where(graph.member_is_kernel, blocks, 0))
    sk_mix = np.zeros(n_l, dtype=np.int64)
    np.maximum.at(sk_mix, graph.member_launch, np.where(ratio[:, 0] > 0, blocks * ratio[:, 1], 0))
    has_cube = np.zeros(n_l, dtype=bool)
    np.logical_or.at(has_cube, graph.member_launch, ratio[:, 0] > 0)
    event_id = np.where(graph.member_is_kernel, 0, rng.integers(1, 4096, size=n_m))
    return GraphNames(
        scope_id=scope_id,
        sk_name=names,
        stream_id=stream_id.astype(np.int64),
        member_node_id=node_id[:n_m],
        member_node_idx_in_stream=idx_in_stream,
        member_event_id=event_id,
        launch_node_id=node_id[n_m:],
        sk_block_num=sk_block,
        sk_mix_block_num=sk_mix,
        sk_has_cube=has_cube,
    )
