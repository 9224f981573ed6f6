"""The gate modes of an option trial (constants only).

Kept apart from :mod:`sk_analytics.option_trial.api` so that validating a task
or a campaign spec (``policy.gate``) does not import Polars and SciPy.
"""

from __future__ import annotations

from typing import Literal

GateMode = Literal["protocol", "strict", "stats", "sequential"]
GATE_MODES: tuple[str, ...] = ("protocol", "strict", "stats", "sequential")
"""``sequential``: the statistics policy looking after every candidate run up to a cap (not the protocol)."""

SEQUENTIAL_CAP = 8
"""The sequential policy's default cap on the candidate runs it looks at (here, not in ``sequential``, so --help stays light)."""
