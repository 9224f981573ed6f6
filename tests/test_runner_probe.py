"""probe_values: wrapper + runtime evidence, config layouts, never-reused probe folders."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

import pytest
from runner_fake import write_fake

from sk_analytics.stage_o.probe_cause import probe_cause
from sk_runner.backends.command import CommandBackend
from sk_runner.probe import PROBE_CONTROL, ProbeEvidenceMissing, probe_config, probe_value, probe_values

YAML_BASE = {"model_config": {"custom_params": {"super_kernel_optimize_options": {"early_start": 0}}}}


def test_probe_config_sets_only_the_option_in_either_layout() -> None:
    assert probe_config("auto_op_parallel", 1, None) == {
        "static_kernel_compile": True, "super_kernel_optimize": True, "super_kernel_optimize_options": {"auto_op_parallel": 1}}
    cfg = probe_config("auto_op_parallel", 1, YAML_BASE)
    assert cfg["model_config"]["custom_params"]["super_kernel_optimize_options"] == {"early_start": 0, "auto_op_parallel": 1}
    assert YAML_BASE["model_config"]["custom_params"]["super_kernel_optimize_options"] == {"early_start": 0}


def test_runtime_without_super_kernel_log_stops_with_the_file_and_where(tmp_path: Path) -> None:
    """No probe evidence is the workload not following the contract: an environment stop at the first
    probe (exit 3), naming the file, the folder it was expected in and the doc section; never a verdict."""
    with pytest.raises(ProbeEvidenceMissing) as stop:
        probe_values("auto_op_parallel", [1, 5], CommandBackend([sys.executable, "-c", "pass"]), out_dir=tmp_path)
    attempt = tmp_path / "auto_op_parallel" / next(p.name for p in (tmp_path / "auto_op_parallel").iterdir()) / "attempt-1"
    line = stop.value.one_line()
    assert stop.value.exit_code == 3 and "\n" not in line
    assert line.startswith(f"probe of auto_op_parallel=1: no super_kernel.log below {attempt / 'run'};")
    assert "'OptionName: <name>, set value: <value>'" in line and line.endswith("(see docs/runner.md#probe-mode)")
    assert json.loads((attempt / "probe.json").read_text())["runtime"]["status"] == "no_evidence"
    assert len(list(tmp_path.rglob("probe.json"))) == 1  # the second value was never probed


def test_super_kernel_log_naming_another_option_is_no_evidence(tmp_path: Path) -> None:
    script = ("import os, pathlib; pathlib.Path(os.environ['SK_RUN_DIR'], 'super_kernel.log')"
              ".write_text('OptionName: split_mode, set value: 4\\n')")
    with pytest.raises(ProbeEvidenceMissing, match=r"super_kernel.log below .*\(run/super_kernel.log\) names no option "
                                                    r"auto_op_parallel; it needs a line 'OptionName: auto_op_parallel"):
        probe_value("auto_op_parallel", 1, CommandBackend([sys.executable, "-c", script]), out_dir=tmp_path)


def test_struct_fields_name_their_option_and_an_invalid_field_is_defaulted(tmp_path: Path) -> None:
    """aggressive_opt_strategies is logged field by field: each line counts for the option."""
    lines = ["OptionName: aggressive_opt_strategies.task_breaker_bypass, set value: 1",
             "OptionName: aggressive_opt_strategies.value_breaker_bypass, set value is invalid, value is 7, "
             "valid range is [0, 3], the process will use default value: 0"]
    script = ("import os, pathlib, sys; pathlib.Path(os.environ['SK_RUN_DIR'], 'super_kernel.log')"
              f".write_text('\\n'.join({lines!r}[:int(sys.argv[1])]) + '\\n')")
    ok = probe_value("aggressive_opt_strategies", {"task_breaker_bypass": 1}, CommandBackend([sys.executable, "-c", script, "1"]),
                     out_dir=tmp_path)
    value = {"task_breaker_bypass": 1, "value_breaker_bypass": 7}
    bad = probe_value("aggressive_opt_strategies", value, CommandBackend([sys.executable, "-c", script, "2"]), out_dir=tmp_path)
    assert ok.ready and ok.values[0].runtime.option_lines == lines[:1]  # type: ignore[union-attr]
    assert not bad.ready and bad.values[0].runtime.status == "invalid_default"  # type: ignore[union-attr]


def test_a_struct_field_probed_off_its_default_must_be_named_by_a_line(tmp_path: Path) -> None:
    """The lines of the other fields, at their defaults, confirm nothing of the probed field: a runtime that does not
    know the field (another release) logs only the ones it knows, and the probe took the value as in effect. It stops
    with exit 3 naming the field; a field probed at its default needs no line of its own."""
    lines = ["OptionName: aggressive_opt_strategies.value_breaker_bypass, set value: 0",
             "OptionName: aggressive_opt_strategies.event_breaker_bypass, set value: 0"]
    with pytest.raises(ProbeEvidenceMissing) as stop:
        probe_value("aggressive_opt_strategies", {"task_breaker_bypass": 1, "value_breaker_bypass": 0}, _logging("\n".join(lines)),
                    out_dir=tmp_path / "off")
    said = stop.value.one_line()
    assert stop.value.exit_code == 3 and stop.value.status == "not_named", said
    assert "names no option aggressive_opt_strategies.task_breaker_bypass; it needs a line 'OptionName: " \
           "aggressive_opt_strategies.task_breaker_bypass, set value: <value>'" in said, said
    at_default = probe_value("aggressive_opt_strategies", {"task_breaker_bypass": 0, "value_breaker_bypass": 0},
                             _logging("\n".join(lines)), out_dir=tmp_path / "default")
    assert at_default.ready, at_default.values[0].runtime
    whole = 'OptionName: aggressive_opt_strategies, set value: {"task_breaker_bypass": 1}'  # the whole struct names every field
    assert probe_value("aggressive_opt_strategies", {"task_breaker_bypass": 1}, _logging(whole), out_dir=tmp_path / "whole").ready


def _logging(line: str) -> CommandBackend:
    """A probe workload whose super_kernel.log holds ``line``."""
    script = f"import os, pathlib; pathlib.Path(os.environ['SK_RUN_DIR'], 'super_kernel.log').write_text({line!r} + '\\n')"
    return CommandBackend([sys.executable, "-c", script])


@pytest.mark.parametrize(("option", "value", "line"), [
    ("split_mode", 2, "OptionName: split_mode, set value: 3"),
    ("aggressive_opt_strategies", {"task_breaker_bypass": 1}, "OptionName: aggressive_opt_strategies.task_breaker_bypass, set value: 0"),
    ("aggressive_opt_strategies", {"task_breaker_bypass": 1}, 'OptionName: aggressive_opt_strategies, set value: {"task_breaker_bypass": 0}'),
    ("dcci_disable_on_kernel", [".*"], 'OptionName: dcci_disable_on_kernel, set value: ["MatMul.*"]'),
    ("dcci_disable_on_kernel", [".*"], "OptionName: dcci_disable_on_kernel, set value: []"),
    ("dcci_after_kernel_end", ["A.*", "B.*"], "OptionName: dcci_after_kernel_end, set value: B.*,A.*"),  # in another order
    ("opt_extend_option", "a=1,2:b=3", "OptionName: opt_extend, set value: a=1,2:b=4"),
    ("opt_extend_option", {"a": ["1", "2"]}, 'OptionName: opt_extend_option, set value: "a=1"'),
])
def test_a_runtime_that_logs_another_value_than_the_probed_one_is_not_ready(tmp_path: Path, option: str, value: object,
                                                                              line: str) -> None:
    """formats.md §5: the probe must check that the exact value took effect; a set-value line with another integer
    (the runtime took 3 where 2 was asked) is no confirmation of the value, whatever the exit status."""
    res = probe_value(option, value, _logging(line), out_dir=tmp_path)
    runtime = res.values[0].runtime
    assert runtime is not None and not res.ready and runtime.status == "value_differs"
    assert runtime.reason == f"the runtime logged another value than the probed one: {line}"
    assert runtime.to_json()["differing_lines"] == [line]
    cause = probe_cause({"probed": True, "ready": False, "evidence": res.to_json()["records"][0]["evidence"]})
    assert cause["kind"] == "value_differs" and cause["en"] == f"the runtime logged another value than the probed one: {line}"


@pytest.mark.parametrize(("option", "value", "line"), [
    ("split_mode", 2, "OptionName: split_mode, set value: 2"),
    ("dcci_disable_on_kernel", [".*"], "OptionName: dcci_disable_on_kernel, set value: .*"),  # the patterns as they are
    ("dcci_disable_on_kernel", [".*"], 'OptionName: dcci_disable_on_kernel, set value: [".*"]'),  # as JSON (docs/runner.md's stand-in)
    ("dcci_after_kernel_end", ["A.*", "B.*"], "OptionName: dcci_after_kernel_end, set value: [A.*, B.*]"),
    ("opt_extend_option", "a=1,2:b=3", "OptionName: opt_extend, set value: a=1,2:b=3"),  # torch_npu's name, the map's text
    ("opt_extend_option", {"a": ["1", "2"]}, 'OptionName: opt_extend_option, set value: "a=1,2"'),  # a mapping, logged as JSON text
    ("aggressive_opt_strategies", {"task_breaker_bypass": 1},  # the whole struct, the fields not probed at their defaults
     'OptionName: aggressive_opt_strategies, set value: {"event_breaker_bypass": 0, "task_breaker_bypass": 1, "value_breaker_bypass": 0}'),
])
def test_a_set_value_line_of_the_probed_value_or_of_a_text_is_ready(tmp_path: Path, option: str, value: object, line: str) -> None:
    res = probe_value(option, value, _logging(line), out_dir=tmp_path)
    assert res.ready and res.values[0].runtime is not None and res.values[0].runtime.option_lines == [line]


@pytest.mark.parametrize(("option", "value", "line"), [
    ("split_mode", 1, "OptionName: split_mode, set value: true"),  # a boolean is no integer
    ("split_mode", 2, "OptionName: split_mode, set value: 0x2"),
    ("dcci_disable_on_kernel", [".*"], "OptionName: dcci_disable_on_kernel, set value: {.*}"),
    ("aggressive_opt_strategies", {"task_breaker_bypass": 1}, "OptionName: aggressive_opt_strategies.other_bypass, set value: 0"),
])
def test_a_set_value_line_that_cannot_be_compared_stops_the_probe_naming_it(tmp_path: Path, option: str, value: object,
                                                                            line: str) -> None:
    """A value logged in a form the option's kind is not compared in is no confirmation of the value, nor a verdict on
    it: the workload logs every value of that kind so. The probe stops with exit 3, naming the line and the forms
    (it took any list, map or text for the value, and compared integers only)."""
    with pytest.raises(ProbeEvidenceMissing) as stop:
        probe_value(option, value, _logging(line), out_dir=tmp_path)
    said = stop.value.one_line()
    assert stop.value.exit_code == 3 and stop.value.status == "not_comparable"
    assert f"logs a value that cannot be compared with the probed one ({line}); a value can be compared when it is logged {option} as " in said
    assert not any(code in said for code in ("uint", "pattern_list", "struct:", "map:")), said  # words, not kind codes
    assert said.endswith("(see docs/runner.md#probe-mode)")
    [record] = [json.loads(p.read_text()) for p in tmp_path.rglob("probe.json")]
    assert record["runtime"]["status"] == "not_comparable" and record["runtime"]["uncomparable_lines"] == [line]


def test_failing_probe_process_is_not_ready_with_its_stderr(tmp_path: Path) -> None:
    res = probe_value("auto_op_parallel", 1, CommandBackend([sys.executable, "-c", "raise SystemExit(4)"]), out_dir=tmp_path)
    runtime = res.values[0].runtime
    assert runtime is not None and runtime.status == "process_failed" and runtime.reason == "probe process failed (exit 4); stderr empty"
    script = "import sys; print('loading model', file=sys.stderr); print('ValueError: no weights', file=sys.stderr); sys.exit(2)"
    res = probe_value("auto_op_parallel", 1, CommandBackend([sys.executable, "-c", script]), out_dir=tmp_path)
    record = res.to_json()["records"][0]
    assert res.values[0].reason == "probe process failed (exit 2); last stderr: loading model | ValueError: no weights"
    assert record["evidence"]["runtime"]["stderr_tail"] == ["loading model", "ValueError: no weights"]
    assert probe_cause({"probed": True, "ready": False, "evidence": record["evidence"]})["kind"] == "probe_crashed"


def test_probe_runs_in_the_working_directory_with_the_rank_count(tmp_path: Path) -> None:
    """Like every process of a trial: a relative script path works, the run folder is not the cwd."""
    work = tmp_path / "work"
    work.mkdir()
    (work / "infer.py").write_text(
        "import json, os, pathlib\n"
        "run = pathlib.Path(os.environ['SK_RUN_DIR'])\n"
        "(run / 'super_kernel.log').write_text('OptionName: auto_op_parallel, set value: 1\\n')\n"
        "(run / 'seen.json').write_text(json.dumps({'cwd': os.getcwd(), 'ranks': os.environ['SK_RUN_RANKS'],"
        " 'work_path': os.environ['ASCEND_WORK_PATH']}))\n")
    res = probe_value("auto_op_parallel", 1, CommandBackend([sys.executable, "infer.py"], cwd=work), out_dir=tmp_path / "p",
                      control=replace(PROBE_CONTROL, ranks=4), cwd=work)
    runtime = res.values[0].runtime
    assert res.ready and runtime is not None and runtime.cwd == work.resolve()
    seen = json.loads((runtime.attempt_dir / "run" / "seen.json").read_text())
    assert seen == {"cwd": str(work.resolve()), "ranks": "4", "work_path": str((runtime.attempt_dir / "run").resolve())}


def test_probe_folders_are_never_reused_and_hold_the_exact_config(tmp_path: Path) -> None:
    backend = CommandBackend(write_fake(tmp_path))
    first = probe_values("auto_op_parallel", [1, 5], backend, out_dir=tmp_path / "p")
    second = probe_value("auto_op_parallel", 1, backend, out_dir=tmp_path / "p")
    assert (first.accepted_values, first.rejected_values) == ([1], [5])
    a1, a2 = first.values[0].runtime.attempt_dir, second.values[0].runtime.attempt_dir  # type: ignore[union-attr]
    assert (a1.name, a2.name, a1.parent == a2.parent) == ("attempt-1", "attempt-2", True)
    config = json.loads((a2 / "config.json").read_text())
    assert config["super_kernel_optimize_options"] == {"auto_op_parallel": 1}
    evidence = json.loads((a2 / "probe.json").read_text())
    assert evidence["runtime"]["contract_env"]["ASCEND_OP_COMPILE_SAVE_KERNEL_META"] == "1"
    assert evidence["runtime"]["option_lines"] == ["OptionName: auto_op_parallel, set value: 1"]


def test_base_config_whose_options_are_not_an_object_is_refused_before_any_process(tmp_path: Path) -> None:
    import pytest

    from sk_analytics.errors import InputError

    bad = {"super_kernel_optimize_options": [1, 2]}
    with pytest.raises(InputError, match=r"^cfg.json: the options at /super_kernel_optimize_options are not an object"):
        probe_config("auto_op_parallel", 1, bad, source="cfg.json")
    # refused even when the wrapper would reject every value (no runtime process at all)
    with pytest.raises(InputError, match="not an object"):
        probe_values("auto_op_parallel", ['"x"'], CommandBackend([sys.executable, "-c", "pass"]), out_dir=tmp_path / "p",
                     base_config=bad, base_source="cfg.json")
    assert not (tmp_path / "p").exists()
