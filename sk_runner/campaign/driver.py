"""The campaign driver: hand tasks to the scheduler, record what happened, handle lost nodes.

The campaign ledger is the driver's only state, so a driver killed at any point
continues with ``sk-run campaign resume ROOT``: finished sessions stay finished,
the others continue (each on its own node, through its sweep process, which like ``sk-run sweep --resume``
picks up at the first action whose outcome was not yet recorded).

Placement is the scheduler's (Ray: by resources); the driver only pins a
session that already exists to the node recorded in its ``session.json``.
When that node is gone, the policy decides: ``restart`` assigns a fresh
session of the same task (Ray places it on another node) and links the two in
both session ledgers and the campaign ledger; ``wait`` waits up to
``node_wait_s`` for the same server to come back.
"""

from __future__ import annotations

import os
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from filelock import FileLock, Timeout

from sk_analytics.errors import EXIT_ENVIRONMENT, EXIT_NEGATIVE, EXIT_OK, IntegrityError, SkTuneError, UsageError
from sk_analytics.files.atomic import write_json
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.fingerprint import fingerprint
from sk_analytics.ledger.chain import Ledger, read_records
from sk_analytics.ledger.signing import forwarded_env
from sk_analytics.messages import coded, is_coded, render, resolve_lang, text
from sk_runner.campaign.job import (
    Job,
    JobResult,
    NodeInfo,
    reap_workers,
    same_server,
)
from sk_runner.campaign.resources import FITS, Capacity, check_tasks, classify, pending_shortfall
from sk_runner.campaign.spec import CampaignSpec, TaskSpec, revalidate
from sk_runner.campaign.state import (
    CAMPAIGN_FILE,
    CAMPAIGN_SCHEMA,
    RUN_DIR,
    TaskState,
    fold,
    placement_of,
    session_dir,
    session_name,
)
from sk_runner.hosts.topology import recorded_spans
from sk_runner.process.lifetime import start_ticks

POLL_S = 1.0
HOSTS_SETTLE_S = 15.0
"""How long the driver gives Ray to notice that the server (or a host) of a session whose job failed died (for a
multi-host session: only when its sweep stopped on an environment blocker, as a lost host makes it)."""


def pin_of(placement: dict[str, Any], alive: dict[str, NodeInfo]) -> NodeInfo | None:
    """The alive node a session continues on (None: its server, or one of its hosts, is gone). A session that spans
    hosts continues only when every one of its hosts is alive; its first host's node is returned."""
    spans = recorded_spans(placement)
    records = [placement] if spans is None else spans[1]
    nodes = [next((n for n in alive.values() if same_server(record, n)), None) for record in records]
    return None if any(n is None for n in nodes) else nodes[0]


def lost_hosts(placement: dict[str, Any], alive: dict[str, NodeInfo]) -> list[dict[str, Any]]:
    """The recorded hosts (or the one server) of a session that are not alive, as recorded (node id, node name)."""
    spans = recorded_spans(placement)
    records = [placement] if spans is None else spans[1]
    gone = [r for r in records if not any(same_server(r, n) for n in alive.values())]
    return [{"node_id": r.get("node_id"), "node_name": r.get("node_name"), **({"index": r["index"]} if "index" in r else {})}
            for r in gone or records[:1]]


class Stop(Exception):
    """Ctrl-C (``interrupted``) or SIGTERM from ``sk-run campaign cancel`` (``cancelled``), seen between two polls."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Executor(Protocol):
    kind: str

    def nodes(self) -> list[NodeInfo]: ...
    def capacity(self) -> Capacity | None: ...
    def node_alive(self, node_id: str, settle_s: float = 0.0) -> bool: ...
    def check_storage(self, root: Path, needs: list[dict[str, float]]) -> list[dict[str, str]]: ...
    def submit(self, job: Job, resources: dict[str, float], pin: NodeInfo | None) -> Any: ...
    def wait(self, handles: list[Any], timeout: float) -> list[Any]: ...
    def result(self, handle: Any) -> JobResult: ...
    def cancel(self, handle: Any, session: str) -> None: ...
    def is_node_failure(self, exc: BaseException) -> bool: ...
    def shutdown(self) -> None: ...


class View(Protocol):
    def update(self, root: Path, spec: CampaignSpec, tasks: dict[str, TaskState]) -> None: ...
    def note(self, text: str) -> None: ...
    def close(self) -> None: ...


@dataclass
class Running:
    task: str
    session: str
    handle: Any
    started: float = field(default_factory=time.monotonic)


def check_resources(spec: CampaignSpec, executor: Executor, source: str) -> dict[str, str]:
    """Before anything runs: each task's class (:mod:`sk_runner.campaign.resources`); a task no node
    can ever hold is bad input naming it (exit 2). An executor without a capacity (local) checks nothing."""
    capacity = executor.capacity()
    if capacity is None:
        return {t.id: FITS for t in spec.tasks}
    return check_tasks([(t.id, t.resources) for t in spec.tasks], capacity, source, {t.id: t.hosts for t in spec.tasks if t.hosts > 1})


def never_ran(root: Path, spec: CampaignSpec) -> bool:
    """Whether ``root`` holds this very campaign (same spec fingerprint) and it never assigned a session:
    what a run refused or stopped before its first session leaves; ``run`` takes it up again."""
    try:
        data = load_json_file(Path(root) / CAMPAIGN_FILE)
        records = read_records(root)
    except (OSError, SkTuneError):  # unreadable or not intact: not ours to reuse
        return False
    same = bool(records) and records[0].kind == "campaign_started" and records[0].data.get("spec_fingerprint") == fingerprint(spec.to_json())
    return same and data.get("spec_fingerprint") == fingerprint(spec.to_json()) and not any(r.kind == "session_assigned" for r in records)


def refuse_existing(root: Path, spec: CampaignSpec) -> None:
    """A usage error when ``root`` cannot take this new campaign: it holds another (or a started) one, or other files."""
    root = Path(root)
    if (root / CAMPAIGN_FILE).exists():
        if never_ran(root, spec):
            return
        raise UsageError(f"{root} already holds a campaign; continue it with 'sk-run campaign resume {root}'")
    if root.exists() and any(root.iterdir()):
        raise UsageError(f"{root} is not empty; a new campaign needs an empty or new folder")


def create_campaign(root: Path, spec: CampaignSpec) -> bool:
    """Freeze the spec into ``campaign.json`` and open the campaign ledger; False when ``root`` already
    holds the same campaign that never started a session (:func:`never_ran`), which is then reused."""
    root = Path(root)
    refuse_existing(root, spec)
    if (root / CAMPAIGN_FILE).exists():
        return False
    root.mkdir(parents=True, exist_ok=True)
    spec_json = spec.to_json()
    write_json(root / CAMPAIGN_FILE, {"schema_version": CAMPAIGN_SCHEMA, "spec": spec_json, "spec_fingerprint": fingerprint(spec_json),
                                      "source": spec.source, "created_ns": time.time_ns()})
    Ledger(root).append("campaign_started", {"name": spec.name, "spec_fingerprint": fingerprint(spec_json), "tasks": [t.id for t in spec.tasks],
                                             "summary": coded("campaign.summary.started", name=spec.name, n=len(spec.tasks))})
    return True


def load_campaign(root: Path) -> CampaignSpec:
    """The frozen spec of a campaign, re-checked against its fingerprint and the task files."""
    root = Path(root)
    path = root / CAMPAIGN_FILE
    if not path.is_file():
        from sk_analytics.errors import InputError

        raise InputError(path, "not a campaign (campaign.json missing)", expected="a folder created by sk-run campaign run")
    data = load_json_file(path)
    records = read_records(root)
    if not records or records[0].kind != "campaign_started" or records[0].data["spec_fingerprint"] != fingerprint(data["spec"]):
        raise IntegrityError(f"{path}: the campaign spec changed since the campaign started (fingerprint mismatch)")
    spec = CampaignSpec.from_json(data["spec"])
    revalidate(spec, path)
    return spec


class Driver:
    """One run of the campaign loop (``run`` or ``resume``)."""

    def __init__(self, root: Path, spec: CampaignSpec, executor: Executor, view: View) -> None:
        self.root, self.spec, self.ex, self.view = Path(root), spec, executor, view
        self.lang = resolve_lang()  # the campaign's notes: SK_LANG, else the locale
        self.ledger = Ledger(self.root)
        self.running: dict[str, Running] = {}
        self.stop_reason: str | None = None
        self.sleep = time.sleep  # between polls while only tasks waiting for a lost server are left
        self._capacity: Capacity | None = None

    def _on_signal(self, signum: int, frame: Any) -> None:
        # only a flag: raising inside Ray's blocking calls (C++) would corrupt the interpreter state
        self.stop_reason = "cancelled" if signum == signal.SIGTERM else "interrupted"

    def _check_stop(self) -> None:
        if self.stop_reason is not None:
            raise Stop(self.stop_reason)

    # ------------------------------------------------------------------ records
    def record(self, kind: str, data: dict[str, Any]) -> None:
        self.ledger.append(kind, data)
        if is_coded(data.get("summary")):
            self.view.note(render(data["summary"], self.lang))

    def tasks(self) -> dict[str, TaskState]:
        return fold(read_records(self.root))

    # ------------------------------------------------------------------ the loop
    def run(self, resumed: bool) -> int:
        lock = FileLock(str(self.root / ".driver.lock"))
        try:
            lock.acquire(timeout=0)
        except Timeout:
            raise UsageError(f"{self.root}: a driver is already running this campaign (see 'sk-run campaign status')") from None
        previous = {sig: signal.signal(sig, self._on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            write_json(self.root / RUN_DIR / "driver.json", {"pid": os.getpid(), "start_ticks": start_ticks(os.getpid()),
                                                             "host": socket.gethostname(), "executor": self.ex.kind})
            survivors = reap_workers(self.root)
            if survivors:
                self.view.note(text("campaign.reclaimed", self.lang, groups=", ".join(survivors)))
            nodes = self.ex.check_storage(self.root, [t.resources for t in self.spec.tasks])
            self.record("storage_checked", {"nodes": nodes, "executor": self.ex.kind,
                                            "summary": coded("campaign.summary.storage_checked", n=len(nodes))})
            if resumed:
                self.record("campaign_resumed", {"tasks": [t.id for t in self.spec.tasks], "summary": coded("campaign.summary.resumed")})
            return self._loop()
        except (KeyboardInterrupt, Stop) as exc:
            reason = exc.reason if isinstance(exc, Stop) else "interrupted"
            self._stop_all(reason)
            summary = "campaign.summary.cancelled" if reason == "cancelled" else "campaign.summary.interrupted"
            self.record("campaign_stopped", {"reason": reason, "summary": coded(summary, root=str(self.root))})
            return EXIT_NEGATIVE
        finally:
            (self.root / RUN_DIR / "driver.json").unlink(missing_ok=True)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            self.view.close()
            lock.release()

    def _loop(self) -> int:
        while True:
            self._check_stop()
            tasks = self.tasks()
            alive = {n.node_id: n for n in self.ex.nodes()}
            unassigned = any(not (st := tasks.get(t.id) or TaskState(t.id)).session and not st.gave_up for t in self.spec.tasks)
            self._capacity = self.ex.capacity() if unassigned else None
            for spec_task in self.spec.tasks:
                if spec_task.id not in self.running:
                    self._step(spec_task, tasks.get(spec_task.id) or TaskState(spec_task.id), alive)
            tasks = self.tasks()
            self._note_placements(tasks)
            self.view.update(self.root, self.spec, tasks)
            if not self.running:
                if all(st.done or st.gave_up for st in tasks.values()):
                    return self._finish(tasks)
                self.sleep(POLL_S)  # only tasks waiting for their lost server are left
                self._check_stop()
                continue
            handles = [r.handle for r in self.running.values()]
            for handle in self.ex.wait(handles, POLL_S):
                if self.stop_reason is not None:
                    break  # a job that ended because we are stopping is recorded by _stop_all
                run = next(r for r in self.running.values() if r.handle is handle)
                self._collect(run)

    def _step(self, task: TaskSpec, st: TaskState, alive: dict[str, NodeInfo]) -> None:
        """Start, continue, relink or leave one task that is not running now."""
        if st.done or st.gave_up:
            return
        if st.session is None:
            if self._placeable(task, st):
                self._assign(task, 1, None)
            return
        session = st.session  # the refreshed state below keeps it
        placement = placement_of(self.root, session)
        pin = None if placement is None else pin_of(placement, alive)
        if (placement is None or pin is not None) and st.failures >= self.spec.max_attempts:
            self.record("task_given_up", {"task": task.id, "session": st.session, "reason": "attempts",
                                          "summary": coded("campaign.summary.given_up_attempts", task=task.id, session=st.session, failures=st.failures)})
            return
        if placement is None:  # assigned but never started anywhere: the scheduler places it
            self._submit(task, st.session, None, st.supersedes)
            return
        if pin is not None:
            if st.lost:  # its server came back: the campaign index says where the session goes on
                self.record("session_continued", {"task": task.id, "session": st.session, "node_id": pin.node_id, "node_name": pin.node_name,
                                                  "reason": "node_back",
                                                  "summary": coded("campaign.summary.node_back", task=task.id, node=pin.node_name, session=st.session)})
            self._submit(task, st.session, pin, None)
            return
        if not st.lost:
            gone = lost_hosts(placement, alive)
            self.record("node_lost", {"task": task.id, "session": st.session, "node_id": gone[0].get("node_id"),
                                      "node_name": gone[0].get("node_name"), "policy": self.spec.on_node_lost,
                                      **({"hosts_lost": gone} if recorded_spans(placement) else {}),
                                      "summary": coded("campaign.summary.node_lost", task=task.id, session=st.session,
                                                      nodes=", ".join(str(h.get("node_name")) for h in gone), policy=self.spec.on_node_lost)})
            Ledger(session_dir(self.root, st.session)).append("node_lost", {
                "node_id": gone[0].get("node_id"), "node_name": gone[0].get("node_name"), "policy": self.spec.on_node_lost,
                **({"hosts_lost": gone} if recorded_spans(placement) else {}),
                "summary": coded("campaign.summary.node_lost_session")})
            st = self.tasks()[task.id]
        if self.spec.on_node_lost == "restart":
            new = session_name(task.id, len(st.sessions) + 1)
            self.record("session_superseded", {"task": task.id, "session": st.session, "by": new, "reason": "node_lost",
                                               "summary": coded("campaign.summary.superseded", task=task.id, new=new, session=st.session)})
            Ledger(session_dir(self.root, session)).append("session_superseded", {
                "by": new, "campaign": str(self.root), "reason": "node_lost",
                "summary": coded("campaign.summary.superseded_session", new=new)})
            self._assign(task, len(st.sessions) + 1, st.session)
        elif st.lost_since_ns is not None and time.time_ns() - st.lost_since_ns > self.spec.node_wait_s * 1e9:
            self.record("task_given_up", {"task": task.id, "session": st.session, "reason": "node_wait",
                                          "summary": coded("campaign.summary.given_up_node_wait", task=task.id, node=placement.get("node_name"),
                                                           seconds=self.spec.node_wait_s)})

    def _placeable(self, task: TaskSpec, st: TaskState) -> bool:
        """Whether an alive node can hold a task not yet assigned. If none can yet (an autoscaler node
        type could: the start checked), the task is ``pending_unsatisfiable`` for at most ``node_wait_s``,
        then given up; it is never handed to the scheduler to wait without end."""
        capacity = self._capacity
        if capacity is None or classify(task.resources, capacity, task.hosts) == FITS:
            return True
        if st.pending is None:
            short = pending_shortfall(task.resources, capacity, task.hosts)  # what the alive nodes lack
            self.record("task_pending_unsatisfiable", {
                "task": task.id, "resources": task.resources, "resource": short.resource, "needed": short.needed,
                "largest": short.largest, "node": short.node, "timeout_s": self.spec.node_wait_s,
                "summary": coded("campaign.summary.waiting", task=task.id, resource=short.resource, needed=short.needed, node=short.node,
                                 largest=short.largest, seconds=self.spec.node_wait_s)})
        elif time.time_ns() - st.pending["ts_ns"] > self.spec.node_wait_s * 1e9:
            self.record("task_given_up", {"task": task.id, "session": None, "reason": "unsatisfiable", "resource": st.pending.get("resource"),
                                          "summary": coded("campaign.summary.unsatisfiable", task=task.id, seconds=self.spec.node_wait_s,
                                                          resource=st.pending.get("resource"), needed=st.pending.get("needed"))})
        return False

    def _assign(self, task: TaskSpec, attempt: int, supersedes: str | None) -> None:
        name = session_name(task.id, attempt)
        self.record("session_assigned", {"task": task.id, "session": name, "attempt": attempt, "supersedes": supersedes,
                                         "resources": task.resources, "summary": coded("campaign.summary.assigned", task=task.id, session=name)})
        self._submit(task, name, None, supersedes)

    def _submit(self, task: TaskSpec, name: str, pin: NodeInfo | None, supersedes: str | None) -> None:
        job = Job(str(self.root.resolve()), task.id, task.task, name, task.timeout_s, supersedes, forwarded_env(), **task.placement())
        self.running[task.id] = Running(task.id, name, self.ex.submit(job, task.resources, pin))

    def _note_placements(self, tasks: dict[str, TaskState]) -> None:
        """Copy each new session's node (from its session.json) into the campaign index."""
        for st in tasks.values():
            if st.session is not None and st.session not in st.placements:
                placement = placement_of(self.root, st.session)
                if placement is not None:
                    self.record("session_placed", {"task": st.id, "session": st.session, "placement": placement,
                                                   "summary": coded("campaign.summary.placed", task=st.id, session=st.session,
                                                                    node=placement.get("node_name"))})

    def _collect(self, run: Running) -> None:
        """Record how a finished job ended."""
        del self.running[run.task]
        try:
            result = self.ex.result(run.handle)
        except Exception as exc:  # noqa: BLE001 - any failure of the job is recorded; the policy decides what follows
            placement = placement_of(self.root, run.session)
            if placement is None:
                lost = False
            elif recorded_spans(placement):  # the job (the sweep's launcher) runs anywhere: what counts is every host of the session
                lost = self._hosts_gone(placement)
            else:
                lost = self.ex.is_node_failure(exc) and not self.ex.node_alive(placement["node_id"], settle_s=HOSTS_SETTLE_S)
            self.record("session_ended", {"task": run.task, "session": run.session, "outcome": "node_lost" if lost else "failed",
                                          "error": " ".join(str(exc).split())[:500],
                                          "summary": coded("campaign.summary.job_failed", task=run.task, session=run.session, error=type(exc).__name__)})
            return
        outcome = result.outcome
        placement = placement_of(self.root, run.session)
        # Only a sweep that stopped on an environment blocker (exit 3, as a lost host makes it) may be waiting for Ray
        # to notice a dead host; any other failure is judged on the nodes Ray reports now.
        settle_s = HOSTS_SETTLE_S if result.exit_code == EXIT_ENVIRONMENT else 0.0
        if outcome == "failed" and placement is not None and recorded_spans(placement) and self._hosts_gone(placement, settle_s):
            outcome = "node_lost"  # a host of the session left the cluster: its policy applies to all its hosts
        self.record("session_ended", {"task": run.task, "session": run.session, "outcome": outcome, "exit_code": result.exit_code,
                                      "signal": result.signal, "timed_out": result.timed_out, "duration_s": round(result.duration_s, 3),
                                      "node": result.node, "summary": coded("campaign.summary.ended", task=run.task, session=run.session,
                                                                       outcome=outcome, seconds=result.duration_s)})

    def _hosts_gone(self, placement: dict[str, Any], settle_s: float = HOSTS_SETTLE_S) -> bool:
        """Whether a host of a multi-host session left the cluster (given Ray ``settle_s`` to notice a death)."""
        deadline = time.monotonic() + settle_s
        while True:
            if pin_of(placement, {n.node_id: n for n in self.ex.nodes()}) is None:
                return True
            if time.monotonic() >= deadline:
                return False
            self.sleep(0.5)

    def _stop_all(self, reason: str) -> None:
        """Cancel every running job and wait until its process group is gone; record each as ``reason``."""
        for run in list(self.running.values()):
            self.ex.cancel(run.handle, run.session)
        deadline = time.monotonic() + 30.0
        while self.running and time.monotonic() < deadline:
            for handle in self.ex.wait([r.handle for r in self.running.values()], 1.0):
                run = next(r for r in self.running.values() if r.handle is handle)
                del self.running[run.task]
                self.record("session_ended", {"task": run.task, "session": run.session, "outcome": reason,
                                              "summary": coded("campaign.summary.stopped_session", task=run.task, session=run.session, reason=reason)})
        reap_workers(self.root)

    def _finish(self, tasks: dict[str, TaskState]) -> int:
        outcomes = {t.id: (tasks[t.id].outcome if t.id in tasks else None) for t in self.spec.tasks}
        base = sum(o == "base" for o in outcomes.values())
        self.record("campaign_stopped", {"reason": "finished", "outcomes": outcomes,
                                         "summary": coded("campaign.summary.finished", base=base, n=len(outcomes))})
        return EXIT_OK if base == len(outcomes) else EXIT_NEGATIVE
