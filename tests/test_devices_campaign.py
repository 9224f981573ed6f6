"""Campaign sessions take the host's device lease: Ray's NPU assignment or the task's devices, under the task's root
(or the node's SK_RUN_LEASE_ROOT); a hand-held lease on the same devices keeps the session from measuring."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from campaign_helpers import write_task
from test_devices_lease import holding

from sk_analytics.cli._base import run_cli
from sk_analytics.errors import InputError, UsageError
from sk_analytics.ledger.chain import read_records
from sk_runner.campaign.job import Job, job_lease
from sk_runner.campaign.spec import load_spec
from sk_runner.campaign.state import session_dir
from sk_runner.cli import cli
from sk_runner.devices.markers import DEVICES_ENV, HELD, IDS, ROOT, ROOT_ENV, TIMEOUT_ENV, Need
from sk_runner.hosts.topology import assigned_npus


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
