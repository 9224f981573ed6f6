"""One campaign job on one node: create (or re-open) the session there, run its sweep, report.

The same function runs as a Ray task on a cluster node and in a thread of the
local sequential path. A new session is pinned to the node that runs it
(``placement`` in ``session.json``, fingerprinted); a job that finds its
session pinned to another server refuses to run (protocol §5.1: every round on
the same environment). The session is created by the sweep process itself
(``sk-run campaign job``, internal), not by the Ray worker: the worker stays a
light launcher and the sweep's heavy imports (Polars, Arrow, SciPy) are paid
once per session instead of twice. The sweep runs as its own process group through
:func:`sk_runner.process.run_process` (killed as a whole on timeout, cancel or
our own death, with every descendant: :mod:`sk_runner.process.lifetime`); its pid and
lifetime marker are recorded in ``run/<session>.json`` so a later
``cancel``/``resume`` reaps survivors of a driver that died. The driver's
signing key and trusted-keys file (when set) travel with the job, so the node
signs the session's ledger and manifests with them (docs/campaign.md). A session
that exists takes the device lease it recorded again (:func:`session_lease`), as
``sk-run sweep --resume`` does: a campaign resumed after a kill continues each
session under the lease it asked for.
"""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sk_analytics.errors import EXIT_NEGATIVE, EXIT_OK, IntegrityError, SkTuneError, UsageError
from sk_analytics.files.atomic import write_json
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.messages import coded
from sk_runner.campaign.spec import Placement
from sk_runner.campaign.state import LOGS_DIR, RUN_DIR, session_dir
from sk_runner.devices.lease import DEFAULT_LEASE_TIMEOUT_S, LeaseRequest
from sk_runner.devices.markers import DEVICES_ENV, ROOT_ENV, TIMEOUT_ENV, marker_need
from sk_runner.devices.options import lease_request
from sk_runner.hosts.base import Hosts
from sk_runner.hosts.topology import recorded_spans, same_server as server_matches
from sk_runner.process import group_alive, kill_group, lifetime, process_alive, run_process
from sk_runner.process.lifetime import start_ticks


@dataclass(frozen=True)
class NodeInfo:
    """A node of the fleet: Ray's node id, its name (one server) and host."""

    node_id: str
    node_name: str
    host: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Job(Placement):
    """Run (or continue) one session of one task, where its task's placement says."""

    campaign_root: str
    task_id: str
    task_path: str
    session: str
    timeout_s: float | None
    supersedes: str | None = None
    #: the driver's SK_TUNE_SIGNING_KEY / SK_TUNE_TRUSTED_KEYS (absolute): the node signs the session with them
    signing_env: tuple[tuple[str, str], ...] = ()
    #: the cluster a multi-host session reserves its hosts on
    ray_address: str | None = None


@contextmanager
def signing_environment(env: tuple[tuple[str, str], ...]) -> Iterator[None]:
    """Set the job's signing variables for its duration (a no-op where they already hold, as in the driver's threads)."""
    changed = {name: os.environ.get(name) for name, value in env if os.environ.get(name) != value}
    os.environ.update({name: value for name, value in env if name in changed})
    try:
        yield
    finally:
        for name, old in changed.items():
            if old is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = old


@dataclass(frozen=True)
class JobResult:
    """How the sweep process of a job ended."""

    session: str
    node: dict[str, Any]
    exit_code: int | None
    signal: int | None
    timed_out: bool
    duration_s: float

    @property
    def outcome(self) -> str:
        """base (exit 0), stopped (exit 1, hand-off written), timeout, or failed."""
        if self.timed_out:
            return "timeout"
        if self.signal is not None or self.exit_code is None:
            return "failed"
        return {EXIT_OK: "base", EXIT_NEGATIVE: "stopped"}.get(self.exit_code, "failed")


def same_server(placement: dict[str, Any], node: NodeInfo) -> bool:
    """True when ``node`` is the server a session was pinned to (same Ray node, or the same named server back)."""
    return server_matches(placement, node.node_id, node.node_name, node.host)


def check_pin(folder: Path, node: NodeInfo) -> bool:
    """Whether the session at ``folder`` exists; if it does, it must be pinned to ``node``'s server (a session that
    spans hosts is pinned to its hosts instead, which its sweep reserves again: :mod:`sk_runner.sweep.spans`)."""
    from sk_runner.sweep.session import SESSION_FILE  # light: the sweep's heavy modules are not imported here

    if not (folder / SESSION_FILE).is_file():
        return False
    placement = load_json_file(folder / SESSION_FILE).get("placement") or {}
    if recorded_spans(placement) is None and not same_server(placement, node):
        raise IntegrityError(f"{folder}: session is pinned to node {placement.get('node_name')} ({placement.get('node_id')}); "
                             f"it never continues on {node.node_name} ({node.node_id})")
    return True


def prepare_session(job: Job, node: NodeInfo, hosts: Hosts | None = None) -> Path:
    """Create the job's session pinned to ``node`` (to ``hosts`` when its ranks span hosts; linked to the session it
    supersedes), or check its pin."""
    folder = session_dir(Path(job.campaign_root), job.session)
    if check_pin(folder, node):
        return folder
    from sk_runner.sweep.phase import enter_phase

    where = node.to_json() if hosts is None else hosts.placement()
    placement = {**where, "campaign": str(Path(job.campaign_root).resolve()), "task": job.task_id}
    session, _ = enter_phase(Path(job.task_path), folder, placement=placement)
    if job.supersedes is not None:
        session.append("session_supersedes", {
            "session": job.supersedes, "reason": "node_lost",
            "summary": coded("campaign.summary.replaces", old=job.supersedes)})
    return folder


def job_argv(job: Job, node: NodeInfo) -> list[str]:
    """The sweep process of a job: ``sk-run campaign job`` creates the session if needed, then runs it."""
    payload = json.dumps({"job": asdict(job), "node": node.to_json()})
    return [sys.executable, "-c", "from sk_runner.cli import main; main()", "campaign", "job", payload, "--quiet"]


def parse_job(payload: str) -> tuple[Job, NodeInfo]:
    """Inverse of the payload of :func:`job_argv` (JSON turns the signing pairs into lists)."""
    data = json.loads(payload)
    job = Placement.from_json_fields(data["job"])
    return Job(**{**job, "signing_env": tuple((name, value) for name, value in job.get("signing_env", ()))}), NodeInfo(**data["node"])


def job_lease(job: Job, env: Mapping[str, str]) -> LeaseRequest:
    """The lease of a job's sweep: the task's root (else ``SK_RUN_LEASE_ROOT`` on the node) and devices (Ray's
    assignment, the task's ids, else ``SK_RUN_DEVICE_IDS``); without a root the session runs unleased (or inherits
    a parent's complete markers), and its ledger says so."""
    raw_timeout = env.get(TIMEOUT_ENV, "").strip()
    try:
        timeout = job.lease_timeout_s if job.lease_timeout_s is not None else float(raw_timeout or DEFAULT_LEASE_TIMEOUT_S)
    except ValueError:
        raise UsageError(f"{TIMEOUT_ENV}={raw_timeout!r}: expected seconds") from None
    root = job.lease_root or env.get(ROOT_ENV, "").strip() or None
    if job.spans is not None:  # every host's agent leases that host's NPUs; the sweep process holds none
        return LeaseRequest(None, timeout)
    if root is None:
        return LeaseRequest(marker_need(env), timeout)
    ids: tuple[int | str, ...] = job.device_ids or tuple(env.get(DEVICES_ENV, "").split())
    return lease_request(Path(root), tuple(str(i) for i in ids), timeout, env=env)


def session_lease(job: Job, folder: Path, env: Mapping[str, str]) -> LeaseRequest:
    """The lease a job's sweep takes: a session that exists takes the lease it recorded again (its ``lease_requested``
    record, else the lease its runs held), as ``sk-run sweep --resume`` does, whatever the node's ``SK_RUN_LEASE_ROOT``
    and ``SK_RUN_DEVICE_IDS`` or Ray's NPU assignment say now: a session that asked for a lease never continues
    unleased, and runs on other devices are another environment (protocol §5.1). A new session (or one that recorded
    no lease) takes :func:`job_lease`; a session that spans hosts holds none itself (each host's agent leases)."""
    from sk_runner.sweep.session import SESSION_FILE  # light: the sweep's heavy modules are not imported here

    asked = job_lease(job, env)  # a usage error before the session is created
    if job.spans is not None or not (folder / SESSION_FILE).is_file():
        return asked
    from sk_runner.sweep.leasing import recorded_request

    need, unleased, _ = recorded_request(folder)
    if need is None and not unleased:
        return asked
    return LeaseRequest(need, asked.timeout_s, unleased=unleased)


def run_sweep_process(job: Job, node: NodeInfo, quiet: bool) -> int:
    """Body of the job's sweep process (``sk-run campaign job``): with the driver's signing key, create
    the session pinned to ``node`` if needed (check its pin if it exists), then run it to its hand-off."""
    from sk_runner.sweep.cli import run_and_print
    from sk_runner.sweep.session import load_session
    from sk_runner.sweep.spans import session_hosts

    with signing_environment(job.signing_env):
        folder = session_dir(Path(job.campaign_root), job.session)
        lease = session_lease(job, folder, os.environ)  # a resumed session's recorded lease, else the job's
        with session_hosts(folder, job.spans, address=job.ray_address, lease_root=job.lease_root,
                           lease_timeout_s=lease.timeout_s) as hosts:  # reserved before a new session records them
            return run_and_print(load_session(prepare_session(job, node, hosts)), "zh", quiet, None if hosts else lease, hosts)


def run_job(job: Job, node: NodeInfo, on_start: Callable[[int], None] | None = None) -> JobResult:
    """Run the job's sweep on this node to its end (or timeout): a new session is created by the
    sweep process; an existing one must be pinned here (checked before anything starts)."""
    root = Path(job.campaign_root)
    check_pin(session_dir(root, job.session), node)
    stamp = time.time_ns()
    logs = root / LOGS_DIR / job.session

    def started(pid: int) -> None:
        write_json(root / RUN_DIR / f"{job.session}.json",
                   {"pid": pid, "start_ticks": start_ticks(pid), "marker": lifetime.spawn_marker(pid), "host": socket.gethostname(),
                    **node.to_json()})
        if on_start is not None:
            on_start(pid)

    result = run_process(job_argv(job, node), cwd=root, env=dict(os.environ), stdout_path=logs / f"{stamp}.out",
                         stderr_path=logs / f"{stamp}.err", timeout_s=job.timeout_s, on_start=started,
                         environment_faults=False)  # a sweep reports its own faults by its exit code (3)
    return JobResult(job.session, node.to_json(), result.exit_code, result.signal, result.timed_out, result.duration_s)


def reap_workers(root: Path, node_id: str | None = None) -> list[str]:
    """Kill the recorded sweeps still alive on this host (optionally of one node only): each sweep's
    process group, and every process carrying its lifetime marker (its workloads, also ones that left
    the group), so nothing of a session survives a driver that died with its watchdog."""
    killed = []
    host = socket.gethostname()
    folder = Path(root) / RUN_DIR
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        if path.name == "driver.json":
            continue
        try:
            rec = load_json_file(path)
        except (OSError, SkTuneError):  # a torn record names no process we could safely kill
            continue
        if rec.get("host") != host or (node_id is not None and rec.get("node_id") != node_id):
            continue
        pid = int(rec["pid"])
        leader_ours = process_alive(pid) and start_ticks(pid) == rec.get("start_ticks")
        marker = rec.get("marker")
        found = False
        if leader_ours or (not process_alive(pid) and group_alive(pid)):  # orphans keep the dead leader's group id
            kill_group(pid, grace_s=2.0)
            found = True
        if isinstance(marker, str) and marker and lifetime.kill_spawn(marker):
            found = True
        if found:
            killed.append(path.stem)
    return killed
