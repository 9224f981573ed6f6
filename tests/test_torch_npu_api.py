"""The npu backend against the REAL torch-npu releases' Python sources (read with ast, never imported).

Every torch_npu name, call, keyword and enum member that
``sk_runner/backends/npu.py`` uses (derived from its AST, so a new use is
checked without editing this file), the ``torch.compile`` backend it names,
and the profiler's ``<host>_<pid>_<timestamp>_ascend_pt`` folder rule, which
the simulator and the ingest discovery must follow. One test per release of
:data:`torch_npu_sources.VERSIONS`; a release whose sources are not cached is
skipped with the reason (``make torch-npu-sources`` fetches them: ``make
test`` does not, docs/runner.md says why).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from npu_backend_uses import BackendUses, backend_uses
from py_sources import SourceTree
from torch_npu_api import api_problems, wrapper_accepts
from torch_npu_facts import FolderRule, folder_rule, output_dir_name, string_constants, wrapper_option_types
from torch_npu_sources import VERSIONS, source_root

from sk_analytics.ingest.discover import discover
from sk_analytics.stage_o.options import REGISTRY
from sk_runner.backends.torch_npu_options import RELEASE_OPTIONS, checked_release, wrapper_section
from sk_runner.sim.identity import ProcessIds
from sk_runner.sim.profiler import profiler_paths
from sk_runner.sim.profiler_db import db_name

TIMEZONES = {"CST-8": -8 * 3600, "PST+8": 8 * 3600, "UTC0": 0}
"""POSIX zones (no tzdata needed) and their ``time.timezone``: local time differs from UTC in the first two,
so a UTC-stamped rule cannot pass by accident."""
INSTANTS_NS = (
    1_764_633_600_000_000_000,  # a whole second
    1_764_633_599_999_999_999,  # 1 ns before one (a float of it rounds up)
    1_764_633_599_999_900_000,
    1_764_640_800_123_456_789,
    1_900_000_000_987_654_321,
)
OUTPUT_FILES = r"kernel_details\.csv|ascend_pytorch_profiler(?:_[0-9]+)?\.db"


@pytest.fixture(scope="module", params=VERSIONS)
def release(request: pytest.FixtureRequest) -> SourceTree:
    """One release's sources, read once for all the tests of this module."""
    root = source_root(request.param)
    if root is None:
        pytest.skip(f"torch-npu {request.param} sources not cached: run `make torch-npu-sources`")
    return SourceTree(root)


@pytest.fixture(scope="module")
def uses() -> BackendUses:
    return backend_uses()


@pytest.fixture(params=list(TIMEZONES))
def local_zone(request: pytest.FixtureRequest) -> Iterator[str]:
    """This process's local time zone set to the parameter for the test (``TZ`` and ``time.tzset``), then restored."""
    old = os.environ.get("TZ")
    os.environ["TZ"] = request.param
    time.tzset()
    try:
        assert time.timezone == TIMEZONES[request.param]
        yield request.param
    finally:
        if old is None:
            os.environ.pop("TZ", None)
        else:
            os.environ["TZ"] = old
        time.tzset()


def _ids(host: str, pid: int, started_ns: int) -> ProcessIds:
    return ProcessIds(pid, host, started_ns, rts_model_id=1, call_count=1, scope_id_base=0, node_id_base=0,
                      stream_id_base=0, task_id_base=0, device_clock_offset_us=0.0, rng_seed=7)  # fmt: skip


def test_backend_uses_are_all_in_the_release(release: SourceTree, uses: BackendUses) -> None:
    """Names and enum members exist, every call binds to the real signature, npugraph_ex is registered."""
    assert api_problems(release, uses) == []


def test_folder_rule_is_the_one_the_simulator_follows(release: SourceTree, local_zone: str, tmp_path: Path) -> None:
    rule = folder_rule(release)
    assert rule.clock == "local", f"{rule.source}: stamps {rule.clock} time; the simulator stamps local time"
    for when in INSTANTS_NS:
        sim = profiler_paths(tmp_path, _ids("node-7", 4242, when))
        assert sim.root.name == rule.name("node-7", 4242, when), (local_zone, when, rule.source)


def test_output_names_are_the_ones_the_simulator_writes(release: SourceTree, tmp_path: Path) -> None:
    sim = profiler_paths(tmp_path, _ids("node-7", 4242, INSTANTS_NS[0]))
    assert sim.kernel_details.parent.name == sim.db.parent.name == output_dir_name(release)
    names = string_constants(release, "torch_npu.profiler", OUTPUT_FILES, containing="kernel_details|ascend_pytorch_profiler", fill="0")
    assert sim.kernel_details.name in names
    assert sim.db.name == db_name(0) in names


def test_ingest_discovers_the_real_layout(release: SourceTree, tmp_path: Path) -> None:
    """Every output file name the release can write, under a folder named by its rule, is found by ``ingest``."""
    rule: FolderRule = folder_rule(release)
    out = tmp_path / "prof" / rule.name("node-7", 4242, INSTANTS_NS[3]) / output_dir_name(release)
    names = string_constants(release, "torch_npu.profiler", OUTPUT_FILES, containing="kernel_details|ascend_pytorch_profiler", fill="3")
    assert {"kernel_details.csv", "ascend_pytorch_profiler_3.db"} <= set(names)
    out.mkdir(parents=True)
    for name in names:
        (out / name).write_bytes(b"")
    found = {a.path.name: a.kind.name for a in discover(tmp_path / "prof")}
    expected = {n: "kernel_details" if n.endswith(".csv") else "profiler_db" for n in names}
    assert found == expected


def test_the_option_mapping_is_what_the_release_wrapper_accepts(release: SourceTree, request: pytest.FixtureRequest) -> None:
    """The npu backend's table of what each release accepts (runtime names -> torch_npu names, sections
    and value types) is the release's own ``_validate_options``: nothing it would refuse is asked, nothing
    it accepts is blocked. The extend options pass only under their torch_npu names, as text."""
    version = request.node.callspec.params["release"]
    assert checked_release(version) == version
    assert wrapper_accepts(release) == RELEASE_OPTIONS[version]
    tables = wrapper_option_types(release)
    assert tables is not None
    for spec in REGISTRY:
        if spec.kind != "not_settable" and spec.name != spec.wrapper:
            assert spec.name not in tables[wrapper_section(spec)]  # the runtime's name would be refused
            if spec.name in RELEASE_OPTIONS[version]:
                assert tables[wrapper_section(spec)][spec.wrapper] == "str"


def test_checked_versions_are_the_documented_range() -> None:
    """Ascending, no duplicates, and docs/runner.md names the first and the last; the make target exists."""
    repo = Path(__file__).resolve().parent.parent
    parsed = [tuple(int(p) for p in v.replace(".post", ".").split(".")) for v in VERSIONS]
    assert parsed == sorted(set(parsed))
    docs = (repo / "docs" / "runner.md").read_text(encoding="utf-8")
    assert f"`{VERSIONS[0]}`" in docs and f"`{VERSIONS[-1]}`" in docs
    assert "\ntorch-npu-sources:" in (repo / "Makefile").read_text(encoding="utf-8")
