"""Campaign sessions take the host's device lease: Ray's NPU assignment or the task's devices, under the task's root
(or the node's SK_RUN_LEASE_ROOT); a hand-held lease on the same devices keeps the session from measuring."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from campaign_helpers import check_finished_session, write_task
from sweep_helpers import small_session
from test_campaign import _live_workloads, _wait
from test_devices_lease import _busy, holding

from sk_analytics.cli import cli as analyze_cli
from sk_analytics.cli._base import run_cli
from sk_analytics.errors import InputError, UsageError
from sk_analytics.ledger.chain import read_records
from sk_runner.campaign.job import Job, job_lease, session_lease
from sk_runner.campaign.spec import load_spec
from sk_runner.campaign.state import session_dir
from sk_runner.cli import cli
from sk_runner.devices.lease import LeaseRequest, lock_path
from sk_runner.devices.markers import DEVICES_ENV, HELD, IDS, ROOT, ROOT_ENV, TIMEOUT_ENV, Need
from sk_runner.hosts.topology import assigned_npus
from sk_runner.sweep.leasing import request_record


def _job(**kw: object) -> Job:
    return Job("/campaign", "t", "/t/task.json", "t-1", None, **kw)  # type: ignore[arg-type]


def test_ray_assigned_npus_are_the_leased_devices() -> None:
    assert assigned_npus({"NPU": ["3", "1"], "GPU": []}) == (1, 3)
    assert assigned_npus({"GPU": ["0"]}) is None and assigned_npus({"NPU": []}) is None


def test_a_job_leases_the_tasks_root_and_devices_else_the_nodes_defaults() -> None:
    job = _job(lease_root="/locks", device_ids=(0, 1), lease_timeout_s=5.0)
    request = job_lease(job, {})
    assert request.need == Need("/locks", (0, 1)) and request.timeout_s == 5.0
    from_node = job_lease(_job(device_ids=(2,)), {ROOT_ENV: "/node-locks", TIMEOUT_ENV: "7"})
    assert from_node.need == Need("/node-locks", (2,)) and from_node.timeout_s == 7.0
    assert job_lease(_job(), {ROOT_ENV: "/node-locks", DEVICES_ENV: "4 5"}).need == Need("/node-locks", (4, 5))
    # no root anywhere: unleased, unless the job's process was started under a parent's complete markers
    assert job_lease(_job(device_ids=(0,)), {}).need is None
    assert job_lease(_job(), {HELD: "1", IDS: "0", ROOT: "/parent"}).need == Need("/parent", (0,))
    with pytest.raises(UsageError, match="--lease-root needs the devices"):
        job_lease(_job(lease_root="/locks"), {})
    with pytest.raises(UsageError, match="SK_RUN_LEASE_TIMEOUT='soon': expected seconds"):
        job_lease(_job(), {TIMEOUT_ENV: "soon"})


def _spec(tmp_path: Path, **settings: object) -> Path:
    write_task(tmp_path / "tasks" / "a", seed=3)
    path = tmp_path / "campaign.json"
    path.write_text(json.dumps({"schema_version": "sk-tune-campaign-v1", "name": "leased", "max_attempts": 1,
                                "tasks": [{"id": "a", "task": "tasks/a/task.json", **settings}]}), encoding="utf-8")
    return path


def test_spec_lease_settings_are_read_and_bad_device_ids_named(tmp_path: Path) -> None:
    task = load_spec(_spec(tmp_path, lease_root="locks", device_ids=["0-1", 3], lease_timeout_s=2)).tasks[0]
    assert (task.lease_root, task.device_ids, task.lease_timeout_s) == (str(tmp_path / "locks"), (0, 1, 3), 2.0)
    with pytest.raises(InputError, match=r"device_ids '1-0': expected") as info:
        load_spec(_spec(tmp_path, lease_root="locks", device_ids=["1-0"]))
    assert info.value.exit_code == 2 and "/tasks/0/device_ids" in info.value.one_line()


@pytest.mark.slow
def test_a_campaign_session_and_a_hand_held_lease_on_its_devices_exclude_each_other(tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    spec = _spec(tmp_path, lease_root=str(locks), device_ids=["0-1"], lease_timeout_s=0.5)
    root = tmp_path / "root"
    with holding(locks, "1"):  # e.g. a sweep started by hand, or the controller's own phase
        assert run_cli(cli, "sk-run", ["campaign", "run", str(spec), "--root", str(root), "--local", "--quiet"]) == 1
    ended = [r.data for r in read_records(root) if r.kind == "session_ended"]
    assert [e["outcome"] for e in ended] == ["failed"]
    session = read_records(session_dir(root, "a-1"))
    blocked = [r.data for r in session if r.kind == "lease_blocked"]
    assert len(blocked) == 1 and blocked[0]["busy"]["device"] == 1 and blocked[0]["device_ids"] == [0, 1]
    assert not [r for r in session if r.kind == "trial_result"]



def test_a_job_whose_session_exists_takes_the_lease_the_session_recorded(tmp_path: Path) -> None:
    """Resumed, a campaign job takes its session's recorded lease, not whatever the node's defaults or Ray say now; a new
    session (or one that recorded none) takes the job's own; a session that spans hosts takes none itself."""
    folder = tmp_path / "s"
    assert session_lease(_job(device_ids=(2, 3)), folder, {ROOT_ENV: "/node"}).need == Need("/node", (2, 3))  # no session yet
    small_session(folder, [], lease=request_record(LeaseRequest(Need("/locks", (0, 1))), "options"))
    recorded = Need("/locks", (0, 1))
    assert session_lease(_job(device_ids=(2, 3)), folder, {ROOT_ENV: "/node"}).need == recorded  # Ray assigned others
    assert session_lease(_job(device_ids=(0, 1)), folder, {}).need == recorded  # the node's SK_RUN_LEASE_ROOT is gone
    assert session_lease(_job(lease_timeout_s=4.0), folder, {}).timeout_s == 4.0
    assert session_lease(_job(lease_root="/locks", hosts=2, npus_per_host=8), folder, {}).need is None  # each host leases
    unrecorded = tmp_path / "u"
    small_session(unrecorded, [])
    assert session_lease(_job(device_ids=(2,)), unrecorded, {ROOT_ENV: "/node"}).need == Need("/node", (2,))


@pytest.mark.slow
def test_a_campaign_killed_inside_a_leased_session_resumes_it_under_the_same_lease(tmp_path: Path,
                                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """The task's lease root is the node's SK_RUN_LEASE_ROOT; the driver is SIGKILLed while the session's first workload
    is held inside the lease (the simulator's hold hook, never a delay); `campaign resume` without that variable
    continues the session under the lease it recorded (it used to run the rest unleased), to the decisions of an
    uninterrupted session."""
    locks, hold = tmp_path / "locks", tmp_path / "hold"
    spec = _spec(tmp_path, device_ids=["0-1"])
    root = tmp_path / "root"
    hold.touch()
    env = {k: v for k, v in os.environ.items() if k not in (ROOT_ENV, DEVICES_ENV)}
    campaign = [sys.executable, "-c", "from sk_runner.cli import main; main()", "campaign"]
    driver = subprocess.Popen([*campaign, "run", str(spec), "--root", str(root), "--local", "--quiet"],
                              env={**env, ROOT_ENV: str(locks), "SK_SIM_HOLD": str(hold)}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True)
    try:
        _wait(lambda: list(tmp_path.glob("hold.held-*")) or driver.poll() is not None, 300)
        assert driver.poll() is None, driver.communicate()[0][-3000:]
        assert _busy(lock_path(locks, 0)) and _busy(lock_path(locks, 1))  # held by the session's sweep
        driver.kill()  # SIGKILL: no handler runs; the lifetime watchdogs end the session's processes, the kernel its locks
        driver.communicate(timeout=60)
        # nothing of the session is left and the kernel dropped its locks (an exiting process's command line reads
        # empty before its files are closed: the locks, not the process list, say when it is gone)
        _wait(lambda: _live_workloads(root) == [] and not any(_busy(lock_path(locks, i)) for i in (0, 1)), 60)
    finally:
        if driver.poll() is None:
            driver.kill()
            driver.communicate()
        hold.unlink(missing_ok=True)
    session = session_dir(root, "a-1")
    requested = [r.data for r in read_records(session) if r.kind == "lease_requested"]
    assert [(d["root"], d["device_ids"]) for d in requested] == [(str(locks), [0, 1])]
    resumed = subprocess.run([*campaign, "resume", str(root), "--local", "--quiet"], env=env, capture_output=True, text=True,
                             timeout=900, check=False)
    assert resumed.returncode == 0, resumed.stdout[-3000:] + resumed.stderr[-3000:]
    check_finished_session(session)
    leases = [r.data["lease"] for r in read_records(session) if r.kind == "trial_result"]
    assert len(leases) >= 2 and all((lease["mode"], lease["root"], lease["device_ids"]) == ("acquired", str(locks), [0, 1])
                                    for lease in leases), leases
    capsys.readouterr()
    assert run_cli(analyze_cli, "sk-analyze", ["ledger", "verify", str(session)]) == 0
    assert "unleased" not in capsys.readouterr().out
