"""Network specs of the simulated device: load, inherit, validate, expand.

A spec (YAML or JSON, see ``docs/simulator.md``) describes one decode graph:
an op catalogue (kernel type, blocks, base time, coherence penalty), and the
ordered items of a prologue, a layer repeated ``layers`` times and an epilogue.
An item is either an SK scope (ordered members: kernels and event members) or
an unfused op. :func:`expand` turns the spec into flat per-launch and
per-member arrays for one compile: the value breakers that are not bypassed
split a scope into several SKs at their event member.
"""

from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from sk_analytics.errors import InputError
from sk_analytics.files.strict_json import load_config_file

BUILTIN_DIR = "networks"
DEFAULT_NETWORK = "moe-decode"

SK_KERNEL_TYPES = ("AIC_ONLY", "AIV_ONLY", "MIX_AIV_1_0", "MIX_AIC_1_0", "MIX_1_1", "MIX_1_2")
UNFUSED_KERNEL_TYPES = ("AI_CORE", "AI_VECTOR_CORE", "AI_CPU", "COMMUNICATION")
EVENT_KINDS = ("EventWait", "EventNotify", "EventReset", "MemoryWrite", "MemoryWait")
BREAKER_BITS = {"paired": 0b01, "unpaired": 0b10}
"""value_breaker_bypass bit that lets a scope fuse across a wait of that kind."""

# Cores of an Atlas A2/A3 device: 0-24 AIC, 25-74 AIV (formats.md §3).
AIC_CORES = 25
AIV_CORES = 50


@dataclass(frozen=True)
class OpSpec:
    """One op of the catalogue."""

    name: str
    kernel_type: str
    blocks: int
    base_us: float
    coherence_penalty_us: float = 0.0
    flush_us: float | None = None


@dataclass(frozen=True)
class MemberSpec:
    """A member of a scope: a kernel (op + variant + time scale) or an event member."""

    op: str | None = None
    variant: str = ""
    scale: float = 1.0
    event: str | None = None
    breaker: str | None = None


@dataclass(frozen=True)
class ItemSpec:
    """An SK scope (``scope`` set) or an unfused op (one kernel member)."""

    scope: str | None
    stream: int
    members: tuple[MemberSpec, ...]


@dataclass(frozen=True)
class Timing:
    launch_overhead_us: float = 4.0
    host_gap_us: float = 1.2
    iteration_overhead_us: float = 1000.0
    prefill_factor: float = 9.0
    dcci_flush_us: float = 1.0
    split_sync_us: float = 8.0
    inter_host_comm_factor: float = 1.0
    """Collectives (COMMUNICATION ops) of a run whose ranks span hosts take this many times longer."""


@dataclass(frozen=True)
class Network:
    name: str
    description: str
    build_id: str
    layers: int
    early_start_adapted: bool
    timing: Timing
    ops: dict[str, OpSpec]
    prologue: tuple[ItemSpec, ...]
    layer: tuple[ItemSpec, ...]
    epilogue: tuple[ItemSpec, ...]
    source: str
    ranks_per_host: int | None = None
    """Ranks on one host of the deployment the network models (None: any number of ranks is one host)."""

    def comm_factor(self, ranks: int) -> float:
        """How much slower the collectives of a ``ranks``-rank run are: ``inter_host_comm_factor`` once the ranks
        span hosts (more than ``ranks_per_host``). A property of the modelled deployment, not of where the
        simulator's processes run: one process of all ranks and one group per host compute the same times."""
        spans = self.ranks_per_host is not None and ranks > self.ranks_per_host
        return self.timing.inter_host_comm_factor if spans else 1.0

    def symbol(self, op: str, variant: str) -> str:
        """The kernel symbol of (op, variant) in this build: stable across processes."""
        digest = hashlib.md5(f"{self.build_id}/{op}/{variant}".encode()).hexdigest()
        counter = int(digest[:6], 16) % 97 + 1
        return f"static_kernel_{op}_{digest}_{counter}_d0"


def builtin_names() -> list[str]:
    """Names of the built-in scenarios (``--network NAME``)."""
    folder = resources.files("sk_runner.sim") / BUILTIN_DIR
    return sorted(p.name[: -len(".yaml")] for p in folder.iterdir() if p.name.endswith(".yaml"))


def _raw_spec(name_or_path: str, seen: tuple[str, ...] = ()) -> tuple[dict[str, Any], str]:
    """The spec mapping (with ``base`` inheritance applied) and where it came from."""
    path = Path(name_or_path)
    if path.suffix.lower() in {".yaml", ".yml", ".json"} or path.exists():
        source = str(path)
        data = load_config_file(path)
    elif name_or_path in builtin_names():
        ref = resources.files("sk_runner.sim") / BUILTIN_DIR / f"{name_or_path}.yaml"
        with resources.as_file(ref) as builtin:
            data = load_config_file(builtin)
        source = f"builtin:{name_or_path}"
    else:
        raise InputError(name_or_path, "no such network spec file or built-in scenario", expected=f"a YAML/JSON file or one of {builtin_names()}")
    if not isinstance(data, dict):
        raise InputError(source, "network spec is not a mapping", expected="a YAML/JSON mapping")
    base = data.get("base")
    if base is None:
        return data, source
    if base in seen:
        raise InputError(source, f"network spec inherits from itself through {base!r}", expected="an acyclic base chain")
    parent, _ = _raw_spec(str(base), (*seen, str(base)))
    return _merge(parent, data), source


def _merge(parent: dict[str, Any], child: dict[str, Any]) -> dict[str, Any]:
    """Child keys replace the parent's; ``ops`` and ``timing`` merge entry by entry, field by field."""
    merged = copy.deepcopy(parent)
    for key, value in child.items():
        if key == "base":
            continue
        if key == "timing" and isinstance(value, dict):
            merged.setdefault("timing", {}).update(value)
        elif key == "ops" and isinstance(value, dict):
            ops = merged.setdefault("ops", {})
            for op, fields in value.items():
                ops[op] = {**ops.get(op, {}), **(fields or {})}
        else:
            merged[key] = copy.deepcopy(value)
    merged.pop("base", None)
    return merged


def load_network(name_or_path: str | None) -> Network:
    """Load a built-in scenario by name or a spec file; raises InputError naming the bad record."""
    raw, source = _raw_spec(name_or_path or DEFAULT_NETWORK)
    try:
        ops = {name: _op(name, fields) for name, fields in dict(raw["ops"]).items()}
        timing = Timing(**{k: float(v) for k, v in dict(raw.get("timing", {})).items()})
        network = Network(
            name=str(raw.get("name", Path(source).stem)),
            description=str(raw.get("description", "")),
            build_id=str(raw.get("build_id", raw.get("name", "build"))),
            layers=int(raw.get("layers", 1)),
            early_start_adapted=bool(raw.get("early_start_adapted", False)),
            timing=timing,
            ops=ops,
            prologue=tuple(_item(i, ops, source, "prologue") for i in raw.get("prologue", []) or []),
            layer=tuple(_item(i, ops, source, "layer") for i in raw.get("layer", []) or []),
            epilogue=tuple(_item(i, ops, source, "epilogue") for i in raw.get("epilogue", []) or []),
            source=source,
            ranks_per_host=None if raw.get("ranks_per_host") is None else int(raw["ranks_per_host"]),
        )
    except InputError:
        raise
    except (KeyError, TypeError, ValueError) as exc:
        raise InputError(source, f"invalid network spec: {exc!r}", expected="the spec format of docs/simulator.md") from None
    if network.layers < 1 or not (network.layer or network.prologue or network.epilogue):
        raise InputError(source, "network has no items", expected="layers >= 1 and at least one item")
    if (network.ranks_per_host is not None and network.ranks_per_host < 1) or not timing.inter_host_comm_factor > 0:
        raise InputError(source, "ranks_per_host must be at least 1 and timing.inter_host_comm_factor positive",
                         expected="ranks_per_host >= 1, inter_host_comm_factor > 0")
    return network


def _op(name: str, fields: dict[str, Any]) -> OpSpec:
    kernel_type = str(fields["kernel_type"])
    if kernel_type not in SK_KERNEL_TYPES + UNFUSED_KERNEL_TYPES:
        raise ValueError(f"op {name}: kernel_type {kernel_type!r} not in {SK_KERNEL_TYPES + UNFUSED_KERNEL_TYPES}")
    flush = fields.get("flush_us")
    return OpSpec(
        name=name,
        kernel_type=kernel_type,
        blocks=int(fields.get("blocks", 1)),
        base_us=float(fields["base_us"]),
        coherence_penalty_us=float(fields.get("coherence_penalty_us", 0.0)),
        flush_us=None if flush is None else float(flush),
    )


def _member(raw: Any, ops: dict[str, OpSpec], where: str) -> MemberSpec:
    if isinstance(raw, str):
        raw = {"op": raw}
    if not isinstance(raw, dict):
        raise ValueError(f"{where}: member {raw!r} is not an op name or mapping")
    if "event" in raw:
        if raw["event"] not in EVENT_KINDS:
            raise ValueError(f"{where}: event {raw['event']!r} not in {EVENT_KINDS}")
        breaker = raw.get("breaker")
        if breaker is not None and breaker not in BREAKER_BITS:
            raise ValueError(f"{where}: breaker {breaker!r} not in {tuple(BREAKER_BITS)}")
        return MemberSpec(event=str(raw["event"]), breaker=breaker)
    op = str(raw["op"])
    if op not in ops:
        raise ValueError(f"{where}: op {op!r} is not in the ops catalogue")
    return MemberSpec(op=op, variant=str(raw.get("variant", "")), scale=float(raw.get("scale", 1.0)))


def _item(raw: dict[str, Any], ops: dict[str, OpSpec], source: str, part: str) -> ItemSpec:
    where = f"{source} {part}"
    if "scope" in raw:
        members = tuple(_member(m, ops, f"{where} scope {raw['scope']}") for m in raw["members"])
        for m in members:
            if m.op is not None and ops[m.op].kernel_type not in SK_KERNEL_TYPES:
                raise ValueError(f"{where}: op {m.op} ({ops[m.op].kernel_type}) cannot be fused into an SK")
        if not any(m.op for m in members):
            raise ValueError(f"{where}: scope {raw['scope']} has no kernel member")
        return ItemSpec(scope=str(raw["scope"]), stream=int(raw.get("stream", 0)), members=members)
    member = _member(raw, ops, where)
    if member.op is None:
        raise ValueError(f"{where}: an unfused item must be an op")
    return ItemSpec(scope=None, stream=int(raw.get("stream", 0)), members=(member,))


@dataclass(frozen=True)
class Graph:
    """One compiled decode graph: launches (SKs and unfused ops) and their members, in graph order.

    Launch arrays have one entry per launch, member arrays one per member.
    ``member_child`` is the member's index in its SK task list (= ``[i]`` of
    sk_fused_nodes.log = sk_prof ``nodeId``).
    """

    network: Network
    launch_is_sk: np.ndarray
    launch_scope: list[str]
    launch_stream: np.ndarray
    launch_layer: np.ndarray  # -1 prologue, layers epilogue
    launch_split_part: np.ndarray  # 0 = first SK of its scope; > 0 = after a breaker split
    launch_first: np.ndarray  # index of the first member
    launch_count: np.ndarray
    member_launch: np.ndarray
    member_child: np.ndarray
    member_is_kernel: np.ndarray
    member_op: list[str]  # op name, or the event kind for event members
    member_variant: list[str]
    member_symbol: list[str]  # kernel funcName ("" for events)
    member_breaker: list[str]  # "paired" / "unpaired" for breaker event members, else ""
    member_kernel_type: list[str]
    member_blocks: np.ndarray
    member_base_us: np.ndarray
    member_penalty_us: np.ndarray
    member_flush_us: np.ndarray

    @property
    def n_launches(self) -> int:
        return len(self.launch_scope)

    @property
    def n_members(self) -> int:
        return len(self.member_op)


def expand(network: Network, value_breaker_bypass: int = 0, comm_factor: float = 1.0) -> Graph:
    """Unroll prologue, layers and epilogue into one graph; split scopes at non-bypassed breakers; collectives take
    ``comm_factor`` times their base time (:meth:`Network.comm_factor`)."""
    launches: list[tuple[bool, str, int, int, int, list[MemberSpec]]] = []
    sequence = [(-1, network.prologue)] + [(k, network.layer) for k in range(network.layers)] + [(network.layers, network.epilogue)]
    for layer, items in sequence:
        for item in items:
            if item.scope is None:
                launches.append((False, item.members[0].op or "", item.stream, layer, 0, list(item.members)))
                continue
            parts: list[list[MemberSpec]] = [[]]
            for member in item.members:
                splits = member.breaker is not None and not (value_breaker_bypass & BREAKER_BITS[member.breaker])
                if splits and any(m.op for m in parts[-1]):
                    parts.append([])
                parts[-1].append(member)
            for part_index, part in enumerate(parts):
                launches.append((True, item.scope, item.stream, layer, part_index, part))
    members = [(li, ci, m) for li, launch in enumerate(launches) for ci, m in enumerate(launch[5])]
    timing = network.timing
    is_kernel = np.array([m.op is not None for _, _, m in members], dtype=bool)
    ops = [network.ops[m.op] if m.op is not None else None for _, _, m in members]
    counts = np.array([len(launch[5]) for launch in launches], dtype=np.int64)
    return Graph(
        network=network,
        launch_is_sk=np.array([launch[0] for launch in launches], dtype=bool),
        launch_scope=[launch[1] for launch in launches],
        launch_stream=np.array([launch[2] for launch in launches], dtype=np.int64),
        launch_layer=np.array([launch[3] for launch in launches], dtype=np.int64),
        launch_split_part=np.array([launch[4] for launch in launches], dtype=np.int64),
        launch_first=np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64),
        launch_count=counts,
        member_launch=np.array([li for li, _, _ in members], dtype=np.int64),
        member_child=np.array([ci for _, ci, _ in members], dtype=np.int64),
        member_is_kernel=is_kernel,
        member_op=[m.op if m.op is not None else str(m.event) for _, _, m in members],
        member_variant=[m.variant for _, _, m in members],
        member_symbol=[network.symbol(m.op, m.variant) if m.op is not None else "" for _, _, m in members],
        member_breaker=[m.breaker or "" for _, _, m in members],
        member_kernel_type=[op.kernel_type if op is not None else "" for op in ops],
        member_blocks=np.array([op.blocks if op is not None else 0 for op in ops], dtype=np.int64),
        member_base_us=np.array([op.base_us * m.scale * (comm_factor if op.kernel_type == "COMMUNICATION" else 1.0) if op is not None
                                 else 0.0 for (_, _, m), op in zip(members, ops, strict=True)]),
        member_penalty_us=np.array([op.coherence_penalty_us if op is not None else 0.0 for op in ops]),
        member_flush_us=np.array(
            [(op.flush_us if op.flush_us is not None else timing.dcci_flush_us) if op is not None else 0.0 for op in ops]
        ),
    )
