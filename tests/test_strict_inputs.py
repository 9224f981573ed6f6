"""Nothing taken loosely (issue 44, cases 1, 2, 7, 8): every key, option value and number of an input is exact or
refused by name with exit 2, in ``--plan-only`` as in the sweep, never exit 0 with defaults, never 70, never a hang;
``sk-run options`` lists the valid option values and ``sk-run task init`` writes a task that ``--plan-only`` accepts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import click
import pytest
from campaign_helpers import SEED, write_spec, write_task
from runner_fake import write_fake
from test_cli_link_loops import COMMANDS, GROUPS, _argv
from test_hostile_inputs import _one_line_exit_2
from test_workload_contract import doc_workload

from sk_analytics.cli._base import FiniteFloat, run_cli
from sk_analytics.fingerprint import fingerprint
from sk_analytics.stage_o.matrix import protocol_candidates
from sk_analytics.stage_o.options import REGISTRY
from sk_analytics.stage_o.state import Policy
from sk_runner.backends.base import Control
from sk_runner.cli import cli
from sk_runner.limits import MAX_SAMPLES, MAX_TIMEOUT_S, SEED as SEED_TYPE
from sk_runner.sweep.session import BackendSpec, create_session

HUGE = "1" * 4301
"""An integer of 4 301 digits: over Python's conversion limit, which used to end in exit 70."""


def _edit(task: Path, text: str | None = None, **changes: Any) -> Path:
    """The task with top-level ``changes`` merged in (a dict merges into the object of the same key), or ``text``."""
    if text is None:
        data = json.loads(task.read_text(encoding="utf-8"))
        for key, value in changes.items():
            data[key] = {**data[key], **value} if isinstance(value, dict) and isinstance(data.get(key), dict) else value
        text = json.dumps(data)
    task.write_text(text, encoding="utf-8")
    return task


def _sweep_both_ways(task: Path, capsys: pytest.CaptureFixture[str], *needles: str) -> None:
    """``--plan-only`` and the sweep itself refuse the task alike: one line, exit 2, no session folder."""
    for extra in (["--plan-only"], ["--quiet"]):
        code = run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--session", str(task.parent / "session"), *extra])
        _one_line_exit_2(capsys, code, str(task), *needles)
        assert not (task.parent / "session").exists()


# ------------------------------------------------------------------ case 1: unknown keys, with the closest valid one


@pytest.mark.parametrize(("changes", "needles"), [
    ({"workload": {"iterations": 400, "warmpu": 12}}, ("unknown key 'warmpu' in /workload (did you mean 'warmup'?)", "(record /workload)")),
    ({"polcy": {"timeout_s": 60}}, ("unknown key 'polcy' in / (did you mean 'policy'?)",)),
    ({"policy": {"risky_timeout": 5}}, ("unknown key 'risky_timeout' in /policy (did you mean 'risky_timeout_s' or 'timeout_s'?)",)),
    ({"seed": {"fingerprint": "x"}}, ("unknown key 'fingerprint' in /seed (did you mean 'config_fingerprint'?)",)),
    ({"clean_artifacts": {"bound": "S0"}}, ("unknown key 'bound' in /clean_artifacts (did you mean 'bound_to'?)",)),
    ({"accepted_option_values": [{"option": "auto_op_parallel", "value": 1, "valu": 1}]},
     ("unknown key 'valu' in /accepted_option_values/0 (did you mean 'value'?)",)),
    ({"workload": {"zzz": 1}}, ("unknown key 'zzz' in /workload (expected keys among backend, command, cwd",)),
])
def test_a_typo_key_is_refused_with_the_closest_valid_name(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                           changes: dict[str, Any], needles: tuple[str, ...]) -> None:
    task = _edit(write_task(tmp_path, seed=3), **changes)
    _sweep_both_ways(task, capsys, *needles)


def test_a_campaign_refuses_a_task_with_a_typo_before_anything_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = write_spec(tmp_path, 1)
    _edit(tmp_path / "tasks" / "t0" / "task.json", workload={"warmpu": 12})
    code = run_cli(cli, "sk-run", ["campaign", "run", str(spec), "--root", str(tmp_path / "root"), "--local"])
    _one_line_exit_2(capsys, code, "t0/task.json", "did you mean 'warmup'?")
    assert not (tmp_path / "root").exists()


# ------------------------------------------------------------------ case 2: option values against the registry


@pytest.mark.parametrize(("value", "shown"), [
    ("2", 'value "2" (a string)'),
    (10**40, f"value {10**40} (an integer)"),
    ({"a": {"b": 1}}, 'value {"a": {"b": 1}} (an object)'),
    (7, "value 7 (an integer)"),
])
def test_an_option_value_of_the_wrong_type_or_range_is_refused_at_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                        value: Any, shown: str) -> None:
    task = _edit(write_task(tmp_path, seed=3), accepted_option_values=[{"option": "auto_op_parallel", "value": 1},
                                                                       {"option": "split_mode", "value": value}])
    _sweep_both_ways(task, capsys, "(record /accepted_option_values/1)", f"option split_mode {shown}",
                     "expected an integer from 1 to 4")


def test_an_option_typo_names_the_closest_registered_options(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    task = _edit(write_task(tmp_path, seed=3), accepted_option_values=[{"option": "split_mod", "value": 2}])
    _sweep_both_ways(task, capsys, "(record /accepted_option_values/0): unknown option 'split_mod'", "did you mean 'split_mode'?",
                     "sk-run options")


@pytest.mark.parametrize(("options", "needles"), [
    ({"split_mode": "2"}, ("seed-config.json (record /super_kernel_optimize_options/split_mode)", "expected an integer from 1 to 4")),
    ({"auto_op_paralel": 1}, ("(record /super_kernel_optimize_options/auto_op_paralel)", "did you mean 'auto_op_parallel'?")),
])
def test_the_seed_configs_options_are_checked_against_the_registry(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                   options: dict[str, Any], needles: tuple[str, ...]) -> None:
    task = write_task(tmp_path, seed=3)
    seed = {**SEED, "super_kernel_optimize_options": options}
    (tmp_path / "seed-config.json").write_text(json.dumps(seed), encoding="utf-8")
    _edit(task, seed={"config_fingerprint": fingerprint(seed)})
    code = run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--plan-only"])
    _one_line_exit_2(capsys, code, *needles)


@pytest.mark.parametrize(("options", "sets", "needles"), [
    ({"split_mode": {"x": [1]}}, ["--set=/super_kernel_optimize_options/auto_op_parallel=1"],
     ("base.json (record /super_kernel_optimize_options/split_mode)", "an object", "expected an integer from 1 to 4")),
    ({}, ["--set=/super_kernel_optimize_options/auto_op_paralel=1"], ("unknown option 'auto_op_paralel'", "did you mean 'auto_op_parallel'?")),
    ({}, ['--set=/super_kernel_optimize_options/opt_extend_option={"a":"1","a":"2"}'], ("key 'a' appears twice",)),
    ({}, [f"--set=/super_kernel_optimize_options/auto_op_parallel={HUGE}"], ("an integer of 4301 digits",)),
    ({}, ["--set=/super_kernel_optimize_options/auto_op_parallel=1e400"], ("beyond the range of a float",)),
])
def test_a_trials_base_config_and_set_are_strict(tmp_path: Path, capsys: pytest.CaptureFixture[str], options: dict[str, Any],
                                                 sets: list[str], needles: tuple[str, ...]) -> None:
    argv = write_fake(tmp_path)
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"super_kernel_optimize_options": options}), encoding="utf-8")
    before = sorted((tmp_path / "session").rglob("*"))
    code = run_cli(cli, "sk-run", ["trial", "--session", str(tmp_path / "session"), "--round", "O1", "--base-config", str(base), *sets,
                                   "--backend", "command", "--ranks", "2", "--warmup", "2", "--", *argv])
    _one_line_exit_2(capsys, code, *needles)
    assert sorted((tmp_path / "session").rglob("*")) == before


# ------------------------------------------------------------------ case 7: numbers bounded, regular files only


@pytest.mark.parametrize(("text_of", "needles"), [
    (lambda t: t.replace('"seed": 3', f'"seed": {HUGE}'), ("task.json:26: invalid JSON: an integer of 4301 digits",)),
    (lambda t: t.replace('"risky_timeout_s": 5.0', '"risky_timeout_s": 1e400'), ("number 1e400 is beyond the range of a float",)),
])
def test_a_number_no_parser_holds_is_refused_by_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], text_of: Any,
                                                      needles: tuple[str, ...]) -> None:
    task = write_task(tmp_path, seed=3)
    _sweep_both_ways(_edit(task, text_of(task.read_text(encoding="utf-8"))), capsys, *needles)


def test_a_value_the_task_lists_twice_is_refused_by_its_record(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """One value, two records: refused with both pointers (the matrix probes each value once; the list is the user's word)."""
    task = write_task(tmp_path, seed=3)
    values = json.loads(task.read_text(encoding="utf-8"))["accepted_option_values"]
    _sweep_both_ways(_edit(task, accepted_option_values=[*values, dict(values[0])]), capsys,
                     f"(record /accepted_option_values/{len(values)})", "is listed twice (also /accepted_option_values/0)")


@pytest.mark.parametrize(("changes", "needles"), [
    ({"policy": {"timeout_s": 1e308}}, (f"/policy/timeout_s is 1e+308 (expected a number > 0 and <= {MAX_TIMEOUT_S})",)),
    ({"workload": {"ranks": 10**30}}, ("/workload/ranks is 1000000000000000000000000000000 (expected an integer from 1 to 1024)",)),
    ({"workload": {"ranks": 1024, "iterations": 10_000}}, (f"expected at most {MAX_SAMPLES} decode samples per process",)),
    ({"workload": {"seed": 10**40}}, ("/workload/seed is",)),
    ({"policy": {"min_trial_runs": 10**40}}, ("/policy/min_trial_runs is",)),
    # an integral float is no integer: the workload would get SK_RUN_RANKS=2.0, and int("2.0") fails in it
    ({"workload": {"ranks": 2.0}}, ("/workload/ranks is 2.0 (expected an integer from 1 to 1024)",)),
    ({"workload": {"warmup": 2e0}}, ("/workload/warmup is 2.0 (expected an integer from 0 to",)),
    ({"policy": {"incumbent_runs": 5.0}}, ("/policy/incumbent_runs is 5.0 (expected an integer from",)),
])
def test_a_value_out_of_bounds_is_refused_in_the_plan_as_in_the_sweep(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                      changes: dict[str, Any], needles: tuple[str, ...]) -> None:
    _sweep_both_ways(_edit(write_task(tmp_path, seed=3), **changes), capsys, *needles)


def test_trial_timeout_is_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = write_fake(tmp_path)
    code = run_cli(cli, "sk-run", ["trial", "--session", str(tmp_path / "session"), "--round", "O0-INCUMBENT", "--incumbent",
                                   "--base-config", str(tmp_path / "base.json"), "--timeout", "1e308", "--backend", "command", "--", *argv])
    assert code == 2 and "1e+308 is not in the range" in capsys.readouterr().err


def test_a_session_that_froze_an_unrunnable_timeout_is_refused_on_every_resume(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A session made before tasks were bounded: --resume says why and what to do, exit 2 (it used to be 70, every time)."""
    root = tmp_path / "session"
    create_session(root, dict(SEED), seed=3, backend=BackendSpec("sim"), control=Control(2, 30, 8), policy=Policy(timeout_s=1e308))
    for _ in range(2):
        code = run_cli(cli, "sk-run", ["sweep", "--resume", str(root)])
        _one_line_exit_2(capsys, code, "session.json (record /policy/timeout_s)", "/policy/timeout_s is 1e+308", "--resume cannot continue it",
                         "sk-run sweep --task TASK --session NEW_FOLDER")


def _not_regular(tmp_path: Path, kind: str) -> Path:
    if kind == "fifo":
        os.mkfifo(tmp_path / "fifo")
        return tmp_path / "fifo"
    return Path("/dev/zero") if kind == "device" else tmp_path


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_an_input_that_is_no_regular_file_is_refused_without_a_hang(tmp_path: Path, kind: str) -> None:
    """The task, a campaign spec, a trial's base config and a task's SEED config: each a FIFO, /dev/zero or a folder."""
    task = write_task(tmp_path / "t", seed=3)
    argv = write_fake(tmp_path)
    bad = _not_regular(tmp_path, kind)
    seed_task = _edit(write_task(tmp_path / "s", seed=3), seed={"config": str(bad)})
    commands = [
        ["sweep", "--task", str(bad), "--plan-only"],
        ["sweep", "--task", str(seed_task), "--plan-only"],
        ["campaign", "run", str(bad), "--root", str(tmp_path / "root"), "--local"],
        ["trial", "--session", str(task.parent), "--round", "O0-INCUMBENT", "--incumbent", "--base-config", str(bad),
         "--backend", "command", "--", *argv],
    ]
    for command in commands:
        done = subprocess.run([sys.executable, "-c", "from sk_runner.cli import main; main()", *command], capture_output=True,
                              text=True, timeout=120, check=False)
        assert done.returncode == 2, (command, done.stderr)
        assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
        assert "not a regular file" in done.stderr or "is a directory" in done.stderr, done.stderr


@pytest.mark.parametrize(("argv", "needle"), [
    (["sweep", "--demo", "--seed", "-1", "--session", "{tmp}/s"], "'--seed'"),
    (["sweep", "--demo", "--seed", "1" * 30, "--session", "{tmp}/s"], "'--seed'"),
    (["sweep", "--demo", "--cpus-per-host", "nan", "--session", "{tmp}/s"], "'--cpus-per-host'"),
    (["sweep", "--demo", "--ranks", "100000000", "--session", "{tmp}/s"], "'--ranks': 100000000 is not in the range 1<=x<=1024"),
    (["sweep", "--demo", "--iterations", "100000000000", "--session", "{tmp}/s"], "'--iterations': 100000000000 is not in the range 10<=x<=100000"),
    (["demo", "--seed", "-1", "--session", "{tmp}/s"], "'--seed'"),
    (["demo", "--seed", HUGE, "--samples", "--session", "{tmp}/s"], "'--seed'"),
    (["sim", "--seed", "-5", "--config", "{tmp}/c.json", "--run-dir", "{tmp}/s"], "'--seed'"),
    (["sim", "--noise", "nan", "--config", "{tmp}/c.json", "--run-dir", "{tmp}/s"], "'--noise'"),
    (["sim", "--noise", "inf", "--config", "{tmp}/c.json", "--run-dir", "{tmp}/s"], "'--noise'"),
    (["sim", "--foreign-load", "0", "--duration", "nan", "--until-file", "{tmp}/s"], "'--duration'"),
    (["sim", "--foreign-load", "0", "--slowdown", "inf", "--until-file", "{tmp}/s"], "'--slowdown'"),
    (["trial", "--session", "{tmp}/s", "--round", "O1", "--incumbent", "--timeout", "nan", "--backend", "sim"], "'--timeout'"),
    (["profile", "--session", "{tmp}/s", "--role", "baseline_profile", "--round", "O0", "--max-attempts", "1000"], "'--max-attempts'"),
    (["profile", "--session", "{tmp}/s", "--role", "baseline_profile", "--round", "O0", "--sk-prof-kb", "-1"], "'--sk-prof-kb'"),
    (["task", "init", "--seed-config", "{tmp}/c.json", "--out", "{tmp}/s", "--timeout", "nan", "--", "true"], "'--timeout'"),
    (["campaign", "cancel", "{tmp}/s", "--wait-s", "nan"], "'--wait-s'"),
])
def test_a_numeric_option_out_of_bounds_or_not_finite_is_refused_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                          argv: list[str], needle: str) -> None:
    """Seeds bounded to 0..MAX_SEED, floats finite (click lets nan through any range), the demo's sizes checked: exit 2
    naming the option, before the command runs (nothing written); a negative seed used to be exit 70, a nan noise or
    duration ran, and ``sweep --demo --ranks 100000000`` made a session that tried to lease 10**8 devices (exit 3)."""
    (tmp_path / "c.json").write_text(json.dumps(SEED), encoding="utf-8")
    code = run_cli(cli, "sk-run", [arg.replace("{tmp}", str(tmp_path)) for arg in argv])
    _one_line_exit_2(capsys, code, needle)
    assert not (tmp_path / "s").exists()


FLOAT_PARAMS = [
    pytest.param(prog, words, param, id=f"{prog} {' '.join(words)} {param.opts[0]}")
    for prog, words, command in COMMANDS for param in command.params
    if isinstance(param.type, click.types.FloatParamType)
]


def test_every_float_option_is_finite_and_every_seed_bounded() -> None:
    """The walk finds the float options of both programs; each is a FiniteFloat, each ``--seed`` the one SEED type."""
    assert len(FLOAT_PARAMS) >= 10
    assert [p.id for p in FLOAT_PARAMS if not isinstance(p.values[2].type, FiniteFloat)] == []
    seeds = [(prog, words) for prog, words, command in COMMANDS for param in command.params if param.name == "seed"]
    assert len(seeds) >= 6
    assert all(param.type is SEED_TYPE for _, _, command in COMMANDS for param in command.params if param.name == "seed")


@pytest.mark.parametrize(("prog", "words", "param"), FLOAT_PARAMS)
@pytest.mark.parametrize("value", ["nan", "inf"])
def test_a_float_option_refuses_nan_and_inf_by_name(capsys: pytest.CaptureFixture[str], prog: str, words: tuple[str, ...],
                                                    param: click.Parameter, value: str) -> None:
    code = run_cli(GROUPS[prog], prog, _argv(words, param, value))
    _one_line_exit_2(capsys, code, f"'{param.opts[0]}'", f"{value} is not")


@pytest.mark.parametrize("value", ["-5", "x", HUGE])
def test_a_sim_seed_from_the_environment_is_bounded_too(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    (tmp_path / "c.json").write_text(json.dumps(SEED), encoding="utf-8")
    monkeypatch.setenv("SK_RUN_SEED", value)
    code = run_cli(cli, "sk-run", ["sim", "--config", str(tmp_path / "c.json"), "--run-dir", str(tmp_path / "run"), "--ranks", "1",
                                   "--iterations", "12", "--warmup", "2"])
    _one_line_exit_2(capsys, code, "SK_RUN_SEED: value", "is not a seed", "expected an integer from 0 to 9223372036854775807")


@pytest.mark.parametrize(("changes", "needles"), [
    ({"runtime_tool": ["sweep"]}, ("unknown key 'runtime_tool' in / (did you mean 'runtime_tools'?)",)),
    ({"skil": "x"}, ("unknown key 'skil' in / (did you mean 'skill'?)",)),
    ({"skill": 3}, ("/skill is 3 (expected a string)",)),
])
def test_the_phase_manifest_is_as_strict_as_the_task(tmp_path: Path, capsys: pytest.CaptureFixture[str], changes: dict[str, Any],
                                                     needles: tuple[str, ...]) -> None:
    task = write_task(tmp_path, seed=3)
    _edit(tmp_path / "phase.json", **changes)
    for extra in (["--plan-only"], ["--quiet"]):
        code = run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--session", str(tmp_path / "session"), *extra])
        _one_line_exit_2(capsys, code, f"{tmp_path / 'phase.json'}", "phase manifest: ", *needles)
        assert not (tmp_path / "session").exists()


@pytest.mark.parametrize("kind", ["fifo", "device", "folder"])
def test_sk_analyze_inputs_that_are_no_regular_file_are_refused_without_a_hang(tmp_path: Path, kind: str) -> None:
    """Every sk-analyze input (rank logs, collections, ledgers, JSON/YAML, the generated document ``--check`` reads)
    as a FIFO, /dev/zero or a folder: exit 2 in one line, never a wait (``schema --check`` on a FIFO hung)."""
    bad = _not_regular(tmp_path, kind)
    commands = [
        ["schema", "--out", str(bad), "--check"],
        ["ingest", str(bad), "--out", str(tmp_path / "data")],
        ["stability", str(bad)],
        ["option-trial", "--baseline", str(bad), "--candidate", f"x={bad}"],
        ["ledger", "verify", str(bad)],
        ["contract", "verify", str(bad)],
        ["dcci-diff", "--baseline", str(bad), "--candidate", str(bad), "--json-out", str(tmp_path / "out.json")],
        ["contract", "finalize", "--session", str(bad), "--control", str(bad), "--workload", str(bad), "--producer-pid", "1",
         "--producer-started-ns", "1", "--producer-ended-ns", "2", "--source-revision", "x", "--command-argv", '["a"]'],
    ]
    for command in commands:
        done = subprocess.run([sys.executable, "-c", "from sk_analytics.cli import main; main()", *command], capture_output=True,
                              text=True, timeout=120, check=False)
        assert done.returncode == 2, (command, done.stderr)
        assert "Traceback" not in done.stderr and done.stderr.count("\n") == 1, done.stderr
    assert not (tmp_path / "data").exists() and not (tmp_path / "out.json").exists()


# ------------------------------------------------------------------ case 8: the plan's matrix, the option list, task init


def test_plan_only_prints_the_matrix_one_line_per_entry(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    task = write_task(tmp_path, seed=3, accepted=[{"option": "auto_op_parallel", "value": 1}, {"option": "split_mode", "value": 2},
                                                  {"option": "early_start", "value": 1}])
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--session", str(tmp_path / "session"), "--plan-only"]) == 0
    out = capsys.readouterr().out
    lines = json.loads(out[out.index("{"):])["matrix"]
    entries = [line for line in lines if not line.startswith("excluded: ")]
    assert [line.split(":", 1)[0] for line in entries] == [c.id for c in protocol_candidates()]
    tried = [line for line in entries if line.endswith("-> probe the exact value, then try it")]
    assert tried == ["auto-op-parallel-1: auto_op_parallel=1 (risk low) -> probe the exact value, then try it",
                     "split-mode-2: split_mode=2 (risk low) -> probe the exact value, then try it"]
    assert "early-start-1: early_start=1 (risk high) -> blocked: early_start=1 needs operator-side adaptation" in "\n".join(entries)  # listed, not declared
    assert "dcci-disable-all: dcci_disable_on_kernel=[\".*\"] (risk medium) -> blocked: not listed in the task's" in "\n".join(entries)
    assert any(line.startswith("excluded: kernel_map ") for line in lines)


def test_options_lists_every_option_with_its_type_and_candidates(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(cli, "sk-run", ["options", "--json"]) == 0
    table = json.loads(capsys.readouterr().out)
    assert [row["option"] for row in table] == [spec.name for spec in REGISTRY]
    split = next(row for row in table if row["option"] == "split_mode")
    assert (split["kind"], split["low"], split["high"], split["candidates"]) == ("uint", 1, 4, [1, 2, 3])
    assert sum(len(row["candidates"]) for row in table) == len(protocol_candidates())
    assert run_cli(cli, "sk-run", ["options"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert len(text) == len(REGISTRY)
    assert "split_mode: uint, an integer from 1 to 4; default 4; candidates: 1, 2, 3" in text
    assert "opt_extend_option (torch_npu: opt_extend): map," in "\n".join(text)


def test_task_init_names_the_workloads_sources_when_its_folder_holds_too_many(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A workload folder with more source files than sk-run hashes each round (a model repository): task init refused,
    saying to name them in workload.sources or with ``sk-run trial --source``, neither of which task init took, so no
    task could be written for it. ``--source`` (repeatable) names them, and the task records them."""
    monkeypatch.setattr("sk_runner.trial.sources.MAX_SOURCE_FILES", 3)
    work = tmp_path / "work"
    work.mkdir()
    (work / "infer.py").write_text(doc_workload(), encoding="utf-8")
    for i in range(4):
        (work / f"layer_{i}.py").write_text("", encoding="utf-8")
    (tmp_path / "seed.json").write_text(json.dumps(SEED), encoding="utf-8")
    monkeypatch.chdir(work)
    init = ["task", "init", "--seed-config", str(tmp_path / "seed.json"), "--out", str(tmp_path / "task"), "--ranks", "1",
            "--iterations", "12", "--warmup", "2", "--accept", "auto_op_parallel=1"]
    assert run_cli(cli, "sk-run", [*init, "--", sys.executable, "infer.py"]) == 2
    err = capsys.readouterr().err
    assert "more than 3 hashed for every round" in err and "sk-run task init --source" in err, err
    assert run_cli(cli, "sk-run", [*init, "--source", "infer.py", "--source", "layer_0.py", "--", sys.executable, "infer.py"]) == 0
    capsys.readouterr()
    task = json.loads((tmp_path / "task" / "task.json").read_text(encoding="utf-8"))
    assert task["workload"]["sources"] == ["infer.py", "layer_0.py"]
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(tmp_path / "task" / "task.json"), "--plan-only"]) == 0


def test_task_init_writes_a_task_the_plan_accepts(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    work = tmp_path / "work"
    work.mkdir()
    (work / "infer.py").write_text(doc_workload(), encoding="utf-8")
    (tmp_path / "seed.json").write_text(json.dumps(SEED), encoding="utf-8")
    monkeypatch.chdir(work)
    init = ["task", "init", "--seed-config", str(tmp_path / "seed.json"), "--out", str(tmp_path / "task"), "--ranks", "2",
            "--iterations", "24", "--warmup", "4", "--timeout", "60"]
    assert run_cli(cli, "sk-run", [*init, "--accept", "split_mode=5", "--", sys.executable, "infer.py"]) == 2
    assert "--accept split_mode=5: not a value the option matrix tries (expected one of 1, 2, 3)" in capsys.readouterr().err
    assert not (tmp_path / "task").exists()  # refused before the workload ran
    assert run_cli(cli, "sk-run", [*init, "--accept", "auto_op_paralel=1", "--", sys.executable, "infer.py"]) == 2
    err = capsys.readouterr().err
    assert ("--accept auto_op_paralel=1: unknown option 'auto_op_paralel': not a registered option "
            "(did you mean 'auto_op_parallel'?)") in err and err.count("\n") == 1, err
    assert not (tmp_path / "task").exists()
    assert run_cli(cli, "sk-run", [*init, "--accept", "split_mode=1", "--accept", "split_mode=1", "--", sys.executable, "infer.py"]) == 2
    err = capsys.readouterr().err  # a task listing a value twice would say "accepted option values: 2" of one value
    assert "--accept split_mode=1: given twice" in err and err.count("\n") == 1, err
    assert not (tmp_path / "task").exists()
    lease = ["--lease-root", str(tmp_path / "locks"), "--device-id", "0"]
    assert run_cli(cli, "sk-run", [*init, *lease, "--", sys.executable, "infer.py"]) == 2
    assert capsys.readouterr().err.strip() == "sk-run: error: --ranks 2 needs 2 leased devices (rank i runs on the i-th), the lease holds 1 (0)"
    assert not (tmp_path / "task").exists()  # no S0/ left behind

    assert run_cli(cli, "sk-run", [*init, "--", sys.executable, "-c", "import sys; sys.exit(4)"]) == 2  # a workload that fails
    err = capsys.readouterr().err
    assert "the S0 run of the workload failed" in err and err.count("\n") == 1, err
    assert not (tmp_path / "task" / "task.json").exists()
    failed = tmp_path / "task" / "S0" / "experiments" / "Sbest" / "S0" / "FAILURE_SCENES"
    assert failed.is_dir()

    # fixed, run again as the error says (it was refused, exit 2 or 3, until the user deleted S0/ by hand):
    # the failed attempt is kept out of the way, never mixed with the new S0 run
    assert run_cli(cli, "sk-run", [*init, "--", sys.executable, "infer.py"]) == 0
    aside = list((tmp_path / "task" / "INCOMPLETE").iterdir())
    assert [p.name.rsplit("-", 1)[0] for p in aside] == ["S0"] and (aside[0] / failed.relative_to(tmp_path / "task" / "S0")).is_dir()
    assert not failed.exists()
    assert f"next: sk-run sweep --task {tmp_path / 'task' / 'task.json'} --plan-only" in capsys.readouterr().out
    task = json.loads((tmp_path / "task" / "task.json").read_text(encoding="utf-8"))
    assert task["seed"]["config_fingerprint"] == fingerprint(SEED)
    assert task["accepted_option_values"] == [{"option": c.option, "value": c.value} for c in protocol_candidates()]
    assert task["workload"] == {"backend": "command", "command": [sys.executable, "infer.py"], "cwd": str(work.resolve()), "ranks": 2,
                                "iterations": 24, "warmup": 4, "seed": 0}
    assert task["policy"] == {"timeout_s": 60.0, "gate": "protocol"}
    logs = sorted(p.name for p in (tmp_path / "task" / task["clean_artifacts"]["path"]).glob("run-*/log_*.log"))
    assert logs == ["log_0.log", "log_1.log"]  # the S0 run of the workload itself, both ranks

    monkeypatch.chdir(tmp_path)
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(tmp_path / "task" / "task.json"), "--plan-only"]) == 0
    out = capsys.readouterr().out
    lines = json.loads(out[out.index("{"):])["matrix"]
    assert sum(line.endswith("-> probe the exact value, then try it") for line in lines) >= 10  # every low/medium candidate
    assert run_cli(cli, "sk-run", [*init, "--", sys.executable, "infer.py"]) == 2
    assert "task.json exists: choose a new --out folder" in capsys.readouterr().err
