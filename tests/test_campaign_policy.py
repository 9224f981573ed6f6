"""The driver's decisions with a scripted fleet: node lost under each policy, retries, placement by the scheduler."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sk_analytics.ledger.chain import read_records
from sk_runner.campaign.driver import Driver, create_campaign
from sk_runner.campaign.job import Job, JobResult, NodeInfo
from sk_runner.campaign.spec import CampaignSpec, TaskSpec
from sk_runner.campaign.state import fold, session_dir

A, B = NodeInfo("id-a", "server-a", "h"), NodeInfo("id-b", "server-b", "h")


class Silent:
    def update(self, *args: Any) -> None: ...
    def note(self, text: str) -> None: ...
    def close(self) -> None: ...


class Fleet:
    """A scripted executor: a job 'starts' on the pinned node or the first alive one (writing the placement as the
    real job does) and ends when the test says so."""

    kind = "fake"

    def __init__(self, nodes: list[NodeInfo]) -> None:
        self.alive = list(nodes)
        self.submitted: list[tuple[str, str | None]] = []
        self.results: dict[str, Any] = {}

    def nodes(self) -> list[NodeInfo]:
        return list(self.alive)

    def node_alive(self, node_id: str, settle_s: float = 0.0) -> bool:
        return any(n.node_id == node_id for n in self.alive)

    def capacity(self) -> None:
        """No capacity: the resource check is tested in test_campaign_resources; this fleet checks nothing."""
        return None

    def check_storage(self, root: Path, needs: list[dict[str, float]]) -> list[dict[str, str]]:
        return [{"node_id": n.node_id, "node_name": n.node_name} for n in self.alive]

    def submit(self, job: Job, resources: dict[str, float], pin: NodeInfo | None) -> str:
        node = pin or self.alive[0]
        folder = session_dir(Path(job.campaign_root), job.session)
        if not (folder / "session.json").exists():
            folder.mkdir(parents=True)
            (folder / "session.json").write_text(json.dumps({"placement": node.to_json()}))
        self.submitted.append((job.session, None if pin is None else pin.node_name))
        return job.session

    def wait(self, handles: list[str], timeout: float) -> list[str]:
        return [h for h in handles if h in self.results]

    def result(self, handle: str) -> JobResult:
        outcome = self.results.pop(handle)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def cancel(self, handle: str, session: str) -> None: ...
    def is_node_failure(self, exc: BaseException) -> bool:
        return isinstance(exc, ConnectionError)

    def shutdown(self) -> None: ...


def ok(session: str, node: NodeInfo) -> JobResult:
    return JobResult(session, node.to_json(), 0, None, False, 1.0)


def campaign(tmp_path: Path, policy: str, wait_s: float = 600.0) -> tuple[Path, CampaignSpec]:
    spec = CampaignSpec("c", (TaskSpec("t", "task.json", "f", {"NPU": 8.0}, None, 0),), policy, wait_s, 2)
    root = tmp_path / "root"
    create_campaign(root, spec)
    return root, spec


def test_restart_policy_links_a_fresh_session_placed_by_the_scheduler(tmp_path: Path) -> None:
    root, spec = campaign(tmp_path, "restart")
    fleet = Fleet([B, A])
    driver = Driver(root, spec, fleet, Silent())
    steps = iter([
        lambda: (fleet.alive.remove(B), fleet.results.__setitem__("t-1", ConnectionError("node died"))),
        lambda: fleet.results.__setitem__("t-2", ok("t-2", A)),
    ])
    real_wait = fleet.wait

    def scripted(handles: list[str], timeout: float) -> list[str]:
        next(steps, lambda: None)()
        return real_wait(handles, timeout)

    fleet.wait = scripted  # type: ignore[method-assign]
    assert driver.run(resumed=False) == 0
    assert fleet.submitted == [("t-1", None), ("t-2", None)]  # the new session is placed by the scheduler, not pinned
    kinds = [(r.kind, r.data.get("session")) for r in read_records(root)]
    assert ("node_lost", "t-1") in kinds and ("session_superseded", "t-1") in kinds and ("session_assigned", "t-2") in kinds
    assert [r.kind for r in read_records(session_dir(root, "t-1"))][-2:] == ["node_lost", "session_superseded"]
    st = fold(read_records(root))["t"]
    assert st.sessions == ["t-1", "t-2"] and st.links == {"t-1": None, "t-2": "t-1"} and st.outcome == "base"


def test_wait_policy_continues_on_the_same_server_when_it_is_back(tmp_path: Path) -> None:
    root, spec = campaign(tmp_path, "wait")
    fleet = Fleet([B, A])
    driver = Driver(root, spec, fleet, Silent())
    back = NodeInfo("id-b2", "server-b", "h")  # the same server, restarted: a new Ray node id
    steps = iter([
        lambda: (fleet.alive.remove(B), fleet.results.__setitem__("t-1", ConnectionError("node died"))),
        lambda: None,  # t-1 waits: nothing submitted while server-b is away, server-a stays unused
        lambda: fleet.alive.append(back),
        lambda: fleet.results.__setitem__("t-1", ok("t-1", back)),
    ])
    real_wait = fleet.wait

    def scripted(handles: list[str], timeout: float) -> list[str]:
        next(steps, lambda: None)()
        return real_wait(handles, timeout)

    fleet.wait = scripted  # type: ignore[method-assign]
    driver.sleep = lambda s: scripted([], 0)  # type: ignore[assignment]
    assert driver.run(resumed=False) == 0
    assert fleet.submitted == [("t-1", None), ("t-1", "server-b")]  # never elsewhere; back on its own server
    assert [r.kind for r in read_records(root)].count("node_lost") == 1
    assert fold(read_records(root))["t"].sessions == ["t-1"]


def test_wait_policy_gives_up_after_node_wait_s(tmp_path: Path) -> None:
    root, spec = campaign(tmp_path, "wait", wait_s=0.001)
    fleet = Fleet([B, A])
    real_wait = fleet.wait

    def scripted(handles: list[str], timeout: float) -> list[str]:
        if B in fleet.alive:
            fleet.alive.remove(B)
            fleet.results["t-1"] = ConnectionError("node died")
        return real_wait(handles, timeout)

    fleet.wait = scripted  # type: ignore[method-assign]
    driver = Driver(root, spec, fleet, Silent())
    driver.sleep = lambda s: None  # type: ignore[assignment]
    assert driver.run(resumed=False) == 1
    given = [r.data for r in read_records(root) if r.kind == "task_given_up"]
    assert [g["reason"] for g in given] == ["node_wait"] and fleet.submitted == [("t-1", None)]


def test_a_failing_job_is_retried_on_its_node_then_given_up(tmp_path: Path) -> None:
    root, spec = campaign(tmp_path, "restart")
    fleet = Fleet([A, B])
    fleet.results["t-1"] = RuntimeError("worker crashed")
    driver = Driver(root, spec, fleet, Silent())
    real_submit = fleet.submit

    def again(job: Job, resources: dict[str, float], pin: NodeInfo | None) -> str:
        handle = real_submit(job, resources, pin)
        fleet.results.setdefault(handle, RuntimeError("worker crashed"))
        return handle

    fleet.submit = again  # type: ignore[method-assign]
    assert driver.run(resumed=False) == 1
    assert fleet.submitted == [("t-1", None), ("t-1", "server-a")]
    outcomes = [r.data["outcome"] for r in read_records(root) if r.kind == "session_ended"]
    assert outcomes == ["failed", "failed"]


def two_host_fleet() -> Fleet:
    """A fleet whose jobs record a session on hosts A and B (the job itself, the sweep's launcher, runs anywhere)."""
    fleet = Fleet([A, B])
    real_submit = fleet.submit

    def submit_on_two_hosts(job: Job, resources: dict[str, float], pin: NodeInfo | None) -> str:
        folder = session_dir(Path(job.campaign_root), job.session)
        if not (folder / "session.json").exists():
            folder.mkdir(parents=True)
            hosts = [{"index": i, **n.to_json()} for i, n in enumerate((A, B))]
            (folder / "session.json").write_text(json.dumps({"placement": {**A.to_json(), "spans": {"hosts": 2, "npus_per_host": 8},
                                                                           "hosts": hosts}}))
        return real_submit(job, resources, pin)

    fleet.submit = submit_on_two_hosts  # type: ignore[method-assign]
    return fleet


def ended(session: str, exit_code: int) -> JobResult:
    return JobResult(session, A.to_json(), exit_code, None, False, 1.0)


def test_a_multi_host_sweep_stopped_by_a_lost_host_waits_for_ray_to_see_the_host_gone(tmp_path: Path) -> None:
    """The sweep ends exit 3 (a host was lost) before Ray reports host B dead: the driver looks again (after a pause)
    and records node_lost, not a failure that would count against the task's attempts."""
    root, spec = campaign(tmp_path, "wait", wait_s=0.001)
    fleet = two_host_fleet()
    fleet.wait = lambda handles, timeout: (fleet.results.setdefault("t-1", ended("t-1", 3)), list(handles))[1]  # type: ignore[method-assign]
    driver = Driver(root, spec, fleet, Silent())
    pauses: list[float] = []
    driver.sleep = lambda s: (pauses.append(s), B in fleet.alive and fleet.alive.remove(B))  # type: ignore[assignment]
    driver.run(resumed=False)
    records = read_records(root)
    assert [r.data["outcome"] for r in records if r.kind == "session_ended"] == ["node_lost"] and pauses[:1] == [0.5]
    assert [[h["node_name"] for h in r.data["hosts_lost"]] for r in records if r.kind == "node_lost"] == [["server-b"]]


def test_a_multi_host_sweep_that_failed_by_itself_is_failed_at_once(tmp_path: Path) -> None:
    """The sweep ends exit 2 (bad input) with both hosts alive: ``failed`` without waiting for Ray (it used to wait
    15 s for a host death that nothing suggested), then retried on the same hosts."""
    root, spec = campaign(tmp_path, "wait")
    fleet = two_host_fleet()
    answers = iter([ended("t-1", 2), ok("t-1", A)])
    fleet.wait = lambda handles, timeout: (fleet.results.setdefault("t-1", next(answers)), list(handles))[1]  # type: ignore[method-assign]
    driver = Driver(root, spec, fleet, Silent())
    pauses: list[float] = []
    driver.sleep = pauses.append  # type: ignore[assignment]
    assert driver.run(resumed=False) == 0
    assert [r.data["outcome"] for r in read_records(root) if r.kind == "session_ended"] == ["failed", "base"]
    assert pauses == [] and fleet.submitted == [("t-1", None), ("t-1", "server-a")]


def test_a_multi_host_session_whose_launcher_fails_while_host_1_is_gone_is_node_lost(tmp_path: Path) -> None:
    """The job of a two-host session (only the sweep's launcher, on any node) fails while its host 1 left the cluster;
    host 0 is alive. The session ended node_lost, not failed: the policy applies to the whole placement group."""
    root, spec = campaign(tmp_path, "wait", wait_s=0.001)
    fleet = two_host_fleet()

    def scripted(handles: list[str], timeout: float) -> list[str]:
        if B in fleet.alive:
            fleet.alive.remove(B)
            fleet.results["t-1"] = RuntimeError("the launcher's worker died")  # not a node failure of its own node
        return [h for h in handles if h in fleet.results]

    fleet.wait = scripted  # type: ignore[method-assign]
    driver = Driver(root, spec, fleet, Silent())
    driver.sleep = lambda s: None  # type: ignore[assignment]
    driver.run(resumed=False)
    records = read_records(root)
    assert [r.data["outcome"] for r in records if r.kind == "session_ended"] == ["node_lost"]
    assert [[h["node_name"] for h in r.data["hosts_lost"]] for r in records if r.kind == "node_lost"] == [["server-b"]]
