"""Which rank and which graph of one side faces which of the other (before any SK is aligned).

Across processes nothing but structure is stable (formats.md §4), so:

* **Ranks**: a process is one rank; its device is the device id of its
  launches. The processes of the two sides pair by device id when both sides
  hold the same set of distinct device ids (a multi-rank profile), otherwise
  in order of device id, then process name (one process per side is the usual
  single-rank pair). An unpaired process's SKs are present on one side only.
* **Graphs** (``model_<rtsModelId>_<n>/`` folders, names unstable) inside a
  rank pair: by structural similarity, the number of SKs the two graphs'
  multisets of structural identities share. Pairs are taken greedily, most
  similar first; a graph that shares nothing is not paired. When another
  free graph is exactly as similar as the chosen partner, the pairing is
  ambiguous and reported so (its SKs are never compared).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl


@dataclass(frozen=True)
class RankPair:
    """One baseline process facing one candidate process (either may be None: unpaired)."""

    rank: int
    baseline: str | None
    candidate: str | None
    devices: tuple[int | None, int | None]


@dataclass(frozen=True)
class GraphPair:
    """One baseline graph facing one candidate graph of a rank pair (either may be None: unpaired)."""

    rank: int
    baseline: tuple[str, str] | None
    """(process, model_dir)"""
    candidate: tuple[str, str] | None
    similarity: int
    ambiguous: bool

    def to_json(self) -> dict[str, Any]:
        def side(graph: tuple[str, str] | None) -> dict[str, str] | None:
            return None if graph is None else {"process": graph[0], "model_dir": graph[1]}

        return {"rank": self.rank, "baseline": side(self.baseline), "candidate": side(self.candidate),
                "shared_structures": self.similarity, "ambiguous_pairing": self.ambiguous}


def _devices(sk_map: pl.DataFrame) -> list[tuple[str, int | None]]:
    """(process, device id) of every process of one side, in device order (null devices last)."""
    per = sk_map.group_by("process").agg(pl.col("device_id").drop_nulls().min().alias("device"))
    per = per.sort(pl.col("device").is_null(), "device", "process")
    return [(r["process"], r["device"]) for r in per.iter_rows(named=True)]


def pair_ranks(baseline: pl.DataFrame, candidate: pl.DataFrame) -> list[RankPair]:
    """Rank pairs of the two sides' SK maps (``process`` and ``device_id`` columns)."""
    base, cand = _devices(baseline), _devices(candidate)
    base_ids, cand_ids = [d for _, d in base], [d for _, d in cand]
    by_device = (None not in base_ids and None not in cand_ids and len(set(base_ids)) == len(base_ids)
                 and sorted(base_ids) == sorted(cand_ids) and len(base_ids) > 1)
    pairs: list[RankPair] = []
    if by_device:
        cand_of = {d: p for p, d in cand}
        for p, d in base:
            pairs.append(RankPair(int(d), p, cand_of[d], (d, d)))  # type: ignore[arg-type]
        return pairs
    for i in range(max(len(base), len(cand))):
        b = base[i] if i < len(base) else (None, None)
        c = cand[i] if i < len(cand) else (None, None)
        rank = b[1] if b[1] is not None and b[1] == c[1] else i
        pairs.append(RankPair(int(rank), b[0], c[0], (b[1], c[1])))
    return pairs


def pair_graphs(rank: RankPair, counts: pl.DataFrame) -> list[GraphPair]:
    """Graph pairs of one rank pair. ``counts``: side, process, model_dir, structure_key, n (SKs per structure)."""
    def graphs(side: str, process: str | None) -> pl.DataFrame:
        return counts.filter((pl.col("side") == side) & (pl.col("process") == process)) if process else counts.clear()

    base, cand = graphs("baseline", rank.baseline), graphs("candidate", rank.candidate)
    shared = (
        base.join(cand, on="structure_key", suffix="_c")
        .group_by("model_dir", "model_dir_c")
        .agg(pl.min_horizontal("n", "n_c").sum().alias("shared"))
        .sort("shared", "model_dir", "model_dir_c", descending=[True, False, False])
    )
    taken_b: set[str] = set()
    taken_c: set[str] = set()
    rows = shared.rows()
    out: list[GraphPair] = []
    for gb, gc, score in rows:
        if gb in taken_b or gc in taken_c:
            continue
        tie = any(s == score and (b == gb) != (c == gc) and b not in taken_b and c not in taken_c for b, c, s in rows)
        taken_b.add(gb)
        taken_c.add(gc)
        out.append(GraphPair(rank.rank, (str(rank.baseline), gb), (str(rank.candidate), gc), int(score), tie))
    for side, frame, taken in (("baseline", base, taken_b), ("candidate", cand, taken_c)):
        process = rank.baseline if side == "baseline" else rank.candidate
        for graph in sorted(set(frame.get_column("model_dir").to_list()) - taken):
            key = (str(process), graph)
            out.append(GraphPair(rank.rank, key if side == "baseline" else None, key if side == "candidate" else None, 0, False))
    return out
