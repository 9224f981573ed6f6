"""Sweeps under the shared-NPU lease: held from the first device command to the hand-off (the DCCI pair inside it),
two sweeps on overlapping devices never measure at the same time, a blocked lease is on the ledger and --resume
takes the lease again. Lock holders and probes are plain-Python processes; readiness comes through pipes and files."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sweep_helpers import SHORT_PROFILE_POLICY, small_session
from test_devices_lease import _busy, holding, sk_run

from sk_analytics.files.strict_json import load_json_file
from sk_analytics.ledger.chain import read_records
from sk_analytics.stage_o import machine as m
from sk_runner.devices.lease import LeaseRequest, lock_path
from sk_runner.devices.markers import Need
from sk_runner.sweep.driver import run_sweep
from sk_runner.sweep.session import load_session

pytestmark = pytest.mark.slow


@pytest.fixture(autouse=True)
def _stable_source_revision(monkeypatch: pytest.MonkeyPatch) -> None:
    """As in test_sweep_dcci: the collections record this checkout's git state; pin it against edits elsewhere."""
    import sk_runner.profile.engine as profile

    monkeypatch.setattr(profile, "source_revision", lambda path, files=(): {"revision": "pinned-for-test"})


def _holder_since(path: Path) -> int | None:
    text = path.read_text() if path.exists() else ""
    return json.loads(text)["since_ns"] if text else None


def _clean_intervals(root: Path) -> list[tuple[int, int]]:
    metas = sorted((root / "experiments" / "Sbest").glob("*/CLEAN/run-*/meta.json"))
    return [(m_["process"]["started_ns"], m_["process"]["ended_ns"]) for m_ in map(load_json_file, metas)]


def test_one_lease_from_the_first_device_command_to_the_hand_off_with_the_dcci_pair_inside(tmp_path: Path) -> None:
    root, locks = tmp_path / "s", tmp_path / "locks"
    seen: list[tuple[str, bool, int | None]] = []

    def look(action: m.Action) -> None:
        seen.append((action.kind, _busy(lock_path(locks, 1)) if lock_path(locks, 1).exists() else False,
                     _holder_since(lock_path(locks, 1))))

    session = small_session(root, ["dcci-disable-all"], network="moe-decode", policy=SHORT_PROFILE_POLICY)
    run_sweep(session, say=lambda _: None, on_action=look, lease=LeaseRequest(Need(str(locks), (0, 1)), timeout_s=60))
    assert seen[:2] == [("FreezeMatrix", False, None), ("RunTrial", False, None)]  # the lease is taken inside the first trial
    held = [(kind, since) for kind, busy, since in seen[2:] if busy]
    assert len(held) == len(seen) - 2  # from then on every step ran inside the lease ...
    assert len({since for _, since in held}) == 1  # ... one continuous holding (a re-taken lease writes a new record)
    assert [kind for kind, _ in held].count("CollectProfile") == 2
    assert not _busy(lock_path(locks, 0)) and lock_path(locks, 0).read_text() == ""  # released at the end
    records = read_records(root)
    leases = [r.data["lease"] for r in records if r.kind in ("trial_result", "profile_result")]
    assert leases and all(lease == {"mode": "acquired", "root": str(locks), "device_ids": [0, 1]}
                          for lease in ({k: v for k, v in lease.items() if k != "proof"} for lease in leases))
    assert {r.data["lease"].get("proof") for r in records if r.kind == "trial_result"} == {"sim-registry"}  # what proved them free
    assert [r.data["side"] for r in records if r.kind == "profile_result"] == ["o0", "disable_all"]
    handoff = load_json_file(root / "handoff.json")["devices"]
    assert handoff["trials"] == handoff["leased"] > 0 and handoff["device_ids"] == [[0, 1]] and handoff["unleased_rounds"] == []
    report = (root / "EXPERIMENT_REPORT.md").read_text(encoding="utf-8")
    assert f"- 租约：本会话持有（acquired）；根目录 `{locks}`；NPU 0,1" in report
    verified = subprocess.run([sys.executable, "-c", "from sk_analytics.cli import main; main()", "ledger", "verify", str(root)],
                              capture_output=True, text=True, check=False)
    assert verified.returncode == 0 and "unleased" not in verified.stdout, verified.stdout + verified.stderr


def test_two_sweeps_on_overlapping_devices_never_measure_at_the_same_time(tmp_path: Path) -> None:
    locks = tmp_path / "locks"
    first, second = tmp_path / "a", tmp_path / "b"
    for folder in (first, second):
        small_session(folder, ["auto-op-parallel-1"])
    base = [sys.executable, "-c", "from sk_runner.cli import main; main()", "sweep", "--quiet", "--lease-root", str(locks)]
    a = subprocess.Popen([*base, "--resume", str(first), "--device-id", "0-1"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300
        while _holder_since(lock_path(locks, 1)) is None:  # a took the lease at its first device command
            assert a.poll() is None and time.monotonic() < deadline, a.stderr.read() if a.stderr else ""
            time.sleep(0.05)
        b = sk_run("sweep", "--quiet", "--lease-root", str(locks), "--resume", str(second), "--device-id", "1-2", timeout=900)
        assert a.wait(timeout=900) in (0, 1)
    finally:
        if a.poll() is None:
            a.kill()
            a.wait()
    assert b.returncode in (0, 1), b.stderr
    assert f"NPU 1 is leased by pid {a.pid} on " in b.stderr  # b really waited for a
    runs_a, runs_b = _clean_intervals(first), _clean_intervals(second)
    assert len(runs_a) >= 8 and len(runs_b) >= 8
    assert all(ea <= sb or eb <= sa for sa, ea in runs_a for sb, eb in runs_b)  # no clean run of one overlaps one of the other
    for folder, ids in ((first, [0, 1]), (second, [1, 2])):
        leases = [r.data["lease"] for r in read_records(folder) if r.kind == "trial_result"]
        assert leases and all(lease["device_ids"] == ids and lease["mode"] == "acquired" for lease in leases)


def test_a_blocked_lease_is_on_the_ledger_and_resume_takes_the_lease_again(tmp_path: Path) -> None:
    root, locks = tmp_path / "s", tmp_path / "locks"
    small_session(root, ["auto-op-parallel-1"])
    with holding(locks, "1"):
        blocked = sk_run("sweep", "--quiet", "--resume", str(root), "--lease-root", str(locks), "--device-id", "0-1", "--lease-timeout", "0.3")
    assert blocked.returncode == 3
    assert blocked.stderr.strip().splitlines()[-1].endswith(f"sk-run sweep --resume {root}")
    last = read_records(root)[-1]
    assert last.kind == "lease_blocked" and last.data["busy"]["device"] == 1 and last.data["lease_mode"] is None
    assert not [r for r in read_records(root) if r.kind == "trial_result"]  # nothing ran, nothing decided
    # the first step again, with the lease (the holder is gone): then a resume without options takes the recorded lease
    run_sweep(load_session(root), say=lambda _: None, max_actions=2, lease=LeaseRequest(Need(str(locks), (0, 1)), timeout_s=60))
    assert not _busy(lock_path(locks, 0))
    resumed = sk_run("sweep", "--quiet", "--resume", str(root), timeout=900)
    assert resumed.returncode in (0, 1), resumed.stderr
    leases = [r.data["lease"] for r in read_records(root) if r.kind == "trial_result"]
    assert len(leases) >= 2 and all(lease == {"mode": "acquired", "root": str(locks), "device_ids": [0, 1], "proof": "sim-registry"} for lease in leases)
    assert (root / "experiments/Sbest/O1/CLEAN/run-1/meta.json").is_file()
