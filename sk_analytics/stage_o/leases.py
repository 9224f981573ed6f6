"""What a session's ledger says about its device leases (protocol §9): which lease its clean runs held, which did not.

Each ``trial_result`` record carries the lease its trial ran under
(``lease``: ``mode`` acquired | inherited, ``root``, ``device_ids``; ``mode``
null or no ``lease`` at all: unleased; a run that spans hosts also ``hosts``,
each host's own, whose roots and devices the summary lists) and the runs it discarded because a
foreign process used the devices (``foreign_processes``); a ``lease_blocked``
record is a step that did not run. Pure functions over ``(kind, data)``
records, shared by the report, the hand-off and ``ledger verify``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sk_analytics.stage_o.state import as_records

LEASE_MODES = ("acquired", "inherited")
NPU_SMI, SIM_REGISTRY = "npu-smi", "sim-registry"
"""The clean-device proof's sources (sk_runner.devices.occupancy): only npu-smi sees a real device's processes."""


@dataclass(frozen=True)
class LeaseSummary:
    """The leases of a session's trials: how many ran leased, on which roots and devices, which rounds did not."""

    trials: int = 0
    leased: int = 0
    modes: tuple[str, ...] = ()
    roots: tuple[str, ...] = ()
    device_ids: tuple[tuple[int, ...], ...] = ()
    unleased_rounds: tuple[str, ...] = ()
    discarded_runs: tuple[Mapping[str, Any], ...] = ()
    blocked: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)
    proof_sources: tuple[str, ...] = ()
    """What proved the leased devices free around the clean runs: ``npu-smi`` (a real device's process table),
    ``sim-registry`` (a simulated host's registry: proves nothing about a real NPU), ``hosts`` (each host's own),
    ``none`` (a leased record that names no proof)."""
    requested: Mapping[str, Any] | None = None
    """The session's ``lease_requested`` record (None: it recorded none)."""

    @property
    def proven_free(self) -> bool:
        """Whether every leased record's devices were proven free by a source that can prove it (npu-smi)."""
        return self.leased > 0 and self.proof_sources == (NPU_SMI,)

    @property
    def all_leased(self) -> bool:
        return self.trials > 0 and self.leased == self.trials

    def to_json(self) -> dict[str, Any]:
        return {"trials": self.trials, "leased": self.leased, "modes": list(self.modes), "roots": list(self.roots),
                "device_ids": [list(ids) for ids in self.device_ids], "unleased_rounds": list(self.unleased_rounds),
                "discarded_runs": [dict(d) for d in self.discarded_runs], "lease_blocked": [dict(b) for b in self.blocked],
                "proof_sources": list(self.proof_sources), "proven_free": self.proven_free,
                "requested": None if self.requested is None else {k: v for k, v in self.requested.items() if k != "summary_zh"}}


def lease_of(data: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The lease a record's trial held, or None when it held none."""
    lease = data.get("lease")
    if isinstance(lease, Mapping) and lease.get("mode") in LEASE_MODES:
        return lease
    return None


def _unique(values: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(dict.fromkeys(values))


def summarize(records: Iterable[Any]) -> LeaseSummary:
    """The :class:`LeaseSummary` of a session's records (ledger records or ``(kind, data)`` pairs)."""
    recs = as_records(records)
    trials = [r.data for r in recs if r.kind == "trial_result"]
    leases = [lease_of(d) for d in trials]
    held = [lease for lease in leases if lease is not None]
    gates = [r.data for r in recs if r.kind == "gate_result"]  # the runs a gate added carry their own round
    discarded = tuple(dict(p, round=p.get("round", d.get("round"))) for d in trials + gates for p in d.get("foreign_processes") or ())
    blocked = tuple(r.data for r in recs if r.kind == "lease_blocked")
    parts = [part for lease in held for part in lease.get("hosts") or (lease,)]  # a multi-host run: each host's lease
    return LeaseSummary(
        trials=len(trials), leased=len(held), modes=_unique(str(lease["mode"]) for lease in held),
        roots=_unique(str(part.get("root")) for part in parts),
        device_ids=_unique(tuple(int(i) for i in part.get("device_ids") or ()) for part in parts),
        unleased_rounds=_unique(str(d.get("round")) for d, lease in zip(trials, leases, strict=True) if lease is None),
        discarded_runs=discarded, blocked=blocked,
        proof_sources=_unique(str(lease.get("proof") or "none") for lease in held),
        requested=requested_lease(recs),
    )


def recorded_lease(records: Iterable[Any]) -> tuple[str, tuple[int, ...]] | None:
    """(root, device ids) of the last lease a trial of the session held: what ``sweep --resume`` takes again."""
    for record in reversed(as_records(records)):
        lease = lease_of(record.data) if record.kind == "trial_result" else None
        if lease is not None and lease.get("root") and lease.get("device_ids"):
            return str(lease["root"]), tuple(int(i) for i in lease["device_ids"])
    return None


REQUESTED = "lease_requested"
"""The ledger record of the lease a session asked for: written at its creation (or its first leased resume); every
``sweep --resume`` takes that lease again. Data: ``root``, ``device_ids`` (null: no lease), ``unleased`` (the user's
explicit opt-out), ``source`` (options, markers, demo)."""


def requested_lease(records: Iterable[Any]) -> Mapping[str, Any] | None:
    """The data of the session's last ``lease_requested`` record (None: the session recorded no request)."""
    for record in reversed(as_records(records)):
        if record.kind == REQUESTED:
            return record.data
    return None


def unleased_note(records: Iterable[Any]) -> str | None:
    """``ledger verify``'s honest note on a session whose clean runs were not all leased (None: all were, or no trial)."""
    summary = summarize(records)
    if summary.trials == 0 or summary.all_leased:
        return None
    rounds = ", ".join(summary.unleased_rounds[:6]) + (" …" if len(summary.unleased_rounds) > 6 else "")
    return (f"unleased: {summary.trials - summary.leased} of {summary.trials} trial record(s) ran their clean runs without a device "
            f"lease (rounds {rounds}): nothing shows that no other work shared their NPUs (protocol §9); not a tampering finding")
