"""Shared set-up of the sweep tests: small sessions on the simulator with a chosen sub-matrix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sk_analytics.atomic import write_json
from sk_analytics.stage_o.machine import Policy
from sk_analytics.stage_o.matrix import build_matrix, protocol_candidates
from sk_analytics.strict_json import load_json_file
from sk_runner.backends.base import Control
from sk_runner.sweep.demo import DEMO_SEED_CONFIG
from sk_runner.sweep.session import BackendSpec, SweepSession, create_session

SMALL = Control(ranks=2, iterations=30, warmup=8)
FAST_POLICY = Policy(timeout_s=60.0, risky_timeout_s=4.0)


def small_session(
    root: Path,
    entries: list[str],
    *,
    network: str | None = None,
    noise: float = 0.0,
    policy: Policy = FAST_POLICY,
    seed: int = 7,
    control: Control = SMALL,
    backend: BackendSpec | None = None,
) -> SweepSession:
    """A session whose matrix holds only ``entries`` (probe evidence: every value ready)."""
    session = create_session(root, dict(DEMO_SEED_CONFIG), seed=seed, backend=backend or BackendSpec("sim", network, noise),
                             control=control, policy=policy)
    probes = [{"option": c.option, "value": c.value, "ready": True, "evidence": {"test": "exact value accepted"}}
              for c in protocol_candidates()]
    matrix = build_matrix(DEMO_SEED_CONFIG, probes)
    matrix["entries"] = [e for e in matrix["entries"] if e["id"] in entries]
    write_json(root / "matrix.json", matrix)
    return session


def settled_statuses(root: Path) -> dict[str, str]:
    return {e["id"]: e["status"] for e in load_json_file(root / "matrix.settled.json")["entries"]}


def base_identity(root: Path) -> dict[str, Any]:
    base = load_json_file(root / "BASE" / "sbest-base.json")
    return {"round": base["round"], "options": base["options"], "option_changes": base["option_changes"]}
