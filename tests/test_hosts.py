"""Runs that span hosts, without Ray (issue 34): the rank groups and their environment, one result for all groups,
the host agent (lease, group, stop, clean-device proof), a trial on two in-process hosts that logs what one process
of all ranks logs, the simulator's groups and inter-host collectives, the campaign's multi-host fields and checks,
and the one-line refusals of ``--hosts`` without Ray. The Ray placement, a lost host and a killed driver are in
test_hosts_ray.py."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest
from campaign_helpers import write_task
from hosts_fake import ThreadHosts

from sk_analytics.cli._base import run_cli
from sk_analytics.errors import EnvironmentBlocker, InputError, UsageError
from sk_runner.campaign.driver import lost_hosts, pin_of
from sk_runner.campaign.job import Job, NodeInfo, job_argv, job_lease, parse_job
from sk_runner.campaign.resources import FITS, LATER, NEVER, Capacity, NodeCapacity, check_tasks, classify, pending_shortfall
from sk_runner.campaign.spec import load_spec
from sk_runner.cli import cli
from sk_runner.devices.markers import HELD, IDS, ROOT, VISIBLE
from sk_runner.devices.proof import ForeignProcessBlocker
from sk_runner.hosts.agent import HostAgent
from sk_runner.hosts.base import HostSlot, combine, hosts_lease_record
from sk_runner.hosts.proof import HostsProof, HostsSighting
from sk_runner.hosts.ray_hosts import host_leases, recorded_devices
from sk_runner.hosts.topology import GROUP_VARIABLES, HostsSpec, check_hosts, group_env, host_path, local_ranks
from sk_runner.process import ProcessResult

# ------------------------------------------------------------------ rank groups


def test_host_1_of_two_8_npu_hosts_gets_every_group_variable() -> None:
    env = group_env(1, 2, 8, "10.0.0.1", 29500)
    assert env == {"WORLD_SIZE": "16", "RANK": "8", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "8", "NODE_RANK": "1", "GROUP_RANK": "1",
                   "NNODES": "2", "MASTER_ADDR": "10.0.0.1", "MASTER_PORT": "29500", "SK_RUN_HOSTS": "2", "SK_RUN_HOST_INDEX": "1",
                   "SK_RUN_RANKS_PER_HOST": "8"}
    assert tuple(env) == GROUP_VARIABLES
    assert local_ranks(env, 16) == range(8, 16) and local_ranks(group_env(0, 2, 8, "a", 1), 16) == range(0, 8)
    assert local_ranks({}, 16) == range(16) and local_ranks({"SK_RUN_HOSTS": "1"}, 4) == range(4)
    assert local_ranks(group_env(0, 2, 8, "a", 1), 1) == range(0, 1)  # a one-rank probe on the first host


@pytest.mark.parametrize(("env", "needle"), [
    ({"SK_RUN_HOSTS": "2", "SK_RUN_HOST_INDEX": "x", "SK_RUN_RANKS_PER_HOST": "8"}, "SK_RUN_HOST_INDEX='x': expected a non-negative integer"),
    ({"SK_RUN_HOSTS": "2", "SK_RUN_HOST_INDEX": "2", "SK_RUN_RANKS_PER_HOST": "8"}, "no such rank group"),
    ({"SK_RUN_HOSTS": "2", "SK_RUN_HOST_INDEX": "1", "SK_RUN_RANKS_PER_HOST": "8"}, "host 1 of 2 (8 ranks each) has no rank among the 4"),
])
def test_group_variables_that_describe_no_group_are_named(env: dict[str, str], needle: str) -> None:
    with pytest.raises(ValueError, match=needle.replace("(", r"\(").replace(")", r"\)")):
        local_ranks(env, 4)


def test_hosts_x_npus_must_be_the_ranks() -> None:
    assert check_hosts(1, None, 8) is None
    assert check_hosts(2, 8, 16) == HostsSpec(2, 8, 1.0) and HostsSpec(2, 8, 1.0).bundle() == {"NPU": 8.0, "CPU": 1.0}
    with pytest.raises(UsageError, match=r"hosts 2 x npus_per_host 8 = 16 ranks, but the workload runs 12 \(one rank per NPU\)"):
        check_hosts(2, 8, 12)
    with pytest.raises(UsageError, match="hosts 2 needs npus_per_host"):
        check_hosts(2, None, 16)


def test_each_host_writes_its_own_streams_beside_host_0s() -> None:
    assert host_path(Path("run-1/stdout.txt"), 0) == Path("run-1/stdout.txt")
    assert host_path(Path("run-1/stdout.txt"), 1) == Path("run-1/stdout.host-1.txt")
    assert host_path(Path("diag/attempt-1.stderr.log"), 3) == Path("diag/attempt-1.stderr.host-3.log")


def _proc(exit_code: int | None = 0, sig: int | None = None, timed_out: bool = False, start: int = 10, end: int = 20) -> ProcessResult:
    return ProcessResult(100 + start, exit_code, sig, timed_out, start, end, (end - start) / 1e9)


def test_the_first_group_that_failed_by_itself_decides_the_run() -> None:
    ok = combine([{"index": 0, "process": _proc(start=5, end=30)}, {"index": 1, "process": _proc(start=7, end=40)}])
    assert (ok.ok, ok.pid, ok.started_ns, ok.ended_ns) == (True, 105, 5, 40)
    assert [g["index"] for g in ok.to_json()["groups"]] == [0, 1]
    crashed = combine([{"index": 0, "process": _proc(None, 15, end=35), "stopped": True},  # we stopped it
                       {"index": 1, "process": _proc(1, end=30)}])
    assert (crashed.exit_code, crashed.signal, crashed.timed_out) == (1, None, False)
    hung = combine([{"index": 0, "process": _proc(None, 9, timed_out=True)}, {"index": 1, "process": _proc(None, 15), "stopped": True}])
    assert (hung.exit_code, hung.signal, hung.timed_out) == (None, 9, True)


def test_a_run_is_leased_in_a_mode_only_when_every_host_held_its_lease_in_it() -> None:
    def slot(i: int, mode: str | None) -> HostSlot:
        return HostSlot(i, f"n{i}", f"server-{i}", "h", "1.2.3.4", (0, 1), {"mode": mode, "root": f"/locks-{i}", "device_ids": [0, 1]})

    both = hosts_lease_record([slot(0, "acquired"), slot(1, "acquired")])
    assert (both["mode"], both["root"], [h["root"] for h in both["hosts"]]) == ("acquired", "/locks-0", ["/locks-0", "/locks-1"])
    assert hosts_lease_record([slot(0, "acquired"), slot(1, None)])["mode"] is None  # one host unproven: the run is not leased
    from sk_analytics.stage_o.leases import summarize

    summary = summarize([("trial_result", {"round": "O1", "lease": both})])  # the report and the hand-off list every host's lease
    assert (summary.leased, summary.roots, summary.device_ids) == (1, ("/locks-0", "/locks-1"), ((0, 1),))


# ------------------------------------------------------------------ one host's agent


def _agent(tmp_path: Path, index: int = 0, **env: str) -> HostAgent:
    return HostAgent(index, (2, 3), lease_root=None, lease_timeout_s=0.5, session=None, command="sk-run sweep (test)",
                     env={**os.environ, "SK_RUN_LEASE_ROOT": str(tmp_path / "locks"), **env}, name=f"server-{index}")


def test_the_agent_leases_rays_npus_and_gives_its_group_the_hosts_environment(tmp_path: Path) -> None:
    agent = _agent(tmp_path)
    answer = agent.start()
    assert answer["lease"] == {"mode": "acquired", "root": str(tmp_path / "locks"), "device_ids": [2, 3]}
    second = _agent(tmp_path, 1).start()  # another holder on the same host's NPUs waits, then says who holds them
    assert "still leased by pid" in second["fault"] and second["lease_blocked"]["busy"]["device"] == 2
    dump = "import json, os, sys; json.dump(dict(os.environ), open(sys.argv[1], 'w'))"
    record = agent.run("r1", [sys.executable, "-c", dump, str(tmp_path / "env.json")], str(tmp_path), {"SK_RUN_RANKS": "4"},
                       group_env(0, 2, 2, "127.0.0.1", 4242), str(tmp_path / "out.txt"), str(tmp_path / "err.txt"), 60)
    agent.release()
    seen = json.loads((tmp_path / "env.json").read_text())
    assert record["process"].ok and not record["stopped"] and record["index"] == 0
    assert (seen[HELD], seen[IDS], seen[ROOT], seen[VISIBLE]) == ("1", "2,3", str(tmp_path / "locks"), "2,3")
    assert (seen["SK_RUN_RANKS"], seen["WORLD_SIZE"], seen["MASTER_PORT"], seen["SK_RUN_HOST_INDEX"]) == ("4", "4", "4242", "0")


def test_an_agent_given_a_lease_root_but_no_npu_ids_by_ray_refuses_instead_of_running_unleased(tmp_path: Path) -> None:
    agent = HostAgent(0, (), lease_root=str(tmp_path / "locks"), lease_timeout_s=0.5, session=None, command="t", env={}, name="s")
    answer = agent.start()
    assert set(answer) == {"fault"} and "no NPU ids" in answer["fault"] and str(tmp_path / "locks") in answer["fault"]
    assert agent.lease is None
    plain = HostAgent(0, (), lease_root=None, lease_timeout_s=0.5, session=None, command="t", env={}, name="s").start()
    assert plain["lease"]["mode"] is None  # no root anywhere: the simulator's unleased host, as before



def _recorded_host(index: int, lease: dict[str, object]) -> dict[str, object]:
    return HostSlot(index, f"node-{index}", f"server-{index}", "h", "127.0.0.1", (6, 7), lease).to_json()


def test_a_resumed_sessions_hosts_lease_the_devices_they_recorded_not_rays_new_assignment() -> None:
    """Issue 45 on hosts: a resumed session's host takes the lease it recorded (root and NPUs) again; a new session's
    hosts lease Ray's assignment (None) under the given root, else the host's own SK_RUN_LEASE_ROOT (None)."""
    pinned = [_recorded_host(0, {"mode": "acquired", "root": "/locks-a", "device_ids": [3, 2]}),
              _recorded_host(1, {"mode": None, "root": None, "device_ids": None})]
    assert recorded_devices(pinned[0]) == (2, 3) and recorded_devices(pinned[1]) is None
    assert host_leases(2, None, pinned) == [("/locks-a", (2, 3)), (None, None)]  # host 1 held none: Ray's NPUs, as before
    assert host_leases(2, "/locks", pinned) == [("/locks", (2, 3)), ("/locks", None)]
    assert host_leases(2, "/locks", None) == [("/locks", None), ("/locks", None)]


def test_a_ray_agent_given_its_hosts_recorded_devices_leases_those_and_answers_them(tmp_path: Path,
                                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray assigned the bundle NPUs 6-7 this time; the host recorded 2-3: the agent leases 2-3, its groups see 2-3 and
    its slot (the trial identity's devices) says 2-3. Without recorded devices it leases Ray's."""
    ray = pytest.importorskip("ray", reason="Ray is not installed")
    from types import SimpleNamespace

    from sk_runner.hosts.ray_hosts import RayAgent

    context = SimpleNamespace(get_node_id=lambda: "n1", get_accelerator_ids=lambda: {"NPU": ["7", "6"]})
    monkeypatch.setattr(ray, "get_runtime_context", lambda: context)
    monkeypatch.setattr(ray, "nodes", lambda: [{"NodeID": "n1", "NodeName": "server-a", "NodeManagerHostname": "h"}])
    monkeypatch.setattr(ray.util, "get_node_ip_address", lambda: "127.0.0.1")
    resumed = RayAgent(0, lease_root=str(tmp_path / "locks"), lease_timeout_s=0.5, session=None, command="t", device_ids=(2, 3))
    fresh = RayAgent(1, lease_root=str(tmp_path / "locks"), lease_timeout_s=0.5, session=None, command="t")
    try:
        answers = [resumed.start(), fresh.start()]
        assert [(a["device_ids"], a["lease"]["device_ids"], a["lease"]["mode"]) for a in answers] == [
            ([2, 3], [2, 3], "acquired"), ([6, 7], [6, 7], "acquired")]
        assert resumed.group_environ({}, {})[VISIBLE] == "2,3"
    finally:
        resumed.release()
        fresh.release()


def test_stop_ends_a_running_group_and_one_not_started_yet(tmp_path: Path) -> None:
    agent = _agent(tmp_path)
    marker = tmp_path / "started"
    sleeper = [sys.executable, "-c", f"import pathlib, time; pathlib.Path({str(marker)!r}).touch(); time.sleep(300)"]
    done: dict[str, object] = {}
    runner = threading.Thread(target=lambda: done.update(agent.run("r1", sleeper, str(tmp_path), {}, {}, str(tmp_path / "o"),
                                                                   str(tmp_path / "e"), 600)))
    runner.start()
    deadline = time.monotonic() + 60
    while not (marker.exists() and agent.running("r1")) and time.monotonic() < deadline:  # the workload may touch its
        time.sleep(0.02)                                                                   # marker before the agent hears its pid
    assert agent.stop("r1", grace_s=1.0)
    runner.join(60)
    assert done["stopped"] and done["process"].signal is not None  # type: ignore[union-attr]
    assert not agent.stop("r2") and agent.run("r2", sleeper, str(tmp_path), {}, {}, str(tmp_path / "o2"), str(tmp_path / "e2"), 600)["stopped"]


def test_a_group_whose_streams_cannot_be_opened_on_its_host_is_a_fault_in_one_line(tmp_path: Path) -> None:
    """The session folder is not writable on this host (here: a file where the run folder should be): the agent answers
    a fault naming the path, not a Python error that Ray would carry back as a remote traceback."""
    (tmp_path / "run-1").write_text("not a folder", encoding="utf-8")
    record = _agent(tmp_path).run("r1", [sys.executable, "-c", "pass"], str(tmp_path), {}, {}, str(tmp_path / "run-1" / "out.txt"),
                                  str(tmp_path / "run-1" / "err.txt"), 60)
    assert set(record) == {"index", "fault"} and record["fault"].startswith("cannot start the group: ")
    assert str(tmp_path / "run-1") in record["fault"] and "\n" not in record["fault"]


ENOSPC_LINE = "OSError: [Errno 28] No space left on device: 'log_3.log'"


def test_a_group_that_died_of_a_full_disk_answers_the_fault_itself_not_only_its_text(tmp_path: Path) -> None:
    """The environment fault crosses the host boundary whole: command, errno, evidence and stderr path, so the session
    can raise it as a one-host run would (and name the stderr where the run is moved)."""
    fail = [sys.executable, "-c", f"import sys; print({ENOSPC_LINE!r}, file=sys.stderr); sys.exit(1)"]
    record = _agent(tmp_path).run("r1", fail, str(tmp_path), {}, {}, str(tmp_path / "out.txt"), str(tmp_path / "err.txt"), 60)
    assert record["fault"].startswith(f"{sys.executable} -c ") and "died of an environment fault (ENOSPC: " in record["fault"]
    assert record["environment_fault"] == {"argv": fail, "errno_name": "ENOSPC", "evidence": ENOSPC_LINE, "stderr": str(tmp_path / "err.txt")}
    plain = _agent(tmp_path).run("r2", [sys.executable, "-c", "import sys; sys.exit(1)"], str(tmp_path), {}, {}, str(tmp_path / "o2"),
                                 str(tmp_path / "e2"), 60)
    assert "fault" not in plain and plain["process"].exit_code == 1  # a plain failure stays the workload's, for the trial to judge


class _Ref:
    """A fake Ray object ref: ready with a value or an error, or never ready."""

    def __init__(self, value: object = None, error: BaseException | None = None, ready: bool = True) -> None:
        self.value, self.error, self.ready = value, error, ready


class _FakeRay:
    class exceptions:  # noqa: N801 - the shape of ray.exceptions
        class RayError(Exception):
            pass

        class RayTaskError(RayError):
            pass

    def get(self, ref: _Ref | list[_Ref], timeout: float | None = None) -> object:
        if isinstance(ref, list):
            return [self.get(r) for r in ref]
        if ref.error is not None:
            raise ref.error
        return ref.value

    def wait(self, refs: list[_Ref], num_returns: int = 1, timeout: float | None = None) -> tuple[list[_Ref], list[_Ref]]:
        ready = [r for r in refs if r.ready][:num_returns]
        return ready, [r for r in refs if r not in ready]


class _Method:
    def __init__(self, answer: object, calls: list[tuple[object, ...]]) -> None:
        self.answer, self.calls = answer, calls

    def remote(self, *args: object) -> object:
        self.calls.append(args)
        return self.answer() if callable(self.answer) else self.answer


def test_an_error_of_one_hosts_call_stops_every_other_hosts_group_before_it_is_raised() -> None:
    """Host 0's call fails with an error that is not a lost host (a bug in the agent, say) while host 1's group still
    runs: host 1 is told to stop its group before the error goes up, so no rank waits on for a rendezvous."""
    from sk_runner.hosts.ray_hosts import RayHosts

    ray = _FakeRay()
    stops: list[tuple[object, ...]] = []
    agents = []
    for answer in (_Ref(error=ray.exceptions.RayTaskError("boom")), _Ref(ready=False)):
        agent = type("Agent", (), {})()
        agent.run = _Method(answer, [])
        agent.stop = _Method(None, stops)
        agent.free_port = _Method(_Ref(4242), [])
        agents.append(agent)
    slots = [HostSlot(i, f"n{i}", f"server-{i}", "h", "1.2.3.4", (0, 1)) for i in range(2)]
    hosts = RayHosts(ray, HostsSpec(2, 2), None, agents, slots, 1.0)
    with pytest.raises(ray.exceptions.RayTaskError):
        hosts.run(["w"], cwd=Path("."), contract_env={}, stdout_path=Path("o"), stderr_path=Path("e"), timeout_s=None)
    assert len(stops) == 1 and stops[0] == agents[1].run.calls[0][:1]  # host 1, this run's id


def test_a_hosts_group_that_died_of_the_machine_is_raised_as_that_environment_fault_naming_the_host() -> None:
    """Host 1's group died of a full disk while host 0's still runs: the session gets the
    :class:`EnvironmentFault` (errno kept for the blocker record, stderr path movable), prefixed with host 1; host 0 is
    stopped. A fault without one (a group that could not start) stays a plain blocker naming its host."""
    from sk_runner.hosts.ray_hosts import RayHosts
    from sk_runner.process.faults import EnvironmentFault

    ray = _FakeRay()
    fault = {"argv": ["w", "--x"], "errno_name": "ENOSPC", "evidence": ENOSPC_LINE, "stderr": "/s/run-1/stderr.host-1.txt"}
    for answer, kind in (({"index": 1, "fault": "w --x died …", "environment_fault": fault}, EnvironmentFault),
                         ({"index": 1, "fault": "cannot start the group: Permission denied (/s/run-1)"}, EnvironmentBlocker)):
        stops: list[tuple[object, ...]] = []
        running = _Ref(ready=False)  # host 0's group: it ends (stopped) only when told to stop

        def stop(ref: _Ref = running) -> None:
            ref.ready, ref.value = True, {"index": 0, "stopped": True, "process": ProcessResult(1, None, 15, False, 0, 1, 0.0)}

        agents = []
        for ref in (running, _Ref(answer)):
            agent = type("Agent", (), {})()
            agent.run, agent.stop, agent.free_port = _Method(ref, []), _Method(stop, stops), _Method(_Ref(4242), [])
            agents.append(agent)
        slots = [HostSlot(i, f"n{i}", f"server-{i}", "h", "1.2.3.4", (0, 1)) for i in range(2)]
        with pytest.raises(EnvironmentBlocker) as info:
            RayHosts(ray, HostsSpec(2, 2), None, agents, slots, 1.0).run(["w", "--x"], cwd=Path("."), contract_env={}, stdout_path=Path("o"),
                                                                         stderr_path=Path("e"), timeout_s=None)
        assert type(info.value) is kind and info.value.one_line().startswith("host 1 (server-1, node n1): ")
        assert len(stops) == 1 and stops[0] == agents[0].run.calls[0][:1]  # host 0's group of this run is stopped
    assert info.value.errno_name is None
    raised = EnvironmentFault.from_json(fault, "host 1 (server-1, node n1)")
    assert raised.errno_name == "ENOSPC" and raised.one_line() == (f"host 1 (server-1, node n1): w --x died of an environment fault "
                                                                  f"(ENOSPC: {ENOSPC_LINE}); its stderr: /s/run-1/stderr.host-1.txt")
    raised.moved(Path("/s/run-1"), Path("/s/INCOMPLETE/run-1-x"))
    assert raised.one_line().endswith("its stderr: /s/INCOMPLETE/run-1-x/stderr.host-1.txt") and raised.one_line().startswith("host 1 ")


def test_an_agent_sees_the_file_the_session_wrote_only_with_its_content(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("abc", encoding="utf-8")
    agent = _agent(tmp_path)
    assert agent.sees(str(token), "abc") is None
    assert "holds other content there" in (agent.sees(str(token), "xyz") or "")  # another folder mounted at the same path
    assert "cannot read" in (agent.sees(str(tmp_path / "missing"), "abc") or "")  # the path is not on this host's storage


def test_a_host_that_does_not_see_the_sessions_storage_stops_the_sweep_before_anything_runs(tmp_path: Path) -> None:
    """Host 1 reads the token the sweep wrote as missing (its folder is on a local disk there): an environment blocker
    naming host 1 before any run, instead of runs whose host-1 logs land where the session never sees them (which
    would look like a failed run and blame the option). The token is gone afterwards."""
    from sk_runner.hosts.ray_hosts import RayHosts

    ray = _FakeRay()
    seen: list[tuple[object, ...]] = []
    agents = []
    for index in range(2):
        agent = type("Agent", (), {})()
        agent.sees = _Method(lambda index=index: _Ref(None if index == 0 else "cannot read /shared/.t there (No such file or directory)"),
                             seen)
        agents.append(agent)
    slots = [HostSlot(i, f"n{i}", f"server-{i}", "h", "1.2.3.4", (0, 1)) for i in range(2)]
    with pytest.raises(EnvironmentBlocker, match=r"host 1 \(server-1, node n1\) does not see the session's storage: cannot read") as info:
        RayHosts(ray, HostsSpec(2, 2), None, agents, slots, 1.0).check_storage(tmp_path / "sessions")
    assert "nothing ran" in info.value.one_line() and len(seen) == 2
    assert list((tmp_path / "sessions").iterdir()) == []  # the token is removed
    agents[1].sees = _Method(_Ref(None), seen)
    RayHosts(ray, HostsSpec(2, 2), None, agents, slots, 1.0).check_storage(tmp_path / "sessions")  # every host sees it
    assert list((tmp_path / "sessions").iterdir()) == []


def test_each_host_proves_its_own_devices_and_a_foreign_process_blocks(tmp_path: Path) -> None:
    from sk_runner.devices.registry import WORKLOAD, Registration

    registry = tmp_path / "registry"
    agent = _agent(tmp_path, SK_SIM_DEVICE_REGISTRY=str(registry))
    agent.start()
    assert agent.proof("before", "k", str(tmp_path), "O1", "sim", run="run-1").clean
    with Registration(registry, (3,), command="someone else's job", kind=WORKLOAD):
        answer = agent.proof("after", "k", str(tmp_path), "O1", "sim")
        assert [p.pid for p in answer.processes] == [os.getpid()]
        blocked = agent.proof("before", "k", str(tmp_path), "O1", "sim", run="run-2")  # waits the lease timeout (0.5 s)
    agent.release()
    assert "host 0 (server-0)" in blocked["fault"] and "someone else's job" in blocked["fault"]
    sightings = [json.loads(line) for line in (tmp_path / "foreign-processes.jsonl").read_text().splitlines()]
    assert {s["host"] for s in sightings} == {"server-0"} and [s["action"] for s in sightings] == ["waited", "blocked"]


def test_the_hosts_proof_discards_a_run_any_host_saw_used_and_blocks_on_a_fault(tmp_path: Path) -> None:
    asked: list[tuple[str, dict[str, object]]] = []

    class Look:
        def __init__(self, clean: bool) -> None:
            self.clean = clean

    def ask(phase: str, **kw: object) -> list[object]:
        asked.append((phase, kw))
        if phase == "discard":
            return [[], [{"run": "run-1", "host": "server-1"}]]
        return [Look(True), Look(phase == "before")]

    proof = HostsProof(ask)
    before, after = proof.before("run-1"), proof.after()
    assert before.clean and not after.clean
    proof.discard("run-1", before, after, tmp_path / "moved")
    assert asked[-1][1]["first"] == 1 and proof.discarded == [{"run": "run-1", "host": "server-1"}]
    with pytest.raises(ForeignProcessBlocker, match="host 1 .*: still used"):
        HostsProof(lambda phase, **kw: [None, {"fault": "host 1 (server-1): still used"}]).before("run-2")
    assert HostsSighting("after", (None, Look(True))).clean  # an unleased host has nothing to prove


# ------------------------------------------------------------------ a trial on two hosts


def test_a_trial_on_two_hosts_logs_what_one_process_of_all_ranks_logs(tmp_path: Path) -> None:
    """Two in-process hosts of 2 NPUs each: every rank's log lands in the run folder, the run records each host's group and
    lease, the trial's fingerprint every host, and each rank's timings equal those of the same trial on one host."""
    from sk_analytics.files.atomic import write_json
    from sk_runner.backends import make_backend
    from sk_runner.backends.base import Control
    from sk_runner.sweep.demo import DEMO_SEED_CONFIG
    from sk_runner.trial import TrialSpec, run_trial

    config = tmp_path / "seed.json"
    write_json(config, DEMO_SEED_CONFIG)
    control = Control(ranks=4, iterations=12, warmup=2, timeout_s=120)
    hosts = ThreadHosts(tmp_path / "hosts", HostsSpec(2, 2))
    results = {}
    try:
        for name, spread in (("two", hosts), ("one", None)):
            session = tmp_path / name
            session.mkdir()
            results[name] = run_trial(TrialSpec(session=session, round="O0-INCUMBENT", base_config=config, backend=make_backend("sim"),
                                                incumbent=True, runs=1, control=control, seed=11, hosts=spread))
    finally:
        hosts.close()
    assert results["two"].status == "ok", results["two"].message
    run = tmp_path / "two" / "experiments" / "Sbest" / "O0-INCUMBENT" / "CLEAN" / "run-1"
    assert sorted(p.name for p in run.glob("log_*.log")) == ["log_0.log", "log_1.log", "log_2.log", "log_3.log"]
    assert (run / "stdout.host-1.txt").is_file() and (run / "correctness.json").is_file()
    meta = json.loads((run / "meta.json").read_text())
    assert [g["index"] for g in meta["process"]["groups"]] == [0, 1] and meta["process"]["exit_code"] == 0
    assert [h["root"] for h in meta["lease"]["hosts"]] == [str(tmp_path / "hosts" / f"locks-{i}") for i in (0, 1)]
    assert meta["lease"]["mode"] == "acquired" and [h["source"] for h in meta["device_proof"]["hosts"]] == ["sim-registry"] * 2
    trial = json.loads((run.parents[1] / "trial.json").read_text())
    assert [h["node_name"] for h in trial["fingerprints"]["environment"]["hosts"]] == ["host-0", "host-1"]
    assert results["two"].lease["hosts"][1]["device_ids"] == [0, 1]
    one = tmp_path / "one" / "experiments" / "Sbest" / "O0-INCUMBENT" / "CLEAN" / "run-1"
    for rank in range(4):
        timings = [[line for line in (d / f"log_{rank}.log").read_text().splitlines() if line.startswith("Inference")] for d in (run, one)]
        assert timings[0] == timings[1]


def test_a_trial_whose_host_1_group_died_of_a_full_disk_records_the_errno_and_the_moved_stderr(tmp_path: Path) -> None:
    """As a one-host run's ENOSPC (protocol §8): a blocker, never a decision, with the errno in
    ``environment-blockers.jsonl`` and the message naming host 1 and its stderr where the run was moved aside."""
    from sk_analytics.files.atomic import write_json
    from sk_runner.backends.base import Control
    from sk_runner.backends.command import CommandBackend
    from sk_runner.process.faults import EnvironmentFault
    from sk_runner.sweep.demo import DEMO_SEED_CONFIG
    from sk_runner.trial import TrialSpec, run_trial

    config = tmp_path / "seed.json"
    write_json(config, DEMO_SEED_CONFIG)
    workload = tmp_path / "workload.py"
    workload.write_text(f"import os, sys\nif os.environ['SK_RUN_HOST_INDEX'] == '1':\n    print({ENOSPC_LINE!r}, file=sys.stderr)\n"
                        "    sys.exit(1)\n", encoding="utf-8")
    (tmp_path / "s").mkdir()
    hosts = ThreadHosts(tmp_path / "hosts", HostsSpec(2, 2))
    try:
        spec = TrialSpec(session=tmp_path / "s", round="O0-INCUMBENT", base_config=config, backend=CommandBackend([sys.executable, str(workload)]),
                         incumbent=True, runs=1, control=Control(ranks=4, iterations=12, warmup=2, timeout_s=60), seed=1, hosts=hosts)
        with pytest.raises(EnvironmentFault) as info:
            run_trial(spec)
    finally:
        hosts.close()
    rd = tmp_path / "s" / "experiments" / "Sbest" / "O0-INCUMBENT"
    blocker = json.loads((rd / "environment-blockers.jsonl").read_text())
    assert blocker["errno"] == "ENOSPC" and blocker["message"].startswith("host 1 (host-1, node node-1): ")
    stderr = Path(blocker["message"].rsplit("; its stderr: ", 1)[1])
    assert stderr.name == "stderr.host-1.txt" and stderr.parent.parent == rd / "INCOMPLETE" and ENOSPC_LINE in stderr.read_text()
    assert info.value.stderr_path == stderr and not (rd / "FAILURE_SCENES").exists()


def test_a_trial_that_spans_hosts_takes_no_lease_of_its_own(tmp_path: Path) -> None:
    from sk_runner.backends import make_backend
    from sk_runner.backends.base import Control
    from sk_runner.devices.lease import LeaseRequest
    from sk_runner.devices.markers import Need
    from sk_runner.trial import TrialSpec, run_trial

    hosts = ThreadHosts(tmp_path / "hosts", HostsSpec(2, 2))
    try:
        base = dict(session=tmp_path, round="O1", base_config=tmp_path / "c.json", backend=make_backend("sim"), incumbent=True, hosts=hosts)
        with pytest.raises(UsageError, match="ranks, but the workload runs 3"):
            run_trial(TrialSpec(**base, control=Control(ranks=3)))  # type: ignore[arg-type]
        with pytest.raises(UsageError, match="takes each host's lease on that host"):
            run_trial(TrialSpec(**base, control=Control(ranks=4), lease=LeaseRequest(Need("/l", (0, 1, 2, 3)))))  # type: ignore[arg-type]
    finally:
        hosts.close()


# ------------------------------------------------------------------ the simulator


def test_two_groups_of_the_simulator_write_what_one_process_of_all_ranks_writes(tmp_path: Path) -> None:
    from sk_runner.sim.runner import SimRequest, run

    config = tmp_path / "c.json"
    config.write_text('{"super_kernel_optimize_options": {"auto_op_parallel": 1}}', encoding="utf-8")

    def simulate(folder: str, env: dict[str, str]) -> None:
        request = SimRequest(config=config, run_dir=tmp_path / folder, ranks=16, iterations=12, warmup=2, seed=5, network="moe-decode-2host",
                             env={**os.environ, **env})
        assert run(request) == 0

    simulate("one", {})
    for index in (0, 1):
        simulate("two", {**group_env(index, 2, 8, "127.0.0.1", 1), VISIBLE: "0,1,2,3,4,5,6,7"})
    lines = {folder: {r: [x for x in (tmp_path / folder / f"log_{r}.log").read_text().splitlines() if x.startswith("Inference")]
                      for r in range(16)} for folder in ("one", "two")}
    assert lines["one"] == lines["two"]
    assert (tmp_path / "two" / "correctness.json").read_text() == (tmp_path / "one" / "correctness.json").read_text()


def test_collectives_across_hosts_are_slower_than_inside_one(tmp_path: Path) -> None:
    from sk_runner.sim.model import compile_model
    from sk_runner.sim.network import expand, load_network
    from sk_runner.sim.options import resolve

    two_host = load_network("moe-decode-2host")
    assert (two_host.ranks_per_host, two_host.timing.inter_host_comm_factor) == (8, 2.6)
    inside, across = expand(two_host, 0, two_host.comm_factor(8)), expand(two_host, 0, two_host.comm_factor(16))
    comm = [t == "COMMUNICATION" for t in inside.member_kernel_type]
    assert all(b == pytest.approx(2.6 * a) for a, b, c in zip(inside.member_base_us, across.member_base_us, comm, strict=True) if c)
    assert all(a == b for a, b, c in zip(inside.member_base_us, across.member_base_us, comm, strict=True) if not c)
    options = resolve({}, {})
    assert compile_model(two_host, options, 16).step_us > compile_model(two_host, options, 8).step_us
    assert compile_model(two_host, options, 8).step_us == compile_model(load_network("moe-decode"), options, 16).step_us
    bad = tmp_path / "bad.yaml"
    bad.write_text("base: moe-decode\nranks_per_host: 0\n", encoding="utf-8")
    with pytest.raises(InputError, match="ranks_per_host must be at least 1"):
        load_network(str(bad))


def test_the_simulator_names_group_variables_that_describe_no_group(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "c.json").write_text("{}", encoding="utf-8")
    for name, value in {"SK_RUN_HOSTS": "2", "SK_RUN_HOST_INDEX": "5", "SK_RUN_RANKS_PER_HOST": "8"}.items():
        monkeypatch.setenv(name, value)
    assert run_cli(cli, "sk-run", ["sim", "--config", str(tmp_path / "c.json"), "--run-dir", str(tmp_path / "r"), "--ranks", "16"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "SK_RUN_HOSTS" in err[0] and "no such rank group" in err[0]


# ------------------------------------------------------------------ campaigns


def _spec(tmp_path: Path, task: dict[str, object], *, ranks: int = 16, backend: str = "sim", defaults: dict[str, object] | None = None) -> Path:
    extra = {"command": ["python", "infer.py", "{config}"]} if backend != "sim" else {}
    write_task(tmp_path / "tasks" / "m", seed=3, ranks=ranks, backend=backend, **extra)
    path = tmp_path / "campaign.json"
    path.write_text(json.dumps({"schema_version": "sk-tune-campaign-v1", "name": "hosts", "defaults": defaults or {},
                                "tasks": [{"id": "m", "task": "tasks/m/task.json", **task}]}), encoding="utf-8")
    return path


def test_a_multi_host_task_reserves_one_bundle_per_host(tmp_path: Path) -> None:
    task = load_spec(_spec(tmp_path, {"hosts": 2, "npus_per_host": 8, "cpus_per_host": 2})).tasks[0]
    assert (task.hosts, task.npus_per_host, task.resources) == (2, 8, {"NPU": 8.0, "CPU": 2.0})
    assert task.spans == HostsSpec(2, 8, 2.0)
    one = load_spec(_spec(tmp_path, {})).tasks[0]
    assert (one.hosts, one.spans, one.resources) == (1, None, {"CPU": 1.0})


@pytest.mark.parametrize(("task", "ranks", "backend", "needle"), [
    ({"hosts": 2, "npus_per_host": 8}, 12, "sim", "task m: hosts 2 x npus_per_host 8 = 16 ranks, but the workload runs 12"),
    ({"hosts": 2}, 16, "sim", "task m: hosts 2 needs npus_per_host"),
    ({"hosts": 2, "npus_per_host": 8, "resources": {"NPU": 16}}, 16, "sim", "a multi-host task reserves {NPU: npus_per_host"),
    ({"hosts": 2, "npus_per_host": 8, "device_ids": ["0-7"]}, 16, "sim", "assigns there; it takes no device_ids"),
    ({"hosts": 2, "npus_per_host": 8}, 16, "npu", "task m runs on NPUs Ray assigns (npu backend) but names no lease_root"),
    ({}, 8, "command", None),
    ({"resources": {"NPU": 8}}, 8, "command", "task m runs on NPUs Ray assigns (command backend) but names no lease_root"),
])
def test_impossible_multi_host_tasks_and_unleased_npu_tasks_are_refused_in_one_line(
        tmp_path: Path, task: dict[str, object], ranks: int, backend: str, needle: str | None) -> None:
    path = _spec(tmp_path, task, ranks=ranks, backend=backend)
    if needle is None:  # a command task on CPUs only is not NPU work
        assert load_spec(path).tasks[0].resources == {"CPU": 1.0}
        return
    with pytest.raises(InputError, match=needle.replace("(", r"\(").replace(")", r"\)").replace("{", r"\{")) as info:
        load_spec(path)
    assert info.value.exit_code == 2 and "\n" not in info.value.one_line()


def test_the_defaults_resources_and_device_ids_are_for_one_host_tasks_and_do_not_refuse_a_multi_host_one(tmp_path: Path) -> None:
    """A campaign whose defaults give its one-host tasks ``resources`` and ``device_ids`` may still hold a multi-host task:
    that task reserves its per-host bundle and leases the NPUs Ray assigns."""
    spec = _spec(tmp_path, {"hosts": 2, "npus_per_host": 8}, defaults={"resources": {"NPU": 8}, "device_ids": ["0-7"]})
    task = load_spec(spec).tasks[0]
    assert (task.hosts, task.resources, task.device_ids) == (2, {"NPU": 8.0, "CPU": 1.0}, None)


def test_the_campaigns_lease_root_default_leases_every_npu_task(tmp_path: Path) -> None:
    task = load_spec(_spec(tmp_path, {"hosts": 2, "npus_per_host": 8}, backend="npu", defaults={"lease_root": "/var/lock/npu"})).tasks[0]
    assert task.lease_root == "/var/lock/npu" and task.hosts == 2


def test_a_multi_host_task_fits_when_enough_nodes_each_hold_a_bundle() -> None:
    bundle = {"NPU": 8.0, "CPU": 1.0}
    one = Capacity((NodeCapacity("server-a", {"NPU": 8.0, "CPU": 1.0}), NodeCapacity("head", {"CPU": 4.0})))
    assert classify(bundle, one) == FITS and classify(bundle, one, hosts=2) == NEVER
    assert classify(bundle, Capacity(one.nodes, (NodeCapacity("node type npu8", bundle, None),)), hosts=4) == LATER
    assert classify(bundle, Capacity(one.nodes, (NodeCapacity("node type npu8", bundle, 2),)), hosts=4) == NEVER
    two = Capacity((*one.nodes, NodeCapacity("server-b", {"NPU": 8.0, "CPU": 2.0})))
    assert classify(bundle, two, hosts=2) == FITS
    assert pending_shortfall(bundle, one, 2).__dict__ == {"resource": "hosts", "needed": 2.0, "largest": 1.0, "node": None}
    with pytest.raises(InputError) as info:
        check_tasks([("m", bundle)], one, "spec.json", {"m": 2})
    assert str(info.value) == ("spec.json: task m needs 2 hosts with CPU: 1, NPU: 8 each (one per node, STRICT_SPREAD) but only 1 "
                               "node(s) can ever hold one (server-a) (expected at least 2 nodes that each hold one host's resources)")
    with pytest.raises(InputError, match="task m needs NPU: 16 but no alive node can ever hold it"):
        check_tasks([("m", {"NPU": 16.0})], one, "spec.json", {"m": 2})


def test_a_session_on_two_hosts_continues_only_while_both_are_there() -> None:
    hosts = [{"index": 0, "node_id": "n-a", "node_name": "server-a", "host": "ha"}, {"index": 1, "node_id": "n-b", "node_name": "server-b", "host": "hb"}]
    placement = {"node_id": "n-a", "node_name": "server-a", "host": "ha", "spans": {"hosts": 2, "npus_per_host": 8}, "hosts": hosts}
    a, b = NodeInfo("n-a", "server-a", "ha"), NodeInfo("n-b2", "server-b", "hb")  # server-b back after a restart: a new node id
    assert pin_of(placement, {"n-a": a, "n-b2": b}) == a
    assert pin_of(placement, {"n-a": a}) is None
    assert lost_hosts(placement, {"n-a": a}) == [{"node_id": "n-b", "node_name": "server-b", "index": 1}]
    single = {"node_id": "n-a", "node_name": "server-a", "host": "ha"}
    assert pin_of(single, {"n-a": a}) == a and lost_hosts(single, {}) == [{"node_id": "n-a", "node_name": "server-a"}]


def test_a_multi_host_job_carries_its_hosts_and_leases_nothing_itself() -> None:
    job = Job("/c", "m", "/t/task.json", "m-1", None, lease_root="/locks", hosts=2, npus_per_host=8, ray_address="127.0.0.1:6379")
    back, _ = parse_job(job_argv(job, NodeInfo("n", "head", "h"))[5])
    assert back == job and back.spans == HostsSpec(2, 8, 1.0)
    assert job_lease(job, {}).need is None  # every host's agent leases that host's NPUs


def test_local_campaigns_and_sweeps_without_ray_refuse_hosts_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    spec = _spec(tmp_path, {"hosts": 2, "npus_per_host": 8})
    assert run_cli(cli, "sk-run", ["campaign", "run", str(spec), "--root", str(tmp_path / "root"), "--local"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "task(s) m span hosts: a multi-host task needs Ray" in err[0] and not (tmp_path / "root").exists()
    task = str(tmp_path / "tasks" / "m" / "task.json")
    for args, needle in (
        (["--hosts", "2", "--npus-per-host", "8"], "--hosts 2: a run that spans hosts needs a Ray cluster: give --ray-address"),
        (["--hosts", "2", "--npus-per-host", "4"], "hosts 2 x npus_per_host 4 = 8 ranks, but the workload runs 16"),
        (["--hosts", "2", "--npus-per-host", "8", "--ray-address", "x:1", "--lease-root", "/l", "--device-id", "0-7"],
         "--device-id is for one host"),
    ):
        assert run_cli(cli, "sk-run", ["sweep", "--task", task, "--session", str(tmp_path / "s"), *args]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and needle in err[0], err
    assert run_cli(cli, "sk-run", ["sweep", "--demo", "--hosts", "2", "--session", str(tmp_path / "d")]) == 2
    assert "the demo runs on this host" in capsys.readouterr().err
    assert not (tmp_path / "s").exists() and not (tmp_path / "d").exists()
    from sweep_helpers import small_session

    one_host = small_session(tmp_path / "one", []).root  # a session that runs on one host stays on one host
    assert run_cli(cli, "sk-run", ["sweep", "--resume", str(one_host), "--hosts", "2", "--npus-per-host", "1", "--ray-address", "x:1"]) == 2
    assert "runs on one host: --resume continues a session on the hosts it recorded" in capsys.readouterr().err


def test_a_multi_host_command_that_cannot_start_is_said_before_any_host_is_reserved(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """The workload's executable is missing: exit 3 naming it at once, not after Ray placed and leased every host (the
    cluster address here is never reached: a connection would be another error)."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    task = write_task(tmp_path / "tasks" / "m", seed=3, ranks=16, backend="command", command=["no-such-infer-script", "{config}"])
    code = run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--session", str(tmp_path / "s"), "--hosts", "2", "--npus-per-host", "8",
                                   "--ray-address", "127.0.0.1:1", "--lease-root", str(tmp_path / "locks")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3 and len(err) == 1 and "workload executable 'no-such-infer-script' not found on PATH" in err[0], err
    assert not (tmp_path / "s").exists()


def test_a_ray_address_where_nothing_answers_is_one_line_at_once_not_a_hang(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """Ray retries an address where nothing listens for minutes (``sk-run sweep --hosts`` sat there over ten minutes):
    exit 3 naming the address, before any session exists."""
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    task = write_task(tmp_path / "tasks" / "m", seed=3, ranks=16)
    started = time.monotonic()
    code = run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--session", str(tmp_path / "s"), "--hosts", "2", "--npus-per-host", "8",
                                   "--ray-address", "127.0.0.1:1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 3 and len(err) == 1 and "cannot join Ray at 127.0.0.1:1: nothing answers there" in err[0], err
    assert time.monotonic() - started < 60 and not (tmp_path / "s").exists()


def test_a_sigterm_during_the_ray_join_is_sk_runs_interrupt_not_rays_bare_exit(monkeypatch: pytest.MonkeyPatch) -> None:
    """``ray.init`` installs ``sys.exit(signum)`` for SIGTERM while it joins: a SIGTERM landing then ended sk-run with
    exit 15 and no ``--resume`` line. It is sk-run's interrupt (exit 143), and sk-run's handler is back afterwards."""
    import signal

    from sk_analytics import interrupts
    from sk_runner.hosts import ray_hosts

    class JoiningRay:
        def init(self, address: str, **options: object) -> None:
            signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))  # what ray.init does
            os.kill(os.getpid(), signal.SIGTERM)
            time.sleep(30)  # the signal lands here

    monkeypatch.setattr(ray_hosts, "unreachable", lambda address, timeout_s=0.0: None)
    interrupts.install()
    ours = signal.getsignal(signal.SIGTERM)
    with pytest.raises(interrupts.Interrupted) as info:
        ray_hosts.join(JoiningRay(), "127.0.0.1:6379")
    assert info.value.exit_code == 143 and signal.getsignal(signal.SIGTERM) is ours


def _raw_ledger(root: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(root.glob("*.jsonl")))


def test_a_one_host_session_given_hosts_is_refused_in_one_line_before_anything_reserves(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``--task`` into the folder of a session that runs on one host, with ``--hosts 2``: exit 2 naming the folder, the
    session untouched, no Ray cluster asked (the address does not exist: asking it would be exit 3)."""
    from sweep_helpers import small_session

    task = write_task(tmp_path / "tasks" / "m", seed=3, ranks=16)
    one_host = small_session(tmp_path / "one", []).root
    ledger = _raw_ledger(one_host)
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--session", str(one_host), "--hosts", "2", "--npus-per-host", "8",
                                   "--ray-address", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"sk-run: error: {one_host} runs on one host; it continues only there (a session that spans hosts starts with --hosts)"]
    assert _raw_ledger(one_host) == ledger


def test_a_multi_host_session_never_runs_on_one_host(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Entered again with ``--task`` but no ``--hosts``, a session that recorded two hosts goes to its hosts (here: no
    cluster given, exit 2 in one line); the sweep driver itself refuses it without hosts."""
    from sk_runner.sweep.driver import run_sweep
    from sk_runner.sweep.phase import enter_phase
    from sk_runner.sweep.session import load_session

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    task = write_task(tmp_path / "tasks" / "m", seed=3, ranks=16)
    hosts = [{"index": i, "node_id": f"n-{i}", "node_name": f"server-{i}", "host": f"h{i}"} for i in range(2)]
    root = tmp_path / "s"
    enter_phase(task, root, placement={"spans": HostsSpec(2, 8).to_json(), "hosts": hosts})
    ledger = _raw_ledger(root)
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--session", str(root)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "a run that spans hosts needs a Ray cluster: give --ray-address" in err[0], err
    with pytest.raises(UsageError, match="spans hosts: it continues only on the hosts it recorded"):
        run_sweep(load_session(root), say=lambda _: None)
    assert _raw_ledger(root) == ledger


def test_hosts_without_ray_installed_are_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """No Ray in the environment: ``--hosts 2`` is exit 2 naming the extra to install, before any session exists; the
    hosts' connection itself says the same (a session that recorded hosts, resumed where Ray is missing)."""
    import importlib.util

    from sk_runner.hosts.ray_hosts import connect

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: None if name == "ray" else find_spec(name, *args))
    task = write_task(tmp_path / "tasks" / "m", seed=3, ranks=16)
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--session", str(tmp_path / "s"), "--hosts", "2", "--npus-per-host", "8",
                                   "--ray-address", "127.0.0.1:1"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--hosts 2: a run that spans hosts needs Ray, which is not installed (pip install 'sk-tune[ray]'" in err[0], err
    assert not (tmp_path / "s").exists()
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails
    with pytest.raises(UsageError, match=r"a run that spans hosts needs Ray, which is not installed: pip install 'sk-tune\[ray\]'"):
        connect("127.0.0.1:1")
