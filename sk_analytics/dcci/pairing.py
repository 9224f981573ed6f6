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
  similar first; a graph that shares nothing is not paired. A graph left
  over then continues a **split or merge** (one graph on one side, a
  consecutive run of graphs on the other, e.g. ``model_a`` + ``model_b``
  compiled where the other build had one decode graph) when the group's
  single graph on the other side still holds more than half of its SKs
  uncovered. When another free graph (not in the group) is exactly as
  similar as the chosen partner, the pairing is ambiguous and reported so
  (its SKs are never compared). Graph pairs come in execution order (first
  launch of the candidate graphs, then of the baseline graphs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

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
    """Baseline graphs facing candidate graphs of a rank pair: one to one, one to a consecutive run of
    several (``split``: one baseline graph, ``merge``: one candidate graph), or one side only (unpaired)."""

    rank: int
    baseline: tuple[tuple[str, str], ...]
    """(process, model_dir) of each baseline graph, in execution order (empty: unpaired candidate graph)"""
    candidate: tuple[tuple[str, str], ...]
    similarity: int
    ambiguous: bool

    @property
    def correspondence(self) -> str:
        """``one_to_one``, ``split`` (one baseline graph, several candidate), ``merge`` or ``unpaired``."""
        if not self.baseline or not self.candidate:
            return "unpaired"
        if len(self.candidate) > 1:
            return "split"
        return "merge" if len(self.baseline) > 1 else "one_to_one"

    def to_json(self) -> dict[str, Any]:
        def side(graphs: tuple[tuple[str, str], ...]) -> dict[str, Any] | None:
            if not graphs:
                return None
            dirs = [g[1] for g in graphs]
            return {"process": graphs[0][0], "model_dir": "+".join(dirs), "model_dirs": dirs}

        return {"rank": self.rank, "baseline": side(self.baseline), "candidate": side(self.candidate),
                "correspondence": self.correspondence, "shared_structures": self.similarity,
                "ambiguous_pairing": self.ambiguous}


def _devices(sk_map: pl.DataFrame) -> list[tuple[str, int | None]]:
    """(process, device id) of every process of one side, in device order (null devices last)."""
    per = sk_map.group_by("process").agg(pl.col("device_id").drop_nulls().min().alias("device"))
    per = per.sort(pl.col("device").is_null(), "device", "process")
    return [(r["process"], r["device"]) for r in per.iter_rows(named=True)]


def pair_ranks(baseline: pl.DataFrame, candidate: pl.DataFrame) -> list[RankPair]:
    """Rank pairs of the two sides' SK maps (``process`` and ``device_id`` columns)."""
    base, cand = _devices(baseline), _devices(candidate)
    base_ids, cand_ids = [d for _, d in base], [d for _, d in cand]
    known_base, known_cand = [d for d in base_ids if d is not None], [d for d in cand_ids if d is not None]
    by_device = (len(known_base) == len(base_ids) and len(known_cand) == len(cand_ids) and len(set(known_base)) == len(known_base)
                 and sorted(known_base) == sorted(known_cand) and len(known_base) > 1)
    pairs: list[RankPair] = []
    if by_device:
        cand_of = {d: p for p, d in cand}
        for (p, _), d in zip(base, known_base, strict=True):
            pairs.append(RankPair(int(d), p, cand_of[d], (d, d)))
        return pairs
    for i in range(max(len(base), len(cand))):
        b = base[i] if i < len(base) else (None, None)
        c = cand[i] if i < len(cand) else (None, None)
        rank = b[1] if b[1] is not None and b[1] == c[1] else i
        pairs.append(RankPair(int(rank), b[0], c[0], (b[1], c[1])))
    return pairs


Graph = tuple[str, str]
"""(process, model_dir)"""
_NEVER: Final = 1 << 62
"""First-launch time of a graph that never launched (sorts last)."""


def _multisets(counts: pl.DataFrame, side: str, process: str | None) -> dict[str, dict[str, int]]:
    """model_dir -> {structure_key: SKs of that structure} of one side's process (a few graphs)."""
    out: dict[str, dict[str, int]] = {}
    if process is None:
        return out
    rows = counts.filter((pl.col("side") == side) & (pl.col("process") == process)).select("model_dir", "structure_key", "n")
    for graph, key, n in rows.iter_rows():
        out.setdefault(graph, {})[key] = int(n)
    return out


def _shared(a: dict[str, int], b: dict[str, int]) -> int:
    return sum(min(n, b.get(k, 0)) for k, n in a.items())


def _residual(whole: dict[str, int], parts: list[dict[str, int]]) -> dict[str, int]:
    """What of ``whole``'s multiset the ``parts`` do not cover yet."""
    left = dict(whole)
    for part in parts:
        for k, n in part.items():
            if k in left:
                left[k] -= min(n, left[k])
    return {k: n for k, n in left.items() if n}


@dataclass
class _Group:
    base: list[str]
    cand: list[str]
    score: int
    rivals: set[tuple[str, str]]
    """(side, graph) of free graphs exactly as similar as the chosen partner when the pair was taken."""


def pair_graphs(rank: RankPair, counts: pl.DataFrame, first_launch: dict[tuple[str, str, str], int] | None = None
                ) -> list[GraphPair]:
    """Graph pairs of one rank pair, in execution order. ``counts``: side, process, model_dir, structure_key, n
    (SKs per structure); ``first_launch``: (side, process, model_dir) -> first launch time (execution order).

    1. One to one, greedily, most similar first (shared SKs of the two structure multisets).
    2. Split / merge: a graph left over joins the group whose single graph on the other side still holds
       more than half of its SKs uncovered (the group's own graphs subtracted), the best such group; a tie
       between groups leaves it unpaired. A group's graphs of one side are ordered by first launch, so they
       are aligned as one sequence across the dump boundary.
    3. A pairing is ambiguous when a free graph other than the group's own was exactly as similar.
    """
    first = first_launch or {}
    base, cand = _multisets(counts, "baseline", rank.baseline), _multisets(counts, "candidate", rank.candidate)
    rows = sorted(((_shared(bm, cm), gb, gc) for gb, bm in base.items() for gc, cm in cand.items()),
                  key=lambda r: (-r[0], r[1], r[2]))
    groups: list[_Group] = []
    taken_b: set[str] = set()
    taken_c: set[str] = set()
    for score, gb, gc in rows:
        if score == 0 or gb in taken_b or gc in taken_c:
            continue
        rivals = {("candidate", c) if b == gb else ("baseline", b) for s, b, c in rows
                  if s == score and (b == gb) != (c == gc) and b not in taken_b and c not in taken_c}
        taken_b.add(gb)
        taken_c.add(gc)
        groups.append(_Group([gb], [gc], score, rivals))
    _attach_leftovers(groups, base, cand, taken_b, taken_c)
    process = {"baseline": str(rank.baseline), "candidate": str(rank.candidate)}

    def order(side: str, graphs: list[str]) -> tuple[Graph, ...]:
        return tuple((process[side], g) for g in sorted(graphs, key=lambda g: (first.get((side, process[side], g), _NEVER), g)))

    out = []
    for g in groups:
        members = {("baseline", b) for b in g.base} | {("candidate", c) for c in g.cand}
        out.append(GraphPair(rank.rank, order("baseline", g.base), order("candidate", g.cand), g.score, bool(g.rivals - members)))
    for side, graphs, taken in (("baseline", base, taken_b), ("candidate", cand, taken_c)):
        for graph in sorted(set(graphs) - taken):
            key = ((process[side], graph),)
            out.append(GraphPair(rank.rank, key if side == "baseline" else (), key if side == "candidate" else (), 0, False))

    def launched(pair: GraphPair) -> tuple[int, int]:
        def at(side: str, graphs: tuple[Graph, ...]) -> int:
            return min((first.get((side, *g), _NEVER) for g in graphs), default=_NEVER)
        return at("candidate", pair.candidate), at("baseline", pair.baseline)

    return sorted(out, key=launched)  # stable: pairing order breaks ties


def _attach_leftovers(groups: list[_Group], base: dict[str, dict[str, int]], cand: dict[str, dict[str, int]],
                      taken_b: set[str], taken_c: set[str]) -> None:
    """Step 2 of :func:`pair_graphs`: leftover graphs join a group as the continuation of a split or merge."""
    changed = True
    while changed:
        changed = False
        for side, graphs, taken in (("baseline", base, taken_b), ("candidate", cand, taken_c)):
            for graph in sorted(set(graphs) - taken):
                size = sum(graphs[graph].values())
                scores = []
                for i, g in enumerate(groups):
                    own, other = (g.base, g.cand) if side == "baseline" else (g.cand, g.base)
                    if len(other) != 1:
                        continue  # one graph faces a consecutive run of graphs, never many to many
                    whole = (cand if side == "baseline" else base)[other[0]]
                    scores.append((_shared(graphs[graph], _residual(whole, [graphs[o] for o in own])), i))
                best = max((s for s, _ in scores), default=0)
                winners = [i for s, i in scores if s == best]
                if 2 * best <= size or len(winners) != 1:
                    continue
                g = groups[winners[0]]
                (g.base if side == "baseline" else g.cand).append(graph)
                g.score += best
                taken.add(graph)
                changed = True
