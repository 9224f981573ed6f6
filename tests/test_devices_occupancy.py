"""Who uses a device: npu-smi's process table (fixtures in its real layout) and the simulated host's registry."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sk_analytics.errors import EnvironmentBlocker
from sk_runner.devices.occupancy import NpuSmiSource, RegistrySource, npu_smi_processes, occupancy_source, parse_npu_smi
from sk_runner.devices.registry import FOREIGN_LOAD, REGISTRY_ENV, Registration, registry_root, slowdowns, tenants

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "npu_smi"


def _text(name: str) -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_a2_process_table_with_the_container_column() -> None:
    table = parse_npu_smi(_text("info_910b3_processes.txt"))
    assert [(r.npu, r.chip, r.pid, r.name, r.memory_mb, r.container_pid) for r in table.rows] == [
        (0, 0, 73215, "python3.10", 61234, "NA"), (3, 0, 81002, "python3", 18120, "412"), (3, 0, 81077, "mindie_llm_back", 9544, "NA")]
    assert table.idle_npus == [1, 2, 4, 5, 6, 7]
    assert table.devices == {}  # one chip per NPU, no Phy-ID column: the device id is the NPU id
    found = npu_smi_processes(_text("info_910b3_processes.txt"), (2, 3))
    assert [(p.device, p.pid, p.source, p.memory_mb) for p in found] == [(3, 81002, "npu-smi", 18120), (3, 81077, "npu-smi", 9544)]
    assert npu_smi_processes(_text("info_910b3_processes.txt"), (1, 2, 4)) == []


def test_a2_idle_host_without_the_container_column() -> None:
    table = parse_npu_smi(_text("info_910b3_idle.txt"))
    assert table.rows == [] and table.idle_npus == list(range(8))
    assert npu_smi_processes(_text("info_910b3_idle.txt"), range(8)) == []


def test_a3_chips_map_to_their_phy_id() -> None:
    table = parse_npu_smi(_text("info_a3_phy_id.txt"))
    assert table.devices == {(0, 0): 0, (0, 1): 1, (1, 0): 2, (1, 1): 3}
    assert table.idle_npus == [0]
    found = npu_smi_processes(_text("info_a3_phy_id.txt"), (3,))
    assert [(p.device, p.pid, p.command) for p in found] == [(3, 52731, "python")]
    assert npu_smi_processes(_text("info_a3_phy_id.txt"), (1, 2)) == []  # NPU 1 chip 1 is device 3, not device 1


@pytest.mark.parametrize("text", ["", "dcmi model initialized failed, because the device is used. ret is -8020\n",
                                  _text("info_910b3_idle.txt").split("| NPU     Chip")[0]])
def test_an_output_without_a_process_table_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="no process table"):
        parse_npu_smi(text)


def _fake_npu_smi(folder: Path, body: str) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "npu-smi"
    script.write_text(f"#!{sys.executable}\n{body}\n", encoding="utf-8")
    script.chmod(0o755)
    return {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"}


def test_npu_smi_source_runs_the_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fixture = FIXTURES / "info_910b3_processes.txt"
    env = _fake_npu_smi(tmp_path / "bin", f"import sys; assert sys.argv[1:] == ['info']; print(open({str(fixture)!r}).read(), end='')")
    monkeypatch.setenv("PATH", env["PATH"])
    assert [p.pid for p in NpuSmiSource().snapshot((0, 1))] == [73215]
    assert isinstance(occupancy_source("npu"), NpuSmiSource) and isinstance(occupancy_source("command"), NpuSmiSource)


@pytest.mark.parametrize(("body", "needle"), [
    ("import sys; print('dcmi init failed', file=sys.stderr); sys.exit(1)", "npu-smi info exited 1: dcmi init failed"),
    ("print('Usage: npu-smi info')", "npu-smi info printed no process table"),
])
def test_npu_smi_trouble_is_an_environment_blocker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str, needle: str) -> None:
    monkeypatch.setenv("PATH", _fake_npu_smi(tmp_path / "bin", body)["PATH"])
    with pytest.raises(EnvironmentBlocker, match=needle):
        NpuSmiSource().snapshot((0,))


def test_npu_smi_missing_is_an_environment_blocker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(EnvironmentBlocker, match="npu-smi not found on PATH"):
        NpuSmiSource().snapshot((0,))
    assert isinstance(occupancy_source("command"), RegistrySource)  # no npu-smi: a command workload is a simulated one


def test_the_registry_is_the_environments_else_the_processes_else_the_users(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A bare workload environment (an in-process simulator run) still finds the host's registry."""
    monkeypatch.setenv(REGISTRY_ENV, str(tmp_path / "host"))
    assert registry_root({REGISTRY_ENV: str(tmp_path / "given")}) == tmp_path / "given"
    assert registry_root({}) == registry_root() == tmp_path / "host"
    monkeypatch.delenv(REGISTRY_ENV)
    (tmp_path / "t").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "t"))
    monkeypatch.setattr("tempfile.tempdir", None)  # gettempdir() caches its first answer
    assert registry_root({}) == tmp_path / "t" / f"sk-tune-sim-devices-{os.getuid()}"


def test_registry_entries_live_while_their_process_runs(tmp_path: Path) -> None:
    root = tmp_path / "registry"
    assert registry_root({REGISTRY_ENV: str(root)}) == root
    with Registration(root, [3, 1, 3], command="python -m sk_runner.sim --run-dir x"):
        seen = tenants(root, (0, 1, 2, 3))
        assert [(t.device, t.pid, t.command) for t in seen] == [(1, os.getpid(), "python -m sk_runner.sim --run-dir x"),
                                                                 (3, os.getpid(), "python -m sk_runner.sim --run-dir x")]
        assert [p.device for p in RegistrySource(root).snapshot((3,))] == [3]
    assert tenants(root, (1, 3)) == []
    assert sorted(p.name for p in root.iterdir()) == ["npu-1", "npu-3"] and not any((root / "npu-1").iterdir())


def test_stale_entries_of_dead_or_reused_pids_are_ignored(tmp_path: Path) -> None:
    root = tmp_path / "registry"
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        Registration(root, [0], command="killed later", kind=FOREIGN_LOAD, slowdown=1.5, pid=child.pid)  # never closed
        assert [t.pid for t in tenants(root, (0,))] == [child.pid]
        assert slowdowns(root, [0, 1]) == [1.5, 1.0]
    finally:
        child.kill()
        child.wait()
    assert tenants(root, (0,)) == [] and slowdowns(root, [0]) == [1.0]
    (root / "npu-0" / f"{os.getpid()}.json").write_text(
        f'{{"pid": {os.getpid()}, "command": "an earlier process with this pid", "start_ticks": "1"}}', encoding="utf-8")
    (root / "npu-0" / "9.json").write_text("{torn", encoding="utf-8")
    assert tenants(root, (0,)) == []  # another start time: not this process's entry; a torn entry is skipped


def test_foreign_loads_multiply_and_a_process_never_slows_itself(tmp_path: Path) -> None:
    root = tmp_path / "registry"
    with Registration(root, [2], command="load a", kind=FOREIGN_LOAD, slowdown=1.1):
        assert slowdowns(root, [2, 5]) == [1.0, 1.0]  # its own entry
        assert slowdowns(root, [2, 5], own_pid=-1) == [pytest.approx(1.1), 1.0]
