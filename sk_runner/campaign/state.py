"""The campaign on disk and what its ledgers say (pure folds, no Ray, no processes).

Layout of a campaign root (one folder every node sees)::

    campaign.json                     frozen spec (+ fingerprint)
    ledger.jsonl                      campaign index: assignments, placements, outcomes, node losses, links
    sessions/session=<task>-<k>/      ordinary sk-tune session folders (hive partition ``session``)
    logs/<session>/<ns>.out|.err      the sweep process output of each attempt
    run/driver.json, run/<session>.json   who runs where (pid, host, node) to reap survivors

The driver is the only writer of the campaign ledger; a session's own ledger is
written by its sweep (and, for links, by the driver). Everything here reads.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sk_analytics.campaign.layout import SESSION_KEY, SESSIONS_DIR
from sk_analytics.errors import SkTuneError
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.ledger.chain import LedgerRecord, raw_records

CAMPAIGN_FILE = "campaign.json"
CAMPAIGN_SCHEMA = "sk-tune-campaign-state-v1"
RUN_DIR = "run"
LOGS_DIR = "logs"
#: Outcomes of a session that end its task (the sweep wrote its hand-off).
FINAL = ("base", "stopped")


def session_name(task_id: str, attempt: int) -> str:
    return f"{task_id}-{attempt}"


def session_dir(root: Path, name: str) -> Path:
    return Path(root) / SESSIONS_DIR / f"{SESSION_KEY}={name}"


@dataclass
class TaskState:
    """What the campaign ledger says about one task."""

    id: str
    sessions: list[str] = field(default_factory=list)
    placements: dict[str, dict[str, Any]] = field(default_factory=dict)
    links: dict[str, str | None] = field(default_factory=dict)  # session -> the session it supersedes
    outcome: str | None = None  # last outcome of the current session
    failures: int = 0  # failed attempts of the current session since this driver run started
    lost: bool = False  # node_lost recorded for the current session
    gave_up: bool = False  # waited for a lost node past node_wait_s, or out of attempts
    lost_since_ns: int | None = None
    pending: dict[str, Any] | None = None  # task_pending_unsatisfiable: no alive node holds it yet (ts_ns added)

    @property
    def session(self) -> str | None:
        return self.sessions[-1] if self.sessions else None

    @property
    def supersedes(self) -> str | None:
        return None if self.session is None else self.links.get(self.session)

    @property
    def done(self) -> bool:
        return self.outcome in FINAL


def fold(records: list[LedgerRecord]) -> dict[str, TaskState]:
    """Task states from the campaign ledger, in record order."""
    tasks: dict[str, TaskState] = {}
    for rec in records:
        d = rec.data
        if rec.kind in ("campaign_started", "campaign_resumed"):
            for t in d.get("tasks", []):
                tasks.setdefault(t, TaskState(t))
            for st in tasks.values():
                st.failures, st.gave_up, st.pending = 0, False, None
            continue
        if "task" not in d:
            continue
        st = tasks.setdefault(d["task"], TaskState(d["task"]))
        if rec.kind == "session_assigned":
            st.sessions.append(d["session"])
            st.links[d["session"]] = d.get("supersedes")
            st.outcome, st.failures, st.lost, st.lost_since_ns, st.pending = None, 0, False, None, None
        elif rec.kind == "session_placed":
            st.placements[d["session"]] = d["placement"]
        elif rec.kind == "session_ended" and d["session"] == st.session:
            st.outcome = d["outcome"]
            st.failures += d["outcome"] in ("failed", "timeout")
        elif rec.kind == "node_lost" and d["session"] == st.session:
            st.lost, st.lost_since_ns = True, rec.ts_ns
        elif rec.kind == "session_continued" and d["session"] == st.session:
            st.lost, st.lost_since_ns = False, None  # its server came back: the session goes on there
        elif rec.kind == "task_pending_unsatisfiable":
            st.pending = {**d, "ts_ns": rec.ts_ns}
        elif rec.kind == "task_given_up":
            st.gave_up = True
    return tasks


def read_campaign(root: Path) -> tuple[dict[str, Any], dict[str, TaskState]]:
    """``campaign.json`` and the folded task states (unverified read: safe while the driver writes)."""
    meta = load_json_file(Path(root) / CAMPAIGN_FILE)
    return meta, fold(raw_records(Path(root)))


# ------------------------------------------------------------------ one session's progress


@dataclass(frozen=True)
class SessionRow:
    """One line of the live view / ``status``."""

    task: str
    session: str | None
    node: str | None
    phase: str
    round: str | None
    decision: str | None
    elapsed_s: float | None
    events: int
    last_event: str | None

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


def session_progress(folder: Path) -> tuple[str, str | None, str | None, float | None, list[LedgerRecord]]:
    """(phase, current round, last decision, elapsed seconds, records) of one session folder, from its ledger."""
    records = raw_records(folder) if (folder / "ledger.jsonl").is_file() else []
    if not records:
        return "pending", None, None, None, records
    kinds = {r.kind for r in records}
    if "handoff_written" in kinds:
        phase = "stopped" if "session_stopped" in kinds else "done"
    elif "base_frozen" in kinds:
        phase = "base"
    elif any(k in kinds for k in ("profile_result", "dcci_diff_result", "probe_result")) and records[-1].kind != "entry_settled":
        phase = "dcci"
    elif "matrix_frozen" in kinds:
        phase = "trials"
    elif "matrix_built" in kinds:
        phase = "matrix"
    else:
        phase = "probes"
    rnd = next((r.data.get("round") for r in reversed(records) if r.kind == "trial_result"), None)
    decision = None
    for r in reversed(records):
        if r.kind == "entry_settled":
            decision = f"{r.data.get('entry_id')}: {r.data.get('status')}"
            break
        if r.kind == "gate_result":
            decision = f"{r.data.get('round')}: {'win' if r.data.get('accepted') else r.data.get('verdict', 'loss')}"
            break
    end = records[-1].ts_ns if phase in ("done", "stopped") else time.time_ns()
    return phase, rnd, decision, (end - records[0].ts_ns) / 1e9, records


def rows(root: Path, order: list[str], tasks: dict[str, TaskState]) -> list[SessionRow]:
    """One row per task (its current session), in ``order``."""
    out = []
    for tid in order:
        st = tasks.get(tid) or TaskState(tid)
        name = st.session
        if name is None:
            out.append(_unassigned_row(st))
            continue
        phase, rnd, decision, elapsed, records = session_progress(session_dir(root, name))
        if st.outcome not in (None, *FINAL) and phase not in ("done", "stopped"):
            phase = st.outcome  # failed / timeout / interrupted / cancelled / node_lost
        if st.lost and not st.done:
            phase = "node_lost"
        if st.gave_up and not st.done:
            phase = "given_up"
        placement = st.placements.get(name) or _placement(session_dir(root, name))
        node = None if placement is None else node_label(placement)
        last = f"{records[-1].kind}" if records else None
        out.append(SessionRow(tid, name, node, phase, rnd, decision, elapsed, len(records), last))
    return out


PENDING_UNSATISFIABLE = "pending_unsatisfiable"
"""Phase of a task no alive node can hold yet (an autoscaler node type could), until its timeout."""


def _unassigned_row(st: TaskState) -> SessionRow:
    """The row of a task without a session: pending, pending_unsatisfiable (what it waits for, until when) or given up."""
    if st.gave_up:
        return SessionRow(st.id, None, None, "given_up", None, None, None, 0, None)
    if st.pending is None:
        return SessionRow(st.id, None, None, "pending", None, None, None, 0, None)
    p = st.pending
    until = time.strftime("%H:%M:%S", time.localtime((p["ts_ns"] / 1e9) + float(p.get("timeout_s") or 0)))
    why = f"needs {p.get('resource')}: {p.get('needed'):g}, waits until {until}"
    return SessionRow(st.id, None, None, PENDING_UNSATISFIABLE, None, why, (time.time_ns() - p["ts_ns"]) / 1e9, 0, None)


def _placement(folder: Path) -> dict[str, Any] | None:
    path = folder / "session.json"
    if not path.is_file():
        return None
    try:
        data = load_json_file(path)
    except (OSError, SkTuneError):  # a half-written file reads as "not placed yet"
        return None
    return data.get("placement") if isinstance(data, dict) else None


def node_label(placement: dict[str, Any]) -> str:
    """The node a session runs on as the live view shows it (``server-a+server-b`` for a session that spans hosts)."""
    hosts = placement.get("hosts") if isinstance(placement.get("hosts"), list) else None
    if hosts:
        return "+".join(str(h.get("node_name") or h.get("node_id")) for h in hosts)
    return str(placement.get("node_name") or placement.get("node_id"))


def placement_of(root: Path, name: str) -> dict[str, Any] | None:
    """The node a session is pinned to (from its ``session.json``), or None before it was created."""
    return _placement(session_dir(root, name))
