"""The torch_npu API check itself, on small source trees written here (always runs, no cache needed).

A minimal torch_npu laid out like the real one passes; each mutation that
breaks one thing the npu backend relies on must be reported, naming it. Also
the readers underneath (names, signatures, the backend's uses, the folder
rule) and the source fetcher, on their unhappy paths.
"""

from __future__ import annotations

import os
import textwrap
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch_npu_sources
from npu_backend_uses import backend_uses, read_uses
from py_sources import Params, SourceTree
from torch_npu_api import api_problems, wrapper_accepts
from torch_npu_facts import RuleNotFound, folder_rule

from sk_runner.sim.identity import ProcessIds
from sk_runner.sim.profiler import profiler_paths

GOOD: dict[str, str] = {
    "torch_npu/__init__.py": """
        import torch
        import torch_npu.npu
        from torch_npu import profiler
        from torch_npu.version import __version__ as __version__
        torch._register_device_module("npu", torch_npu.npu)
    """,
    "torch_npu/version.py": """
        __version__ = '2.99.0'
    """,
    "torch_npu/profiler/__init__.py": """
        from torch_npu._C._profiler import ProfilerActivity
        from .profiler import profile, tensorboard_trace_handler
        from .experimental_config import _ExperimentalConfig, ProfilerLevel, AiCMetrics, ExportType
    """,
    "torch_npu/profiler/profiler.py": """
        class _KinetoProfile:
            def __init__(self, *, activities=None, experimental_config=None):
                pass

        class profile(_KinetoProfile):
            def __init__(self, *, activities=None, on_trace_ready=None, experimental_config=None):
                super().__init__(activities=activities, experimental_config=experimental_config)

        def tensorboard_trace_handler(dir_name=None, worker_name=None):
            return None
    """,
    "torch_npu/profiler/experimental_config.py": """
        from .analysis.prof_common_func._constant import Constant

        class ProfilerLevel:
            Level0 = Constant.LEVEL0
            Level1 = Constant.LEVEL1

        class AiCMetrics:
            AiCoreNone = Constant.AicMetricsNone

        class ExportType:
            Db = "db"
            Text = "text"

        class _ExperimentalConfig:
            def __init__(self, profiler_level=Constant.LEVEL0, aic_metrics=None, export_type="text"):
                pass
    """,
    "torch_npu/profiler/_profiler_path_creator.py": """
        import os
        import socket
        from datetime import datetime, timezone

        class ProfPathCreator:
            def create_prof_dir(self):
                worker_name = "{}_{}".format(self._worker_name or socket.gethostname(), str(os.getpid()))
                current_time = datetime.now(tz=timezone.utc).astimezone()
                span_name = "{}_{}_ascend_pt".format(worker_name, current_time.strftime("%Y%m%d%H%M%S%f")[:-3])
                return span_name
    """,
    "torch_npu/profiler/analysis/__init__.py": "",
    "torch_npu/profiler/analysis/prof_common_func/__init__.py": "",
    "torch_npu/profiler/analysis/prof_common_func/_constant.py": """
        class Constant:
            OUTPUT_DIR = "ASCEND_PROFILER_OUTPUT"
            LEVEL0 = "Level0"
            LEVEL1 = "Level1"
            AicMetricsNone = "ACL_AICORE_NONE"
            DB = "ascend_pytorch_profiler.db"
    """,
    "torch_npu/profiler/analysis/views.py": """
        KERNEL_VIEW = "kernel_details.csv"

        def db_path(rank_id):
            return f"ascend_pytorch_profiler_{rank_id}.db"
    """,
    "torch_npu/npu/__init__.py": """
        from .graphs import NPUGraph
        from .utils import synchronize, device_count
    """,
    "torch_npu/npu/utils.py": """
        def synchronize(device=None):
            pass

        def device_count():
            return 1
    """,
    "torch_npu/npu/graphs.py": """
        class NPUGraph:
            def _validate_options(self, option_name, options=None):
                valid = {"optimize_options": {"split_mode": {"value_type": int}, "opt_extend": {"value_type": str},
                                              "dcci_after_kernel_end": {"value_type": list, "element_type": str}},
                         "debug_options": {"debug_sync_all": {"value_type": int}}}
                if option_name not in valid:
                    raise RuntimeError(option_name)
    """,
    "torch_npu/npu/memory.py": """
        import torch_npu

        def activities():
            return {torch_npu.profiler.ProfilerActivity.CPU, torch_npu.profiler.ProfilerActivity.NPU}
    """,
    "torch_npu/dynamo/__init__.py": """
        NPUGRAPH_EX_BACKEND = "npugraph_ex"

        def _register_npu_backend(backend, name="npu"):
            pass

        def _register_backends():
            _register_npu_backend(None)
            _register_npu_backend(None, NPUGRAPH_EX_BACKEND)
    """,
}


def write_tree(root: Path, files: dict[str, str]) -> SourceTree:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text), encoding="utf-8")
    return SourceTree(root)


def mutated(file: str, old: str, new: str) -> dict[str, str]:
    assert old in GOOD[file], (file, old)
    return {**GOOD, file: GOOD[file].replace(old, new)}


@pytest.fixture
def utc_plus_8() -> Iterator[None]:
    old = os.environ.get("TZ")
    os.environ["TZ"] = "CST-8"
    time.tzset()
    try:
        yield
    finally:
        os.environ.pop("TZ", None) if old is None else os.environ.__setitem__("TZ", old)
        time.tzset()


def test_a_faithful_stand_in_passes(tmp_path: Path) -> None:
    assert api_problems(write_tree(tmp_path, GOOD), backend_uses()) == []


BREAKS = [
    ("export_type_gone", "torch_npu/profiler/__init__.py", ", ExportType", "", "torch_npu.profiler.ExportType "),
    ("enum_member_renamed", "torch_npu/profiler/experimental_config.py", "AiCoreNone =", "AiCoreOff =", "AiCMetrics.AiCoreNone"),
    ("keyword_dropped", "torch_npu/profiler/experimental_config.py", ', export_type="text"', "", "unknown keyword(s) export_type"),
    ("profile_keyword_dropped", "torch_npu/profiler/profiler.py", "on_trace_ready=None, ", "", "unknown keyword(s) on_trace_ready"),
    ("handler_keyword_only", "torch_npu/profiler/profiler.py", "handler(dir_name=None", "handler(*, dir_name=None", "1 positional arguments given, at most 0"),
    ("required_parameter_added", "torch_npu/profiler/profiler.py", "worker_name=None):", "worker_name=None, *, analyse):", "required parameter(s) analyse"),
    ("validate_reads_self", "torch_npu/npu/graphs.py", "raise RuntimeError(option_name)", "raise RuntimeError(self.name)", "passes None as self"),
    ("validate_gone", "torch_npu/npu/graphs.py", "def _validate_options(", "def _check_options(", "NPUGraph._validate_options"),
    ("validate_static", "torch_npu/npu/graphs.py", "(self, option_name, options=None)", "(option_name, options=None)",
     "3 positional arguments given, at most 2"),
    ("npugraph_ex_unregistered", "torch_npu/dynamo/__init__.py", "_register_npu_backend(None, NPUGRAPH_EX_BACKEND)", "pass", "backend='npugraph_ex'"),
    ("activity_unused", "torch_npu/npu/memory.py", "ProfilerActivity.NPU}", "ProfilerActivity.CUDA}", "ProfilerActivity.NPU is in compiled code"),
    ("activity_from_elsewhere", "torch_npu/profiler/__init__.py", "torch_npu._C._profiler", "torch.profiler", "outside torch_npu's sources"),
    ("no_device_module", "torch_npu/__init__.py", 'torch._register_device_module("npu", torch_npu.npu)', "", "does not register torch_npu.npu"),
    ("synchronize_gone", "torch_npu/npu/__init__.py", "synchronize, ", "", "torch.npu.synchronize"),
]


@pytest.mark.parametrize(("file", "old", "new", "expected"), [b[1:] for b in BREAKS], ids=[b[0] for b in BREAKS])
def test_each_break_is_reported(tmp_path: Path, file: str, old: str, new: str, expected: str) -> None:
    problems = api_problems(write_tree(tmp_path, mutated(file, old, new)), backend_uses())
    assert any(expected in p for p in problems), problems


def test_wrapper_accepts_reads_names_tables_and_types_through_the_mapping(tmp_path: Path) -> None:
    """An option counts as accepted only under its torch_npu name, in the table the probe asks, with the type
    the npu backend converts its value to; breaking any of them makes it count as refused."""
    assert wrapper_accepts(write_tree(tmp_path, GOOD)) == {"split_mode", "opt_extend_option", "dcci_after_kernel_end", "debug_sync_all"}
    graphs = "torch_npu/npu/graphs.py"
    for name, (old, new, gone) in {
        "runtime-name": ('"opt_extend": {"value_type": str}', '"opt_extend_option": {"value_type": str}', "opt_extend_option"),
        "dict-not-text": ('"opt_extend": {"value_type": str}', '"opt_extend": {"value_type": dict}', "opt_extend_option"),
        "other-table": ('"debug_options": {"debug_sync_all"', '"debug_options": {"debug_other"', "debug_sync_all"),
        "no-element-type": ('"value_type": list, "element_type": str', '"value_type": list', "dcci_after_kernel_end"),
    }.items():
        accepted = wrapper_accepts(write_tree(tmp_path / name, mutated(graphs, old, new)))
        assert accepted is not None and gone not in accepted, name
    assert wrapper_accepts(write_tree(tmp_path / "none", mutated(graphs, "def _validate_options(", "def _other("))) is None


def test_the_backend_uses_read_from_its_ast_cover_the_profiler_and_the_probe() -> None:
    uses = backend_uses()
    paths = set(uses.paths())
    assert {
        "torch_npu.profiler.profile", "torch_npu.profiler.tensorboard_trace_handler", "torch_npu.profiler._ExperimentalConfig",
        "torch_npu.profiler.ProfilerActivity.CPU", "torch_npu.profiler.ProfilerActivity.NPU", "torch_npu.profiler.ProfilerLevel.Level1",
        "torch_npu.profiler.AiCMetrics.AiCoreNone", "torch_npu.profiler.ExportType.Db", "torch.npu.NPUGraph._validate_options",
        "torch.npu.synchronize", "torch.npu.device_count",
    } <= paths  # fmt: skip
    calls = {c.path: c for c in uses.calls}
    assert calls["torch_npu.profiler._ExperimentalConfig"].keywords == {"aic_metrics", "profiler_level", "export_type"}
    assert calls["torch_npu.profiler.profile"].keywords == {"activities", "on_trace_ready", "experimental_config"}
    assert calls["torch_npu.profiler.tensorboard_trace_handler"].positional == 1
    assert calls["torch.npu.NPUGraph._validate_options"].positional_literals[0] is None  # self, through the class
    assert calls["torch.compile"].literal_keywords["backend"] == "npugraph_ex"


def test_uses_follow_locals_hasattr_lists_and_dict_keys() -> None:
    source = textwrap.dedent('''
        import importlib
        def torch_of():
            return importlib.import_module("torch")
        def f(db):
            tn = importlib.import_module("torch_npu")
            prof = getattr(tn, "profiler", None)
            needed = ("profile", "Alpha")
            needed += ("Beta",) if db else ()
            missing = [n for n in needed if not hasattr(prof, n)]
            opts = {"a": 1}
            opts["b"] = 2
            prof.make(**opts)
            torch_of().npu.go(1, 2, *rest)
            prof.other(**kwargs)
    ''')
    uses = read_uses(source)
    assert {"torch_npu.profiler.profile", "torch_npu.profiler.Alpha", "torch_npu.profiler.Beta", "torch.npu.go"} <= set(uses.paths())
    calls = {c.path: c for c in uses.calls}
    assert calls["torch_npu.profiler.make"].keywords == {"a", "b"} and calls["torch_npu.profiler.make"].unresolved is None
    assert calls["torch.npu.go"].unresolved == "*args"
    assert calls["torch_npu.profiler.other"].unresolved == "**kwargs (keys not literal)"


def test_an_unreadable_call_is_a_problem_not_a_pass(tmp_path: Path) -> None:
    uses = read_uses('import importlib\ndef f(kw):\n    importlib.import_module("torch_npu").profiler.profile(**kw)\n')
    assert api_problems(write_tree(tmp_path, GOOD), uses) == ["torch_npu.profiler.profile (backend line 3): arguments cannot be checked: **kw (keys not "
                                                              "literal)"]


def test_params_report_what_would_not_bind() -> None:
    params = Params(positional=("a", "b"), required_positional=1, keyword_only=("k",), required_keyword_only=("k",), var_positional=False, var_keyword=False)
    assert params.problems(1, frozenset({"k"})) == []
    assert params.problems(1, frozenset({"k", "a"})) == ["a given both by position and by keyword"]
    assert params.problems(0, frozenset()) == ["required parameter(s) a, k not given"]
    assert params.problems(3, frozenset({"k"})) == ["3 positional arguments given, at most 2 accepted ('a', 'b')"]


def test_names_resolve_through_stars_bases_and_cycles(tmp_path: Path) -> None:
    tree = write_tree(tmp_path, {
        "pkg/__init__.py": "from .a import *\nfrom pkg import loop\n",
        "pkg/a.py": "class Base:\n    X = 1\nclass Child(Base):\n    pass\n",
        "pkg/loop.py": "from pkg.loop import nothing\n",
    })  # fmt: skip
    assert tree.resolve("pkg.Child.X").module == "pkg.a"  # type: ignore[union-attr]
    assert tree.resolve("pkg.loop").kind == "module"  # type: ignore[union-attr]
    assert tree.resolve("pkg.loop.nothing") is None  # an import cycle, not a recursion error
    assert tree.resolve("pkg.Child.Y") is None and tree.resolve("other.X") is None


def test_folder_rule_replays_the_source_and_matches_the_simulator(tmp_path: Path, utc_plus_8: None) -> None:
    rule = folder_rule(write_tree(tmp_path, GOOD))
    assert (rule.clock, rule.worker_parts, rule.strftime, rule.cut) == ("local", ("host", "pid"), "%Y%m%d%H%M%S%f", -3)
    when = 1_764_633_599_999_999_999  # 23:59:59.999999999 UTC = 07:59:59.999 at UTC+8
    assert rule.name("h", 7, when) == "h_7_20251202075959999_ascend_pt"
    ids = ProcessIds(7, "h", when, 1, 1, 0, 0, 0, 0, 0.0, 1)
    assert profiler_paths(tmp_path, ids).root.name == rule.name("h", 7, when)


def test_a_utc_folder_rule_would_not_match_the_simulator(tmp_path: Path, utc_plus_8: None) -> None:
    old = "datetime.now(tz=timezone.utc).astimezone()"
    rule = folder_rule(write_tree(tmp_path, mutated("torch_npu/profiler/_profiler_path_creator.py", old, "datetime.utcnow()")))
    when = 1_764_633_600_000_000_000
    assert rule.clock == "utc" and rule.name("h", 7, when) == "h_7_20251202000000000_ascend_pt"
    assert profiler_paths(tmp_path, ProcessIds(7, "h", when, 1, 1, 0, 0, 0, 0, 0.0, 1)).root.name != rule.name("h", 7, when)


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("datetime.now(tz=timezone.utc).astimezone()", "clock()", "unknown clock expression 'clock()'"),
        ("str(os.getpid())", "str(rank)", "unknown worker name part 'str(rank)'"),
        ("return span_name", 'return "{}_{}_ascend_pt".format(1, 2)', "expected one '..._ascend_pt'.format(...)"),
    ],
)
def test_a_folder_rule_in_an_unknown_form_is_an_error(tmp_path: Path, old: str, new: str, message: str) -> None:
    with pytest.raises(RuleNotFound, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        folder_rule(write_tree(tmp_path, mutated("torch_npu/profiler/_profiler_path_creator.py", old, new)))


def _wheel(path: Path, members: dict[str, str]) -> Path:
    with zipfile.ZipFile(path, "w") as wheel:
        for name, text in members.items():
            wheel.writestr(name, text)
    return path


def test_unpack_keeps_only_torch_npu_python_and_marks_the_entry_last(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "torch_npu-9.9-cp311-cp311-linux_x86_64.whl", {
        "torch_npu/__init__.py": "x = 1\n", "torch_npu/lib/libx.so": "bin", "torchnpugen/gen.py": "",
        "torch_npu-9.9.dist-info/METADATA": "", "torch_npu/../evil.py": "",
    })  # fmt: skip
    cache = tmp_path / "cache"
    assert torch_npu_sources.source_root("9.9", cache) is None
    assert torch_npu_sources.unpack_sources(wheel, cache / "9.9") == 1
    root = torch_npu_sources.source_root("9.9", cache)
    assert root is not None and sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()) == ["WHEEL", "torch_npu/__init__.py"]
    assert (root / "WHEEL").read_text().startswith(wheel.name + " sha256=")
    assert not (cache / "9.9.partial").exists()


def test_unpack_refuses_a_wheel_without_sources(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path / "torch_npu-9.9.whl", {"torch_npu/lib/libx.so": "bin"})
    with pytest.raises(ValueError, match="no torch_npu/\\*.py file"):
        torch_npu_sources.unpack_sources(wheel, tmp_path / "cache" / "9.9")
    assert torch_npu_sources.source_root("9.9", tmp_path / "cache") is None


def test_fetch_reports_cached_fetched_and_failed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setattr(torch_npu_sources, "CACHE", cache)

    def download(version: str, into: Path) -> Path:
        if version == "0.0":
            raise RuntimeError(f"torch-npu=={version}: no wheel could be downloaded: offline")
        return _wheel(into / f"torch_npu-{version}-py3-none-any.whl", {"torch_npu/__init__.py": ""})

    monkeypatch.setattr(torch_npu_sources, "download_wheel", download)
    assert torch_npu_sources.main(["9.9", "0.0"]) == 1
    out, err = capsys.readouterr()
    assert "torch-npu 9.9: fetched torch_npu-9.9-py3-none-any.whl, 1 .py files" in out
    assert "torch-npu 0.0: FAILED: torch-npu==0.0: no wheel could be downloaded: offline" in err
    assert "1 of 2 torch-npu versions" in out
    monkeypatch.setattr(torch_npu_sources, "download_wheel", lambda *_: pytest.fail("a cached version is downloaded again"))
    assert torch_npu_sources.main(["9.9"]) == 0
    assert "torch-npu 9.9: cached (torch_npu-9.9-py3-none-any.whl)" in capsys.readouterr().out
