"""The Stage O session as the report and the explore API read it from disk: ledger, matrix and every file the ledger names.

Loaded once into a :class:`SessionView`; the report sections and the
notebook frames only read it. It sits below both
(:mod:`sk_analytics.explore` reads it, :mod:`sk_analytics.report.render`
builds on explore), so no lower floor imports a higher one; it reads only the
decision floor (:mod:`sk_analytics.stage_o.state`, ``matrix``, ``layout``,
``reasons``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sk_analytics.files.strict_json import load_json_file
from sk_analytics.ledger.chain import LedgerRecord, read_records
from sk_analytics.stage_o.layout import ENVIRONMENT_BLOCKERS_FILE, EXPERIMENTS, HANDOFF_FILE
from sk_analytics.stage_o.matrix import load_matrix
from sk_analytics.stage_o.reasons import settled_reason
from sk_analytics.stage_o.state import SessionState, fold, skipped_settlement


@dataclass
class RoundInfo:
    """One round's records: trial results, gate, stability, and the files they name."""

    name: str
    entry_id: str | None
    phase: str
    trials: list[Mapping[str, Any]] = field(default_factory=list)
    gate: Mapping[str, Any] | None = None
    stability: Mapping[str, Any] | None = None
    summary: Mapping[str, Any] | None = None
    stability_file: Mapping[str, Any] | None = None


@dataclass
class SessionView:
    """Everything the report shows, loaded once."""

    root: Path
    matrix: Mapping[str, Any]
    records: list[tuple[str, Mapping[str, Any]]]
    state: SessionState
    rounds: dict[str, RoundInfo]
    dcci_diff: Mapping[str, Any] | None
    base: Mapping[str, Any] | None
    next_steps: list[str] = field(default_factory=list)  # in the report's language
    environment_blockers: list[Mapping[str, Any]] = field(default_factory=list)
    truth: Mapping[str, Mapping[str, Any]] | None = None
    """The simulator's truth per gated round (sessions on the simulator): recorded in
    handoff.json after every decision, shown only in the report's comparison section."""


def json_or_none(root: Path, rel: str | None) -> Any:
    if not rel:
        return None
    path = root / rel
    return load_json_file(path) if path.is_file() else None


def load_view(root: Path, verified: Sequence[LedgerRecord] | None = None) -> SessionView:
    """Read the ledger, matrix and every file the ledger names.

    ``verified``: the ledger's records when the caller has just verified them (one read per command)."""
    records: list[tuple[str, Mapping[str, Any]]] = [(r.kind, r.data) for r in (read_records(root) if verified is None else verified)]
    matrix = load_matrix(root / "matrix.json")
    state = fold(records, matrix)
    rounds: dict[str, RoundInfo] = {}
    for kind, data in records:
        name = data.get("round")
        if kind == "trial_result":
            info = rounds.setdefault(data["round"], RoundInfo(data["round"], data.get("entry_id"), data["phase"]))
            info.trials.append(data)
        elif kind == "gate_result" and name in rounds:
            rounds[name].gate = data
            rounds[name].summary = json_or_none(root, data.get("summary_path"))
        elif kind == "stability_result" and name in rounds:
            rounds[name].stability = data
            rounds[name].stability_file = json_or_none(root, data.get("path"))
    diff = None
    base = None
    for kind, data in records:
        if kind == "dcci_diff_result" and data.get("ok"):
            diff = json_or_none(root, data.get("path"))
        if kind == "base_frozen":
            base = json_or_none(root, data.get("path"))
    handoff = json_or_none(root, HANDOFF_FILE)  # bound to the ledger by its fingerprint (ledger verify)
    return SessionView(root, matrix, records, state, rounds, diff, base,
                       environment_blockers=load_environment_blockers(root),
                       truth=(handoff or {}).get("simulator_truth"))


def load_environment_blockers(root: Path) -> list[Mapping[str, Any]]:
    """Every round's environment blockers in time order (protocol §8: they go
    into the parent report). A line cut by a crash is shown as unreadable."""
    blockers: list[Mapping[str, Any]] = []
    for path in sorted((root / EXPERIMENTS).glob(f"*/{ENVIRONMENT_BLOCKERS_FILE}")):
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                record = None
            if not isinstance(record, dict):
                record = {"round": path.parent.name, "stage": "?", "message": f"{path.name}:{number}: unreadable line"}
            blockers.append(record)
    return sorted(blockers, key=lambda r: r["ts_ns"] if isinstance(r.get("ts_ns"), int) else 0)

def trial_round(view: SessionView, entry_id: str, phase: str) -> RoundInfo | None:
    for info in view.rounds.values():
        if info.entry_id == entry_id and info.phase == phase:
            return info
    return None


def run_count(info: RoundInfo | None) -> int:
    return max((t.get("runs_total", 0) for t in info.trials), default=0) if info else 0


def settled_status(view: SessionView, entry: Mapping[str, Any], lang: str) -> tuple[str, str, Mapping[str, Any]]:
    """(status, reason in ``lang``, evidence) of an entry; ``pending`` while unsettled, ``skipped``
    (as in the hand-off) when the session stopped before it ran."""
    s = view.state.settled.get(entry["id"])
    if s is None and view.state.stopped is not None:
        s = skipped_settlement(view.state.stopped)
    if s is None:
        return "pending", "", {}
    return s["status"], settled_reason(entry, s, view.state, lang), s.get("evidence") or {}
