"""A campaign task no node can hold is refused before anything runs; one that only a node yet to come can
hold is pending_unsatisfiable with a timeout; the small campaign items of issue 29 (fast, no Ray; the
real-cluster cases are in test_campaign_ray.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from campaign_helpers import write_spec

from sk_analytics.cli._base import run_cli
from sk_analytics.errors import InputError, UsageError
from sk_analytics.ledger.chain import Ledger, read_records, verify
from sk_runner.campaign import cli as campaign_cli
from sk_runner.campaign.driver import Driver, create_campaign
from sk_runner.campaign.job import JobResult, NodeInfo
from sk_runner.campaign.resources import FITS, LATER, NEVER, Capacity, NodeCapacity, check_tasks, classify, shortfall
from sk_runner.campaign.spec import load_spec
from sk_runner.campaign.state import fold, rows, session_dir
from sk_runner.cli import cli

SERVERS = Capacity((NodeCapacity("server-a", {"CPU": 1.0, "NPU": 8.0}), NodeCapacity("server-b", {"CPU": 2.0, "NPU": 4.0})))


@pytest.mark.parametrize(("need", "kind"), [
    ({"NPU": 8.0}, FITS), ({"CPU": 2.0, "NPU": 4.0}, FITS), ({"NPU": 16.0}, NEVER), ({"CPU": 4.0}, NEVER),
    ({"CPU": 2.0, "NPU": 8.0}, NEVER), ({"GPU": 0.0}, FITS), ({"GPU": 1.0}, NEVER),
])
def test_a_task_fits_a_node_only_when_one_node_has_all_of_it(need: dict[str, float], kind: str) -> None:
    assert classify(need, SERVERS) == kind
    later = Capacity(SERVERS.nodes, (NodeCapacity("node type big", {"CPU": 8.0, "NPU": 16.0}),))
    assert classify(need, later) == (kind if kind == FITS or "GPU" in need else LATER)


def test_the_refusal_names_the_task_the_resource_and_the_largest_node() -> None:
    assert shortfall({"NPU": 16.0}, SERVERS.nodes).__dict__ == {"resource": "NPU", "needed": 16.0, "largest": 8.0, "node": "server-a"}
    assert shortfall({"CPU": 2.0, "NPU": 8.0}, SERVERS.nodes).resource == "CPU"  # both exist, never together: what server-a lacks
    with pytest.raises(InputError) as info:
        check_tasks([("ok", {"NPU": 8.0}), ("big", {"NPU": 16.0})], SERVERS, "spec.json")
    assert str(info.value) == ("spec.json: task big needs NPU: 16 but no alive node can ever hold it (the largest node, server-a, has NPU: 8)"
                               " (expected task resources that one node of the cluster has)")
    assert info.value.exit_code == 2
    assert check_tasks([("ok", {"NPU": 8.0})], SERVERS, "s") == {"ok": FITS}


class FakeCluster:
    """An executor whose nodes (capacity) a test changes; every job ends at once as a Sbest-BASE."""

    kind = "fake"

    def __init__(self, capacity: Capacity) -> None:
        self.cap = capacity
        self.submitted: list[tuple[str, dict[str, float]]] = []
        self.polls = 0
        self.on_poll: Any = None

    def nodes(self) -> list[NodeInfo]:
        return [NodeInfo(n.name, n.name, "h") for n in self.cap.nodes]

    def capacity(self) -> Capacity:
        self.polls += 1
        if self.on_poll is not None:
            self.on_poll(self)
        return self.cap

    def node_alive(self, node_id: str, settle_s: float = 0.0) -> bool:
        return any(n.name == node_id for n in self.cap.nodes)

    def check_storage(self, root: Path, needs: list[dict[str, float]]) -> list[dict[str, str]]:
        return [{"node": n.name} for n in self.cap.nodes]

    def submit(self, job: Any, resources: dict[str, float], pin: NodeInfo | None) -> str:
        self.submitted.append((job.session, resources))
        return job.session

    def wait(self, handles: list[Any], timeout: float) -> list[Any]:
        return list(handles)

    def result(self, handle: Any) -> JobResult:
        return JobResult(handle, {"node_name": "x"}, 0, None, False, 1.0)

    def cancel(self, handle: Any, session: str) -> None:
        pass

    def is_node_failure(self, exc: BaseException) -> bool:
        return False

    def shutdown(self) -> None:
        pass


class Quiet:
    def update(self, *args: Any) -> None:
        pass

    def note(self, text: str) -> None:
        pass

    def close(self) -> None:
        pass


def _spec_with(tmp_path: Path, resources: list[dict[str, float]], **extra: Any) -> Path:
    path = write_spec(tmp_path, len(resources), **extra)
    data = json.loads(path.read_text())
    for item, need in zip(data["tasks"], resources, strict=True):
        item["resources"] = need
    path.write_text(json.dumps(data))
    return path


def test_refused_campaign_leaves_no_root_and_names_the_task(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """The docs' own example (NPU: 16 on 8-NPU servers) and CPU: 4 on 1-CPU nodes: exit 2 before anything runs."""
    monkeypatch.setattr(campaign_cli, "_executor", lambda address, local: FakeCluster(SERVERS))
    for need, message in (({"NPU": 16}, "task t1 needs NPU: 16 but no alive node can ever hold it (the largest node, server-a, has NPU: 8)"),
                          ({"CPU": 4}, "task t1 needs CPU: 4 but no alive node can ever hold it (the largest node, server-b, has CPU: 2)")):
        spec = _spec_with(tmp_path, [{"NPU": 8}, need])
        root = tmp_path / "root"
        assert run_cli(cli, "sk-run", ["campaign", "run", str(spec), "--root", str(root)]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and message in err, err
        assert not root.exists()


@pytest.mark.parametrize("first", [[], [{"NPU": 8}]])
def test_every_task_no_node_can_hold_is_named_one_line_each_then_the_summary(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                             capsys: pytest.CaptureFixture[str],
                                                                             first: list[dict[str, float]]) -> None:
    """Issue 38: with every task (or two of three) unsatisfiable, only the first used to be named; the user
    learnt of the next one after fixing it."""
    monkeypatch.setattr(campaign_cli, "_executor", lambda address, local: FakeCluster(SERVERS))
    spec = _spec_with(tmp_path, [*first, {"NPU": 16}, {"CPU": 4}])
    root = tmp_path / "root"
    assert run_cli(cli, "sk-run", ["campaign", "run", str(spec), "--root", str(root)]) == 2
    lines = capsys.readouterr().err.splitlines()
    a, b = (f"t{i}" for i in range(len(first), len(first) + 2))
    assert lines == [
        f"sk-run: error: {spec}: task {a} needs NPU: 16 but no alive node can ever hold it (the largest node, server-a, has NPU: 8)"
        " (expected task resources that one node of the cluster has)",
        f"sk-run: error: {spec}: task {b} needs CPU: 4 but no alive node can ever hold it (the largest node, server-b, has CPU: 2)"
        " (expected task resources that one node of the cluster has)",
        f"sk-run: error: {spec}: 2 of {len(first) + 2} tasks can never be held by one node ({a}, {b})"
        " (expected task resources that one node of the cluster has)",
    ]
    assert not root.exists()


def test_a_campaign_that_never_started_a_session_is_taken_up_by_run(tmp_path: Path) -> None:
    spec = load_spec(write_spec(tmp_path / "s", 1))
    root = tmp_path / "root"
    assert create_campaign(root, spec) is True
    assert create_campaign(root, spec) is False  # e.g. the storage check failed (exit 3): the rerun reuses the root
    other = load_spec(write_spec(tmp_path / "other", 2))
    with pytest.raises(UsageError, match="already holds a campaign"):
        create_campaign(root, other)
    Ledger(root).append("session_assigned", {"task": "t0", "session": "t0-1", "attempt": 1, "supersedes": None, "resources": {}})
    with pytest.raises(UsageError, match="already holds a campaign"):
        create_campaign(root, spec)


def test_pending_unsatisfiable_until_a_node_comes_then_runs(tmp_path: Path) -> None:
    """No alive node holds NPU: 16 but an autoscaler node type does: the task waits (pending_unsatisfiable,
    shown with what it needs) instead of being handed to the scheduler; once such a node is alive it runs."""
    big = NodeCapacity("server-c", {"CPU": 1.0, "NPU": 16.0})
    cluster = FakeCluster(Capacity(SERVERS.nodes, (NodeCapacity("node type big", big.resources),)))
    spec = load_spec(_spec_with(tmp_path, [{"NPU": 8}, {"NPU": 16}], node_wait_s=600))
    root = tmp_path / "root"
    create_campaign(root, spec)
    seen: list[str] = []

    def grow(c: FakeCluster) -> None:
        if c.polls == 3:
            seen.extend(r.phase for r in rows(root, ["t0", "t1"], fold(read_records(root))))
            c.cap = Capacity((*SERVERS.nodes, big), c.cap.node_types)

    cluster.on_poll = grow
    driver = Driver(root, spec, cluster, Quiet())
    driver.sleep = lambda s: None
    assert driver.run(False) == 0  # both jobs of the fake end as a Sbest-BASE
    index = read_records(root)
    pending = [r.data for r in index if r.kind == "task_pending_unsatisfiable"]
    assert [(p["task"], p["resource"], p["needed"], p["node"]) for p in pending] == [("t1", "NPU", 16.0, "server-a")]
    assert "pending_unsatisfiable" in seen
    assert [s for s, _ in cluster.submitted] == ["t0-1", "t1-1"]
    assert not any(r.kind == "task_given_up" for r in index) and verify(root).ok


def test_pending_unsatisfiable_gives_up_after_the_timeout(tmp_path: Path) -> None:
    cluster = FakeCluster(Capacity(SERVERS.nodes, (NodeCapacity("node type big", {"NPU": 16.0}),)))
    spec = load_spec(_spec_with(tmp_path, [{"NPU": 16}], node_wait_s=0.2))
    root = tmp_path / "root"
    create_campaign(root, spec)
    driver = Driver(root, spec, cluster, Quiet())
    driver.sleep = lambda s: __import__("time").sleep(0.1)
    assert driver.run(False) == 1
    index = read_records(root)
    assert [(r.data["task"], r.data["reason"]) for r in index if r.kind == "task_given_up"] == [("t0", "unsatisfiable")]
    assert cluster.submitted == []
    (row,) = rows(root, ["t0"], fold(index))
    assert row.phase == "given_up"


def test_status_row_of_a_pending_task_says_what_it_waits_for(tmp_path: Path) -> None:
    root = tmp_path / "root"
    root.mkdir()
    Ledger(root).append("task_pending_unsatisfiable", {"task": "t1", "resource": "NPU", "needed": 16.0, "node": "server-a", "timeout_s": 60.0})
    (row,) = rows(root, ["t1"], fold(read_records(root)))
    assert row.phase == "pending_unsatisfiable" and row.decision is not None and row.decision.startswith("needs NPU: 16, waits until ")


def test_a_session_continued_on_its_server_back_is_in_the_campaign_ledger(tmp_path: Path) -> None:
    """on_node_lost=wait: the lost server comes back; the campaign index records where the session goes on
    (it used to continue silently, and status kept showing node_lost)."""
    spec = load_spec(write_spec(tmp_path, 1, on_node_lost="wait"))
    root = tmp_path / "root"
    create_campaign(root, spec)
    folder = session_dir(root, "t0-1")
    folder.mkdir(parents=True)
    Ledger(folder).append("session_started", {})
    (folder / "session.json").write_text(json.dumps({"placement": {"node_id": "server-a", "node_name": "server-a", "host": "h"}}))
    ledger = Ledger(root)
    ledger.append("session_assigned", {"task": "t0", "session": "t0-1", "attempt": 1, "supersedes": None, "resources": {}})
    ledger.append("session_ended", {"task": "t0", "session": "t0-1", "outcome": "failed"})
    ledger.append("node_lost", {"task": "t0", "session": "t0-1", "node_id": "server-a", "node_name": "server-a", "policy": "wait"})
    assert rows(root, ["t0"], fold(read_records(root)))[0].phase == "node_lost"
    cluster = FakeCluster(SERVERS)  # server-a is alive again
    driver = Driver(root, spec, cluster, Quiet())
    driver._step(spec.tasks[0], fold(read_records(root))["t0"], {n.node_id: n for n in cluster.nodes()})
    last = read_records(root)[-1]
    assert (last.kind, last.data["session"], last.data["node_name"], last.data["reason"]) == ("session_continued", "t0-1", "server-a", "node_back")
    assert cluster.submitted == [("t0-1", spec.tasks[0].resources)]
    assert not fold(read_records(root))["t0"].lost


def test_status_after_a_cancel_with_the_driver_dead_shows_cancelled(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = load_spec(write_spec(tmp_path, 2))
    root = tmp_path / "root"
    create_campaign(root, spec)
    folder = session_dir(root, "t0-1")
    folder.mkdir(parents=True)
    for kind in ("session_started", "matrix_built", "matrix_frozen"):
        Ledger(folder).append(kind, {})
    Ledger(root).append("session_assigned", {"task": "t0", "session": "t0-1", "attempt": 1, "supersedes": None, "resources": {}})
    assert rows(root, ["t0"], fold(read_records(root)))[0].phase == "trials"  # the driver died mid-session
    assert run_cli(cli, "sk-run", ["campaign", "cancel", str(root)]) == 0
    capsys.readouterr()
    index = read_records(root)
    assert [(r.kind, r.data.get("session"), r.data.get("outcome")) for r in index[-2:]] == [
        ("session_ended", "t0-1", "cancelled"), ("campaign_stopped", None, None)]
    assert run_cli(cli, "sk-run", ["campaign", "status", str(root), "--json"]) == 0
    phases = {r["task"]: r["phase"] for r in json.loads(capsys.readouterr().out)["sessions"]}
    assert phases == {"t0": "cancelled", "t1": "pending"}
    assert verify(root).ok


def test_lang_en_prints_english_output_labels(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import types

    import sk_runner.sweep.cli as sweep_cli
    import sk_runner.sweep.driver as sweep_driver

    outcome = types.SimpleNamespace(report=tmp_path / "EXPERIMENT_REPORT.md", html=tmp_path / "report.html", handoff=tmp_path / "handoff.json",
                                    outcome="base")
    def run_sweep(session, say, lang, started=None, **_):  # type: ignore[no-untyped-def]  # the real one: started() once it holds the session
        started()
        return outcome

    monkeypatch.setattr(sweep_driver, "run_sweep", run_sweep)  # run_and_print imports it when it runs
    session = types.SimpleNamespace(root=tmp_path, notices=[])
    for lang, labels in (("en", ("Session: ", "Report: ", "HTML: ", "Hand-off: ")), ("zh", ("会话：", "报告：", "HTML：", "交接："))):
        assert sweep_cli.run_and_print(session, lang, quiet=True) == 0  # type: ignore[arg-type]
        lines = capsys.readouterr().out.splitlines()
        assert [line[: len(label)] for line, label in zip(lines, labels, strict=False)] == list(labels)
        assert ("报告" in "".join(lines)) == (lang == "zh")
