"""The Stage O session as the ledger tells it: the user's policy and the folded state.

:func:`fold` replays ledger records in order into a :class:`SessionState`;
the state machine and the session report both read the session through it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sk_analytics.errors import IntegrityError
from sk_analytics.messages import coded, text
from sk_analytics.stage_o.actions import Change

O0 = "O0-INCUMBENT"


def skipped_settlement(stopped: Mapping[str, Any]) -> dict[str, Any]:
    """The settlement of an entry a stopped session never ran (``skipped``): what the hand-off,
    the settled matrix and the report all say of it, so that they agree on the word."""
    if "reason_zh" in stopped:  # a session recorded before reasons were codes: its derived files said it in Chinese
        return {"status": "skipped", "reason_zh": text("reason.skipped_stopped", "zh"), "evidence": {"session_stopped": dict(stopped)}}
    return {"status": "skipped", "reason": coded("reason.skipped_stopped"), "evidence": {"session_stopped": dict(stopped)}}


@dataclass(frozen=True)
class Policy:
    """What the user allowed and the fixed numbers of the protocol.

    Stored with the session and recorded in the ledger at start, so that a
    resumed sweep decides with exactly the same policy.
    """

    authorisations: frozenset[str] = frozenset()
    operator_adaptation: bool = False
    max_risk: str = "high"
    budget_runs: int | None = None
    min_trial_runs: int = 3
    incumbent_runs: int = 5
    timeout_s: float = 600.0
    risky_timeout_s: float = 300.0
    max_collect_attempts: int = 2
    gate: str = "protocol"
    """Gate mode of every option trial (``sk_analytics.option_trial.GATE_MODES``)."""
    allow_p90_regression_pct: float = 0.0
    allow_stddev_regression_pct: float = 0.0
    """The reference tool's P90/stddev regression allowances (the protocol: 0)."""
    min_effect_pct: float | None = None
    """The family policy's minimum effect that matters (%): a smaller estimated gain is not frozen;
    None: :data:`~sk_analytics.option_trial.modes.FAMILY_MIN_EFFECT_PCT`. Read only under ``gate: family``."""
    profile_iterations: int | None = None
    """First window (iterations) of the DCCI diagnostic collections; None: ``sk_runner.profile``'s
    default (40). The demo profiles fewer steps (``sk_runner.sweep.demo.DEMO_PROFILE_ITERATIONS``)."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["authorisations"] = sorted(self.authorisations)
        for name in ("profile_iterations", "min_effect_pct"):
            if data[name] is None:  # sessions made before the field keep their identity
                del data[name]
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Policy:
        values = dict(data)
        values["authorisations"] = frozenset(values.get("authorisations", ()))
        return cls(**values)


@dataclass(frozen=True)
class Record:
    """The part of a ledger record the machine reads."""

    kind: str
    data: Mapping[str, Any]


def as_records(records: Iterable[Any]) -> list[Record]:
    """Accept ledger records (objects with ``kind``/``data``) or ``(kind, data)`` pairs."""
    out: list[Record] = []
    for r in records:
        if isinstance(r, tuple):
            out.append(Record(r[0], r[1]))
        else:
            out.append(Record(r.kind, r.data))
    return out


@dataclass
class SessionState:
    """Everything the ledger says so far, folded in order."""

    matrix_fingerprint: str | None = None
    incumbent: str = O0
    option_changes: list[Change] = field(default_factory=list)
    settled: dict[str, dict[str, Any]] = field(default_factory=dict)
    trial_rounds: list[str] = field(default_factory=list)
    runs_used: int = 0
    by_entry: dict[str | None, list[Record]] = field(default_factory=dict)
    stopped: dict[str, Any] | None = None
    base: dict[str, Any] | None = None
    handoff: dict[str, Any] | None = None

    def records(self, entry_id: str | None, kind: str, **match: Any) -> list[Mapping[str, Any]]:
        """Data of this entry's records of ``kind`` whose fields equal ``match``."""
        return [
            r.data
            for r in self.by_entry.get(entry_id, [])
            if r.kind == kind and all(r.data.get(k) == v for k, v in match.items())
        ]

    def last(self, entry_id: str | None, kind: str, **match: Any) -> Mapping[str, Any] | None:
        found = self.records(entry_id, kind, **match)
        return found[-1] if found else None

    @property
    def next_round(self) -> str:
        return f"O{len(self.trial_rounds) + 1}"


def _changes(items: Sequence[Mapping[str, Any]] | None) -> list[Change]:
    return [Change(c["pointer"], c["value"]) for c in items or ()]


def fold(records: Iterable[Any], matrix: Mapping[str, Any] | None = None) -> SessionState:
    """Fold ledger records into a :class:`SessionState` (order matters)."""
    state = SessionState()
    entry_ids = {e["id"] for e in matrix["entries"]} if matrix is not None else None
    for rec in as_records(records):
        data = rec.data
        if state.handoff is not None:
            raise IntegrityError(f"ledger has a '{rec.kind}' record after the hand-off was written")
        entry_id = data.get("entry_id")
        if entry_ids is not None and entry_id is not None and entry_id not in entry_ids:
            raise IntegrityError(f"ledger record '{rec.kind}' names entry {entry_id!r} that is not in the frozen matrix")
        state.by_entry.setdefault(entry_id, []).append(rec)
        if rec.kind == "matrix_frozen":
            state.matrix_fingerprint = data["fingerprint"]
        elif rec.kind == "trial_result":
            state.runs_used += int(data.get("runs_added", 0))
            if data["phase"] in ("trial", "repair") and data["round"] not in state.trial_rounds:
                state.trial_rounds.append(data["round"])
        elif rec.kind == "entry_settled":
            if entry_id is None:
                raise IntegrityError("ledger record 'entry_settled' names no entry_id")
            if entry_id in state.settled:
                raise IntegrityError(f"ledger settles entry {entry_id!r} twice")
            state.settled[entry_id] = dict(data)
            if data["status"] == "accepted":
                state.incumbent = data["incumbent_round"]
                accepted = _changes(data.get("accepted_changes"))
                pointers = {c.pointer for c in accepted}
                state.option_changes = [c for c in state.option_changes if c.pointer not in pointers] + accepted
        elif rec.kind == "session_stopped":
            state.stopped = dict(data)
        elif rec.kind == "base_frozen":
            state.base = dict(data)
        elif rec.kind == "handoff_written":
            state.handoff = dict(data)
    return state
