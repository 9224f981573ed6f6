"""Which of the real format variants one simulated run writes (formats.md §3, §4).

Real profiles come from many CANN builds and kernels: some name the SK trace
``sk_event_dev_device_<id>.json`` with ``args.modelRI`` (builds before
2026-05), some log kernel members whose handle lists run past the logger's
4096 characters (``[CONT:<n>]`` lines). The simulator draws these per run from
the timing seed, so the demo, the sweeps and the tests meet every layout
without asking for it, and a given seed always writes the same one. The
analysis never knows which was drawn: it must read them all alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LEGACY_SK_PROF_SHARE = 0.25
"""Share of runs written by a pre-2026-05 build (legacy sk_prof file name and ``args.modelRI``)."""
LONG_LINES_SHARE = 0.35
"""Share of runs whose kernels list many resolved handles."""
LONG_MEMBER_SHARE = 0.04
"""In such a run, the share of kernel members with a line over 4096 characters."""


@dataclass(frozen=True)
class FormatVariant:
    """The layout choices of one run (the same on every rank: one build, one graph)."""

    legacy_sk_prof: bool
    long_member_share: float


def draw_variant(seed: int) -> FormatVariant:
    """The variant of the run with timing seed ``seed`` (a stream of its own: timings do not move)."""
    rng = np.random.default_rng([seed, 7])
    legacy, long_lines = rng.random(2) < (LEGACY_SK_PROF_SHARE, LONG_LINES_SHARE)
    return FormatVariant(bool(legacy), LONG_MEMBER_SHARE if long_lines else 0.0)
