"""``python -m sk_runner.sim``: the simulated workload without the ``sk-run`` group."""

from __future__ import annotations

import sys

from sk_analytics.cli._base import run_cli
from sk_runner.sim.cli import sim

if __name__ == "__main__":
    sys.exit(run_cli(sim, "sk_runner.sim"))
