"""Your own workload, from docs/runner.md alone (issue 37).

The minimal workload of docs/runner.md § A minimal workload is taken from the page itself (never a copy
kept here) and run through ``sk-run sweep --task`` with the command backend: it reaches Sbest-BASE with a
true 3 % effect that the gate decides (never blocked), from a relative script path exactly as from an
absolute one; without its probe output the sweep stops at the first probe with exit 3 naming
``super_kernel.log``. Every ``blocked`` entry names its own cause, and a session stopped at O0 says
``skipped`` in the report as in the hand-off and names its failure scene everywhere.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from sweep_helpers import gate_numbers, settled_statuses

from sk_analytics.cli._base import run_cli
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.ledger.chain import read_records
from sk_analytics.messages import render
from sk_runner.cli import cli
from sk_runner.sweep import task_init

RUNNER_MD = Path(__file__).resolve().parents[1] / "docs" / "runner.md"
SEED = {"static_kernel_compile": True, "super_kernel_optimize": True, "super_kernel_optimize_options": {}}
WORKLOAD = {"ranks": 2, "iterations": 24, "warmup": 4, "seed": 11}
"""Small: two ranks, 20 decode samples after warm-up (the sweep tests' size)."""
AUTO = [{"option": "auto_op_parallel", "value": 1}]
EFFECT = {"auto_op_parallel=1": 0.03}
"""A true 3 % speed-up of auto_op_parallel=1, planted through the documented STANDIN_EFFECTS variable."""


def doc_workload() -> str:
    """The Python block of docs/runner.md § A minimal workload, verbatim."""
    section = RUNNER_MD.read_text(encoding="utf-8").split("\n### A minimal workload\n", 1)[1]
    return section.split("```python\n", 1)[1].split("\n```", 1)[0] + "\n"


def without_probe_mode(script: str) -> str:
    """The same workload written by someone who never read "Probe mode": no option lines, ever."""
    lines = script.splitlines(keepends=True)
    start = next(i for i, line in enumerate(lines) if line.startswith('if os.environ.get("ASCEND_OP_COMPILE_SAVE_KERNEL_META")'))
    end = next(i for i in range(start, len(lines)) if "sys.exit(0)" in lines[i])
    return "".join(lines[:start] + lines[end + 1:])


def write_task(folder: Path, command: list[str], *, accepted: list[dict[str, Any]] = AUTO, **workload: Any) -> Path:
    """A dispatched task in ``folder`` (its phase manifest, SEED config and S0 artifacts beside it)."""
    (folder / "S0" / "run-1").mkdir(parents=True, exist_ok=True)
    (folder / "S0" / "run-1" / "log_0.log").write_text("Inference time (decode): 10.0 ms\n", encoding="utf-8")
    return task_init.write_task(folder, SEED, {"backend": "command", "command": command, **WORKLOAD, **workload}, clean_artifacts="S0",
                                accepted=accepted, policy={"timeout_s": 60.0, "risky_timeout_s": 30.0}).path


def causes(root: Path) -> dict[str, str]:
    """entry -> kind of the cause its blocked settlement carries (hand-off)."""
    return {e["id"]: e["evidence"]["cause"]["kind"] for e in load_json_file(root / "handoff.json")["entries"] if e["status"] == "blocked"}


@pytest.mark.slow
def test_the_doc_workload_sweeps_to_base_alike_from_a_relative_and_an_absolute_path(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "infer.py").write_text(doc_workload(), encoding="utf-8")
    monkeypatch.setenv("STANDIN_EFFECTS", json.dumps(EFFECT))
    absolute = write_task(tmp_path / "abs", [sys.executable, str(work / "infer.py")])
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(absolute), "--quiet"]) == 0
    monkeypatch.chdir(work)  # `python infer.py`, started from the script's folder as in the docs
    relative = write_task(tmp_path / "rel", [sys.executable, "infer.py"])
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(relative), "--quiet"]) == 0
    capsys.readouterr()

    results = []
    for root in (tmp_path / "abs" / "session", tmp_path / "rel" / "session"):
        statuses = settled_statuses(root)
        assert statuses.pop("auto-op-parallel-1") in ("accepted", "rejected")  # decided by the gate, never blocked
        assert set(statuses.values()) == {"blocked"} and set(causes(root).values()) == {"not_listed"}
        [gate] = gate_numbers(root)
        assert gate[0] == "O1" and 2.5 < 100 * (1 - gate[2] / gate[1]) < 3.5  # the planted 3 %
        [probe] = list((root / "PROBES").rglob("probe.json"))  # only the listed value was probed, with the task's ranks
        runtime = load_json_file(probe)["runtime"]
        assert runtime["status"] == "accepted" and runtime["contract_env"]["SK_RUN_RANKS"] == "2"
        assert (root / "BASE" / "sbest-base.json").is_file()
        results.append((settled_statuses(root), gate_numbers(root)))
    assert results[0] == results[1]  # the same decisions on the same numbers

    rel = tmp_path / "rel" / "session"
    assert load_json_file(rel / "session.json")["backend"]["cwd"] == str(work.resolve())
    metas = list((rel / "experiments").rglob("meta.json"))
    assert len(metas) >= 10 and {load_json_file(m)["cwd"] for m in metas} == {str(work.resolve())}
    assert load_json_file(probe)["runtime"]["cwd"] == str(work.resolve())


def test_the_doc_workload_without_its_probe_output_stops_at_the_first_probe(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "infer.py"
    script.write_text(without_probe_mode(doc_workload()), encoding="utf-8")
    task = write_task(tmp_path, [sys.executable, str(script)], accepted=[*AUTO, {"option": "split_mode", "value": 1}])
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--quiet"]) == 3
    err = capsys.readouterr().err.strip()
    root = tmp_path / "session"
    [attempt] = [p.parent for p in (root / "PROBES").rglob("probe.json")]  # the first probe, and no other
    assert len(err.splitlines()) == 1
    assert f"no super_kernel.log below {attempt / 'run'}" in err and "docs/runner.md#probe-mode" in err
    assert err.endswith(f"Free the cause, then: sk-run sweep --resume {root}")
    assert [r.kind for r in read_records(root)] == ["session_started", "phase_entry"]  # nothing settled, no BASE
    assert not (root / "matrix.json").exists() and not (root / "BASE").exists()
    blockers = (root / "experiments" / "Sbest" / "SESSION" / "environment-blockers.jsonl").read_text(encoding="utf-8")
    assert "super_kernel.log" in blockers


def test_plan_only_prints_every_mode_resolved_and_checks_the_command(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "infer.py").write_text(doc_workload(), encoding="utf-8")
    command = [sys.executable, "infer.py", "--config", "{config}", "--out", "{run_dir}", "--seed", "{seed}"]
    task = write_task(tmp_path, command, cwd="work")
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--plan-only"]) == 0
    out = capsys.readouterr().out
    plan = json.loads(out[out.index("{"):])["workload"]
    root = (tmp_path / "session").resolve()
    assert (plan["backend"], plan["cwd"], plan["executable"]) == ("command", str(work.resolve()), sys.executable)
    modes = plan["modes"]
    assert set(modes) == {"probe", "correctness", "clean", "profile"}
    assert not any("{" in arg for mode in modes.values() for arg in mode["argv"])
    o0 = root / "experiments" / "Sbest" / "O0-INCUMBENT"
    assert modes["correctness"]["argv"][:6] == [sys.executable, "infer.py", "--config", str(o0 / "config.json"),
                                                "--out", str(o0 / "CORRECTNESS")]
    assert modes["clean"]["run_dir"] == str(o0 / "CLEAN" / "run-1")
    assert modes["probe"]["env"]["ASCEND_OP_COMPILE_SAVE_KERNEL_META"] == "1" and modes["probe"]["env"]["SK_RUN_RANKS"] == "2"
    assert modes["probe"]["run_dir"].startswith(str(root / "PROBES"))
    assert modes["profile"]["env"]["SK_RUN_PROFILE"] == "1" and modes["profile"]["env"]["SK_RUN_ITERATIONS"] == "40"
    assert [r.kind for r in read_records(root)] == ["session_started", "phase_entry"]  # planned, nothing run

    for bad, code, needle in ((["--out={rundir}"], 2, "(record /workload/command/2): workload/command argument '--out={rundir}' "
                                                     "has unknown placeholder(s) {rundir} (expected only {config}, {run_dir}, {seed})"),
                              ([], 3, "workload executable './nope.sh' not found in")):
        folder = tmp_path / f"bad-{code}"
        written = write_task(folder, [sys.executable, "infer.py"] if bad else ["./nope.sh"], cwd="../work")
        data = json.loads(written.read_text(encoding="utf-8"))
        data["workload"]["command"] += bad  # the typo made by hand in task.json, which task init would refuse to write
        written.write_text(json.dumps(data), encoding="utf-8")
        assert run_cli(cli, "sk-run", ["sweep", "--task", str(written), "--plan-only"]) == code
        err = capsys.readouterr().err
        assert needle in err and err.count("\n") == 1, err
        assert not (folder / "session").exists()  # refused before the session folder is created


def test_a_workload_that_fails_in_probe_mode_whatever_the_value_stops_the_sweep(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """`python missing.py` from the wrong folder: every probe process exits 2. The control probe of the
    unchanged SEED fails too, so it is the environment: exit 3, never every value blocked."""
    monkeypatch.chdir(tmp_path)
    task = write_task(tmp_path / "t", [sys.executable, "missing.py"], accepted=[*AUTO, {"option": "split_mode", "value": 1}])
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--quiet"]) == 3
    err = capsys.readouterr().err
    assert "fails in probe mode whatever the option value" in err and "can't open file" in err and str(tmp_path) in err
    root = tmp_path / "t" / "session"
    assert sorted(p.parent.parent.parent.name for p in (root / "PROBES").rglob("probe.json")) == ["PROBES", "auto_op_parallel"]
    assert (root / "PROBES" / "SEED-control" / "attempt-1" / "probe.json").is_file()
    assert not (root / "matrix.json").exists()


CRASHES_ON_SPLIT_MODE = '''
import json, os, sys
opts = json.load(open(os.environ["SK_RUN_CONFIG"]))["super_kernel_optimize_options"]
run = os.environ["SK_RUN_DIR"]
if os.environ.get("ASCEND_OP_COMPILE_SAVE_KERNEL_META") == "1":
    if opts.get("split_mode") == 1:
        print("compiling split_mode=1", file=sys.stderr)
        print("RuntimeError: EZ9999 split scope failed", file=sys.stderr)
        sys.exit(3)
    with open(os.path.join(run, "super_kernel.log"), "w") as fh:
        fh.writelines(f"OptionName: {k}, set value: {json.dumps(v)}\\n" for k, v in opts.items())
    sys.exit(0)
if os.environ.get("CRASH_CLEAN"):
    print("RuntimeError: out of device memory", file=sys.stderr)
    sys.exit(1)
for r in range(int(os.environ["SK_RUN_RANKS"])):
    with open(os.path.join(run, f"log_{r}.log"), "w") as fh:
        fh.writelines(f"Inference time (decode): {10 + 0.001 * ((i * 7 + r) % 5):.3f} ms\\n" for i in range(24))
json.dump({"passed": True}, open(os.path.join(run, "correctness.json"), "w"))
'''


def test_each_blocked_entry_names_its_own_cause_in_matrix_report_console_and_handoff(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "w.py"
    script.write_text(CRASHES_ON_SPLIT_MODE, encoding="utf-8")
    task = write_task(tmp_path, [sys.executable, str(script)], accepted=[{"option": "split_mode", "value": 1}])
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--lang", "en"]) == 0  # BASE = O0, for its own causes
    out = capsys.readouterr().err  # the progress lines (docs/sweep.md, "Streams")
    root = tmp_path / "session"
    crashed = "the probe process failed (exit 3); last stderr: compiling split_mode=1 | RuntimeError: EZ9999 split scope failed"
    assert causes(root) == {**{eid: "not_listed" for eid in causes(root)}, "split-mode-1": "probe_crashed"}
    entry = next(e for e in load_json_file(root / "matrix.json")["entries"] if e["id"] == "split-mode-1")
    cause = entry["probe_evidence"]["evidence"]["cause"]
    assert cause["en"] == crashed and cause["zh"].startswith("探测进程失败（退出码 3）；stderr 末行：compiling split_mode=1")
    settled = next(e for e in load_json_file(root / "matrix.settled.json")["entries"] if e["id"] == "split-mode-1")
    assert cause["zh"] in render(settled["settlement"]["reason"], "zh") and crashed in render(settled["settlement"]["reason"], "en")
    assert f"[split-mode-1] → blocked: split_mode=1 is not ready (probe ready=false): {crashed}" in out
    assert "[preload-code-0] → blocked: preload_code=0 is not ready (probe ready=false): not listed in the task's accepted_option_values" in out
    report = (root / "EXPERIMENT_REPORT.md").read_text(encoding="utf-8")
    assert f"split_mode=1 is not ready (probe ready=false): {crashed}" in report
    assert (root / "PROBES" / "SEED-control" / "attempt-1" / "probe.json").is_file()  # the control probe passed: the value's cause
    assert load_json_file(root / "handoff.json")["outcome"] == "base"


def test_a_session_stopped_at_o0_says_skipped_everywhere_and_names_its_scene(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    script = tmp_path / "w.py"
    script.write_text(CRASHES_ON_SPLIT_MODE, encoding="utf-8")
    monkeypatch.setenv("CRASH_CLEAN", "1")
    task = write_task(tmp_path, [sys.executable, str(script)], accepted=[])
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task)]) == 1
    out, progress = capsys.readouterr()  # the result lines, the progress (docs/sweep.md, "Streams")
    root = tmp_path / "session"
    handoff = load_json_file(root / "handoff.json")
    scene = handoff["stop"]["evidence"]["scene"]
    assert scene.startswith("experiments/Sbest/O0-INCUMBENT/FAILURE_SCENES/attempt-") and handoff["failure_scenes"] == [scene]
    assert {e["status"] for e in handoff["entries"]} == {"skipped"}
    assert f"失败现场：{root / scene}" in out and "out of device memory" in progress  # the scene on stdout, the cause in the progress
    report = (root / "EXPERIMENT_REPORT.md").read_text(encoding="utf-8")
    assert f"- 失败现场: `{scene}`" in report and "out of device memory" in report
    rows = [line for line in report.splitlines() if re.match(r"^\| (O0-INCUMBENT|[a-z0-9-]+-\d|dcci-disable-all) \|", line)]
    assert rows and all("| 跳过 |" in row for row in rows[1:]) and "未定" not in report
    assert "| 失败 |" in rows[0] and scene in rows[0]
