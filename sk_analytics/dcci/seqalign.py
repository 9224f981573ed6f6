"""Alignment of two graphs' ordered sequences of structural identities (formats.md §4, graph context).

The two sides of a DCCI diff may be fused differently in places, so the k-th
occurrence of a repeated structure on one side is not the k-th on the other.
Each graph is a sequence of integer structure tokens (graph order); the two
sequences are aligned as a longest common subsequence with token equality:

1. **Anchors**: tokens that occur exactly once on each side pair by
   themselves; the longest order-consistent chain of them is kept (an anchor
   that crosses the chain is reported ambiguous, never paired).
2. **Runs** between consecutive anchors are aligned exactly. A run equal on
   both sides pairs element by element (the only alignment of full length).
   Any other run is aligned by the band-limited O((N+M)·D) furthest-reaching
   method (Myers), run forwards and backwards: a match lies on an optimal
   alignment iff its forward plus backward edit distance is the run's distance
   D, and every optimal alignment holds exactly one such match per LCS level.
   A level with a single match is a pair every optimal alignment makes
   (*certain*); a level with several is an ambiguity (its elements are
   reported ``ambiguous``, never guessed); an element on no optimal match is
   a gap in every optimal alignment (present on one side only).

Only NumPy: the D loop is vectorized over diagonals and D is the number of
differences (a handful when one option changes fusion), so two graphs of
thousands of SKs align in milliseconds. Runs that differ in more than
:data:`MAX_BAND_CELLS` allows are reported ambiguous as a whole.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass
from typing import Final

import numpy as np

PAIRED_ANCHOR: Final = 0
"""Paired as a structure that occurs once on each side."""
PAIRED_RUN: Final = 1
"""Paired inside an aligned run between anchors (every optimal alignment makes this pair)."""
GAP: Final = 2
"""In a gap of every optimal alignment: present on this side only."""
AMBIGUOUS: Final = 3
"""Optimal alignments disagree about this element (or it is an anchor crossing the chain)."""
STATUS_NAMES: Final = ("anchor", "run", "gap", "ambiguous")

MAX_BAND_CELLS: Final = 1 << 22
"""Largest diagonal band (diagonals x positions) tried before a run counts as too different to align."""
_NEG: Final = -(1 << 40)


@dataclass(frozen=True)
class SequenceAlignment:
    """Per element of each side: partner index on the other side (-1 none), status code, run (segment) index."""

    partner_a: np.ndarray
    status_a: np.ndarray
    segment_a: np.ndarray
    partner_b: np.ndarray
    status_b: np.ndarray
    segment_b: np.ndarray
    anchors: np.ndarray
    """(k, 2) positions (a, b) of the kept anchors; run s lies after anchor s-1 and before anchor s."""


def align_sequences(a: np.ndarray, b: np.ndarray) -> SequenceAlignment:
    """Align two token sequences (non-negative integers) by anchored LCS; see the module docstring."""
    a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    n, m = a.size, b.size
    partner_a, partner_b = np.full(n, -1, np.int64), np.full(m, -1, np.int64)
    status_a, status_b = np.full(n, GAP, np.int8), np.full(m, GAP, np.int8)
    anchors, crossing_a, crossing_b = _anchors(a, b)
    status_a[crossing_a], status_b[crossing_b] = AMBIGUOUS, AMBIGUOUS
    ia, ib = anchors[:, 0], anchors[:, 1]
    partner_a[ia], partner_b[ib] = ib, ia
    status_a[ia], status_b[ib] = PAIRED_ANCHOR, PAIRED_ANCHOR
    # run s spans (anchor s-1, anchor s) on each side
    starts_a, ends_a = np.concatenate(([0], ia + 1)), np.concatenate((ia, [n]))
    starts_b, ends_b = np.concatenate(([0], ib + 1)), np.concatenate((ib, [m]))
    segment_a = np.searchsorted(ia, np.arange(n), side="left")
    segment_b = np.searchsorted(ib, np.arange(m), side="left")
    same = _equal_runs(a, b, starts_a, ends_a, starts_b, ends_b, segment_a)
    pos = np.flatnonzero(same[segment_a] & (status_a == GAP))
    mate = pos - starts_a[segment_a[pos]] + starts_b[segment_a[pos]]
    partner_a[pos], partner_b[mate] = mate, pos
    status_a[pos], status_b[mate] = PAIRED_RUN, PAIRED_RUN
    for s in np.flatnonzero(~same):
        sa, sb = slice(starts_a[s], ends_a[s]), slice(starts_b[s], ends_b[s])
        run = _align_run(a[sa], b[sb])
        # an anchor crossing the chain stays ambiguous (its token is unique, so the run leaves it a gap)
        status_a[sa] = np.where(status_a[sa] == AMBIGUOUS, AMBIGUOUS, run.status_a)
        status_b[sb] = np.where(status_b[sb] == AMBIGUOUS, AMBIGUOUS, run.status_b)
        paired = np.flatnonzero(run.partner_a >= 0)
        partner_a[sa.start + paired] = run.partner_a[paired] + sb.start
        partner_b[sb.start + run.partner_a[paired]] = sa.start + paired
    return SequenceAlignment(partner_a, status_a, segment_a, partner_b, status_b, segment_b, anchors)


def _anchors(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Kept anchors (k, 2) in order, and the positions on each side of anchors crossing them."""
    ua, ia, ca = np.unique(a, return_index=True, return_counts=True)
    ub, ib, cb = np.unique(b, return_index=True, return_counts=True)
    once_a, once_b = ua[ca == 1], ub[cb == 1]
    common, ka, kb = np.intersect1d(once_a, once_b, assume_unique=True, return_indices=True)
    pa = ia[ca == 1][ka]
    pb = ib[cb == 1][kb]
    order = np.argsort(pa)
    pa, pb = pa[order], pb[order]
    if pb.size < 2 or bool(np.all(np.diff(pb) > 0)):
        keep = np.ones(pa.size, dtype=bool)
    else:
        keep = _longest_increasing(pb)
    return np.stack((pa[keep], pb[keep]), axis=1).reshape(-1, 2), pa[~keep], pb[~keep]


def _longest_increasing(values: np.ndarray) -> np.ndarray:
    """Mask of one longest strictly increasing subsequence (patience sorting; only when anchors cross)."""
    tails: list[int] = []
    tail_index: list[int] = []
    previous = np.full(values.size, -1, np.int64)
    for i, v in enumerate(values.tolist()):
        j = bisect.bisect_left(tails, v)
        if j == len(tails):
            tails.append(v)
            tail_index.append(i)
        else:
            tails[j], tail_index[j] = v, i
        previous[i] = tail_index[j - 1] if j else -1
    keep = np.zeros(values.size, dtype=bool)
    i = tail_index[-1] if tail_index else -1
    while i >= 0:
        keep[i] = True
        i = int(previous[i])
    return keep


def _equal_runs(a: np.ndarray, b: np.ndarray, starts_a: np.ndarray, ends_a: np.ndarray, starts_b: np.ndarray,
                ends_b: np.ndarray, segment_a: np.ndarray) -> np.ndarray:
    """Per run: both sides hold the same tokens in the same order (compared in one vectorized pass)."""
    lengths_a, lengths_b = ends_a - starts_a, ends_b - starts_b
    same = lengths_a == lengths_b
    inside = np.flatnonzero(same[segment_a])
    inside = inside[(inside >= starts_a[segment_a[inside]]) & (inside < ends_a[segment_a[inside]])]
    mate = inside - starts_a[segment_a[inside]] + starts_b[segment_a[inside]]
    differs = np.bincount(segment_a[inside[a[inside] != b[mate]]], minlength=same.size)
    equal: np.ndarray = same & (differs == 0)
    return equal


@dataclass(frozen=True)
class _Run:
    partner_a: np.ndarray
    status_a: np.ndarray
    status_b: np.ndarray


def _align_run(a: np.ndarray, b: np.ndarray) -> _Run:
    """Exact alignment of one run: certain pairs, ambiguous elements, gaps (see the module docstring)."""
    n, m = a.size, b.size
    partner = np.full(n, -1, np.int64)
    status_a, status_b = np.full(n, GAP, np.int8), np.full(m, GAP, np.int8)
    if n == 0 or m == 0:
        return _Run(partner, status_a, status_b)
    # the distance is at least the multiset difference of the two runs: start the band there
    tokens, counts = np.unique(np.concatenate((a, b)), return_counts=True)
    in_a = np.bincount(np.searchsorted(tokens, a), minlength=tokens.size)
    common = np.minimum(in_a, counts - in_a).sum()
    band = max(2, int(n + m - 2 * common))
    while True:
        if (2 * band + 1) * (max(n, m) + 1) > MAX_BAND_CELLS:
            return _Run(partner, np.full(n, AMBIGUOUS, np.int8), np.full(m, AMBIGUOUS, np.int8))
        forward = _furthest(a, b, band)
        if forward is not None:
            break
        band *= 2
    reach, eq, distance = forward
    back = _furthest(a[::-1], b[::-1], band)
    assert back is not None and back[2] == distance
    rows, x = np.nonzero(eq)
    k = rows - band
    keep = (np.abs(k) <= distance) & (np.abs(k - (n - m)) <= distance)
    x, k = x[keep], k[keep]
    y = x - k
    before = _distance_at(reach, band, x, k, n)
    after = _distance_at(back[0], band, n - 1 - x, (n - m) - k, n)
    on_path = before + after == distance
    x, y, before = x[on_path], y[on_path], before[on_path]
    level = (x + y - before) // 2
    per_level = np.bincount(level, minlength=1)
    certain = per_level[level] == 1
    status_a[x[~certain]], status_b[y[~certain]] = AMBIGUOUS, AMBIGUOUS
    partner[x[certain]] = y[certain]
    status_a[x[certain]], status_b[y[certain]] = PAIRED_RUN, PAIRED_RUN
    return _Run(partner, status_a, status_b)


def _furthest(a: np.ndarray, b: np.ndarray, band: int) -> tuple[np.ndarray, np.ndarray, int] | None:
    """Furthest-reaching table of the edit graph of a vs b within ``band`` diagonals, or None if the
    distance exceeds it.

    Returns (reach, eq, D): ``reach[e, band + k]`` = the furthest x on diagonal k (= x - y) whose
    insert/delete distance from (0, 0) is at most e (``_NEG`` where none), ``eq[band + k, x]`` =
    a[x] == b[x - k], and D the distance of (n, m).
    """
    n, m = a.size, b.size
    if abs(n - m) > band:
        return None
    ks = np.arange(-band, band + 1)
    xs = np.arange(n + 1)
    ys = xs[None, :] - ks[:, None]
    valid = (ys >= 0) & (ys < m) & (xs[None, :] < n)
    eq = valid & (np.append(a, -1)[None, :] == np.take(b, ys, mode="clip"))
    stops = np.where(eq, n + 1, xs[None, :])
    runs = np.minimum.accumulate(stops[:, ::-1], axis=1)[:, ::-1] - xs[None, :]
    width = 2 * band + 3  # one margin column each side for k - 1 and k + 1
    rows = [np.full(width, _NEG, np.int64)]
    rows[0][band + 1] = runs[band, 0]
    target = band + 1 + (n - m)
    e = 0
    while rows[-1][target] < n:
        e += 1
        if e > band:
            return None
        prev, prev2 = rows[-1], rows[-2] if e >= 2 else np.full(width, _NEG, np.int64)
        k = np.arange(-e, e + 1, 2)
        col = k + band + 1
        down, left = prev[col + 1], prev[col - 1]
        down = np.where((down > _NEG) & (down - k <= m), down, _NEG)
        right = np.where((left > _NEG) & (left < n), left + 1, _NEG)
        x = np.maximum(np.maximum(down, right), prev2[col])
        ok = x > _NEG
        x[ok] += runs[col[ok] - 1, x[ok]]
        row = np.full(width, _NEG, np.int64)
        row[col] = x
        rows.append(row)
    return np.maximum.accumulate(np.stack(rows), axis=0), eq, e


def _distance_at(reach: np.ndarray, band: int, x: np.ndarray, k: np.ndarray, n: int) -> np.ndarray:
    """Edit distance from the origin of cells (x, diagonal k): the first e whose reach covers x
    (``len(reach)`` where none does). One search over the table flattened diagonal by diagonal."""
    depth = reach.shape[0]
    stride = n + 3
    columns = np.maximum(reach, -1).T + (np.arange(reach.shape[1]) * stride)[:, None]  # disjoint ascending ranges
    col = k + band + 1
    found: np.ndarray = np.searchsorted(columns.ravel(), col * stride + x, side="left") - col * depth
    return found
