"""The clean-device proof on the simulator: a foreign load on a leased device is caught before or after a clean run,
the run does not count, it is recorded and made again; without the lease the gate would be fooled by it.

The foreign load is ``sk-run sim --foreign-load``, started outside the trial's process tree (by a plain-Python
launcher of the test), and says when it is registered; nothing here waits a guessed time.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl
import pytest

from sk_analytics.errors import EnvironmentBlocker
from sk_analytics.ingest.timings import read_candidate
from sk_analytics.option_trial.api import evaluate_option_trial
from sk_analytics.tables import scan_table
from sk_runner.backends.base import Control
from sk_runner.backends.command import CommandBackend
from sk_runner.backends.sim import SimBackend
from sk_runner.devices.lease import LeaseRequest
from sk_runner.devices.markers import Need
from sk_runner.devices.proof import FOREIGN_FILE
from sk_runner.process import process_alive
from sk_runner.trial import TrialSpec, complete_runs, round_dir_of, run_trial

BASE = {"static_kernel_compile": True, "super_kernel_optimize": True, "super_kernel_optimize_options": {}}
CONTROL = Control(ranks=2, iterations=20, warmup=2, timeout_s=120.0)
SK_RUN = [sys.executable, "-c", "from sk_runner.cli import main; main()"]

#: Started by the test, so the load it starts is no process of the trial: waits for ``go``, starts the foreign
#: load, writes its pid to ``ready`` once the load is registered, and ends with it.
LAUNCHER = r"""
import os, subprocess, sys, time
go, ready, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
while not os.path.exists(go):
    time.sleep(0.02)
load = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
load.stdout.readline()
with open(ready + ".tmp", "w") as fh:
    fh.write(str(load.pid))
os.replace(ready + ".tmp", ready)
load.wait()
"""

#: The workload: the simulator; before clean run 2 (once) it has the launcher start the foreign load and
#: waits until the load is registered, so the load shares run 2's device from its first kernel on.
WRAPPER = r"""
import os, sys, time
go, ready = sys.argv[1], sys.argv[2]
run_dir = os.environ["SK_RUN_DIR"]
if run_dir.endswith(os.path.join("CLEAN", "run-2")) and not os.path.exists(go):
    open(go, "w").close()
    deadline = time.monotonic() + 120
    while not os.path.exists(ready) and time.monotonic() < deadline:
        time.sleep(0.02)
os.execv(sys.executable, [sys.executable, "-m", "sk_runner.sim", "--config", os.environ["SK_RUN_CONFIG"], "--run-dir", run_dir,
                          "--ranks", os.environ["SK_RUN_RANKS"], "--iterations", "20", "--warmup", "2", "--seed", "7", "--noise", "0"])
"""


def _session(tmp_path: Path) -> tuple[Path, Path]:
    (tmp_path / "session").mkdir(exist_ok=True)
    (tmp_path / "base.json").write_text(json.dumps(BASE))
    return tmp_path / "session", tmp_path / "base.json"


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("ASCEND_PROF", "SK_RUN", "ASCEND_OP_COMPILE"))}


def _decode_mean(log: Path, warmup: int = 2) -> float:
    values = [float(line.split(":")[1].split()[0]) for line in log.read_text().splitlines() if "Inference time (decode)" in line]
    return sum(values[warmup:]) / len(values[warmup:])


@contextmanager
def foreign_load(devices: str, slowdown: str = "1.08") -> Iterator[subprocess.Popen[str]]:
    """``sk-run sim --foreign-load`` running and registered; stopped (SIGTERM) at the end."""
    proc = subprocess.Popen([*SK_RUN, "sim", "--foreign-load", devices, "--slowdown", slowdown], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None
        ready, _, _ = select.select([proc.stdout], [], [], 120)
        assert ready and proc.stdout.readline().startswith(f"foreign load on NPU {devices.replace('-', ',')}")
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_a_foreign_load_during_a_clean_run_discards_it_and_the_run_is_made_again(tmp_path: Path) -> None:
    session, base = _session(tmp_path)
    go, ready = tmp_path / "go", tmp_path / "ready"
    (tmp_path / "wrapper.py").write_text(WRAPPER)
    round_dir = round_dir_of(session, "O0")
    launcher = subprocess.Popen([sys.executable, "-c", LAUNCHER, str(go), str(ready), *SK_RUN, "sim", "--foreign-load", "6",
                                 "--slowdown", "1.08", "--until-file", str(round_dir / FOREIGN_FILE)])
    try:
        spec = TrialSpec(session=session, round="O0", base_config=base, incumbent=True, runs=3, control=CONTROL, env=_env(),
                         cwd=tmp_path, backend=CommandBackend([sys.executable, str(tmp_path / "wrapper.py"), str(go), str(ready)]),
                         lease=LeaseRequest(Need(str(tmp_path / "locks"), (5, 6)), timeout_s=120))
        result = run_trial(spec)
        launcher.wait(timeout=120)  # the load ended once the discard was recorded (its --until-file)
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
    load_pid = int(ready.read_text())
    assert not process_alive(load_pid)
    assert (result.status, result.runs_completed, result.new_runs) == ("ok", [1, 2, 3], [1, 2, 3])
    assert result.lease == {"mode": "acquired", "root": str(tmp_path / "locks"), "device_ids": [5, 6], "proof": "sim-registry"}
    [discard] = result.foreign
    assert (discard["run"], discard["action"], discard["phase"], discard["attempt"]) == ("run-2", "discarded", "after", 1)
    [seen] = discard["processes"]
    assert (seen["device"], seen["pid"], seen["source"]) == (6, load_pid, "sim-registry")
    assert "--foreign-load 6 --slowdown 1.08" in seen["command"]
    lines = [json.loads(x) for x in (round_dir / FOREIGN_FILE).read_text().splitlines()]
    assert [x["action"] for x in lines if x["action"] != "waited"] == ["discarded"]  # the re-run may wait for the load to go
    moved = Path(discard["moved_to"])
    assert moved.parent == round_dir / "INCOMPLETE" and moved.name.startswith("run-2-")
    assert json.loads((moved / "DISCARDED.json").read_text())["reason"] == "foreign_process_on_device"
    counted = round_dir / "CLEAN" / "run-2"
    # the discarded run's rank 1 ran on device 6 beside the load: 8 % slower than the counted run of the same config and seed
    assert _decode_mean(moved / "log_1.log") / _decode_mean(counted / "log_1.log") == pytest.approx(1.08, rel=1e-3)
    assert _decode_mean(moved / "log_0.log") == pytest.approx(_decode_mean(counted / "log_0.log"), rel=1e-6)
    meta = json.loads((counted / "meta.json").read_text())
    assert meta["device_proof"]["after"]["processes"] == [] and meta["lease"]["device_ids"] == [5, 6]
    env = json.loads((counted / "meta.json").read_text())["contract_env"]
    assert "SK_RUN_DIR" in env
    runs = scan_table(session / "data", "runs").collect()
    assert runs.height == 3 and runs.filter(pl.col("status") == "ok").height == 3  # the discarded run is in no table


def test_without_the_lease_a_foreign_load_fools_the_gate_and_with_it_nothing_is_measured(tmp_path: Path,
                                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    session, base = _session(tmp_path)
    backend = SimBackend(extra_args=["--noise", "0.2"])

    def spec(round_name: str, lease: LeaseRequest | None, runs: int = 3) -> TrialSpec:
        return TrialSpec(session=session, round=round_name, base_config=base, incumbent=True, runs=runs, control=CONTROL, env=_env(),
                         cwd=tmp_path, backend=backend, seed=11, lease=lease, lang="zh")

    need = Need(str(tmp_path / "locks"), (0, 1))
    with foreign_load("0-1") as load:
        assert run_trial(spec("O0", None, runs=5)).runs_completed == [1, 2, 3, 4, 5]  # unleased: measured beside the load
        with pytest.raises(EnvironmentBlocker, match=rf"pid {load.pid} \(sk-run sim --foreign-load 0-1 --slowdown 1.08\) on NPU 0 "
                                                       r"\(and 1 more sighting\(s\) on NPU 1\) "  # one line: the first and the count
                                                       r"outside the lease \(devices 0,1\) for more than 0.5 s before run-1"):
            run_trial(spec("O0L", LeaseRequest(need, timeout_s=0.5)))
        assert complete_runs(round_dir_of(session, "O0L")) == []  # leased: nothing measured while the load is there
        # the wait line speaks the trial's language (a Chinese sweep's); the blocker's error line above stays English
        assert f"sk-run: 租约外有 NPU 0 上的进程 pid {load.pid}（sk-run sim --foreign-load 0-1 --slowdown 1.08）（另有 1 处，在 NPU 1 上）；" \
               "run-1 开始前最多等待 0.5 秒（--lease-timeout）" in capsys.readouterr().err
    later = run_trial(spec("O0L", LeaseRequest(need, timeout_s=60)))
    assert later.runs_completed == [1, 2, 3] and later.lease["mode"] == "acquired"

    def frame(round_name: str) -> pl.DataFrame:
        return read_candidate(round_dir_of(session, round_name) / "CLEAN", expected_ranks=2, warmup=2)

    summary = evaluate_option_trial(frame("O0"), {"O0L": frame("O0L")}, warmup=2, expected_ranks=None)
    verdict = summary["candidates"]["O0L"]["option_trial_evaluation"]
    # the same config twice: the gate "accepts" the copy measured on free devices over the one that shared them
    assert verdict["accepted"] is True and verdict["mean_improvement_pct"] == pytest.approx(100 * (1 - 1 / 1.08), abs=1.0)
    blockers = [json.loads(x) for x in (round_dir_of(session, "O0L") / FOREIGN_FILE).read_text().splitlines()]
    assert [b["action"] for b in blockers] == ["waited", "blocked"] and {p["pid"] for p in blockers[0]["processes"]} == {load.pid}


def test_on_an_npu_host_the_proof_reads_npu_smis_process_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command workload on a host with npu-smi: a process npu-smi lists on a leased device blocks the clean run."""
    from runner_fake import write_fake

    fixture = Path(__file__).resolve().parents[1] / "fixtures" / "npu_smi" / "info_910b3_processes.txt"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "npu-smi").write_text(f"#!{sys.executable}\nprint(open({str(fixture)!r}).read(), end='')\n")
    (bin_dir / "npu-smi").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    spec = TrialSpec(session=tmp_path / "session", round="O0", base_config=tmp_path / "base.json", incumbent=True, runs=1,
                     control=Control(ranks=2, warmup=2, timeout_s=60), env={**_env(), "PATH": os.environ["PATH"]}, cwd=tmp_path,
                     backend=CommandBackend(write_fake(tmp_path)), lease=LeaseRequest(Need(str(tmp_path / "locks"), (0, 1)), timeout_s=0.3))
    with pytest.raises(EnvironmentBlocker, match=r"pid 73215 \(python3\.10\) on NPU 0 outside the lease \(devices 0,1\)"):
        run_trial(spec)
    [waited, blocked] = [json.loads(x) for x in (round_dir_of(tmp_path / "session", "O0") / FOREIGN_FILE).read_text().splitlines()]
    assert (waited["source"], waited["action"], blocked["action"]) == ("npu-smi", "waited", "blocked")
    assert waited["processes"] == [{"device": 0, "pid": 73215, "command": "python3.10", "source": "npu-smi", "memory_mb": 61234}]
    assert complete_runs(round_dir_of(tmp_path / "session", "O0")) == []
