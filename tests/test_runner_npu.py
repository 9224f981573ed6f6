"""NPU backend glue with a stand-in torch/torch_npu injected in sys.modules."""

from __future__ import annotations

import io
import json
import os
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from sk_analytics.errors import EnvironmentBlocker, InputError
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


def test_a_debug_option_is_validated_in_the_debug_table(fake_torch: types.SimpleNamespace) -> None:
    """The real wrapper keeps optimize_options and debug_options apart (super_kernel_debug_options)."""
    verdict = npu.validate_option("debug_sync_all", 1)
    assert fake_torch.calls[-1] == ("validate", "debug_options", {"debug_sync_all": 1})
    assert verdict.evidence["call"] == """torch.npu.NPUGraph._validate_options(None, "debug_options", {'debug_sync_all': 1})"""


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


# A stand-in torch_npu with the public profiler API (torch_npu.profiler.profile,
# tensorboard_trace_handler, _ExperimentalConfig, ProfilerActivity, ProfilerLevel,
# AiCMetrics). Like the real one, the trace handler runs when the profiler stops
# and writes <dir>/<host>_<pid>_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv.
FAKE_TORCH_NPU = r'''
import os, socket, types

class ProfilerActivity:
    CPU = "CPU"
    NPU = "NPU"

class ProfilerLevel:
    Level0, Level1, Level2 = "Level0", "Level1", "Level2"

class AiCMetrics:
    AiCoreNone, PipeUtilization = "AiCoreNone", "PipeUtilization"

class ExportType:
    Text, Db = "text", "db"

class _ExperimentalConfig:
    def __init__(self, profiler_level=ProfilerLevel.Level0, aic_metrics=AiCMetrics.AiCoreNone, l2_cache=False,
                 export_type=ExportType.Text, **kw):
        self.profiler_level, self.aic_metrics, self.export_type = profiler_level, aic_metrics, export_type

def tensorboard_trace_handler(dir_name=None, worker_name=None, analyse_flag=True):
    def handler(prof):
        worker = worker_name or f"{socket.gethostname()}_{os.getpid()}"
        out = os.path.join(dir_name or ".", f"{worker}_20261129000000000_ascend_pt", "ASCEND_PROFILER_OUTPUT")
        os.makedirs(out, exist_ok=True)
        if prof.experimental_config.export_type == ExportType.Db:
            open(os.path.join(out, "ascend_pytorch_profiler_0.db"), "wb").write(b"SQLite format 3\x00")
            return
        with open(os.path.join(out, "kernel_details.csv"), "w") as fh:
            fh.write("Step Id,Name,Type,Start Time(us),Duration(us)\n1,SuperKernel_0,SuperKernel,1.0,2.0\n")
    handler.dir_name = dir_name
    return handler

class profile:
    made = []
    def __init__(self, activities=None, schedule=None, on_trace_ready=None, experimental_config=None, **kw):
        self.activities, self.on_trace_ready, self.experimental_config = activities, on_trace_ready, experimental_config
        self.running = False
        profile.made.append(self)
    def __enter__(self):
        self.running = True
        return self
    def __exit__(self, *exc):
        self.running = False
        self.on_trace_ready(self)
    def step(self):
        pass

profiler = types.SimpleNamespace(profile=profile, tensorboard_trace_handler=tensorboard_trace_handler,
                                 _ExperimentalConfig=_ExperimentalConfig, ProfilerActivity=ProfilerActivity,
                                 ProfilerLevel=ProfilerLevel, AiCMetrics=AiCMetrics, ExportType=ExportType)
'''

FAKE_TORCH = r'''
import os

class _Npu:
    def synchronize(self):
        pass
    def device_count(self):
        return 1
npu = _Npu()
def compile(model, **kwargs):
    if os.environ.get("ASCEND_OP_COMPILE_SAVE_KERNEL_META") == "1":  # the runtime's SK metadata dump
        meta = os.path.join(os.environ["SK_RUN_DIR"], "sk_meta", str(os.getpid()), "model_1_1")
        os.makedirs(meta)
        for name in ("sk_graph_origin.json", "sk_graph_updated.json", "sk_fused_nodes.log", "sk_scope_split.log"):
            open(os.path.join(meta, name), "w").write(name)
        open(os.path.join(meta, "super_kernel.log"), "w").write("Begin aclskOptimize\nEnd aclskOptimize\n")
    return model
'''


@pytest.fixture
def fake_profiler(fake_torch: types.SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    module = types.ModuleType("torch_npu")
    exec(FAKE_TORCH_NPU, module.__dict__)  # noqa: S102 - the test's own stand-in source
    monkeypatch.setitem(sys.modules, "torch_npu", module)
    monkeypatch.delenv("SK_RUN_PROFILE", raising=False)
    return module


def _kernel_details(run_dir: Path) -> list[Path]:
    return sorted(run_dir.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"))


def test_profile_collection_times_under_the_npu_profiler(fake_profiler: types.ModuleType, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SK_RUN_PROFILE", "1")
    monkeypatch.setenv("SK_RUN_DIR", str(tmp_path))
    with npu.TimingLog(rank=0, echo=io.StringIO()) as log:
        (prof,) = fake_profiler.profile.made
        assert log.profiler is prof and prof.running
        log.record("decode", 1.0)
        assert _kernel_details(tmp_path) == []  # written when the profiler stops
    assert not prof.running and log.profiler is None
    assert prof.activities == ["CPU", "NPU"]
    assert (prof.experimental_config.profiler_level, prof.experimental_config.aic_metrics) == ("Level1", "AiCoreNone")
    assert prof.on_trace_ready.dir_name == str(tmp_path)
    (details,) = _kernel_details(tmp_path)
    assert details.read_text().splitlines()[1] == "1,SuperKernel_0,SuperKernel,1.0,2.0"
    assert (tmp_path / "log_0.log").read_text() == "Inference time (decode): 1.000 ms\n"


def test_db_export_is_asked_of_the_npu_profiler(fake_profiler: types.ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SK_RUN_PROFILE", "1")
    monkeypatch.setenv("SK_RUN_PROFILE_EXPORT", "db")
    with npu.TimingLog(tmp_path, rank=0, echo=io.StringIO()) as log:
        log.record("decode", 1.0)
    (prof,) = fake_profiler.profile.made
    assert prof.experimental_config.export_type == "db" and prof.experimental_config.profiler_level == "Level1"
    assert _kernel_details(tmp_path) == []
    assert len(list(tmp_path.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db"))) == 1
    monkeypatch.setenv("SK_RUN_PROFILE_EXPORT", "parquet")
    with pytest.raises(InputError, match="export type 'parquet' is not known"):
        npu.TimingLog(tmp_path, rank=0, echo=io.StringIO()).__enter__()
    monkeypatch.setenv("SK_RUN_PROFILE_EXPORT", "db")
    del fake_profiler.profiler.ExportType  # an old torch_npu without the DB export
    with pytest.raises(EnvironmentBlocker, match=r"no torch_npu.profiler.ExportType"):
        npu.TimingLog(tmp_path, rank=0, echo=io.StringIO()).__enter__()


@pytest.mark.parametrize("switch", [None, "0", "true"])
def test_a_clean_run_never_starts_the_profiler(fake_profiler: types.ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               switch: str | None) -> None:
    if switch is not None:
        monkeypatch.setenv("SK_RUN_PROFILE", switch)
    with npu.TimingLog(tmp_path, rank=0, echo=io.StringIO()) as log:
        log.record("decode", 1.0)
        assert log.profiler is None
    with npu.npu_profiler(tmp_path) as prof:
        assert prof is None
    assert fake_profiler.profile.made == [] and _kernel_details(tmp_path) == []


def test_profiler_without_the_api_is_an_environment_blocker(fake_torch: types.SimpleNamespace, tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SK_RUN_PROFILE", "1")  # fake_torch's torch_npu has no profiler
    with pytest.raises(EnvironmentBlocker, match=r"no torch_npu.profiler.profile, tensorboard_trace_handler, .*cannot profile"):
        npu.TimingLog(tmp_path, rank=0).__enter__()


USER_SCRIPT = r'''
from sk_runner.backends import npu as sk
model = sk.compile_model(lambda x: x + 1)
with sk.TimingLog() as log:
    log.timed("prefill", model, 1)
    for _ in range(12):
        log.timed("decode", model, 1)
sk.write_correctness(passed=True)
'''


def _user_workload(tmp_path: Path) -> tuple[list[str], dict[str, str]]:
    """A user script on the npu helper, with the stand-in torch/torch_npu importable in its process."""
    site = tmp_path / "site"
    for name, source in (("torch", FAKE_TORCH), ("torch_npu", FAKE_TORCH_NPU)):
        (site / name).mkdir(parents=True)
        (site / name / "__init__.py").write_text(source)
    script = tmp_path / "infer.py"
    script.write_text(USER_SCRIPT)
    repo = Path(__file__).resolve().parents[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ASCEND_PROF", "SK_RUN"))}
    env["PYTHONPATH"] = os.pathsep.join([str(site), str(repo)])
    return [sys.executable, str(script)], env


def test_npu_trial_clean_runs_write_no_profiler_output(fake_profiler: types.ModuleType, tmp_path: Path) -> None:
    from sk_runner.backends.base import Control
    from sk_runner.trial import TrialSpec, run_trial

    argv, env = _user_workload(tmp_path)
    (tmp_path / "session").mkdir()
    (tmp_path / "base.json").write_text(json.dumps({"super_kernel_optimize": True, "super_kernel_optimize_options": {}}))
    result = run_trial(TrialSpec(session=tmp_path / "session", round="O0", base_config=tmp_path / "base.json",
                                 backend=npu.NpuBackend(argv), incumbent=True, runs=1,
                                 control=Control(ranks=1, warmup=2, timeout_s=60), env=env, cwd=tmp_path))
    assert result.status == "ok", result.message
    round_dir = tmp_path / "session/experiments/Sbest/O0"
    assert (round_dir / "CLEAN/run-1/log_0.log").read_text().count("Inference time (decode)") == 12
    assert list(round_dir.rglob("*_ascend_pt")) == []


def test_npu_profile_collection_writes_kernel_details_under_its_root(fake_profiler: types.ModuleType, tmp_path: Path) -> None:
    from sk_runner.backends.base import Control
    from sk_runner.profile import ProfileSpec, collect_profile

    argv, env = _user_workload(tmp_path)
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"super_kernel_optimize": True, "super_kernel_optimize_options": {}}))
    (tmp_path / "session").mkdir()  # profile, like trial, refuses a missing session folder
    spec = ProfileSpec(session=tmp_path / "session", round="DIAG", role="candidate_compat", config=config,
                       backend=npu.NpuBackend(argv), control=Control(ranks=1, iterations=12, warmup=2, timeout_s=60),
                       workload={"model": "tiny", "input": "p", "batch_size": 1, "mode": "decode", "runtime": "fake"},
                       env=env, ingest=False)
    result = collect_profile(spec)
    assert (result.status, result.reason) == ("complete", "collection complete and sealed")
    root = Path(result.root or "")
    (details,) = _kernel_details(root)
    assert details.read_text().startswith("Step Id,Name,Type")
