"""Defaults of reading rank logs, importable without Polars: the CLIs show them in ``--help``
(:mod:`.timings` reads the logs with them)."""

from __future__ import annotations

DEFAULT_EXPECTED_RANKS = 8
"""Rank logs per clean run (TP 8)."""
DEFAULT_WARMUP = 8
"""Decode samples dropped per rank as warm-up."""
