"""probe_values: wrapper + runtime evidence, config layouts, never-reused probe folders."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from runner_fake import write_fake

from sk_runner.backends.command import CommandBackend
from sk_runner.probe import probe_config, probe_value, probe_values

YAML_BASE = {"model_config": {"custom_params": {"super_kernel_optimize_options": {"early_start": 0}}}}


def test_probe_config_sets_only_the_option_in_either_layout() -> None:
    assert probe_config("auto_op_parallel", 1, None) == {
        "static_kernel_compile": True, "super_kernel_optimize": True, "super_kernel_optimize_options": {"auto_op_parallel": 1}}
    cfg = probe_config("auto_op_parallel", 1, YAML_BASE)
    assert cfg["model_config"]["custom_params"]["super_kernel_optimize_options"] == {"early_start": 0, "auto_op_parallel": 1}
    assert YAML_BASE["model_config"]["custom_params"]["super_kernel_optimize_options"] == {"early_start": 0}


def test_runtime_without_super_kernel_log_is_not_ready(tmp_path: Path) -> None:
    res = probe_value("auto_op_parallel", 1, CommandBackend([sys.executable, "-c", "pass"]), out_dir=tmp_path)
    record = res.to_json()["records"][0]
    assert res.ready is False and record["evidence"]["runtime"]["status"] == "no_evidence"


def test_failing_probe_process_is_not_ready(tmp_path: Path) -> None:
    res = probe_value("auto_op_parallel", 1, CommandBackend([sys.executable, "-c", "raise SystemExit(4)"]), out_dir=tmp_path)
    runtime = res.values[0].runtime
    assert runtime is not None and runtime.status == "process_failed" and runtime.reason == "probe process failed (exit 4)"


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
