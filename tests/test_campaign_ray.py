"""Campaigns on a real multi-node Ray cluster, all of it on loopback inside a private network namespace.

Each test re-runs itself under ``unshare -n`` (only ``lo``, brought up), where a
``ray.cluster_utils.Cluster`` of named nodes, each declaring ``NPU: 8``, runs
simulator sessions; no Ray traffic can leave the namespace. Where namespaces
are not permitted (not root, no ``unshare``) the tests skip saying so.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from campaign_helpers import DRIVER_COMMANDS, check_finished_session, write_spec
from netns_helpers import netns_problem, pytest_in_private_netns

pytestmark = pytest.mark.slow
ray = pytest.importorskip("ray", reason="Ray is not installed (pip install 'sk-tune[ray]'); campaign-on-Ray tests need it")

INSIDE = "SK_CAMPAIGN_NETNS"
NODE = {"num_cpus": 1, "resources": {"NPU": 8}, "object_store_memory": 78 * 1024 * 1024}
#: Ray notices a dead node within a few seconds (defaults take ~30 s).
FAST_HEALTH = {"health_check_period_ms": 500, "health_check_failure_threshold": 4, "health_check_initial_delay_ms": 1000}


def in_private_netns(request: pytest.FixtureRequest) -> bool:
    """True inside the namespace (run the test); outside, run this very test in one and assert it passed."""
    if os.environ.get(INSIDE) == "1":
        return True
    problem = netns_problem()
    if problem:
        pytest.skip(problem)
    node = f"{Path(request.node.fspath)}::{request.node.name}"
    tmp = request.getfixturevalue("tmp_path")
    code, out = pytest_in_private_netns(["-x", "--basetemp", str(tmp / "inner"), node], INSIDE, tmp, 900)
    assert code == 0, out[-9000:]
    assert "1 passed" in out and "skipped" not in out, out[-3000:]
    return False


@pytest.fixture(scope="module", autouse=True)
def ray_session_folders_removed() -> Iterator[None]:
    """Ray keeps each cluster's session folder (logs, sockets) under ``$TMPDIR/ray`` after it shut down;
    those this module's clusters made are removed once they are down (the run's TMPDIR must end empty)."""
    folder = Path(os.environ.get("RAY_TMPDIR") or os.environ.get("TMPDIR") or "/tmp") / "ray"
    before = set(folder.iterdir()) if folder.is_dir() else None
    yield
    if before is None:
        shutil.rmtree(folder, ignore_errors=True)
        return
    for entry in set(folder.iterdir()) - before if folder.is_dir() else ():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            entry.unlink(missing_ok=True)


@pytest.fixture
def cluster() -> Iterator[Any]:
    """Two named nodes (server-a = head, server-b), each NPU: 8; everything stopped at the end, even on failure."""
    from ray.cluster_utils import Cluster

    c = Cluster(initialize_head=True, head_node_args={**NODE, "node_name": "server-a", "include_dashboard": False,
                                                       "_system_config": FAST_HEALTH})
    try:
        c.add_node(**NODE, node_name="server-b")
        c.wait_for_nodes()
        yield c
    finally:
        c.shutdown()  # stops exactly the processes this cluster started


def sk_run(*args: str, **kw: Any) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", "from sk_runner.cli import main; main()", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)


def finish(proc: subprocess.Popen[str], timeout: float = 600) -> tuple[int, str]:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        raise AssertionError(f"campaign did not finish in {timeout} s:\n{out[-4000:]}") from None
    return proc.returncode, out


def wait_for(what: Callable[[], Any], timeout: float, proc: subprocess.Popen[str] | None = None) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"driver ended early ({proc.returncode}):\n{proc.stdout.read() if proc.stdout else ''}")
        time.sleep(0.5)
    raise AssertionError("condition not reached in time")


def kinds(folder: Path) -> list[str]:
    from sk_analytics.ledger.chain import raw_records

    return [r.kind for r in raw_records(folder)]


def session_folders(root: Path) -> dict[str, Path]:
    return {p.name.split("=", 1)[1]: p for p in sorted((root / "sessions").glob("session=*"))}


def placement(folder: Path) -> dict[str, Any]:
    return json.loads((folder / "session.json").read_text())["placement"]


def workload_processes(root: Path) -> list[str]:
    """Live processes whose command line names the campaign root: sweeps and simulator runs (not the driver)."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(root) in cmd and state not in ("Z", "X") and "-m pytest" not in cmd and not any(verb in cmd for verb in DRIVER_COMMANDS):
            found.append(f"{proc.name}: {cmd[:160]}")
    return found


def test_four_sessions_two_nodes_one_node_lost(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if not in_private_netns(request):
        return
    c = request.getfixturevalue("cluster")
    spec = write_spec(tmp_path, 4, resources={"NPU": 8}, on_node_lost="restart")
    root = tmp_path / "root"
    driver = sk_run("campaign", "run", str(spec), "--root", str(root), "--address", c.address)
    try:
        # the first wave: one session per node (each takes the node's 8 NPUs); then take server-b away mid-session
        def on_b() -> str | None:
            for name, folder in session_folders(root).items():
                if (folder / "session.json").is_file() and placement(folder)["node_name"] == "server-b" and "matrix_built" in kinds(folder):
                    return name
            return None

        lost = wait_for(on_b, 300, driver)
        c.remove_node(c.list_all_nodes()[1])
        code, out = finish(driver)
    finally:
        driver.kill()
    assert code == 0, out[-4000:]
    folders = session_folders(root)
    task = lost.rsplit("-", 1)[0]
    assert f"{task}-2" in folders, out[-3000:]  # a fresh session of the same task, on the surviving node
    assert set(folders) == {"t0-1", "t1-1", "t2-1", "t3-1", f"{task}-2"}
    for name, folder in folders.items():
        if name == lost:
            continue
        check_finished_session(folder)
        assert placement(folder)["node_name"] in {"server-a", "server-b"}
    # the lost session never continued elsewhere; both ledgers and the campaign index link the two
    assert placement(folders[lost])["node_name"] == "server-b" and "handoff_written" not in kinds(folders[lost])
    assert kinds(folders[lost])[-2:] == ["node_lost", "session_superseded"]
    assert placement(folders[f"{task}-2"])["node_name"] == "server-a"
    assert "session_supersedes" in kinds(folders[f"{task}-2"])
    from sk_analytics.ledger.chain import read_records, verify

    assert verify(root).ok and verify(folders[lost]).ok
    index = read_records(root)
    assert [r.data["session"] for r in index if r.kind == "node_lost"] == [lost]
    assert [(r.data["session"], r.data["by"]) for r in index if r.kind == "session_superseded"] == [(lost, f"{task}-2")]
    assert {r.data["session"] for r in index if r.kind == "session_placed"} == set(folders)
    # both nodes ran sessions; no workload process is left
    assert {placement(f)["node_name"] for f in folders.values()} == {"server-a", "server-b"}
    assert workload_processes(root) == []
    status = subprocess.run([sys.executable, "-c", "from sk_runner.cli import main; main()", "campaign", "status", str(root), "--json"],
                            capture_output=True, text=True, check=True)
    rows = {r["task"]: r for r in json.loads(status.stdout)["sessions"]}
    assert {r["phase"] for r in rows.values()} == {"done"} and rows[task]["session"] == f"{task}-2"


def test_embedded_ray_without_an_address_and_status_while_it_runs(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """No --address and no RAY_ADDRESS: the run starts its own Ray on this machine (loopback only), runs the session
    there with the simulator's default resources (CPU: 1), and `status` reads the ledgers while the driver runs."""
    if not in_private_netns(request):
        return
    spec = write_spec(tmp_path, 1)
    root = tmp_path / "root"
    env = {name: value for name, value in os.environ.items() if name != "RAY_ADDRESS"}
    driver = sk_run("campaign", "run", str(spec), "--root", str(root), env=env)
    try:
        wait_for(lambda: "t0-1" in session_folders(root) and "matrix_built" in kinds(session_folders(root)["t0-1"]), 300, driver)
        status = subprocess.run([sys.executable, "-c", "from sk_runner.cli import main; main()", "campaign", "status", str(root), "--json"],
                                capture_output=True, text=True, check=True)
        code, out = finish(driver)
    finally:
        driver.kill()
    assert code == 0, out[-4000:]
    live = json.loads(status.stdout)
    folder = session_folders(root)["t0-1"]
    assert live["driver"]["alive"] is True and live["driver"]["record"]["executor"] == "ray"
    assert [(r["session"], r["node"]) for r in live["sessions"]] == [("t0-1", placement(folder)["node_name"])]
    assert live["sessions"][0]["phase"] not in ("pending", "done")
    check_finished_session(folder)
    assert not placement(folder)["node_id"].startswith("local-")  # a Ray node, not the sequential path
    from sk_analytics.ledger.chain import read_records

    checked = [r.data for r in read_records(root) if r.kind == "storage_checked"]
    assert [(c["executor"], len(c["nodes"])) for c in checked] == [("ray", 1)]
    assert workload_processes(root) == []


def test_driver_killed_then_resumed(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if not in_private_netns(request):
        return
    c = request.getfixturevalue("cluster")
    spec = write_spec(tmp_path, 2, resources={"NPU": 8})
    root = tmp_path / "root"
    driver = sk_run("campaign", "run", str(spec), "--root", str(root), "--address", c.address)
    try:
        wait_for(lambda: all("trial_result" in kinds(f) for f in session_folders(root).values()) and len(session_folders(root)) == 2,
                 300, driver)
        driver.send_signal(signal.SIGKILL)
        driver.wait()
    finally:
        driver.kill()
    # Ray ends the dead driver's tasks; their sweeps and simulator runs die with them
    wait_for(lambda: workload_processes(root) == [], 30)
    status = subprocess.run([sys.executable, "-c", "from sk_runner.cli import main; main()", "campaign", "status", str(root)],
                            capture_output=True, text=True, check=True)
    assert "未运行" in status.stdout and "trials" in status.stdout
    before = {n: placement(f) for n, f in session_folders(root).items()}
    code, out = finish(sk_run("campaign", "resume", str(root), "--address", c.address))
    assert code == 0, out[-4000:]
    folders = session_folders(root)
    assert set(folders) == {"t0-1", "t1-1"}
    for name, folder in folders.items():
        check_finished_session(folder)
        assert placement(folder) == before[name]  # continued on its own node
    from sk_analytics.ledger.chain import read_records

    assert [r.kind for r in read_records(root)].count("campaign_resumed") == 1


def _ray_worker_of(pid: int) -> int:
    """The Ray worker process above ``pid`` (its title starts with ``ray::``)."""
    while pid > 1:
        pid = int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
        if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"ray::"):
            return pid
    raise AssertionError("no Ray worker above the sweep")


def test_a_ray_task_that_fails_is_retried_on_its_node_and_ends_as_uninterrupted(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The Ray worker running a job is killed mid-session (a Ray task failure; the node stays): the driver records the
    failure, continues the same session on the same node, and it ends as an uninterrupted session of its seed."""
    if not in_private_netns(request):
        return
    c = request.getfixturevalue("cluster")
    spec = write_spec(tmp_path, 1, resources={"NPU": 8}, max_attempts=2)
    root = tmp_path / "root"
    driver = sk_run("campaign", "run", str(spec), "--root", str(root), "--address", c.address)
    try:
        wait_for(lambda: "t0-1" in session_folders(root) and "trial_result" in kinds(session_folders(root)["t0-1"]), 300, driver)
        before = placement(session_folders(root)["t0-1"])
        sweep = json.loads((root / "run" / "t0-1.json").read_text())["pid"]
        os.kill(_ray_worker_of(sweep), signal.SIGKILL)
        code, out = finish(driver)
    finally:
        driver.kill()
    assert code == 0, out[-4000:]
    assert set(session_folders(root)) == {"t0-1"}
    folder = session_folders(root)["t0-1"]
    check_finished_session(folder)
    assert placement(folder) == before
    from sk_analytics.ledger.chain import read_records

    index = read_records(root)
    assert [(r.data["session"], r.data["outcome"]) for r in index if r.kind == "session_ended"] == [("t0-1", "failed"), ("t0-1", "base")]
    assert not any(r.kind in ("node_lost", "session_superseded", "task_given_up") for r in index)
    assert workload_processes(root) == []


def test_cancel_leaves_no_workload_and_resumes(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    if not in_private_netns(request):
        return
    c = request.getfixturevalue("cluster")
    spec = write_spec(tmp_path, 2, resources={"NPU": 8})
    root = tmp_path / "root"
    driver = sk_run("campaign", "run", str(spec), "--root", str(root), "--address", c.address)
    try:
        wait_for(lambda: len(session_folders(root)) == 2 and all("phase_entry" in kinds(f) for f in session_folders(root).values()),
                 120, driver)
        wait_for(lambda: workload_processes(root), 30)
        cancel = subprocess.run([sys.executable, "-c", "from sk_runner.cli import main; main()", "campaign", "cancel", str(root)],
                                capture_output=True, text=True, timeout=120, check=False)
        assert cancel.returncode == 0, cancel.stdout + cancel.stderr
        code, out = finish(driver, 60)
    finally:
        driver.kill()
    assert code == 1, out
    assert workload_processes(root) == []
    from sk_analytics.ledger.chain import read_records

    index = read_records(root)
    assert index[-1].kind == "campaign_stopped" and index[-1].data["reason"] == "cancelled"
    assert {r.data["outcome"] for r in index if r.kind == "session_ended"} == {"cancelled"}


def test_root_not_shared_by_every_node_is_refused(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """server-b runs in its own mount namespace where a tmpfs hides the campaign root: the run refuses, naming it."""
    if not in_private_netns(request):
        return
    from ray.cluster_utils import Cluster

    spec = write_spec(tmp_path, 1, resources={"NPU": 8})
    root = tmp_path / "root"
    root.mkdir()
    c = Cluster(initialize_head=True, head_node_args={**NODE, "node_name": "server-a", "include_dashboard": False})
    ray_cli = str(Path(sys.executable).parent / "ray")
    other = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", f'mount -t tmpfs none "{root}" && exec "$@"', "sh",
                              ray_cli, "start", "--address", c.address, "--node-name", "server-b", "--num-cpus", "1",
                              "--resources", '{"NPU": 8}', "--object-store-memory", str(NODE["object_store_memory"]), "--block"],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        ray.init(address=c.address, log_to_driver=False)
        try:
            wait_for(lambda: sum(n["Alive"] for n in ray.nodes()) == 2, 120)
        finally:
            ray.shutdown()
        code, out = finish(sk_run("campaign", "run", str(spec), "--root", str(root), "--address", c.address), 300)
    finally:
        from sk_runner.process import kill_group

        kill_group(other.pid, grace_s=10.0)  # that node's raylet and workers: the group this test started
        other.wait(30)
        c.shutdown()
    assert code == 3, out[-3000:]
    assert "is not shared by every node: server-b" in out and "cannot read the driver's token" in out
    assert not (root / "sessions").exists()


def test_a_task_no_node_can_hold_is_refused_before_anything_runs(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """Issue 29: NPU: 16 on 8-NPU servers and CPU: 4 on 1-CPU nodes used to wait silently forever (or exit 3 without a
    name when every task was so): exit 2 naming task, resource and largest node, and no campaign root is left."""
    if not in_private_netns(request):
        return
    c = request.getfixturevalue("cluster")
    for need, needle in (({"NPU": 16}, r"task t1 needs NPU: 16 but no alive node can ever hold it \(the largest node, server-[ab], has NPU: 8\)"),
                         ({"CPU": 4}, r"task t1 needs CPU: 4 but no alive node can ever hold it \(the largest node, server-[ab], has CPU: 1\)")):
        spec = write_spec(tmp_path / str(need), 2, resources={"NPU": 8})
        data = json.loads(spec.read_text())
        data["tasks"][1]["resources"] = need
        spec.write_text(json.dumps(data))
        root = tmp_path / f"root-{next(iter(need))}"
        code, out = finish(sk_run("campaign", "run", str(spec), "--root", str(root), "--address", c.address), 120)
        assert code == 2, out[-3000:]
        assert re.search(needle, out), out[-3000:]
        assert not root.exists()
    assert workload_processes(tmp_path) == []


def test_pending_unsatisfiable_until_an_autoscaler_node_joins(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    """The cluster's autoscaler (its node types published in the GCS as a real autoscaler does) could add a
    16-NPU and a 32-NPU server: both tasks are pending_unsatisfiable; once a 16-NPU node joins, t0 runs there and
    ends as an uninterrupted session; t1 is given up after node_wait_s, never handed to Ray to wait forever."""
    if not in_private_netns(request):
        return
    from ray.core.generated import autoscaler_pb2
    from ray.experimental.internal_kv import _internal_kv_put

    c = request.getfixturevalue("cluster")
    config = autoscaler_pb2.ClusterConfig()
    for name, npus in (("npu16", 16), ("npu32", 32)):
        group = config.node_group_configs.add()
        group.name, group.max_count = name, 1
        group.resources["CPU"], group.resources["NPU"] = 1, npus
    ray.init(address=c.address, log_to_driver=False)
    try:
        _internal_kv_put(ray._raylet.GCS_AUTOSCALER_CLUSTER_CONFIG_KEY, config.SerializeToString(), overwrite=True,
                         namespace=ray._raylet.GCS_AUTOSCALER_STATE_NAMESPACE)
    finally:
        ray.shutdown()
    spec = write_spec(tmp_path, 2, resources={"NPU": 16}, node_wait_s=45)
    data = json.loads(spec.read_text())
    data["tasks"][1]["resources"] = {"NPU": 32}
    spec.write_text(json.dumps(data))
    root = tmp_path / "root"
    driver = sk_run("campaign", "run", str(spec), "--root", str(root), "--address", c.address)
    try:
        def pending() -> dict[str, Any] | None:
            if not (root / "ledger.jsonl").is_file():
                return None
            rows = _status_rows(root)
            return rows if {r["phase"] for r in rows.values()} == {"pending_unsatisfiable"} else None

        rows = wait_for(pending, 120, driver)
        assert rows["t0"]["decision"].startswith("needs NPU: 16, waits until ") and rows["t0"]["session"] is None
        c.add_node(**{**NODE, "resources": {"NPU": 16}}, node_name="server-c")
        code, out = finish(driver)
    finally:
        driver.kill()
    assert code == 1, out[-4000:]  # t1 was given up: not every session has a Sbest-BASE
    from sk_analytics.ledger.chain import read_records, verify

    index = read_records(root)
    assert sorted((r.data["task"], r.data["resource"], r.data["needed"]) for r in index if r.kind == "task_pending_unsatisfiable") == [
        ("t0", "NPU", 16.0), ("t1", "NPU", 32.0)]
    assert [(r.data["task"], r.data["reason"]) for r in index if r.kind == "task_given_up"] == [("t1", "unsatisfiable")]
    assert set(session_folders(root)) == {"t0-1"}
    check_finished_session(session_folders(root)["t0-1"])
    assert placement(session_folders(root)["t0-1"])["node_name"] == "server-c"
    assert {t: r["phase"] for t, r in _status_rows(root).items()} == {"t0": "done", "t1": "given_up"}
    assert verify(root).ok and workload_processes(root) == []


def _status_rows(root: Path) -> dict[str, dict[str, Any]]:
    status = subprocess.run([sys.executable, "-c", "from sk_runner.cli import main; main()", "campaign", "status", str(root), "--json"],
                            capture_output=True, text=True, check=True)
    return {r["task"]: r for r in json.loads(status.stdout)["sessions"]}
