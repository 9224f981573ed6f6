"""The gate modes of an option trial (constants only).

Kept apart from :mod:`sk_analytics.option_trial.api` so that validating a task
or a campaign spec (``policy.gate``) does not import Polars and SciPy.
"""

from __future__ import annotations

from typing import Literal

GateMode = Literal["protocol", "strict", "stats", "sequential", "family"]
GATE_MODES: tuple[str, ...] = ("protocol", "strict", "stats", "sequential", "family")
"""``sequential``: the statistics policy looking after every candidate run up to a cap (not the protocol);
``family``: decisions controlled across the whole sweep matrix (:mod:`sk_analytics.option_trial.family`, not the protocol)."""

SEQUENTIAL_CAP = 8
"""The sequential policy's default cap on the candidate runs it looks at (here, not in ``sequential``, so --help stays light)."""

FAMILY_MIN_EFFECT_PCT = 1.0
"""Default ``policy.min_effect_pct`` of the family policy: a gain below 1 % is not worth freezing into BASE."""
FAMILY_INCUMBENT_RUNS = (10, 17)
"""Fewest and most runs the family policy extends the incumbent (and tops a frozen winner up) to: its runs
serve every later entry, so a longer matrix buys more of them (:func:`family_incumbent_runs`)."""
FAMILY_CAP = 30
"""The family policy's most candidate runs of one entry."""


def family_incumbent_runs(entries: int) -> int:
    """The family policy's incumbent runs for a matrix of ``entries``: ``entries + 4`` within :data:`FAMILY_INCUMBENT_RUNS`
    (13 for 9 entries, 17 for 15; tuned with ``benchmarks/bench_session_mc.py``: every later test compares with
    these runs, and a winner frozen on a lucky mean carries its luck into them)."""
    low, high = FAMILY_INCUMBENT_RUNS
    return min(high, max(low, entries + 4))
