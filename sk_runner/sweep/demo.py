"""A complete Stage O sweep on the simulated device (the README's main command)."""

from __future__ import annotations

import os
import tempfile
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

from sk_analytics.ledger.evidence import LEASE_DIR
from sk_analytics.stage_o.machine import Policy
from sk_runner.backends.base import Control
from sk_runner.devices.lease import LeaseRequest
from sk_runner.devices.markers import Need, lease_root_text
from sk_runner.sweep.leasing import DEMO_SOURCE, request_record, request_source
from sk_runner.sweep.session import BackendSpec, SweepSession, create_session

DEMO_SEED_CONFIG: dict[str, Any] = {
    "static_kernel_compile": True,
    "super_kernel_optimize": True,
    "super_kernel_optimize_options": {},
}
DEMO_CONTROL = Control(ranks=8, iterations=120, warmup=8)
DEMO_PROFILE_ITERATIONS = 14
"""The demo's DCCI collections profile 14 steps (6 after the 8 warm-up steps; protocol §6 needs 3)
instead of the 40 of a real collection: every rank is still profiled, but the raw sk_prof text of
both sides is ~0.6 GB instead of ~1.8 GB, and the demo takes ~1.5 min instead of ~2.5-3 on two cores
(benchmarks/README.md). ``sk-run demo --full-profile`` profiles the full 40."""
DEMO_POLICY = Policy(timeout_s=120.0, risky_timeout_s=6.0, profile_iterations=DEMO_PROFILE_ITERATIONS)
"""No risk authorisation and no declared operator adaptation: event_breaker_bypass and
early_start=1 settle as blocked, as they would for a real user who allowed neither. A risky
option's run is killed after 6 s (a simulated run takes under a second; the hang of
value_breaker_bypass=3 waited 15 s before)."""


def demo_session(
    folder: Path | None,
    *,
    network: str | None = None,
    seed: int = 2026,
    control: Control = DEMO_CONTROL,
    policy: Policy = DEMO_POLICY,
    noise: float | None = None,
    full_profile: bool = False,
    lease: LeaseRequest | None = None,
) -> SweepSession:
    """Create a fresh demo session (a new folder under the temp dir when none is given);
    ``full_profile``: the DCCI collections profile the full default window, not :data:`DEMO_PROFILE_ITERATIONS`;
    ``lease``: the lease every resume takes again (default: :func:`demo_need`), recorded at creation."""
    if full_profile:
        policy = replace(policy, profile_iterations=None)
    root = demo_root(folder)
    request = lease or LeaseRequest(demo_need(root, control.ranks))
    source = DEMO_SOURCE if lease is None or request.need == demo_need(root, control.ranks) else request_source(request, os.environ)
    return create_session(
        root, dict(DEMO_SEED_CONFIG), seed=seed, backend=BackendSpec("sim", network, noise), control=control, policy=policy,
        lease=request_record(request, source),
    )


def demo_root(folder: Path | None) -> Path:
    """The folder of a new demo session: ``folder``, else a new one under the temp dir, named by the time and a random
    suffix (two demos started in the same second get two folders)."""
    if folder is not None:
        return Path(folder)
    return Path(tempfile.gettempdir()) / f"sk-tune-demo-{time.strftime('%Y%m%d-%H%M%S')}-{uuid.uuid4().hex[:8]}"


def demo_need(root: Path, ranks: int) -> Need:
    """The demo's lease: simulated NPUs 0..ranks-1 under ``<session>/.device-leases`` (its own lock folder, so a
    demo never waits for another user's devices; its simulated devices are private too: docs/runner.md)."""
    return Need(lease_root_text(root / LEASE_DIR), tuple(range(ranks)))
