"""The session's lease request: recorded when the session is created, taken again by every ``--resume``.

A sweep started with a lease root and device ids (or under a parent's markers,
or a demo's own lease) records that request in its ledger (``lease_requested``,
:data:`sk_analytics.stage_o.leases.REQUESTED`) before anything runs; a resume
without lease options takes exactly that lease again (acquired again, or
inherited from exactly matching markers), whether or not a trial ran before the
stop. A session that recorded no request (made before this record existed, or by
the Python API) takes the lease its runs held, and records the request at its
first leased run.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sk_analytics.ledger.chain import read_records
from sk_analytics.ledger.evidence import LEASE_DIR
from sk_analytics.stage_o.leases import REQUESTED, recorded_lease, requested_lease
from sk_runner.devices.lease import LeaseRequest
from sk_runner.devices.markers import Need, lease_root_text
from sk_runner.devices.options import resume_request
from sk_runner.devices.recorded import SESSION_RUNS, folder_lease, request_need, request_record, request_source

DEMO_SOURCE = "demo"
"""The ``source`` of a demo's own lease (``<session>/.device-leases``): it moves with the session folder."""


def recorded_request(root: Path) -> tuple[Need | None, bool, bool]:
    """(need, unleased, recorded) of a session: its ``lease_requested`` record (a demo's own lease under the
    session's folder as it is now, so a moved demo session leases under its new folder), else the lease its runs
    held (the ledger's trial records, else any run's meta.json: a session killed inside its first trial)."""
    records = read_records(root)
    data = requested_lease(records)
    if data is not None:
        need, unleased = request_need(data)
        if need is not None and data.get("source") == DEMO_SOURCE:  # the demo's own lease: under the session, wherever it is now
            need = Need(lease_root_text(Path(root) / LEASE_DIR), need.device_ids)
        return need, unleased, True
    found = recorded_lease(records)
    return (Need(*found) if found is not None else folder_lease(root, SESSION_RUNS)), False, False


def session_request(root: Path, lease_root: Path | None, device_ids: tuple[str, ...], lease_timeout: float, *,
                    unleased: bool = False, env: Mapping[str, str] | None = None) -> LeaseRequest:
    """The lease a ``sweep --resume`` of ``root`` takes: the recorded one; options naming another are refused (exit 2)."""
    need, was_unleased, _ = recorded_request(root)
    return resume_request(lease_root, device_ids, lease_timeout, recorded=need, recorded_unleased=was_unleased, unleased=unleased,
                          env=os.environ if env is None else env, what=str(root),
                          again=f"resume with no lease options: sk-run sweep --resume {root}")


def ensure_recorded(session: Any, request: LeaseRequest | None, env: Mapping[str, str]) -> None:
    """Record ``request`` as the session's lease request if it has none yet and asks for a lease (or opted out)."""
    if request is None or (request.need is None and not request.unleased):
        return
    if requested_lease(read_records(session.root)) is None:
        session.append(REQUESTED, request_record(request, request_source(request, env)))


__all__ = ["DEMO_SOURCE", "ensure_recorded", "recorded_request", "request_record", "request_source", "session_request"]
