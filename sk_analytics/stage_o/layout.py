"""Names in a Stage O session folder shared by the runner (writer) and the
analysis (reader), so that neither hard-codes the other's file names."""

from __future__ import annotations

from pathlib import Path

EXPERIMENTS = Path("experiments") / "Sbest"
"""Round folders: ``<session>/experiments/Sbest/<round>/``."""

ENVIRONMENT_BLOCKERS_FILE = "environment-blockers.jsonl"
"""Per round: one JSON line per environment blocker (a failure before any
experiment command started, protocol §8), appended and fsynced."""

HANDOFF_FILE = "handoff.json"
"""The hand-off (protocol §2), written once every decision is made."""

PROBES_DIR = "PROBES"
"""The sweep's exact-value probes: ``<session>/PROBES/<option>/value-<sha8>/attempt-<n>/``."""
