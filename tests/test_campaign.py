"""Campaigns without Ray: spec validation, the local sequential path, failures, timeout, cancel and resume."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from campaign_helpers import DRIVER_COMMANDS, check_finished_session, write_spec, write_task

from sk_analytics.cli import cli as analyze_cli
from sk_analytics.cli._base import run_cli
from sk_analytics.ledger.chain import read_records, verify
from sk_runner.cli import cli


def _spec(tmp_path: Path, tasks: list[dict[str, Any]], **extra: Any) -> Path:
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"schema_version": "sk-tune-campaign-v1", "tasks": tasks, **extra}), encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("tasks", "extra", "needle"),
    [
        ([{"id": "a", "task": "tasks/a/task.json", "colour": "red"}], {}, "campaign spec: unknown key 'colour' in /tasks/0"),
        ([{"id": "a b", "task": "tasks/a/task.json"}], {}, "/tasks/0/id: 'a b' does not match"),
        ([{"id": "a", "task": "tasks/a/task.json", "timeout_s": 0}], {}, "/tasks/0/timeout_s is 0 (expected a number > 0 and <= 31536000 or null)"),
        ([{"id": "a", "task": "tasks/a/task.json", "resources": {"NPU": -1}}], {}, "/tasks/0/resources/NPU is -1 (expected a number from 0 to 1000000)"),
        ([{"id": "a", "task": "tasks/a/task.json"}], {"on_node_lost": "migrate"}, "/on_node_lost is \"migrate\" (expected restart or wait)"),
        ([{"id": "a", "task": "tasks/a/task.json"}, {"id": "a", "task": "tasks/a/task.json"}], {}, "task id(s) ['a'] appear more than once"),
        ([{"id": "a", "task": "tasks/none.json"}], {}, "tasks/none.json not found"),
        ([], {}, "/tasks: [] should be non-empty"),
        ([{"id": "a", "task": "tasks/a/task.json", "timeout_s": 1e308}], {}, "/tasks/0/timeout_s is 1e+308 (expected a number > 0 and <= 31536000"),
        ([{"id": "a", "task": "tasks/a/task.json", "priority": 10**40}], {}, "/tasks/0/priority is 10000000000000000000000000000000000000000 (expected"),
        # a typo is named with the closest valid key (issue 44)
        ([{"id": "a", "task": "tasks/a/task.json", "priorty": 2}], {}, "unknown key 'priorty' in /tasks/0 (did you mean 'priority'?)"),
        ([{"id": "a", "task": "tasks/a/task.json"}], {"max_attempt": 2}, "unknown key 'max_attempt' in / (did you mean 'max_attempts'?)"),
    ],
)
def test_bad_spec_is_refused_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], tasks: list[dict[str, Any]],
                                           extra: dict[str, Any], needle: str) -> None:
    write_task(tmp_path / "tasks" / "a", seed=3)
    spec = _spec(tmp_path, tasks, **extra)
    assert run_cli(cli, "sk-run", ["campaign", "run", str(spec), "--root", str(tmp_path / "root"), "--local"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "spec.json" in err and needle in err, err
    assert not (tmp_path / "root").exists()


def test_task_refused_by_phase_entry_is_refused_before_anything_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    task = write_task(tmp_path / "tasks" / "a", seed=3)
    data = json.loads(task.read_text())
    data["clean_artifacts"]["bound_to"] = "S1"
    task.write_text(json.dumps(data))
    spec = _spec(tmp_path, [{"id": "a", "task": "tasks/a/task.json"}], root="root")
    assert run_cli(cli, "sk-run", ["campaign", "run", str(spec), "--local"]) == 2
    assert "not bound to S0" in capsys.readouterr().err and not (tmp_path / "root").exists()


def test_spec_yaml_defaults_and_priority(tmp_path: Path) -> None:
    from sk_runner.campaign.spec import load_spec

    for name, seed in (("a", 3), ("b", 10)):
        write_task(tmp_path / "tasks" / name, seed=seed)
    data = write_task(tmp_path / "tasks" / "n", seed=3, ranks=16, backend="npu", command=["python", "infer.py", "{config}"])
    assert data.is_file()
    (tmp_path / "spec.yaml").write_text(
        "schema_version: sk-tune-campaign-v1\nroot: out\ndefaults: {timeout_s: 900, priority: 1}\ntasks:\n"
        "  - {id: a, task: tasks/a/task.json}\n  - {id: b, task: tasks/b/task.json, priority: 5, resources: {CPU: 2}}\n"
        "  - {id: n, task: tasks/n/task.json, lease_root: locks}\n", encoding="utf-8")  # real NPUs: the hosts' lease root
    spec = load_spec(tmp_path / "spec.yaml")
    assert [t.id for t in spec.tasks] == ["b", "a", "n"]
    assert spec.task("a").resources == {"CPU": 1.0} and spec.task("b").resources == {"CPU": 2.0}
    assert spec.task("n").resources == {"NPU": 16.0}  # the npu backend takes the whole server by default
    assert spec.task("a").timeout_s == 900.0 and spec.root == str(tmp_path / "out")
    assert spec.on_node_lost == "restart" and spec.max_attempts == 2


def test_the_driver_and_a_ray_worker_import_no_polars_arrow_or_scipy(tmp_path: Path) -> None:
    """Start-up and per-session overhead (issue 15): validating the spec (every task file), opening the campaign
    ledger and a job's pin check and launch import neither Polars, Arrow nor SciPy; only the sweep process does."""
    spec = write_spec(tmp_path / "spec", 2)
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from sk_runner.campaign import cli, ray_executor\n"
        "from sk_runner.campaign.driver import create_campaign\n"
        "from sk_runner.campaign.job import Job, NodeInfo, check_pin, job_argv\n"
        "from sk_runner.campaign.progress import make_view\n"
        "from sk_runner.campaign.spec import load_spec\n"
        f"spec = load_spec(Path({str(spec)!r}))\n"
        f"create_campaign(Path({str(tmp_path / 'root')!r}), spec)\n"
        f"job = Job({str(tmp_path / 'root')!r}, 't0', spec.tasks[0].task, 't0-1', None)\n"
        "node = NodeInfo('id-a', 'server-a', 'host-a')\n"
        "assert check_pin(Path(job.campaign_root) / 'sessions' / 'session=t0-1', node) is False and job_argv(job, node)\n"
        "print(json.dumps(sorted(m for m in ('polars', 'pyarrow', 'scipy', 'numpy') if m in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.splitlines()[-1]) == []
    assert (tmp_path / "root" / "campaign.json").is_file()


def test_without_ray_the_command_says_how_to_install(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from sk_runner.campaign import cli as campaign_cli
    from sk_runner.campaign.local_executor import LocalExecutor

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    executor = campaign_cli._executor(None, local=False)
    assert isinstance(executor, LocalExecutor)
    assert "pip install 'sk-tune[ray]'" in capsys.readouterr().err
    from sk_analytics.errors import EnvironmentBlocker

    with pytest.raises(EnvironmentBlocker, match=r"Ray is not installed: pip install 'sk-tune\[ray\]'"):
        campaign_cli._executor("127.0.0.1:6379", local=False)


@pytest.mark.slow
def test_local_campaign_runs_sessions_one_by_one_and_reports(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, 2)
    root = tmp_path / "root"
    assert run_cli(cli, "sk-run", ["campaign", "run", str(spec), "--root", str(root), "--local"]) == 0
    out = capsys.readouterr().out
    assert "共享存储检查通过" in out and "战役结束：2/2" in out
    folders = {p.name: p for p in (root / "sessions").iterdir()}
    assert set(folders) == {"session=t0-1", "session=t1-1"}
    for folder in folders.values():
        check_finished_session(folder)  # uninterrupted: seed 3 accepts auto_op_parallel=1, seed 10 rejects it
        assert json.loads((folder / "session.json").read_text())["placement"]["node_id"].startswith("local-")
    index = read_records(root)
    assert verify(root).ok
    ended = [(r.data["session"], r.data["outcome"]) for r in index if r.kind == "session_ended"]
    assert ended == [("t0-1", "base"), ("t1-1", "base")]  # one after another, by priority
    # status (driver gone), a second run on the same root refused, resume of a finished campaign does nothing
    assert run_cli(cli, "sk-run", ["campaign", "status", str(root), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    assert [(s["task"], s["phase"]) for s in status["sessions"]] == [("t0", "done"), ("t1", "done")]
    assert status["driver"] == {"record": None, "alive": False}
    assert run_cli(cli, "sk-run", ["campaign", "run", str(spec), "--root", str(root), "--local"]) == 2
    assert "already holds a campaign" in capsys.readouterr().err
    assert run_cli(cli, "sk-run", ["campaign", "resume", str(root), "--local"]) == 0
    assert [r.kind for r in read_records(root)][len(index):] == ["storage_checked", "campaign_resumed", "campaign_stopped"]
    # every existing per-session command works on a campaign session
    assert run_cli(analyze_cli, "sk-analyze", ["ledger", "verify", str(folders["session=t0-1"])]) == 0
    # the campaign report, both languages
    for lang, needle in (("zh", "| 因负载而异 |"), ("en", "| depends on the workload |")):
        assert run_cli(analyze_cli, "sk-analyze", ["campaign", str(root), "--lang", lang, "--out", str(tmp_path / lang)]) == 0
        md = (tmp_path / lang / "CAMPAIGN_REPORT.md").read_text(encoding="utf-8")
        assert "| auto_op_parallel | 1 | 2 | 1 | 1 | 0 | 0 |" in md, md
        html = (tmp_path / lang / "campaign-report.html").read_text(encoding="utf-8")
        assert html.count("<svg") == 1 and "t0-1" in html and "t1-1" in html
        assert md.count(needle) == 1  # accepted with seed 3, rejected with seed 10


def _driver(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", "from sk_runner.cli import main; main()", "campaign", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def _live_workloads(root: Path) -> list[str]:
    found = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                state = (proc / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if str(root) in cmd and state not in ("Z", "X") and not any(verb in cmd for verb in DRIVER_COMMANDS):
                found.append(cmd[:160])
    return found


def _wait(cond: Any, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.3)


@pytest.mark.slow
def test_cancel_kills_every_workload_and_resume_ends_as_uninterrupted(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, 1)
    root = tmp_path / "root"
    driver = _driver("run", str(spec), "--root", str(root), "--local")
    try:
        _wait(lambda: len(_live_workloads(root)) >= 2, 120)  # the sweep and one of its simulator runs
        cancel = subprocess.run([sys.executable, "-c", "from sk_runner.cli import main; main()", "campaign", "cancel", str(root)],
                                capture_output=True, text=True, timeout=120, check=False)
        assert cancel.returncode == 0, cancel.stderr
        out, _ = driver.communicate(timeout=60)
    finally:
        driver.kill()
    assert driver.returncode == 1, out
    assert _live_workloads(root) == []
    index = read_records(root)
    assert index[-1].kind == "campaign_stopped" and index[-1].data["reason"] == "cancelled"
    assert [r.data["outcome"] for r in index if r.kind == "session_ended"] == ["cancelled"]
    resumed = _driver("resume", str(root), "--local")
    out, _ = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, out
    check_finished_session(root / "sessions" / "session=t0-1")


def test_cancel_with_the_driver_dead_reaps_the_recorded_sweeps_and_only_them(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A driver that died leaves its sweeps' records in run/: cancel kills each recorded process group that is still
    the process it recorded, leaves a pid that now belongs to another process alone, and records the cancel."""
    import socket

    from sk_runner.campaign.driver import create_campaign
    from sk_runner.campaign.spec import load_spec
    from sk_runner.process import process_alive
    from sk_runner.process.lifetime import start_ticks

    root = tmp_path / "root"
    create_campaign(root, load_spec(write_spec(tmp_path / "spec", 2)))
    (root / "run").mkdir()
    survivor, reused = (subprocess.Popen(["sleep", "300"], start_new_session=True) for _ in range(2))
    try:
        for name, proc, ticks in (("t0-1", survivor, start_ticks(survivor.pid)), ("t1-1", reused, -1)):  # -1: the pid was reused
            (root / "run" / f"{name}.json").write_text(json.dumps(
                {"pid": proc.pid, "start_ticks": ticks, "marker": None, "host": socket.gethostname(), "node_id": "local-x"}))
        assert run_cli(cli, "sk-run", ["campaign", "cancel", str(root)]) == 0
        assert survivor.wait(timeout=10) != 0 and process_alive(reused.pid) and reused.poll() is None
    finally:
        survivor.kill()
        reused.kill()
        survivor.wait()
        reused.wait()
    assert "sk-run campaign resume" in capsys.readouterr().out
    stopped = read_records(root)[-1]
    assert (stopped.kind, stopped.data["reason"], stopped.data["reaped"]) == ("campaign_stopped", "cancelled", ["t0-1"])
    assert verify(root).ok


def test_failed_session_is_retried_then_given_up(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_task(tmp_path / "tasks" / "bad", seed=3, backend="command", command=[str(tmp_path / "no-such-workload"), "{config}"])
    spec = _spec(tmp_path, [{"id": "bad", "task": "tasks/bad/task.json"}], max_attempts=2)
    root = tmp_path / "root"
    assert run_cli(cli, "sk-run", ["campaign", "run", str(spec), "--root", str(root), "--local", "--quiet"]) == 1
    index = read_records(root)
    assert [r.data["outcome"] for r in index if r.kind == "session_ended"] == ["failed", "failed"]
    assert [r.data["reason"] for r in index if r.kind == "task_given_up"] == ["attempts"]
    assert "given_up" in capsys.readouterr().out
    assert list((root / "logs" / "bad-1").glob("*.err"))  # the sweep's own one-line error is kept


def test_timeout_kills_the_session_group(tmp_path: Path) -> None:
    write_task(tmp_path / "tasks" / "slow", seed=3)
    spec = _spec(tmp_path, [{"id": "slow", "task": "tasks/slow/task.json", "timeout_s": 4}], max_attempts=1)
    root = tmp_path / "root"
    assert run_cli(cli, "sk-run", ["campaign", "run", str(spec), "--root", str(root), "--local", "--quiet"]) == 1
    index = read_records(root)
    assert [r.data["outcome"] for r in index if r.kind == "session_ended"] == ["timeout"]
    assert _live_workloads(root) == []


def test_a_session_never_continues_on_another_server(tmp_path: Path) -> None:
    from sk_analytics.errors import IntegrityError
    from sk_runner.campaign.job import Job, NodeInfo, prepare_session
    from sk_runner.sweep.session import load_session

    task = write_task(tmp_path / "tasks" / "a", seed=3)
    job = Job(str(tmp_path / "root"), "a", str(task), "a-1", None)
    a = NodeInfo("id-a", "server-a", "host-a")
    folder = prepare_session(job, a)
    session = load_session(folder)  # the placement is part of the fingerprinted identity
    assert session.placement is not None and session.placement["node_id"] == "id-a" and session.placement["task"] == "a"
    assert prepare_session(job, a) == folder
    assert prepare_session(job, NodeInfo("id-a2", "server-a", "host-a")) == folder  # the same server back under a new Ray id
    with pytest.raises(IntegrityError, match="pinned to node server-a .* never continues on server-b"):
        prepare_session(job, NodeInfo("id-b", "server-b", "host-b"))
    # a replacement session records which session it supersedes in its own ledger
    relinked = prepare_session(Job(str(tmp_path / "root"), "a", str(task), "a-2", None, supersedes="a-1"), NodeInfo("id-b", "server-b", "host-b"))
    assert [r.kind for r in read_records(relinked)][-1] == "session_supersedes"
    assert verify(relinked).ok


def test_job_signs_its_session_with_the_drivers_key(tmp_path: Path) -> None:
    """The driver's SK_TUNE_SIGNING_KEY travels with the job: its sweep process (run_sweep_process) creates and signs
    the session with it, exactly as here, and leaves the caller's environment as it was."""
    import os

    from sk_analytics.ledger.signing import KEY_ENV, signer
    from sk_runner.campaign.job import Job, NodeInfo, prepare_session, signing_environment

    task = write_task(tmp_path / "tasks" / "a", seed=3)
    campaign_key = (KEY_ENV, str(tmp_path / "keys" / "campaign_key"))
    before = os.environ[KEY_ENV]
    job = Job(str(tmp_path / "root"), "a", str(task), "a-1", None, signing_env=(campaign_key,))
    with signing_environment(job.signing_env):
        folder = prepare_session(job, NodeInfo("id-a", "server-a", "host-a"))
        expected = signer().fingerprint
    assert os.environ[KEY_ENV] == before and signer().fingerprint != expected
    assert json.loads((folder / "session.json").read_text())["signing_key"] == expected
    assert {r.sig["key"] for r in read_records(folder) if r.sig} == {expected}  # the campaign key is trusted on creation


def test_a_job_checks_its_pin_in_the_worker_and_creates_the_session_in_its_sweep(tmp_path: Path) -> None:
    """The Ray worker only launches: a session pinned elsewhere is refused before any process starts;
    a new session is created by the sweep process from the job payload (parse_job inverts job_argv)."""
    from sk_analytics.errors import IntegrityError
    from sk_runner.campaign.job import Job, NodeInfo, job_argv, parse_job, prepare_session, run_job

    task = write_task(tmp_path / "tasks" / "a", seed=3)
    root = tmp_path / "root"
    job = Job(str(root), "a", str(task), "a-1", 30.0, supersedes="a-0", signing_env=(("SK_TUNE_SIGNING_KEY", "/keys/campaign"),))
    a, b = NodeInfo("id-a", "server-a", "host-a"), NodeInfo("id-b", "server-b", "host-b")
    argv = job_argv(job, a)
    assert argv[-3:-2] == ["job"] and parse_job(argv[-2]) == (job, a)
    prepare_session(job, a)
    with pytest.raises(IntegrityError, match="never continues on server-b"):
        run_job(job, b)
    assert not (root / "run" / "a-1.json").exists() and not (root / "logs" / "a-1").exists()


def _plain(terminal: str) -> str:
    """What a terminal shows of ``terminal``'s text, less its control sequences."""
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", terminal).replace("\r", "")


def test_progress_rows_from_the_ledgers_live_table_and_event_lines(tmp_path: Path) -> None:
    import io

    from sk_analytics.ledger.chain import Ledger
    from sk_runner.campaign.progress import LineView, LiveView, table
    from sk_runner.campaign.spec import CampaignSpec, TaskSpec
    from sk_runner.campaign.state import TaskState, rows, session_dir

    folder = session_dir(tmp_path, "a-1")
    folder.mkdir(parents=True)
    (folder / "session.json").write_text(json.dumps({"placement": {"node_name": "server-a", "node_id": "x"}}))
    ledger = Ledger(folder)
    for kind, data in (("session_started", {}), ("matrix_built", {}), ("matrix_frozen", {}),
                       ("trial_result", {"round": "O1"}), ("gate_result", {"round": "O1", "accepted": True})):
        ledger.append(kind, data)
    spec = CampaignSpec("c", (TaskSpec("a", "t.json", "f", {"CPU": 1.0}, None, 0), TaskSpec("b", "t.json", "f", {"CPU": 1.0}, None, 0)))
    tasks = {"a": TaskState("a", sessions=["a-1"]), "b": TaskState("b")}
    got = rows(tmp_path, ["a", "b"], tasks)
    assert [(r.task, r.session, r.node, r.phase, r.round, r.decision) for r in got] == [
        ("a", "a-1", "server-a", "trials", "O1", "O1: win"), ("b", None, None, "pending", None, None)]
    text = table(got)
    assert text.splitlines()[0].split() == ["task", "session", "node", "phase", "round", "last", "decision", "elapsed"]
    assert "server-a" in text.splitlines()[1] and "pending" in text.splitlines()[2]
    lines = io.StringIO()
    view = LineView(lines)
    view.update(tmp_path, spec, tasks)
    view.update(tmp_path, spec, tasks)  # nothing new: no line
    ledger.append("entry_settled", {"entry_id": "x-1", "status": "accepted"})
    view.update(tmp_path, spec, tasks)
    printed = lines.getvalue().splitlines()
    assert len(printed) == 2 and "O1: win" in printed[0] and "x-1: accepted" in printed[1]
    live = io.StringIO()
    lv = LiveView(live, width=160)
    lv.update(tmp_path, spec, tasks)
    drawn = _plain(live.getvalue())
    assert "server-a" in drawn and "pending" in drawn and "tasks finished" in drawn and "0/2" in drawn and "ETA" in drawn
    lv.note("event")  # printed above the live table, which is drawn again below it
    tasks["b"].gave_up = True
    lv.update(tmp_path, spec, tasks)
    lv.close()
    screen = _plain(live.getvalue())
    assert screen.index("event") < screen.rindex("server-a") and "1/2" in screen[screen.index("event"):]
    tasks["a"].lost = True
    assert rows(tmp_path, ["a"], tasks)[0].phase == "node_lost"


@pytest.mark.slow
def test_sigkill_of_the_driver_leaves_no_sweep_or_workload_alive(tmp_path: Path) -> None:
    spec = write_spec(tmp_path, 1)
    root = tmp_path / "root"
    driver = _driver("run", str(spec), "--root", str(root), "--local")
    try:
        _wait(lambda: len(_live_workloads(root)) >= 2, 120)  # the sweep and one of its simulator runs
        driver.kill()  # SIGKILL: no handler runs; the lifetime watchdogs end the tree
        driver.communicate(timeout=60)
        _wait(lambda: _live_workloads(root) == [], 20)
    finally:
        driver.kill()


@pytest.mark.slow
def test_ctrl_c_stops_the_campaign_resumably(tmp_path: Path) -> None:
    import signal

    spec = write_spec(tmp_path, 2)
    root = tmp_path / "root"
    driver = _driver("run", str(spec), "--root", str(root), "--local")
    try:
        _wait(lambda: len(_live_workloads(root)) >= 2, 120)
        driver.send_signal(signal.SIGINT)
        out, _ = driver.communicate(timeout=60)
    finally:
        driver.kill()
    assert driver.returncode == 1, out
    assert "sk-run campaign resume" in out and _live_workloads(root) == []
    index = read_records(root)
    assert index[-1].data["reason"] == "interrupted"
    # the running session and the queued one (never started: no folder) are both recorded as interrupted
    assert sorted((r.data["session"], r.data["outcome"]) for r in index if r.kind == "session_ended") == [
        ("t0-1", "interrupted"), ("t1-1", "interrupted")]
    assert sorted(p.name for p in (root / "sessions").iterdir()) == ["session=t0-1"]
    assert verify(root).ok
