"""The lease a folder's runs recorded: what a resumed trial round or an old sweep session takes again.

Every run's ``meta.json`` carries ``lease`` (``mode`` acquired | inherited, ``root``,
``device_ids``; docs/runner.md "What is recorded"). A round continued without
lease options takes the lease its runs held, so its missing runs are measured on
the same devices (another device set is another environment, protocol §5.1).
"""

from __future__ import annotations

import json
from pathlib import Path

from sk_runner.devices.markers import LEASE_MODES, Need

META = "meta.json"


def run_lease(meta_path: Path) -> Need | None:
    """The lease one run's ``meta.json`` recorded (None: unleased, unreadable, or a multi-host run)."""
    try:
        lease = json.loads(meta_path.read_text(encoding="utf-8")).get("lease")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(lease, dict) or lease.get("mode") not in LEASE_MODES or lease.get("hosts"):
        return None
    root, ids = lease.get("root"), lease.get("device_ids")
    if not isinstance(root, str) or not isinstance(ids, list) or not ids or not all(isinstance(i, int) for i in ids):
        return None
    return Need(root, tuple(sorted(ids)))


ROUND_RUNS = ("CORRECTNESS/meta.json", "CLEAN/run-*/meta.json")
SESSION_RUNS = tuple(f"experiments/*/*/{pattern}" for pattern in ROUND_RUNS)


def folder_lease(folder: Path, patterns: tuple[str, ...] = ROUND_RUNS) -> Need | None:
    """The lease of the newest run under ``folder`` (a round: :data:`ROUND_RUNS`; a session: :data:`SESSION_RUNS`)."""
    metas = sorted((p for pattern in patterns for p in Path(folder).glob(pattern)), key=_mtime)
    for meta in reversed(metas):
        need = run_lease(meta)
        if need is not None:
            return need
    return None


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0
