"""The npu backend speaks torch_npu's option names: configs and wrapper calls use ``opt_extend`` /
``debug_extend`` (text), super_kernel.log's runtime names are matched back, and a value the installed
release's wrapper would refuse is ``blocked`` naming the release, never tried. A stand-in torch/torch_npu
whose wrapper checks like the real one (names per table, one type each) is put in sys.modules."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from sk_analytics.errors import InputError
from sk_analytics.stage_o.options import REGISTRY, both_names, runtime_name
from sk_runner.backends import npu
from sk_runner.backends.torch_npu_options import checked_release, release_problem, wrapper_config
from sk_runner.probe import probe_values

TABLES = {"optimize_options": {"split_mode": int, "auto_op_parallel": int, "opt_extend": str,
                               "dcci_after_kernel_end": list, "aggressive_opt_strategies": dict},
          "debug_options": {"debug_sync_all": int, "debug_extend": str}}
"""Keys and value types as in torch_npu 2.14's NPUGraph._validate_options (a subset)."""

WORKLOAD = r'''
import json, os, sys
cfg = json.load(open(os.environ["SK_RUN_CONFIG"]))
folder = os.path.join(os.environ["SK_RUN_DIR"], "sk_meta", str(os.getpid()), "model_1_1")
os.makedirs(folder)
runtime = {"opt_extend": "opt_extend_option"}  # the runtime logs its own names
lines = ["Begin aclskOptimize"]
for name, value in cfg["super_kernel_optimize_options"].items():
    if value == "bad=1":
        lines.append(f"OptionName: {runtime.get(name, name)}, set value is invalid, value is {value}, valid range is [a-z=0-9], "
                     "the process will use default value: 0")
    else:
        lines.append(f"OptionName: {runtime.get(name, name)}, set value: {json.dumps(value)}")
open(os.path.join(folder, "super_kernel.log"), "w").write("\n".join(lines + ["End aclskOptimize"]) + "\n")
'''


@pytest.fixture
def wrapper(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    """torch/torch_npu stand-ins; ``state.version`` is torch_npu.__version__, ``state.calls`` the wrapper calls."""
    state = types.SimpleNamespace(calls=[], compiled=[])

    class NPUGraph:
        @staticmethod
        def _validate_options(_self: Any, section: str, options: dict[str, Any]) -> None:
            state.calls.append((section, options))
            for key, value in options.items():
                if key not in TABLES[section]:
                    raise RuntimeError(f"Invalid {section} param key: '{key}'.")
                if not isinstance(value, TABLES[section][key]):
                    raise RuntimeError(f"{section} param['{key}'] must be {TABLES[section][key].__name__}")

    torch = types.ModuleType("torch")
    torch.npu = types.SimpleNamespace(NPUGraph=NPUGraph, device_count=lambda: 1, synchronize=lambda: None)  # type: ignore[attr-defined]
    torch.compile = lambda model, **kw: state.compiled.append(kw) or model  # type: ignore[attr-defined]
    torch_npu = types.ModuleType("torch_npu")
    torch_npu.__version__ = "2.14.0"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch_npu", torch_npu)
    state.module = torch_npu
    return state


def test_both_names_of_every_registry_option() -> None:
    assert both_names("opt_extend_option") == both_names("opt_extend") == ("opt_extend_option", "opt_extend")
    assert both_names("debug_extend") == ("debug_extend_option", "debug_extend")
    assert both_names("split_mode") == ("split_mode",) and both_names("nope") == ("nope",)
    assert runtime_name("opt_extend") == "opt_extend_option" and runtime_name("debug_extend_option") == "debug_extend_option"
    assert {s.name for s in REGISTRY if s.wrapper != s.name} == {"opt_extend_option", "debug_extend_option"}


def test_configs_for_the_wrapper_use_its_names_and_text_values() -> None:
    config = {"model_config": {"custom_params": {
        "super_kernel_optimize_options": {"opt_extend_option": {"k": ["v1", "v2"], "k2": "v3"}, "split_mode": 2},
        "super_kernel_debug_options": {"debug_extend_option": "a=1"}}}}
    out = wrapper_config(config)
    custom = out["model_config"]["custom_params"]
    assert custom["super_kernel_optimize_options"] == {"opt_extend": "k=v1,v2:k2=v3", "split_mode": 2}
    assert custom["super_kernel_debug_options"] == {"debug_extend": "a=1"}
    assert config["model_config"]["custom_params"]["super_kernel_optimize_options"]["opt_extend_option"] == {"k": ["v1", "v2"], "k2": "v3"}
    assert wrapper_config(out) == out  # already in torch_npu's names: unchanged
    with pytest.raises(InputError, match=r"cfg.json: /super_kernel_optimize_options sets 'opt_extend' twice \(as 'opt_extend' and 'opt_extend_option'\)"):
        wrapper_config({"super_kernel_optimize_options": {"opt_extend": "a=1", "opt_extend_option": "b=2"}}, source="cfg.json")


def test_compile_model_hands_torch_compile_the_wrapper_names(wrapper: types.SimpleNamespace, tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"super_kernel_optimize": True, "super_kernel_optimize_options": {"opt_extend_option": {"a": "1"}}}))
    npu.compile_model("model", path)
    assert wrapper.compiled[-1]["options"] == {"super_kernel_optimize": True, "super_kernel_optimize_options": {"opt_extend": "a=1"}}


def test_the_wrapper_is_asked_in_its_own_names(wrapper: types.SimpleNamespace) -> None:
    verdict = npu.validate_option("opt_extend_option", {"k": "v"})
    assert verdict.accepted and wrapper.calls == [("optimize_options", {"opt_extend": "k=v"})]
    assert verdict.evidence["wrapper_name"] == "opt_extend" and verdict.evidence["torch_npu"] == "2.14.0"
    assert npu.validate_option("debug_extend", "a=1").accepted and wrapper.calls[-1] == ("debug_options", {"debug_extend": "a=1"})


@pytest.mark.parametrize(
    ("version", "option", "value", "reason"),
    [
        ("2.9.1", "opt_extend_option", "a=1", "torch_npu 2.9.1: NPUGraph._validate_options has no optimize_options key 'opt_extend' "
                                              "(it knows debug_sync_all, preload_code, split_mode, stream_fusion)"),
        ("2.9.0", "auto_op_parallel", 1, "torch_npu 2.9.0 (as its checked build 2.9.1): NPUGraph._validate_options has no "
                                         "optimize_options key 'auto_op_parallel'"),
        ("2.8.0.post5", "debug_extend_option", "a=1", "torch_npu 2.8.0.post5: NPUGraph._validate_options has no debug_options key 'debug_extend'"),
        ("2.14.0", "auto_op_parallel", "1", "torch_npu 2.14.0: auto_op_parallel must be int, got '1'"),
        ("2.14.0", "dcci_after_kernel_end", [1], "torch_npu 2.14.0: dcci_after_kernel_end must be list of str, got [1]"),
        ("2.14.0", "opt_extend_option", 7, "torch_npu 2.14.0: opt_extend must be str, got 7"),
    ],
)
def test_a_value_the_release_refuses_is_blocked_naming_it_and_never_tried(wrapper: types.SimpleNamespace, version: str, option: str,
                                                                        value: Any, reason: str) -> None:
    wrapper.module.__version__ = version
    verdict = npu.validate_option(option, value)
    assert (verdict.accepted, verdict.blocked, verdict.verdict) == (False, True, "blocked")
    assert verdict.reason.startswith(f"blocked, not tried: {reason}") and wrapper.calls == []


def test_a_release_outside_the_checked_range_is_asked(wrapper: types.SimpleNamespace) -> None:
    wrapper.module.__version__ = "3.0.0"
    assert checked_release("3.0.0") is None and checked_release("2.14.0") == "2.14.0"
    verdict = npu.validate_option("auto_op_parallel", "1")  # its own wrapper decides
    assert (verdict.accepted, verdict.blocked, verdict.verdict) == (False, False, "rejected")
    assert wrapper.calls == [("optimize_options", {"auto_op_parallel": "1"})]
    assert release_problem("3.0.0", next(s for s in REGISTRY if s.name == "opt_extend_option")) is None


def test_probe_on_npu_writes_wrapper_names_and_reads_runtime_names_back(wrapper: types.SimpleNamespace, tmp_path: Path) -> None:
    script = tmp_path / "workload.py"
    script.write_text(WORKLOAD)
    backend = npu.NpuBackend([sys.executable, str(script)])
    result = probe_values("opt_extend", ["k=v", {"bad": "1"}], backend, out_dir=tmp_path / "probes")
    good, bad = result.values
    assert result.option == good.option == "opt_extend_option"  # records carry the runtime's name
    assert good.ready and bad.wrapper.accepted and not bad.ready
    assert good.runtime is not None and good.runtime.option_lines == ['OptionName: opt_extend_option, set value: "k=v"']
    config = json.loads(good.runtime.config_path.read_text())
    assert config["super_kernel_optimize_options"] == {"opt_extend": "k=v"}  # what torch_npu's wrapper accepts
    assert bad.runtime is not None and bad.runtime.status == "invalid_default" and "opt_extend_option" in bad.reason
    wrapper.module.__version__ = "2.9.1"
    blocked = probe_values("opt_extend_option", ["k=v"], backend, out_dir=tmp_path / "old")
    assert blocked.values[0].runtime is None and not (tmp_path / "old").exists()  # never tried: no process, no folder
    assert blocked.to_json()["records"][0]["evidence"]["wrapper"]["blocked"] is True


def test_probe_cli_prints_blocked(wrapper: types.SimpleNamespace, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from sk_analytics.cli._base import run_cli
    from sk_runner.cli import cli

    wrapper.module.__version__ = "2.9.1"
    argv = ["probe", "--backend", "npu", "--option", "opt_extend", "--value", '"k=v"', "--out", str(tmp_path / "p"), "--", sys.executable, "-c", "pass"]
    assert run_cli(cli, "sk-run", argv) == 1
    out = capsys.readouterr().out
    assert out.startswith("opt_extend_option: ready=false (npu)")
    assert '"k=v": blocked — blocked, not tried: torch_npu 2.9.1: NPUGraph._validate_options has no optimize_options key' in out
