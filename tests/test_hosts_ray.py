"""Sessions whose 16 ranks span two simulated 8-NPU hosts, on a real local Ray cluster (issue 34).

One cluster per module: a head node without NPUs (where the campaign's jobs run their sweeps) and two servers,
``server-a`` and ``server-b``, each declaring ``NPU: 8`` with its own lease root, simulated-device registry and
the simulator's hold hook (``SK_SIM_HOLD``) in its environment, as two real hosts would have. Like
test_campaign_ray.py, everything runs on loopback inside a private network namespace: the module re-runs itself
once under ``unshare -n`` and each test here reports the outcome of its twin inside. Every "mid-run" point is
chosen by the hold hook (each held workload writes a marker, the test acts on it), never by a delay.
"""

from __future__ import annotations

import json
import os
import signal
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from campaign_helpers import write_task
from netns_helpers import netns_problem, pytest_in_private_netns
from sweep_helpers import small_session, sweep_outcome
from test_campaign_ray import (
    FAST_HEALTH,
    finish,
    kinds,
    ray_session_folders_removed,  # noqa: F401 - autouse: this module's Ray session folders go too
    session_folders,
    sk_run,
    wait_for,
    workload_processes,
)
from test_devices_lease import holding

pytestmark = pytest.mark.slow
ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'sk-tune[ray]'); multi-host tests need it")

INSIDE = "SK_HOSTS_NETNS"
SERVERS = ("server-a", "server-b")
SPARE = "server-c"
"""A third server, there only while the restart-policy test runs."""
HEAD = {"num_cpus": 1, "object_store_memory": 78 * 1024 * 1024}
TASK = {"ranks": 16, "iterations": 20, "network": "moe-decode-2host"}
"""The 16-rank task: 2 hosts x 8 NPUs of the two-host MoE network, few samples (the claims need no more)."""


@pytest.fixture(scope="module")
def netns(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str] | None:
    """None inside the namespace (the tests run for real); outside, each test's outcome from one run of this module
    inside a private network namespace (one Ray cluster for all of them)."""
    if os.environ.get(INSIDE) == "1":
        return None
    problem = netns_problem()
    if problem:
        pytest.skip(problem)
    tmp = tmp_path_factory.mktemp("netns")
    xml = tmp / "inner.xml"
    _, out = pytest_in_private_netns(["--basetemp", str(tmp / "inner"), f"--junitxml={xml}", str(Path(__file__))], INSIDE, tmp, 1800)
    outcomes: dict[str, str] = {}
    if xml.is_file():
        for case in ET.parse(xml).getroot().iter("testcase"):
            problems = [child for child in case if child.tag in ("failure", "error", "skipped")]
            outcomes[case.get("name", "")] = "passed" if not problems else f"{problems[0].tag}: {problems[0].get('message')}\n{problems[0].text}"
    assert outcomes, out[-9000:]
    return outcomes


def inside(request: pytest.FixtureRequest) -> bool:
    """True inside the namespace (run the test); outside, assert that its twin inside passed."""
    outcomes = request.getfixturevalue("netns")
    if outcomes is None:
        return True
    outcome = outcomes.get(request.node.name, "not run inside the namespace")
    assert outcome == "passed", outcome[-6000:]
    return False


@dataclass
class Fleet:
    """The module's cluster and each server's environment."""

    cluster: Any
    base: Path
    nodes: dict[str, Any]

    @property
    def address(self) -> str:
        return str(self.cluster.address)

    @property
    def hold(self) -> Path:
        return self.base / "hold"

    def locks(self, server: str) -> Path:
        return self.base / f"locks-{server}"

    def add(self, server: str) -> None:
        self.nodes[server] = self.cluster.add_node(**HEAD, resources={"NPU": 8}, node_name=server, env_vars={
            "SK_RUN_LEASE_ROOT": str(self.locks(server)), "SK_SIM_DEVICE_REGISTRY": str(self.base / f"registry-{server}"),
            "SK_SIM_HOLD": str(self.hold)})
        self.cluster.wait_for_nodes()

    def remove(self, server: str) -> None:
        self.cluster.remove_node(self.nodes.pop(server))

    def held(self) -> list[int]:
        """The pids of the workload processes waiting at the hold (one per host's group)."""
        return [int(p.name.rsplit("-", 1)[1]) for p in self.base.glob("hold.held-*")]

    def release(self) -> None:
        self.hold.unlink(missing_ok=True)
        for marker in self.base.glob("hold.held-*"):
            marker.unlink()


@pytest.fixture(scope="module")
def fleet(netns: dict[str, str] | None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    from ray.cluster_utils import Cluster

    assert netns is None  # only inside the namespace
    base = tmp_path_factory.mktemp("fleet")
    cluster = Cluster(initialize_head=True, head_node_args={**HEAD, "node_name": "head", "include_dashboard": False,
                                                             "_system_config": FAST_HEALTH})
    fleet = Fleet(cluster, base, {})
    try:
        for server in SERVERS:
            fleet.add(server)
        yield fleet
    finally:
        fleet.release()
        cluster.shutdown()  # stops exactly the processes this cluster started


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_task(tmp_path_factory.mktemp("task") / "t0", seed=3, **TASK)


@pytest.fixture(scope="module")
def one_node(task: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, ...]:
    """What the same task decides on one simulated 16-NPU node (no Ray): the reference of every multi-host result."""
    root = tmp_path_factory.mktemp("one-node") / "s"
    code, out = finish(sk_run("sweep", "--task", str(task), "--session", str(root), "--quiet"))
    assert code == 0, out[-3000:]
    return sweep_outcome(root)


def _spec(base: Path, task: Path, **settings: Any) -> Path:
    item = {"id": "t0", "task": str(task), "hosts": 2, "npus_per_host": 8, "cpus_per_host": 1}
    path = base / "campaign.json"
    path.write_text(json.dumps({"schema_version": "sk-tune-campaign-v1", "name": "hosts", "tasks": [item], **settings}), encoding="utf-8")
    return path


def _blockers(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for path in sorted(folder.glob("experiments/Sbest/*/environment-blockers.jsonl"))
            for line in path.read_text(encoding="utf-8").splitlines()]


def test_a_lost_host_mid_run_is_an_environment_failure_and_the_resumed_session_decides_as_one_node(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """server-b dies while both hosts' groups of a run are held: the run is not a measurement (an environment blocker,
    its folder moved aside), the campaign records node_lost for the whole placement group and, with on_node_lost
    wait, gives the task up; server-b comes back (same server, new Ray node), ``campaign resume`` continues the same
    session on the same two hosts to the decisions of the one-node sweep, and both ledgers verify."""
    if not inside(request):
        return
    fleet: Fleet = request.getfixturevalue("fleet")
    reference = request.getfixturevalue("one_node")
    spec = _spec(tmp_path, request.getfixturevalue("task"), on_node_lost="wait", node_wait_s=3, max_attempts=1)
    root = tmp_path / "root"
    fleet.hold.touch()
    driver = sk_run("campaign", "run", str(spec), "--root", str(root), "--address", fleet.address)
    try:
        wait_for(lambda: len(fleet.held()) == 2, 300, driver)  # both hosts' groups of the first run are running
        assert json.loads((root / "run" / "t0-1.json").read_text())["node_name"] == "head"  # the sweep is not on server-b
        fleet.remove("server-b")
        code, out = finish(driver)
    finally:
        driver.kill()
        fleet.release()
    assert code == 1, out[-4000:]  # given up after node_wait_s: no Sbest-BASE yet
    session = session_folders(root)["t0-1"]
    lost = [b for b in _blockers(session) if "was lost during the run" in b["message"]]
    assert len(lost) == 1 and "server-b" in lost[0]["message"] and "not a measurement" in lost[0]["message"], _blockers(session)
    assert list(session.glob(f"experiments/Sbest/{lost[0]['round']}/INCOMPLETE/*"))  # the run's folder, moved aside
    from sk_analytics.ledger.chain import read_records, verify

    index = read_records(root)
    assert [r.data["outcome"] for r in index if r.kind == "session_ended"] == ["node_lost"]
    assert [[h["node_name"] for h in r.data["hosts_lost"]] for r in index if r.kind == "node_lost"] == [["server-b"]]
    assert [r.data["reason"] for r in index if r.kind == "task_given_up"] == ["node_wait"]
    before_loss = kinds(session)[: kinds(session).index("node_lost")]
    assert "trial_result" not in before_loss  # the interrupted run decided nothing

    fleet.add("server-b")  # the same server back: a new Ray node id, the same name and host
    code, out = finish(sk_run("campaign", "resume", str(root), "--address", fleet.address))
    assert code == 0, out[-4000:]
    index = read_records(root)
    assert [r.data["outcome"] for r in index if r.kind == "session_ended"] == ["node_lost", "base"]
    assert [r.data["reason"] for r in index if r.kind == "session_continued"] == ["node_back"]
    assert sweep_outcome(session) == reference  # the same decisions, and the same gate numbers, as on one 16-NPU node
    placement = json.loads((session / "session.json").read_text())["placement"]
    assert sorted(h["node_name"] for h in placement["hosts"]) == list(SERVERS) and placement["spans"]["hosts"] == 2
    meta = json.loads(next(session.glob("experiments/Sbest/O1/CLEAN/run-1/meta.json")).read_text())
    assert sorted(p.name for p in (session / "experiments/Sbest/O1/CLEAN/run-1").glob("log_*.log")) == sorted(
        f"log_{r}.log" for r in range(16))
    assert [g["node_name"] for g in meta["process"]["groups"]] == [h["node_name"] for h in placement["hosts"]]
    assert [(h["mode"], h["root"]) for h in meta["lease"]["hosts"]] == [
        ("acquired", str(fleet.locks(h["node_name"]))) for h in placement["hosts"]]  # each host its own lease, Ray's NPUs
    assert verify(root).ok and verify(session).ok
    assert workload_processes(root) == []


def test_a_lost_host_under_the_restart_policy_gives_a_new_session_on_two_other_hosts_deciding_as_one_node(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """A third server (server-c) joins; one host of the session's placement group dies while both its groups of a run
    are held. With on_node_lost restart the whole placement group is given up: the session is superseded (linked in
    both session ledgers and the campaign index), a fresh session of the task reserves the two hosts still alive and
    runs, uninterrupted, to the decisions of the one-node sweep; every ledger verifies and nothing is left running."""
    if not inside(request):
        return
    fleet: Fleet = request.getfixturevalue("fleet")
    reference = request.getfixturevalue("one_node")
    spec = _spec(tmp_path, request.getfixturevalue("task"), on_node_lost="restart", max_attempts=1)
    root = tmp_path / "root"
    fleet.add(SPARE)
    victim = None
    try:
        fleet.hold.touch()
        driver = sk_run("campaign", "run", str(spec), "--root", str(root), "--address", fleet.address)
        try:
            wait_for(lambda: len(fleet.held()) == 2, 300, driver)  # both hosts' groups of the first run are running
            first = session_folders(root)["t0-1"]
            hosts = [h["node_name"] for h in json.loads((first / "session.json").read_text())["placement"]["hosts"]]
            victim = hosts[-1]
            fleet.remove(victim)
            from sk_analytics.ledger.chain import read_records

            wait_for(lambda: any(r.kind == "session_superseded" for r in read_records(root)), 300, driver)
            fleet.release()  # the new session's runs go on without a hold
            code, out = finish(driver)
        finally:
            driver.kill()
            fleet.release()
    finally:
        if victim is not None and victim not in fleet.nodes:
            fleet.add(victim)  # the module's fleet as the other tests expect it: server-a and server-b
        fleet.remove(SPARE)
    assert code == 0, out[-4000:]
    from sk_analytics.ledger.chain import read_records, verify

    folders = session_folders(root)
    assert set(folders) == {"t0-1", "t0-2"}, out[-3000:]
    index = read_records(root)
    assert [[h["node_name"] for h in r.data["hosts_lost"]] for r in index if r.kind == "node_lost"] == [[victim]]
    assert [r.data["policy"] for r in index if r.kind == "node_lost"] == ["restart"]
    assert [(r.data["session"], r.data["by"]) for r in index if r.kind == "session_superseded"] == [("t0-1", "t0-2")]
    assert kinds(folders["t0-1"])[-2:] == ["node_lost", "session_superseded"] and "trial_result" not in kinds(folders["t0-1"])
    lost = [b for b in _blockers(folders["t0-1"]) if "was lost during the run" in b["message"]]
    assert len(lost) == 1 and victim in lost[0]["message"] and "not a measurement" in lost[0]["message"], _blockers(folders["t0-1"])
    assert "session_supersedes" in kinds(folders["t0-2"])
    placement = json.loads((folders["t0-2"] / "session.json").read_text())["placement"]
    alive = sorted({*SERVERS, SPARE} - {victim})
    assert sorted(h["node_name"] for h in placement["hosts"]) == alive and placement["spans"]["hosts"] == 2
    assert sweep_outcome(folders["t0-2"]) == reference  # the same decisions, and gate numbers, as on one 16-NPU node
    assert verify(root).ok and all(verify(folder).ok for folder in folders.values())
    assert workload_processes(root) == []


def test_thirty_two_ranks_on_four_hosts_by_hand_decide_as_one_thirty_two_npu_node_and_leave_nothing(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Two more servers join (four of 8 NPUs); ``sk-run sweep --hosts 4 --npus-per-host 8`` of a 32-rank task runs,
    uninterrupted, on a placement group of one bundle per server: every run writes the 32 ranks' logs into its run
    folder, each of its four groups ran on the placement's host in order under that host's own lease, the decisions
    and gate numbers are those of the same task on one simulated 32-NPU node, the ledger verifies, and the cluster
    holds nothing of the session afterwards."""
    if not inside(request):
        return
    fleet: Fleet = request.getfixturevalue("fleet")
    task = write_task(tmp_path / "task32", seed=3, **{**TASK, "ranks": 32})
    code, out = finish(sk_run("sweep", "--task", str(task), "--session", str(tmp_path / "one-node"), "--quiet"))
    assert code == 0, out[-3000:]
    session = tmp_path / "four-hosts"
    extra = (SPARE, "server-d")
    try:
        for server in extra:
            fleet.add(server)
        code, out = finish(sk_run("sweep", "--task", str(task), "--session", str(session), "--hosts", "4", "--npus-per-host", "8",
                                  "--quiet", "--ray-address", fleet.address))
        assert code == 0, out[-4000:]
        with watching(fleet):
            assert _left_on_the_cluster() == []
    finally:
        for server in extra:
            if server in fleet.nodes:
                fleet.remove(server)
    assert sweep_outcome(session) == sweep_outcome(tmp_path / "one-node")
    placement = json.loads((session / "session.json").read_text())["placement"]
    hosts = [h["node_name"] for h in placement["hosts"]]
    assert sorted(hosts) == sorted({*SERVERS, *extra}) and placement["spans"]["hosts"] == 4
    run = session / "experiments/Sbest/O1/CLEAN/run-1"
    assert sorted(p.name for p in run.glob("log_*.log")) == sorted(f"log_{r}.log" for r in range(32))
    meta = json.loads((run / "meta.json").read_text())
    assert [g["node_name"] for g in meta["process"]["groups"]] == hosts
    assert [(h["node_name"], h["mode"], h["root"]) for h in meta["lease"]["hosts"]] == [
        (name, "acquired", str(fleet.locks(name))) for name in hosts]
    from sk_analytics.ledger.chain import verify

    assert verify(session).ok
    assert workload_processes(tmp_path) == []


@contextmanager
def watching(fleet: Fleet) -> Iterator[None]:
    """This test process connected to the fleet for the block, only to look at what the cluster holds."""
    import ray

    ray.init(address=fleet.address, log_to_driver=False, logging_level="ERROR")
    try:
        yield
    finally:
        ray.shutdown()


def _left_on_the_cluster() -> list[str]:
    """What of a session's reservation the cluster still holds (inside :func:`watching`): a placement group not
    removed, NPUs not free, an agent's worker process (Ray titles it ``ray::RayAgent...``) still alive."""
    import ray

    left = [f"placement group {pg_id[:12]} {pg['state']}" for pg_id, pg in ray.util.placement_group_table().items()
            if pg["state"] != "REMOVED"]
    free, total = ray.available_resources().get("NPU", 0), ray.cluster_resources().get("NPU", 0)
    if free != total:
        left.append(f"{free:g} of {total:g} NPUs free")
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and b"RayAgent" in (proc / "cmdline").read_bytes():
                left.append(f"pid {proc.name}: {(proc / 'cmdline').read_bytes()[:80]!r}")
        except OSError:
            continue
    return left


def _survivors(pids: Sequence[int]) -> list[str]:
    """What is left of a stopped session on any node: the given processes of its run, and its Ray reservation."""
    from sk_runner.process import process_alive

    return [f"pid {pid}" for pid in pids if process_alive(pid)] + _left_on_the_cluster()


def _gone(pids: Sequence[int], timeout_s: float = 60) -> None:
    """Wait (at most ``timeout_s``; it matters only when something is broken) until nothing of the session is left."""
    try:
        wait_for(lambda: not _survivors(pids), timeout_s)
    except AssertionError:
        raise AssertionError(f"left after the session was stopped: {_survivors(pids)}") from None


def _every_lease_free(fleet: Fleet) -> None:
    """Every host's NPUs can be leased at once: the agents, the lease holders, are gone."""
    from sk_runner.devices.lease import acquire
    from sk_runner.devices.markers import Need

    for server in SERVERS:
        acquire(Need(str(fleet.locks(server)), tuple(range(8))), timeout_s=10, on_wait=None).release()


def test_sigkill_of_the_campaign_driver_leaves_no_process_of_the_session_on_any_host(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The driver is killed while both hosts' groups run: Ray ends its job, the sweep dies with its worker, the sweep's
    Ray job (its placement group and agents) ends with it, each agent's group with the agent: no process of the
    session on any node, no placement group, every NPU free, and every host's lease free again."""
    if not inside(request):
        return
    fleet: Fleet = request.getfixturevalue("fleet")
    spec = _spec(tmp_path, request.getfixturevalue("task"))
    root = tmp_path / "root"
    fleet.hold.touch()
    driver = sk_run("campaign", "run", str(spec), "--root", str(root), "--address", fleet.address)
    try:
        held = wait_for(lambda: fleet.held() if len(fleet.held()) == 2 else None, 300, driver)
        sweep = json.loads((root / "run" / "t0-1.json").read_text())["pid"]
        driver.send_signal(signal.SIGKILL)
        driver.wait()
        with watching(fleet):
            _gone([*held, sweep])
        assert workload_processes(root) == []
    finally:
        driver.kill()
        fleet.release()
    _every_lease_free(fleet)


def test_a_signalled_multi_host_sweep_stops_every_hosts_group_and_gives_the_hosts_back(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Ctrl-C to ``sk-run sweep --hosts 2``, then SIGTERM to its ``--resume``, each while both hosts' groups of a run are
    held and the sweep waits on Ray for them: exit 130, then 143, each with the ``--resume`` line; after each, no group
    of the run is alive on any host, the cluster holds nothing of the session (no placement group, every NPU free, no
    agent's process) and every host's lease can be taken. The resumed sweep ran on the session's recorded hosts."""
    if not inside(request):
        return
    fleet: Fleet = request.getfixturevalue("fleet")
    session = tmp_path / "s"
    task = str(request.getfixturevalue("task"))
    fleet.hold.touch()
    try:
        for signum, code, args in ((signal.SIGINT, 130, ["--task", task, "--session", str(session), "--hosts", "2", "--npus-per-host", "8"]),
                                   (signal.SIGTERM, 143, ["--resume", str(session)])):
            sweep = sk_run("sweep", *args, "--quiet", "--ray-address", fleet.address)
            try:
                held = wait_for(lambda: fleet.held() if len(fleet.held()) == 2 else None, 300, sweep)
                sweep.send_signal(signum)
                returned, out = finish(sweep, 120)
            finally:
                sweep.kill()
            assert returned == code, out[-4000:]
            assert f"continue with: sk-run sweep --resume {session}" in out, out[-4000:]
            with watching(fleet):
                _gone(held)
            assert workload_processes(tmp_path) == []
            _every_lease_free(fleet)
            for marker in fleet.base.glob("hold.held-*"):  # the next run's groups write their own
                marker.unlink()
    finally:
        fleet.release()
    placement = json.loads((session / "session.json").read_text())["placement"]
    assert sorted(h["node_name"] for h in placement["hosts"]) == list(SERVERS)
    from sk_analytics.ledger.chain import read_records

    assert "trial_result" not in [r.kind for r in read_records(session)]  # both interrupted runs decided nothing


def test_a_multi_host_sweep_by_hand_waits_for_a_host_lease_then_stops_with_nothing_run(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """``sk-run sweep --hosts 2 --ray-address`` while someone holds server-b's NPUs: exit 3 naming that host and the
    holder, no session created, the hosts given back (the next reservation gets them)."""
    if not inside(request):
        return
    fleet: Fleet = request.getfixturevalue("fleet")
    session = tmp_path / "s"
    with holding(fleet.locks("server-b"), ",".join(str(i) for i in range(8))) as holder:  # another program, silent in the files
        code, out = finish(sk_run("sweep", "--task", str(request.getfixturevalue("task")), "--session", str(session), "--hosts", "2",
                                  "--npus-per-host", "8", "--ray-address", fleet.address, "--lease-timeout", "1"), 300)
    assert code == 3, out[-3000:]
    error = [line for line in out.splitlines() if line.startswith("sk-run: error:")]
    assert len(error) == 1 and f"(server-b): NPU 0 is still leased by pid {holder.pid} (" in error[0], out[-3000:]  # named by /proc/locks
    assert str(fleet.locks("server-b")) in error[0] and "nothing ran" in error[0]
    assert not (session / "session.json").exists()
    assert workload_processes(tmp_path) == []


def test_a_campaign_npu_task_and_a_sweep_by_hand_on_the_same_lease_root_exclude_each_other(
        request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Issue 33's rule: a Ray task assigned NPUs takes the host's lease under the spec's root with Ray's ids. A sweep
    started by hand holds that root's NPUs 0-7 (held inside its first run); the campaign's session cannot get them:
    it ends failed with a lease_blocked record naming the sweep, nothing measured."""
    if not inside(request):
        return
    fleet: Fleet = request.getfixturevalue("fleet")
    locks = tmp_path / "locks"
    small = write_task(tmp_path / "tasks" / "small", seed=3)
    hold = tmp_path / "hold"
    hold.touch()
    by_hand_session = tmp_path / "by-hand"
    small_session(by_hand_session, ["auto-op-parallel-1"])  # its matrix is there: the sweep goes straight to its first run
    by_hand = sk_run("sweep", "--resume", str(by_hand_session), "--quiet", "--lease-root", str(locks), "--device-id", "0-7",
                     env={**os.environ, "SK_SIM_HOLD": str(hold)})
    try:
        wait_for(lambda: list(tmp_path.glob("hold.held-*")), 300, by_hand)
        spec = tmp_path / "campaign.json"
        spec.write_text(json.dumps({"schema_version": "sk-tune-campaign-v1", "name": "leased", "max_attempts": 1, "tasks": [
            {"id": "c", "task": str(small), "resources": {"NPU": 8}, "lease_root": str(locks), "lease_timeout_s": 1}]}), encoding="utf-8")
        root = tmp_path / "root"
        code, out = finish(sk_run("campaign", "run", str(spec), "--root", str(root), "--address", fleet.address), 300)
    finally:
        by_hand.send_signal(signal.SIGTERM)
        finish(by_hand, 60)
        hold.unlink(missing_ok=True)
    assert code == 1, out[-3000:]
    from sk_analytics.ledger.chain import read_records

    assert [r.data["outcome"] for r in read_records(root) if r.kind == "session_ended"] == ["failed"]
    blocked = [r.data for r in read_records(session_folders(root)["c-1"]) if r.kind == "lease_blocked"]
    assert len(blocked) == 1 and blocked[0]["device_ids"] == list(range(8)) and blocked[0]["root"] == str(locks)
    assert f"pid {by_hand.pid}" in blocked[0]["busy"]["holder"] and "sweep" in blocked[0]["busy"]["holder"]
    assert "trial_result" not in kinds(session_folders(root)["c-1"])
    assert workload_processes(root) == []
