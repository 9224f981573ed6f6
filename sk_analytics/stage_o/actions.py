"""The actions of the Stage O state machine: what :func:`~sk_analytics.stage_o.machine.next_action` asks for.

Each action is a frozen dataclass the sweep executor performs exactly once and
records in the ledger; ``kind`` names it there.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any, Literal

Status = Literal["accepted", "rejected", "failed", "blocked", "skipped"]
Phase = Literal["o0", "trial", "top_up", "repair"]


@dataclass(frozen=True)
class Change:
    """One RFC 6901 pointer set to an exact JSON value."""

    pointer: str
    value: Any


@dataclass(frozen=True)
class Action:
    """Base of every action; ``kind`` names it in logs and ledger records."""

    @property
    def kind(self) -> str:
        return type(self).__name__

    def to_json(self) -> dict[str, Any]:
        return {"action": self.kind, **asdict(self)}


@dataclass(frozen=True)
class FreezeMatrix(Action):
    """The matrix must be frozen (and recorded) before anything runs."""


@dataclass(frozen=True)
class RunTrial(Action):
    """Run (or continue) a round until it has ``runs`` clean processes.

    ``base_round`` None means the SEED config. ``correctness`` asks for the
    full correctness run first (new rounds); top-ups skip it.
    """

    round: str
    phase: Phase
    entry_id: str | None
    base_round: str | None
    changes: tuple[Change, ...]
    runs: int
    correctness: bool
    timeout_s: float
    isolated: bool = False
    joint_dcci: bool = False


@dataclass(frozen=True)
class Gate(Action):
    """Compare ``round`` with the five-run ``baseline_round`` (option-trial gate)."""

    round: str
    baseline_round: str
    entry_id: str | None


@dataclass(frozen=True)
class CheckStability(Action):
    """Five-run stability check (spread ≤ max) of ``round``."""

    round: str
    entry_id: str | None


@dataclass(frozen=True)
class CollectProfile(Action):
    """One diagnostic profile under the artifact contract (a new empty root per attempt)."""

    entry_id: str
    side: Literal["o0", "disable_all"]
    role: Literal["baseline_profile", "candidate_profile"]
    config_round: str
    attempt: int
    iterations: int | None = None
    """Window to collect with: the other side's final window (None: the default first window)."""


@dataclass(frozen=True)
class DcciDiff(Action):
    """Read-only per-SK/child attribution between the two collections."""

    entry_id: str
    baseline_root: str
    candidate_root: str
    o0_round: str
    disable_all_round: str


@dataclass(frozen=True)
class ProbeRepair(Action):
    """Exact-value probe of the final before/after lists on the disable-all config, same environment."""

    entry_id: str
    disable_all_round: str
    values: tuple[Change, ...]


@dataclass(frozen=True)
class Settle(Action):
    """Give a matrix entry its final status (recorded as ``entry_settled``)."""

    entry_id: str
    status: Status
    reason: Mapping[str, Any]
    """The recorded reason: a message id and its facts (:func:`sk_analytics.messages.coded`), worded at the edge."""
    evidence: Mapping[str, Any]
    incumbent_round: str
    accepted_changes: tuple[Change, ...] = ()
    family_rejected: bool = False


@dataclass(frozen=True)
class Stop(Action):
    """The session cannot continue (O0 failed or unstable)."""

    reason: Mapping[str, Any]
    evidence: Mapping[str, Any]


@dataclass(frozen=True)
class FreezeBase(Action):
    """All entries settled: freeze the incumbent as Sbest-BASE."""

    round: str
    accepted_entries: tuple[str, ...]
    option_changes: tuple[Change, ...]


@dataclass(frozen=True)
class WriteHandoff(Action):
    """Write handoff.json and the reports (after BASE or a stop)."""

    outcome: Literal["base", "stopped"]


@dataclass(frozen=True)
class Finished(Action):
    """Nothing left to do."""

    outcome: Literal["base", "stopped"]
