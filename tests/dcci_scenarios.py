"""Generator of multi-rank DCCI diff pairs with their ground truth (issue 25).

A scenario names each fused SK logically (``L3.moe``, ``L2.add``…) and lays it out per rank, side and graph
dump; the generator writes schema-conformant frames (``dcci_frames``) and keeps the truth the analysis never
reads: which slots exist on both sides of a rank (compared), every slot's class, which ranks hold each SK,
the deciding rank, the candidate time of every SK, and the repair tokens.

Timing: per step, every graph of a rank runs in its listed order, every SK once; a child lasts
``10 us + 0.5 us x (the SK's logical index) + 0.7 us x position + 20 ns x rank`` plus a 0/40/80 ns jitter,
and ``+6 us`` where the scenario slows it on the candidate. An SK's wall time is its children + 200 ns.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
from dcci_frames import launch, sk_events, structure, symbol_of, symbols
from test_dcci_analysis import DISABLE_ALL, _markers

from sk_analytics.dcci.analysis import SideInput, analyze

WARMUP = 2
OCCURRENCES = 10
SLOW_NS = 6_000
KINDS = {"embed": ("embed", ("Gather",)), "attn": ("attn", ("RmsNorm", "MatMul")),
         "moe": ("moe", ("Gate", "GroupedMatmul", "Add")), "moe2": ("moe", ("Gate", "GroupedMatmul")),
         "add": ("add", ("Add",)), "head": ("head", ("LmHead",)), "sampler": ("sampler", ("TopK", "Softmax", "ArgMax"))}


@dataclass(frozen=True)
class Sk:
    """One fused SK: a logical name (the same SK on every rank and side has the same name) and its kind."""

    name: str
    kind: str

    @property
    def ops(self) -> tuple[str, ...]:
        return KINDS[self.kind][1]


Graphs = list[tuple[str, list[Sk]]]
"""(model_dir, SKs in graph order) in execution order."""


@dataclass
class Scenario:
    """Per rank and side the graph dumps; ``slow``: (rank, SK name) -> slowed op on the candidate."""

    ranks: dict[int, dict[str, Graphs]]
    slow: dict[tuple[int, str], str] = field(default_factory=dict)


def decode_graph(layers: int, *, prefix: str = "", refused: Sequence[int] = (), extra_after: dict[str, Sk] | None = None,
                 missing: Sequence[str] = ()) -> list[Sk]:
    """embed, (attn, moe) per layer, head; a re-fused layer's moe is ``moe2`` + ``add``; ``extra_after``
    inserts an SK after the named one; ``missing`` drops SKs by name."""
    sks = [Sk(f"{prefix}E", "embed")]
    for layer in range(layers):
        sks.append(Sk(f"{prefix}L{layer}.attn", "attn"))
        if layer in refused:
            sks += [Sk(f"{prefix}L{layer}.moe2", "moe2"), Sk(f"{prefix}L{layer}.add", "add")]
        else:
            sks.append(Sk(f"{prefix}L{layer}.moe", "moe"))
    sks.append(Sk(f"{prefix}H", "head"))
    out = []
    for sk in sks:
        if sk.name not in missing:
            out.append(sk)
        if extra_after and sk.name in extra_after:
            out.append(extra_after[sk.name])
    return out


def _names(scenario: Scenario) -> dict[str, int]:
    """Logical index of every SK name (its duration offset), in first-seen order."""
    names: dict[str, int] = {}
    for rank in sorted(scenario.ranks):
        for side in ("baseline", "candidate"):
            for _dir, sks in scenario.ranks[rank][side]:
                for sk in sks:
                    names.setdefault(sk.name, len(names))
    return names


def child_ns(scenario: Scenario, index: dict[str, int], rank: int, side: str, sk: Sk, pos: int, occ: int) -> int:
    slow = side == "candidate" and scenario.slow.get((rank, sk.name)) == sk.ops[pos]
    return 10_000 + 500 * index[sk.name] + 700 * pos + 20 * rank + (occ % 3) * 40 + (SLOW_NS if slow else 0)


def _process(rank: int, side: str) -> str:
    return f"{1 if side == 'baseline' else 2}{rank}0"


def build_side(scenario: Scenario, side: str) -> SideInput:
    """The side's frames: one process per rank (device = rank), its graphs run in order every step."""
    index = _names(scenario)
    events, members, inventory = [], [], set()
    for rank in sorted(scenario.ranks):
        process, rows, t = _process(rank, side), [], 1_000_000
        graphs = scenario.ranks[rank][side]
        scopes = {}
        for g, (model_dir, sks) in enumerate(graphs):
            for k, sk in enumerate(sks):
                scope = (100 if side == "candidate" else 0) + 40 * g + k + 1
                scopes[(model_dir, sk.name)] = scope
                for pos, op in enumerate(sk.ops):
                    members.append(dict(process=process, model_dir=model_dir, scope_id=scope, scope_name=KINDS[sk.kind][0],
                                        child_index=pos, func_name=symbol_of(op, int(side == "candidate")), canonical_op=op))
                    inventory.add((symbol_of(op, int(side == "candidate")), op))
        for occ in range(OCCURRENCES):
            for model_dir, sks in graphs:
                for sk in sks:
                    off, children = 100, []
                    for pos, _op in enumerate(sk.ops):
                        d = child_ns(scenario, index, rank, side, sk, pos, occ)
                        children.append((pos, off, d))
                        off += d
                    rows += launch(t0=t, sk_dur=off + 100, children=children, model_id=model_dir.removeprefix("model_"),
                                   sk_id=scopes[(model_dir, sk.name)], process=process)
                    t += off + 5_000
        frame = sk_events(rows)
        events.append(frame.with_columns(pl.lit(rank, dtype=frame.schema["device_id"]).alias("device_id")))
    struct = structure(members).with_columns(pl.Series("process", [m["process"] for m in members], dtype=pl.Utf8))
    syms = symbols(sorted(inventory)).with_columns(pl.lit(_process(min(scenario.ranks), side)).alias("process"))
    return SideInput(root=Path(side), events=pl.concat(events).lazy(), structure=struct, markers=_markers([]), symbols=syms)


def run(scenario: Scenario) -> dict[str, Any]:
    return analyze(build_side(scenario, "baseline"), build_side(scenario, "candidate"), warmup=WARMUP,
                   disable_all_config=DISABLE_ALL)


# ---- truth -------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SlotTruth:
    rank: int
    name: str
    sides: tuple[str, ...]
    cls: str
    reason: str | None
    cand_p50_ns: float | None
    cand_time_us: float


def _median(values: list[int]) -> float:
    s = sorted(values)
    n = len(s)
    return float(s[n // 2]) if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


def slot_truth(scenario: Scenario) -> dict[tuple[int, str], SlotTruth]:
    """(rank, SK name) -> the slot's truth: sides it is on, class, reason, candidate P50 and time after warm-up."""
    index = _names(scenario)
    out = {}
    for rank in sorted(scenario.ranks):
        found: dict[str, dict[str, Sk]] = {}
        for side in ("baseline", "candidate"):
            for _dir, sks in scenario.ranks[rank][side]:
                for sk in sks:
                    found.setdefault(sk.name, {})[side] = sk
        for name, by_side in found.items():
            sides = tuple(s for s in ("baseline", "candidate") if s in by_side)
            walls = {side: [200 + sum(child_ns(scenario, index, rank, side, sk, p, occ) for p in range(len(sk.ops)))
                            for occ in range(WARMUP, OCCURRENCES)] for side, sk in by_side.items()}
            if len(sides) == 2:
                cls = "significantly_slower" if (rank, name) in scenario.slow else "neutral"
                reason = None
            else:
                cls, reason = "insufficient_evidence", f"only_in_{sides[0]}"
            cand = walls.get("candidate")
            out[(rank, name)] = SlotTruth(rank, name, sides, cls, reason, _median(cand) if cand else None,
                                          sum(cand) / 1000.0 if cand else 0.0)
    return out


def group_truth(slots: dict[tuple[int, str], SlotTruth]) -> dict[tuple[str, tuple[str, ...]], dict[str, Any]]:
    """(SK name, sides) -> ranks present, deciding rank (largest candidate P50, ties the lowest rank) and class."""
    groups: dict[tuple[str, tuple[str, ...]], list[SlotTruth]] = {}
    for slot in slots.values():
        groups.setdefault((slot.name, slot.sides), []).append(slot)
    out = {}
    for key, members in groups.items():
        decider = min(members, key=lambda s: (s.cand_p50_ns is None, -(s.cand_p50_ns or 0), s.rank))
        out[key] = {"ranks": sorted(s.rank for s in members), "deciding_rank": decider.rank, "class": decider.cls}
    return out


def coverage_truth(slots: dict[tuple[int, str], SlotTruth]) -> dict[int | None, float]:
    """Compared share of the candidate SK time per rank and overall (key None)."""
    def share(items: list[SlotTruth]) -> float:
        total = sum(s.cand_time_us for s in items)
        return sum(s.cand_time_us for s in items if len(s.sides) == 2) / total

    cand = [s for s in slots.values() if "candidate" in s.sides]
    out: dict[int | None, float] = {r: share([s for s in cand if s.rank == r]) for r in sorted({s.rank for s in cand})}
    out[None] = share(cand)
    return out


# ---- reading the result back ---------------------------------------------------------------------------------------


def scope_names(scenario: Scenario) -> dict[tuple[int, str, str, int], str]:
    """(rank, side, model_dir, scope id) -> SK name (the generator's numbering, for reading results back)."""
    out = {}
    for rank, sides in scenario.ranks.items():
        for side, graphs in sides.items():
            for g, (model_dir, sks) in enumerate(graphs):
                for k, sk in enumerate(sks):
                    out[(rank, side, model_dir, (100 if side == "candidate" else 0) + 40 * g + k + 1)] = sk.name
    return out


def named_slots(result: dict[str, Any], scenario: Scenario) -> dict[tuple[int, str], dict[str, Any]]:
    """(rank, SK name) -> the result's slot; a slot pairing two different names fails loudly."""
    names = scope_names(scenario)
    out = {}
    for sk in result["sks"]:
        a = sk["alignment"]
        found = {names[(a["rank"], side, a[side]["model_dir"], a[side]["sk_id"])]
                 for side in ("baseline", "candidate") if a[side]}
        assert len(found) == 1, f"slot {sk['uid']} pairs different SKs {sorted(found)}"
        key = (a["rank"], found.pop())
        assert key not in out, f"two slots for {key}"
        out[key] = sk
    return out
