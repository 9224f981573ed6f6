"""SK metadata of a compiled model (formats.md §4): ``sk_meta/<pid>/model_<rtsModelId>_<callCount>/``.

Writes ``sk_fused_nodes.log`` (with the logger prefix), ``super_kernel.log``,
``sk_graph_origin.json``, ``sk_graph_updated.json``, ``sk_scope_split.log``
and ``sk_task_queue.json``. The member index ``[i]`` of sk_fused_nodes.log is
the child's index in the SK task list, the same number sk_prof writes as
``args.nodeId``; every kernel funcName of the build is in the origin graph.
Where a run's variant asks for it (:mod:`.variants`), some kernel members list
hundreds of resolved handles, so their lines pass the logger's 4096 characters
and continue on ``[CONT:<n>]`` lines, as on kernels with many binaries.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from sk_analytics.files.atomic import write_text
from sk_analytics.stage_o.options import BY_NAME
from sk_runner.sim.identity import ProcessIds
from sk_runner.sim.model import StepModel
from sk_runner.sim.naming import TASK_RATIO, GraphNames
from sk_runner.sim.network import BREAKER_BITS
from sk_runner.sim.superlog import log_prefix, logged_lines, super_kernel_log

NODE_TYPES = {
    "EventWait": "EVENT_WAIT",
    "EventNotify": "EVENT_RECORD",
    "EventReset": "EVENT_RESET",
    "MemoryWrite": "MEMORY_WRITE",
    "MemoryWait": "MEMORY_WAIT",
}
OPTION_TYPES = {"uint": "uint", "pattern_list": "string_list", "map": "map", "struct": "struct", "not_settable": "map"}


def _event_payload(kind: str, event_id: int) -> str:
    if kind.startswith("Memory"):
        return f"{kind}(addr:0x12c0{event_id:05x}00, value:0x1)"
    return f"{kind}(eventId:0x{event_id:x}, eventFlag:0x0, eventTaskFlag:0x{1 if kind == 'EventWait' else 2:x})"


def _sk_kernel_type(model: StepModel, names: GraphNames, launch: int) -> str:
    graph = model.graph
    first, count = int(graph.launch_first[launch]), int(graph.launch_count[launch])
    ratios = [TASK_RATIO[graph.member_kernel_type[m]] for m in range(first, first + count) if graph.member_is_kernel[m]]
    cube, vec = any(r[0] for r in ratios), any(r[1] for r in ratios)
    return "MIX_1_2" if cube and vec else ("MIX_AIC_1_0" if cube else "MIX_AIV_1_0")


def resolved_handles(ids: ProcessIds, n_members: int, long_share: float) -> np.ndarray:
    """Resolved kernel handles per member: 1, or 180-400 for a ``long_share`` of them (lines over 4096 characters)."""
    rng = np.random.default_rng([ids.rng_seed, 5])
    many = rng.random(n_members) < long_share
    return np.where(many, rng.integers(180, 401, n_members), 1)


def fused_nodes_text(model: StepModel, names: GraphNames, ids: ProcessIds, long_share: float = 0.0) -> str:
    """``sk_fused_nodes.log``: one header per SK, one line per member, each with the logger prefix
    (continued on ``[CONT:<n>]`` lines past 4096 characters)."""
    graph = model.graph
    prefix = log_prefix(ids.pid, ids.pid + 17, "sk_optimizer.cpp:1187", "PrintSKNodesDetail")
    resolved = resolved_handles(ids, graph.n_members, long_share)
    lines = []
    for launch in np.flatnonzero(graph.launch_is_sk):
        first, count = int(graph.launch_first[launch]), int(graph.launch_count[launch])
        lines.append(f"{prefix}  SK Function: {names.sk_name[launch]}, scope id: {names.scope_id[launch]}, Node Count: {count}")
        stream_id, stream_idx = int(names.stream_id[launch]), int(graph.launch_stream[launch])
        for m in range(first, first + count):
            where = (f"[nodeId:{names.member_node_id[m]}, streamId:{stream_id}, streamIdxInGraph:{stream_idx}, "
                     f"nodeIdxInStream:{names.member_node_idx_in_stream[m]}")
            i = int(graph.member_child[m])
            if not graph.member_is_kernel[m]:
                lines.append(f"{prefix}    [{i}] {where}, {_event_payload(graph.member_op[m], int(names.member_event_id[m]))}]")
                continue
            kt = graph.member_kernel_type[m]
            a, b = TASK_RATIO[kt]
            n = int(graph.member_blocks[m])
            handle = 0x7F3A00000000 + int(names.member_node_id[m]) * 0x40
            handles = ", ".join(f"handle:0x{handle + 0x1000 * h:x}" for h in range(int(resolved[m])))
            lines.extend(logged_lines(prefix,
                f"    [{i}] {where}] - KernelInfos{{funcName:{graph.member_symbol[m]}, kernelType:{kt}, taskRatio:[{a},{b}], "
                f"cap:1, numBlocks:{n}, cubeNum:{a * n}, vecNum:{b * n}, isScheModeOn:0, needMixKernelSplit:{int(a > 0 and b > 0)}, "
                f"resolvedNum:{int(resolved[m])}, {handles}}}"
            ))
    return "\n".join(lines) + "\n"


def _options_json(model: StepModel) -> dict[str, Any]:
    values = model.options.values
    out: dict[str, Any] = {
        name: {"name": name, "type": OPTION_TYPES[spec.kind], "value": values[name]}
        for name, spec in BY_NAME.items()
        if spec.kind not in ("struct", "not_settable")
    }
    out["inner_options"] = {k: {"name": k, "type": "uint", "value": v} for k, v in model.options.aggressive.items()}
    return out


def _kernel_node(model: StepModel, names: GraphNames, m: int, task_id: int) -> dict[str, Any]:
    graph = model.graph
    launch = int(graph.member_launch[m])
    stream_id = int(names.stream_id[launch])
    node: dict[str, Any] = {
        "nodeId": int(names.member_node_id[m]),
        "nodeType": "KERNEL" if graph.member_is_kernel[m] else NODE_TYPES[graph.member_op[m]],
        "scopeName": graph.launch_scope[launch] if graph.launch_is_sk[launch] else "",
    }
    if graph.member_kernel_type[m] == "COMMUNICATION":  # an HCCL task: no kernel symbol
        node["nodeType"] = "HCCL"
        params: dict[str, Any] = {"opName": names.sk_name[launch], "opType": graph.member_op[m]}
        node["taskInfo"] = [{"taskId": task_id, "streamId": stream_id, "taskType": "HCCL", "hcclParams": params}]
    elif graph.member_is_kernel[m]:
        kt = graph.member_kernel_type[m]
        params = {"funcName": graph.member_symbol[m], "numBlocks": int(graph.member_blocks[m]), "kernelType": kt,
                  "taskRatio": list(TASK_RATIO.get(kt, (0, 0)))}
        node["taskInfo"] = [{"taskId": task_id, "streamId": stream_id, "taskType": "KERNEL", "kernelParams": params}]
    else:
        params = {"eventId": int(names.member_event_id[m]), "eventType": graph.member_op[m]}
        node["taskInfo"] = [{"taskId": task_id, "streamId": stream_id, "taskType": node["nodeType"], "eventParams": params}]
    return node


def _graph_doc(model: StepModel, ids: ProcessIds, description: str, streams: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "version": "1.0",
        "description": description,
        "modelId": ids.rts_model_id,
        "deviceId": ids.device_id,
        "options": _options_json(model),
        "totalStreams": len(streams),
        "totalNodes": sum(len(nodes) for nodes in streams.values()),
        "streams": [{"streamIdxInGraph": k, "nodeCount": len(nodes), "nodes": nodes} for k, nodes in sorted(streams.items())],
    }


def graph_origin(model: StepModel, names: GraphNames, ids: ProcessIds) -> dict[str, Any]:
    """The graph before SK fusion: every kernel and event task as its own node."""
    graph = model.graph
    streams: dict[int, list[dict[str, Any]]] = {}
    for m in range(graph.n_members):
        streams.setdefault(int(graph.launch_stream[graph.member_launch[m]]), []).append(_kernel_node(model, names, m, ids.task_id_base + m))
    return _graph_doc(model, ids, "super kernel origin graph", streams)


def graph_updated(model: StepModel, names: GraphNames, ids: ProcessIds) -> dict[str, Any]:
    """The graph after SK fusion: one launch node per SK (with ``skinfos``), unfused ops unchanged."""
    graph = model.graph
    streams: dict[int, list[dict[str, Any]]] = {}
    for launch in range(graph.n_launches):
        first, count = int(graph.launch_first[launch]), int(graph.launch_count[launch])
        stream = int(graph.launch_stream[launch])
        if not graph.launch_is_sk[launch]:
            streams.setdefault(stream, []).append(_kernel_node(model, names, first, ids.task_id_base + graph.n_members + launch))
            continue
        kernels = [m for m in range(first, first + count) if graph.member_is_kernel[m]]
        params = {"funcName": names.sk_name[launch], "numBlocks": int(names.sk_block_num[launch]),
                  "kernelType": _sk_kernel_type(model, names, launch), "subTaskNum": count}
        streams.setdefault(stream, []).append(
            {
                "nodeId": int(names.launch_node_id[launch]),
                "nodeType": "SUPER_KERNEL",
                "scopeName": graph.launch_scope[launch],
                "taskInfo": [{"taskId": ids.task_id_base + graph.n_members + launch, "streamId": int(names.stream_id[launch]),
                              "taskType": "KERNEL", "kernelParams": params}],
                "skinfos": {
                    "scopeId": int(names.scope_id[launch]),
                    "scopeName": graph.launch_scope[launch],
                    "startKernelFuncName": graph.member_symbol[kernels[0]],
                    "endKernelFuncName": graph.member_symbol[kernels[-1]],
                },
            }
        )
    return _graph_doc(model, ids, "super kernel updated graph", streams)


def scope_split_text(model: StepModel, names: GraphNames, ids: ProcessIds) -> str:
    """``sk_scope_split.log``: each scope, its SKs, and why a value breaker split it."""
    graph = model.graph
    prefix = log_prefix(ids.pid, ids.pid + 17, "sk_scope_split.cpp:342", "SplitScope")
    bypass = model.options.aggressive["value_breaker_bypass"]
    lines = []
    sk = np.flatnonzero(graph.launch_is_sk)
    starts = [i for i, launch in enumerate(sk) if graph.launch_split_part[launch] == 0]
    for k, s in enumerate(starts):
        group = sk[s : starts[k + 1] if k + 1 < len(starts) else len(sk)]
        members = int(graph.launch_count[group].sum())
        lines.append(f"{prefix}scope name: {graph.launch_scope[group[0]]}, node count: {members}, super kernel count: {len(group)}")
        for launch in group:
            if graph.launch_split_part[launch] > 0:
                m = int(graph.launch_first[launch])
                kind = graph.member_breaker[m]
                lines.append(f"{prefix}  split before {graph.member_op[m]} (nodeId:{names.member_node_id[m]}): value breaker ({kind} wait), "
                             f"value_breaker_bypass={bypass} lacks bit 0b{BREAKER_BITS[kind]:02b}")
            lines.append(f"{prefix}  scope id: {names.scope_id[launch]}, super kernel: {names.sk_name[launch]}, task num: {graph.launch_count[launch]}")
    return "\n".join(lines) + "\n"


def task_queue(model: StepModel, names: GraphNames, ids: ProcessIds) -> dict[str, Any]:
    """``sk_task_queue.json``: each SK's ordered task list with the DCCI task flags."""
    graph = model.graph
    sks = []
    for launch in np.flatnonzero(graph.launch_is_sk):
        first, count = int(graph.launch_first[launch]), int(graph.launch_count[launch])
        tasks = []
        for m in range(first, first + count):
            task: dict[str, Any] = {"index": int(graph.member_child[m]), "nodeId": int(names.member_node_id[m])}
            if graph.member_is_kernel[m]:
                task.update(taskType="KERNEL", funcName=graph.member_symbol[m], dcciFlag=f"0x{int(model.dcci[m]):x}")
            else:
                task.update(taskType=NODE_TYPES[graph.member_op[m]], eventId=f"0x{int(names.member_event_id[m]):x}")
            tasks.append(task)
        sks.append({"skId": int(names.scope_id[launch]), "skName": names.sk_name[launch], "streamId": int(names.stream_id[launch]),
                    "taskNum": count, "tasks": tasks})
    return {"modelId": ids.rts_model_id, "deviceId": ids.device_id, "superKernels": sks}


def write_sk_meta(run_dir: Path, model: StepModel, names: GraphNames, ids: ProcessIds, *, sk_prof_kb: int | None,
                  full_cores: list[int], long_share: float = 0.0) -> Path:
    """All six metadata files into ``run_dir/sk_meta/<pid>/model_<id>_<n>/``; returns that folder."""
    folder = run_dir / "sk_meta" / str(ids.pid) / ids.model_dir
    graph = model.graph
    sk_count = int(graph.launch_is_sk.sum())
    scopes = int((graph.launch_is_sk & (graph.launch_split_part == 0)).sum())
    write_text(folder / "super_kernel.log", super_kernel_log(ids.pid, model.options, rts_model_id=ids.rts_model_id, sk_count=sk_count,
                                                             scope_count=scopes, sk_prof_kb=sk_prof_kb, full_cores=full_cores,
                                                             device=ids.device_id))
    write_text(folder / "sk_fused_nodes.log", fused_nodes_text(model, names, ids, long_share))
    write_text(folder / "sk_scope_split.log", scope_split_text(model, names, ids))
    write_text(folder / "sk_graph_origin.json", json.dumps(graph_origin(model, names, ids), indent=1) + "\n")
    write_text(folder / "sk_graph_updated.json", json.dumps(graph_updated(model, names, ids), indent=1) + "\n")
    write_text(folder / "sk_task_queue.json", json.dumps(task_queue(model, names, ids), indent=1) + "\n")
    return folder
