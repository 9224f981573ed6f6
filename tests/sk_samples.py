"""Generated SK artifacts in the real formats (formats.md §3, §4).

``sk_prof_device_<id>.json`` (and the legacy ``sk_event_dev_device_<id>.json``),
``sk_fused_nodes.log``, ``super_kernel.log`` and ``sk_graph_*.json``. Used by
the tests (written to ``tmp_path``) and the ingest benchmark. The logical
frame of a trace (:func:`sk_prof_events`) carries the exact values a parser
must get back; the trace encoder is vectorized so that 1,000,000 events are
written in seconds.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import polars as pl

from sk_analytics.files.atomic import atomic_path, write_text
from sk_runner.sim.superlog import logged_lines

H32 = "5f3c0a9e1b2d4c6f8a7e9d0c1b2a3f4e"

CHILD_FUNCS = (
    f"static_kernel_RmsNorm_{H32}_9_d0",
    "te_matmul_v2_ND_FP16_10001__kernel0",
    "Add_0x1f_high_performance_1",
    "FlashAttentionScore_mix_aic",
    'Weird"Name\\With{brace}',  # names are not JSON-escaped
)
"""Child kernel symbols of generated traces (the last one breaks strict JSON)."""

SK_NAMES = (
    f"sk_3_layer0_start_static_kernel_RmsNorm_{H32}_9_d0_end_Add_0x1f_high_performance_1",
    "sk_7_none_start_te_matmul_v2_ND_FP16_10001__kernel0_end_FlashAttentionScore_mix_aic",
)


def sk_prof_events(
    n: int, seed: int = 0, *, t0_ps: int = 1_234_567_890_123_456_000, funcs: Sequence[str] = CHILD_FUNCS
) -> pl.DataFrame:
    """Logical rows of an sk_prof trace: every 6th event is an SK span (no node id).

    ``funcs`` are the child symbols (pass JSON-safe ones to compare with ``json.load``).
    ``ts_ps``/``dur_ps`` are picoseconds (the 6 decimals of µs); ``ts_ns``/``dur_ns``
    are what the parser must return (sub-ns digits rounded half up).
    """
    rng = np.random.default_rng(seed)
    index = np.arange(n, dtype=np.int64)
    is_span = index % 6 == 0
    node = np.where(is_span, -1, index % 6 - 1)
    core = rng.integers(0, 75, n)
    ts_ps = t0_ps + index * 3_000_000 + rng.integers(0, 999_999, n)
    dur_ps = rng.integers(1_000, 90_000_000, n)
    frame = pl.DataFrame({
        "lane": np.where(core < 25, "AIC", "AIV"),
        "core": core.astype(np.int32),
        "ts_ps": ts_ps,
        "dur_ps": dur_ps,
        "model_id": np.char.add("1_", (index // 600 % 3).astype(str)),
        "sk_id": (index // 60 % 2).astype(np.int64),
        "node_id": node,
        "block_idx": (core % 24).astype(np.int32),
        "block_num": np.full(n, 24, dtype=np.int32),
    }).with_columns(
        pl.when(pl.col("node_id") >= 0).then(pl.col("node_id")).alias("node_id"),
        pl.col("node_id").lt(0).alias("is_span"),
    )
    func_series = pl.Series(list(funcs))
    sks = pl.Series(list(SK_NAMES))
    return frame.with_columns(
        pl.when(pl.col("is_span"))
        .then(pl.lit(sks).gather(pl.col("sk_id")))
        .otherwise(pl.lit(func_series).gather(pl.col("node_id") % len(funcs)))
        .alias("func_name"),
        *[_round_ps(pl.col(f"{c}_ps")).alias(f"{c}_ns") for c in ("ts", "dur")],
    ).with_columns(
        pl.concat_str(
            pl.lit("["), pl.col("block_idx"), pl.lit("/"), pl.col("block_num"), pl.lit("]"),
            pl.when(pl.col("is_span")).then(pl.lit(" ")).otherwise(pl.lit("")), pl.col("func_name"),
        ).alias("name")
    )


def _round_ps(ps: pl.Expr) -> pl.Expr:
    return ps // 1000 + (ps % 1000 >= 500).cast(pl.Int64)


def _us_text(ps: pl.Expr) -> pl.Expr:
    """µs with exactly 6 decimals of an integer ps value."""
    return pl.concat_str((ps // 1_000_000).cast(pl.Utf8), pl.lit("."), (ps % 1_000_000).cast(pl.Utf8).str.zfill(6))


@dataclass(frozen=True)
class SkProfVariant:
    """Encoding variant of an SK time profiling trace (formats.md §3)."""

    legacy: bool = False
    """``sk_event_dev_device_<id>.json`` with integer ``args.modelRI``."""
    object_form: bool = False
    """``{"traceEvents": [...]}`` instead of a bare array."""
    one_line: bool = False
    """Whole array on one line instead of one record per line."""
    terminator: bool = True
    """End with the ``{}`` record (the runtime always writes it)."""

    def file_name(self, device_id: int) -> str:
        return f"sk_event_dev_device_{device_id}.json" if self.legacy else f"sk_prof_device_{device_id}.json"


def encode_sk_prof(events: pl.DataFrame, variant: SkProfVariant = SkProfVariant()) -> pl.Series:
    """The record texts (no separators) of ``events`` in the runtime's key order."""
    model = (
        pl.concat_str(pl.lit('"modelRI":'), pl.col("model_id").str.replace(r"_.*", ""))
        if variant.legacy
        else pl.concat_str(pl.lit('"modelId":"'), pl.col("model_id"), pl.lit('"'))
    )
    node = pl.when(pl.col("is_span")).then(pl.lit("")).otherwise(pl.concat_str(pl.lit(',"nodeId":'), pl.col("node_id")))
    return events.select(
        pl.concat_str(
            pl.lit('{"name":"'), pl.col("name"), pl.lit('","ph":"X","pid":"'), pl.col("lane"),
            pl.lit('","tid":'), pl.col("core"), pl.lit(',"ts":'), _us_text(pl.col("ts_ps")),
            pl.lit(',"dur":'), _us_text(pl.col("dur_ps")), pl.lit(',"args":{'), model,
            pl.lit(',"skId":'), pl.col("sk_id"), node, pl.lit("}}"),
        ).alias("record")
    ).to_series()


def write_sk_prof(path: Path, events: pl.DataFrame, variant: SkProfVariant = SkProfVariant()) -> Path:
    """Write ``events`` as a complete trace file (atomically)."""
    records = encode_sk_prof(events, variant)
    if variant.terminator:
        records = records.append(pl.Series("record", ["{}"]))
    sep = "," if variant.one_line else ",\n"
    head, tail = ('{"traceEvents":[', "]}") if variant.object_form else ("[", "]")
    if not variant.one_line:
        head, tail = head + "\n", "\n" + tail
    body = records.str.join(sep).item() if records.len() else ""
    write_text(path, head + body + tail + "\n")
    return path


def write_sk_prof_large(path: Path, events: pl.DataFrame) -> Path:
    """Stream a big one-record-per-line trace through Polars' writer (benchmarks)."""
    lines = (encode_sk_prof(events) + ",").append(pl.Series("record", ["{}"]))
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            fh.write(b"[\n")
            pl.DataFrame({"r": lines}).write_csv(fh, include_header=False, quote_style="never")
            fh.write(b"]\n")
    return path


# --------------------------------------------------------------------------- metadata logs

LOG_PREFIX = "2026-05-12 10:31:07.123 [4242:4243] [INFO] [sk_optimizer.cpp:{line}] [PrintSKNodesDetail] "


@dataclass(frozen=True)
class FusedMember:
    """One member line of an SK in sk_fused_nodes.log."""

    node_id: int
    stream_id: int
    func_name: str | None = None
    """Kernel funcName; None for an event/memory member."""
    kernel_type: str = "AIV_ONLY"
    num_blocks: int = 24
    detail: str = "EventWait(eventId:0x2, eventFlag:0x0, eventTaskFlag:0x1)"
    """Payload of an event/memory member (``type: Default`` for a default one)."""


@dataclass(frozen=True)
class FusedSk:
    """One fused SK of sk_fused_nodes.log."""

    name: str
    scope_id: int
    members: Sequence[FusedMember]
    node_count: int | None = None
    """``Node Count:`` written in the header (default: the member count)."""


def fused_member_payload(index: int, member: FusedMember) -> str:
    """The text of one member line (without logger prefix)."""
    ids = f"[{index}] [nodeId:{member.node_id}, streamId:{member.stream_id}, streamIdxInGraph:0, nodeIdxInStream:{index}"
    if member.func_name is None:
        return f"    {ids}, {member.detail}]"
    return (
        f"    {ids}] - KernelInfos{{funcName:{member.func_name}, kernelType:{member.kernel_type}, taskRatio:[1,2], "
        f"cap:0, numBlocks:{member.num_blocks}, cubeNum:0, vecNum:{member.num_blocks}, isScheModeOn:0, "
        f"needMixKernelSplit:0, resolvedNum:1, handle:0x7f3a2c001000}}"
    )


def fused_nodes_text(sks: Sequence[FusedSk], *, prefix: bool = True, max_line: int = 4096) -> str:
    """sk_fused_nodes.log text; with ``prefix`` every line carries the logger prefix
    and payloads longer than ``max_line`` continue on ``[CONT:<n>] `` lines."""
    payloads: list[str] = []
    for sk in sks:
        count = len(sk.members) if sk.node_count is None else sk.node_count
        payloads.append(f"  SK Function: {sk.name}, scope id: {sk.scope_id}, Node Count: {count}")
        payloads.extend(fused_member_payload(i, m) for i, m in enumerate(sk.members))
    if not prefix:
        return "".join(p + "\n" for p in payloads)
    lines = [line for number, payload in enumerate(payloads, start=100)
             for line in logged_lines(LOG_PREFIX.format(line=number), payload, max_line)]
    return "".join(line + "\n" for line in lines)


@dataclass(frozen=True)
class OptionLine:
    """An option line of super_kernel.log: set value, or invalid value with fallback."""

    name: str
    value: str
    valid_range: tuple[str, str] | None = None
    default: str | None = None

    def text(self) -> str:
        if self.valid_range is None:
            return f"OptionName: {self.name}, set value: {self.value}"
        low, high = self.valid_range
        return (
            f"OptionName: {self.name}, set value is invalid, value is {self.value}, valid range is "
            f"[{low}, {high}], the process will use default value: {self.default}"
        )


def super_kernel_log_text(
    options: Sequence[OptionLine] = (),
    buffer_full: Sequence[tuple[int, int]] = (),
    *,
    prefix: bool = True,
) -> str:
    """super_kernel.log text: phase markers around option lines, sk time profiling
    lines and buffer-full lines for each (device, core)."""
    payloads = ["Begin aclskOptimize", *[o.text() for o in options], "End aclskOptimize",
                "[sk time profiling] prof sk on, buffer size per core: 64 KB"]
    payloads += [
        f"[sk time profiling]  device {d} core {c} buffer is full, stop dump the time of nodes on device {d} core {c}"
        for d, c in buffer_full
    ]
    head = "2026-05-12 10:31:07.123 [4242:4243] [INFO] [super_kernel.cpp:77] " if prefix else ""
    return "".join(f"{head}{p}\n" for p in payloads)


@dataclass(frozen=True)
class GraphNode:
    """A node of sk_graph_*.json: kernel (func_name set) or event node."""

    node_id: int
    node_type: str
    func_name: str | None = None
    kernel_type: str = "AIV_ONLY"
    skinfo: dict[str, object] | None = None


@dataclass(frozen=True)
class GraphDump:
    """A whole sk_graph_origin.json / sk_graph_updated.json document."""

    streams: Sequence[Sequence[GraphNode]]
    model_id: int = 1
    options: dict[str, object] = field(default_factory=lambda: {"split_mode": {"name": "split_mode", "type": "uint", "value": 4}})

    def document(self) -> dict[str, object]:
        streams = []
        for idx, nodes in enumerate(self.streams):
            streams.append({"streamIdxInGraph": idx, "nodeCount": len(nodes), "nodes": [_graph_node(n, idx) for n in nodes]})
        return {
            "version": "1.0", "description": "generated", "modelId": self.model_id, "deviceId": 0,
            "options": {**self.options, "inner_options": {}},
            "totalStreams": len(self.streams), "totalNodes": sum(len(s) for s in self.streams), "streams": streams,
        }

    def write(self, path: Path) -> Path:
        write_text(path, json.dumps(self.document(), indent=2) + "\n")
        return path


def _graph_node(node: GraphNode, stream: int) -> dict[str, object]:
    if node.func_name is None:
        task = {"taskId": node.node_id, "streamId": stream, "taskType": "EVENT_WAIT", "eventParams": {"eventId": 3}}
    else:
        task = {"taskId": node.node_id, "streamId": stream, "taskType": "KERNEL",
                "kernelParams": {"funcName": node.func_name, "numBlocks": 24, "kernelType": node.kernel_type}}
    out: dict[str, object] = {"nodeId": node.node_id, "nodeType": node.node_type, "scopeName": "", "taskInfo": [task]}
    if node.skinfo is not None:
        out["skinfos"] = node.skinfo
    return out
