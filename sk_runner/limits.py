"""Bounds on the size of one workload process (ranks, iterations, warm-up), shared by every backend and the simulator.

:class:`sk_runner.backends.base.Control` refuses controls out of bounds before
anything starts, and the simulated workload (:mod:`sk_runner.sim.runner`)
refuses the same sizes when started by hand. The click types at the end are the
same bounds as sk-run options take them (one definition each, for every command
that has the option): a value out of bounds, ``nan`` or ``inf`` is exit 2 naming
the option before the command runs.
"""

from __future__ import annotations

import click

from sk_analytics.cli._base import FiniteFloat

MAX_RANKS = 1024
"""Most ranks one process may be asked for (128 servers of 8 NPUs); a larger value is a typo, not a job."""
MAX_ITERATIONS = 100_000
"""Most decode iterations one process may be asked for."""
MAX_SAMPLES = 2_000_000
"""Most decode samples of one process over all its ranks (ranks x iterations: about 80 MB of rank logs)."""


def size_problem(ranks: int, iterations: int | None, warmup: int) -> str | None:
    """Why these run sizes cannot be run (below 1, above their bound), or None; the check is O(1)."""
    if ranks < 1:
        return f"--ranks {ranks}: expected at least 1"
    if ranks > MAX_RANKS:
        return f"--ranks {ranks}: expected at most {MAX_RANKS}"
    if warmup < 0:
        return f"--warmup {warmup}: expected 0 or more"
    if iterations is not None:
        if iterations <= warmup:
            return f"--iterations {iterations}: expected more than --warmup {warmup} (decode samples must remain after warm-up)"
        if iterations > MAX_ITERATIONS:
            return f"--iterations {iterations}: expected at most {MAX_ITERATIONS}"
        if ranks * iterations > MAX_SAMPLES:
            return f"--ranks {ranks} x --iterations {iterations}: expected at most {MAX_SAMPLES} decode samples per process"
    return None

MAX_TIMEOUT_S = 7 * 24 * 3600
"""Longest timeout of one workload process (a week): a larger value (``1e308``) is a typo, and no clock
arithmetic of a deadline may overflow."""
MAX_RUNS = 1000
"""Most clean runs of one round (``min_trial_runs``, ``incumbent_runs``, ``--runs``) and most runs of a session budget per entry."""
MAX_SEED = 2**63 - 1
"""Largest workload seed: the contract hands it to the workload as a signed 64-bit integer."""
MAX_COLLECT_ATTEMPTS = 100
"""Most collection attempts of one diagnostic profile (``--max-attempts``, ``policy.max_collect_attempts``)."""
MAX_NOISE = 1000.0
"""Largest noise scale of the simulated device (``sk-run sim --noise``, ``workload.noise``)."""

SEED = click.IntRange(0, MAX_SEED)
"""A workload or session seed: ``--seed`` of sweep, demo, sim, trial, profile and task init."""
TIMEOUT = FiniteFloat(min=0, min_open=True, max=MAX_TIMEOUT_S)
"""Seconds a process or a wait may last: ``--timeout`` of trial, profile and task init, ``sk-run sim --duration``."""
LEASE_TIMEOUT = FiniteFloat(min=0, max=MAX_TIMEOUT_S)
"""Seconds to wait for a held NPU lease: ``--lease-timeout`` of every device command (0: do not wait)."""
RANKS = click.IntRange(1, MAX_RANKS)
"""Ranks of one process: ``--ranks`` of trial, probe, profile, task init and sweep (``--demo``)."""
ITERATIONS = click.IntRange(1, MAX_ITERATIONS)
"""Decode iterations per rank: ``--iterations`` of trial, profile and task init."""
RUNS = click.IntRange(1, MAX_RUNS)
"""A number of clean runs: ``sk-run trial --runs`` and ``--top-up-to``."""
ATTEMPTS = click.IntRange(1, MAX_COLLECT_ATTEMPTS)
"""``sk-run profile --max-attempts``."""
NOISE = FiniteFloat(min=0.0, max=MAX_NOISE)
"""``sk-run sim --noise``."""
