"""Defaults of ``sk-run profile``, importable without the collection machinery (Polars, Arrow):
``--help`` shows them (:mod:`sk_runner.profile` collects with them)."""

from __future__ import annotations

DEFAULT_SK_PROF_KB = 1024
"""``ASCEND_PROF_SK_ON``: sk_prof buffer per core in KB."""
MAX_SK_PROF_KB = 5120
DEFAULT_PROFILE_ITERATIONS = 40
"""Iterations of the first profiling window (halved after a full sk_prof buffer)."""
DEFAULT_MAX_ATTEMPTS = 3
"""Collections at most, each in a new root."""
