"""NPU backend glue with a stand-in torch/torch_npu injected in sys.modules."""

from __future__ import annotations

import io
import json
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from sk_analytics.errors import EnvironmentBlocker
from sk_runner.backends import npu


class _FakeNpu:
    def __init__(self) -> None:
        self.syncs = 0
        self.devices = 1

    def synchronize(self) -> None:
        self.syncs += 1

    def device_count(self) -> int:
        return self.devices


@pytest.fixture
def fake_torch(monkeypatch: pytest.MonkeyPatch) -> types.SimpleNamespace:
    calls: list[tuple[Any, ...]] = []

    class NPUGraph:
        @staticmethod
        def _validate_options(_self: Any, kind: str, options: dict[str, Any]) -> None:
            calls.append(("validate", kind, options))
            (name, value), = options.items()
            if name == "auto_op_parallel" and not isinstance(value, int):
                raise ValueError(f"{name} must be int")

    torch = types.ModuleType("torch")
    torch.npu = _FakeNpu()  # type: ignore[attr-defined]
    torch.npu.NPUGraph = NPUGraph  # type: ignore[attr-defined]

    def compile(model: Any, **kwargs: Any) -> Any:  # noqa: A001 - mirrors torch.compile
        calls.append(("compile", model, kwargs))
        return ("compiled", model)

    torch.compile = compile  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "torch", torch)
    monkeypatch.setitem(sys.modules, "torch_npu", types.ModuleType("torch_npu"))
    return types.SimpleNamespace(torch=torch, calls=calls)


def test_missing_torch_npu_is_environment_blocker(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch_npu", None)  # import raises ImportError
    with pytest.raises(EnvironmentBlocker, match="torch_npu is not importable"):
        npu.require_torch_npu()
    with pytest.raises(EnvironmentBlocker):
        npu.validate_option("auto_op_parallel", 1)


def test_compile_model_applies_options_from_both_layouts(fake_torch: types.SimpleNamespace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    yaml_cfg = tmp_path / "exp.yaml"
    yaml_cfg.write_text("model_config:\n  custom_params:\n    super_kernel_optimize: true\n"
                        "    super_kernel_optimize_options:\n      auto_op_parallel: 1\n  other: 3\n")
    monkeypatch.setenv("SK_RUN_CONFIG", str(yaml_cfg))
    assert npu.compile_model("M") == ("compiled", "M")
    _, model, kwargs = fake_torch.calls[-1]
    assert kwargs == {"backend": "npugraph_ex", "fullgraph": True,
                      "options": {"super_kernel_optimize": True, "super_kernel_optimize_options": {"auto_op_parallel": 1}}}
    top = tmp_path / "c.json"
    top.write_text(json.dumps({"static_kernel_compile": True, "super_kernel_optimize_options": {"early_start": 0}, "x": 1}))
    npu.compile_model("M", top)
    assert fake_torch.calls[-1][2]["options"] == {"static_kernel_compile": True, "super_kernel_optimize_options": {"early_start": 0}}


def test_timing_log_writes_standard_lines_with_device_sync(fake_torch: types.SimpleNamespace, tmp_path: Path) -> None:
    echo = io.StringIO()
    with npu.TimingLog(tmp_path, rank=3, echo=echo) as log:
        assert log.timed("decode", lambda x: x * 2, 21) == 42
        log.record("prefill", 12.3456)
    lines = (tmp_path / "log_3.log").read_text().splitlines()
    assert lines[0].startswith("Inference time (decode): ") and lines[0].endswith(" ms")
    assert lines[1] == "Inference time (prefill): 12.346 ms"
    assert echo.getvalue().splitlines() == lines
    assert fake_torch.torch.npu.syncs == 2  # before and after the timed call
    with pytest.raises(ValueError):
        npu.TimingLog(tmp_path, rank=0).__enter__().record("warmup", 1.0)


def test_validate_option_through_the_wrapper(fake_torch: types.SimpleNamespace) -> None:
    ok = npu.validate_option("auto_op_parallel", 1)
    bad = npu.validate_option("auto_op_parallel", "x")
    assert ok.accepted and not bad.accepted and "must be int" in bad.reason
    assert fake_torch.calls[0] == ("validate", "optimize_options", {"auto_op_parallel": 1})


def test_npu_backend_readiness(fake_torch: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    backend = npu.NpuBackend([sys.executable, "infer.py", "--config", "{config}"])
    backend.check_ready()
    fake_torch.torch.npu.devices = 0
    monkeypatch.setenv("ASCEND_RT_VISIBLE_DEVICES", "7")
    with pytest.raises(EnvironmentBlocker, match="no NPU device visible .*'7'"):
        backend.check_ready()


def test_write_correctness(tmp_path: Path) -> None:
    npu.write_correctness(False, tmp_path, max_abs_err=0.5)
    assert json.loads((tmp_path / "correctness.json").read_text()) == {"passed": False, "max_abs_err": 0.5}
