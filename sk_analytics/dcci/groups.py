"""Aligned SKs grouped by structure, for reading (reports and figures only).

A decode graph repeats the same fused structure once per layer, so a per-SK
list shows the same row many times. :func:`group_sks` folds the aligned SKs
of a :func:`~sk_analytics.dcci.analysis.analyze` result into one group per
(structure, class): how many occurrences, which ones, and the ΔP50 range.
The per-occurrence rows stay in the DCCI diff report; nothing here decides.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SkGroup:
    """Occurrences of one SK structure that share one class."""

    structure: str
    short_name: str
    cls: str
    occurrences: tuple[int, ...]
    delta_p50_pct: tuple[float, ...]
    delta_p50_us: tuple[float, ...]
    noise_band_pct: float | None

    @property
    def median_pct(self) -> float:
        values = sorted(self.delta_p50_pct)
        mid = len(values) // 2
        return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def short_name(sk: Mapping[str, Any]) -> str:
    """``scope · op→op→op`` (``first→…→last (n ops)`` beyond three); the hash when no child ops are known."""
    ops = list(sk.get("child_ops") or [])
    if not ops:
        return str(sk.get("structure_hash") or sk.get("structure_key") or sk.get("uid"))
    body = "→".join(ops) if len(ops) <= 3 else f"{ops[0]}→…→{ops[-1]} ({len(ops)} ops)"
    scope = sk.get("scope_name")
    return f"{scope} · {body}" if scope else body


def occurrence_ranges(occurrences: Sequence[int]) -> str:
    """``0–15`` / ``0, 2, 5–7`` of occurrence indices (each index once: ``[0, 0, 1, 1]`` is ``0–1``).

    The same index repeats when a structure's occurrence is measured on several
    ranks (one SK slot per rank); the range names indices, not slots.
    """
    runs: list[list[int]] = []
    for value in sorted(set(occurrences)):
        if runs and value == runs[-1][-1] + 1:
            runs[-1].append(value)
        else:
            runs.append([value])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}–{r[-1]}" for r in runs) or "—"


def format_range(values: Sequence[float], fmt: str = "+.2f") -> str:
    """``lo … hi`` of ``values`` in ``fmt`` (one number when both ends print the same)."""
    if not values:
        return "—"
    lo, hi = format(min(values), fmt), format(max(values), fmt)
    return lo if lo == hi else f"{lo} … {hi}"


def group_sks(sks: Sequence[Mapping[str, Any]]) -> list[SkGroup]:
    """Aligned SKs with a ΔP50 grouped by (structure, class), largest median ΔP50 % (most slowed down) first."""
    buckets: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for sk in sks:
        if sk.get("delta_p50_pct") is None:
            continue
        key = (str(sk.get("structure_key") or sk.get("structure_hash") or sk.get("uid")), str(sk.get("class")))
        buckets.setdefault(key, []).append(sk)
    groups = []
    for (structure, cls), members in buckets.items():
        members = sorted(members, key=lambda s: s.get("occurrence_index") or 0)
        bands = [float(s["noise_band_pct"]) for s in members if s.get("noise_band_pct") is not None]
        groups.append(SkGroup(
            structure, short_name(members[0]), cls, tuple(int(s.get("occurrence_index") or 0) for s in members),
            tuple(float(s["delta_p50_pct"]) for s in members), tuple(float(s.get("delta_p50_us") or 0.0) for s in members),
            max(bands) if bands else None,
        ))
    return sorted(groups, key=lambda g: (-g.median_pct, g.structure, g.cls))
