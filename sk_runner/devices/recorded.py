"""The lease a session or a trial round asked for, and the lease its runs held: what a rerun takes again.

A sweep session records its request in its ledger, a trial round in
``<round>/lease-request.json`` (:data:`ROUND_REQUEST`), both with
:func:`request_record` and before any run: a round blocked at the lease and run
again without lease options takes the lease it asked for. Every run's
``meta.json`` carries ``lease`` (``mode`` acquired | inherited, ``root``,
``device_ids``; docs/runner.md "What is recorded"): a round made before the
request record existed takes the lease its runs held, so its missing runs are
measured on the same devices (another device set is another environment,
protocol §5.1).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sk_analytics.errors import InputError
from sk_analytics.files.atomic import write_json
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.messages import coded
from sk_runner.devices.lease import LeaseRequest
from sk_runner.devices.markers import LEASE_MODES, Need, format_ids, marker_need

ROUND_REQUEST = "lease-request.json"
"""A trial round's lease request (the data of :func:`request_record`), written when the round is first run."""


def request_record(request: LeaseRequest, source: str) -> dict[str, Any]:
    """The record of ``request`` (``source``: options, markers, demo, campaign, unleased): a session's
    ``lease_requested`` ledger record, a round's :data:`ROUND_REQUEST`."""
    need = request.need
    what = coded("lease.unleased" if request.unleased else "lease.none") if need is None else \
        coded("lease.need", ids=format_ids(need.device_ids), root=need.root)
    return {"root": None if need is None else need.root, "device_ids": None if need is None else list(need.device_ids),
            "unleased": request.unleased, "source": source, "summary": coded("summary.lease_requested", what=what)}


def request_source(request: LeaseRequest, env: Mapping[str, str]) -> str:
    """Where a request came from: the user's opt-out, a parent's markers, or the options."""
    if request.unleased:
        return "unleased"
    return "markers" if request.need is not None and request.need == marker_need(env) else "options"


def request_need(data: Any, source: str | os.PathLike[str] | None = None) -> tuple[Need | None, bool]:
    """(need, unleased) of a :func:`request_record`; :class:`InputError` naming ``source`` (the file it was read
    from) when it is not one: a lease request read loosely would let a rerun take another lease, or none."""
    expected = 'a lease request {"root": folder or null, "device_ids": [NPU ids] or null, "unleased": true|false}'
    if not isinstance(data, Mapping):
        raise InputError(source, "the lease request is not a JSON object", expected=expected)
    root, ids, unleased = data.get("root"), data.get("device_ids"), data.get("unleased", False)
    if root is not None and not (isinstance(root, str) and root):
        raise InputError(source, f"lease request root {root!r} is not a folder", expected=expected)
    if ids is not None and not (isinstance(ids, list) and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in ids)):
        raise InputError(source, f"lease request device_ids {ids!r} are not NPU ids", expected=expected)
    if not isinstance(unleased, bool) or (unleased and (root or ids)) or (bool(root) != bool(ids)):
        raise InputError(source, "the lease request names a root without devices, devices without a root, or a lease and "
                         "--unleased at once", expected=expected)
    need = Need(root, tuple(ids)) if root and ids else None
    return need, unleased


def record_round_request(round_dir: Path, request: object, env: Mapping[str, str]) -> None:
    """Write the round's :data:`ROUND_REQUEST` once, before any run, where ``request`` is a :class:`LeaseRequest` that
    asks for a lease (or opted out); a lease a caller holds (a sweep's) is recorded by that caller's session."""
    path = Path(round_dir) / ROUND_REQUEST
    if isinstance(request, LeaseRequest) and (request.need is not None or request.unleased) and not path.is_file():
        write_json(path, request_record(request, request_source(request, env)))


def round_request(round_dir: Path) -> tuple[Need | None, bool]:
    """(need, unleased) a rerun of a trial round takes: its :data:`ROUND_REQUEST`, else (a round made before that file
    existed) the lease its runs held. A request file that cannot be read or is no request is refused, naming it:
    ignoring it would run the round again under another lease, or none."""
    path = Path(round_dir) / ROUND_REQUEST
    if not os.path.lexists(path):
        return folder_lease(round_dir), False
    return request_need(load_json_file(path), path)

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
