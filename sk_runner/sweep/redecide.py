"""``sk-run sweep --redecide SESSION --gate family --session NEW``: re-decide a finished session under another
gate, from the runs it already made (issue 43).

The successor is a new session linked to its predecessor (``task.redecides``: its path, ledger head and hand-off
fingerprint, in the successor's fingerprinted identity); the predecessor is only read, so it stays verifiable.
The successor takes the predecessor's frozen matrix and walks the state machine again under the new gate. Each
trial round it asks for that the predecessor ran with the same identity (same round, base config and changes, so
the same derived config) is adopted: its folder is copied without the derived gate and stability files, so its
clean runs are reused and the trial engine adds only the runs the new gate needs. A round whose incumbent differs
(the predecessor froze a value the successor does not) is run afresh.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

from sk_analytics.errors import IntegrityError, UsageError
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.fingerprint import sha256_file
from sk_analytics.stage_o.layout import HANDOFF_FILE, PROBES_DIR
from sk_runner.sweep.matrix_cli import MATRIX_NAME
from sk_runner.sweep.session import SweepSession, create_session, load_session
from sk_runner.trial.spec import complete_runs, round_dir_of

PREDECESSOR_KEY = "redecides"
NOT_ADOPTED = ("option-trial-summary.json", "stability.json", "*.lock", ".*")
"""Derived files the successor computes again under its own gate (and locks / temp files)."""


def successor_session(original: Path, target: Path, gate: str, *, lease: dict[str, Any] | None = None) -> SweepSession:
    """Create the successor of the finished, verifiable session ``original`` under ``gate`` at ``target``
    (``lease``: its ``lease_requested`` record, :mod:`sk_runner.sweep.leasing`)."""
    from sk_analytics.ledger.chain import verify

    orig = load_session(original)
    handoff_path = original / HANDOFF_FILE
    if not handoff_path.is_file():
        raise UsageError(f"{original}: no hand-off yet; finish it first (sk-run sweep --resume {original})")
    if gate == orig.policy.gate:
        raise UsageError(f"{original} was decided under gate {gate} already; --redecide takes another gate")
    checked = verify(original)
    if not checked.ok:
        raise IntegrityError(f"{original}: the ledger does not verify; only a verifiable session can be re-decided")
    handoff = load_json_file(handoff_path)
    link = {"session": str(original.resolve()), "gate": orig.policy.gate, "ledger_head": handoff["ledger"]["head"],
            "handoff_fingerprint": handoff["handoff_fingerprint"]}
    task: dict[str, Any] = {**(orig.task or {}), PREDECESSOR_KEY: link}
    session = create_session(target, load_json_file(orig.seed_config_path), seed=orig.seed, backend=orig.backend,
                             control=orig.control, policy=replace(orig.policy, gate=gate, budget_runs=None), task=task,
                             placement=orig.placement, lease=lease)
    shutil.copy2(original / MATRIX_NAME, target / MATRIX_NAME)  # the same frozen family of entries
    if (original / PROBES_DIR).is_dir():
        shutil.copytree(original / PROBES_DIR, target / PROBES_DIR)
    return session


def predecessor_of(session: SweepSession) -> Path | None:
    """The session a successor re-decides (None for any other session)."""
    link = (session.task or {}).get(PREDECESSOR_KEY)
    return None if not link else Path(link["session"])


def adopt_round(session: SweepSession, round_name: str, base_config: Path, changes: list[dict[str, Any]], joint_dcci: bool) -> int:
    """Copy the predecessor's ``round_name`` into the successor when it ran exactly this trial; the clean runs
    adopted (0: nothing adopted: no predecessor, the round exists already, or it ran another trial)."""
    predecessor = predecessor_of(session)
    target = round_dir_of(session.root, round_name)
    if predecessor is None or target.exists():
        return 0
    source = round_dir_of(predecessor, round_name)
    trial_path = source / "trial.json"
    if not trial_path.is_file():
        return 0
    identity = load_json_file(trial_path).get("identity") or {}
    same = (identity.get("base_config_sha256") == sha256_file(base_config) and identity.get("changes") == changes
            and bool(identity.get("joint_dcci")) == joint_dcci)
    if not same:
        return 0
    shutil.copytree(source, target, ignore=shutil.ignore_patterns(*NOT_ADOPTED))
    return len(complete_runs(target))
