"""What the ledger says about a session's device leases: the summary, resume's recorded lease, verify's note, the report."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from sk_analytics.report.devices import devices_section
from sk_analytics.stage_o.leases import recorded_lease, summarize, unleased_note

LEASE = {"mode": "acquired", "root": "/locks", "device_ids": [0, 1]}
DISCARD = {"run": "run-2", "attempt": 1, "processes": [{"pid": 77, "command": "sk-run sim --foreign-load 1", "device": 1}]}


def _trial(round_name: str, lease: dict[str, Any] | None, foreign: list[dict[str, Any]] | None = None) -> tuple[str, dict[str, Any]]:
    data: dict[str, Any] = {"round": round_name, "phase": "trial", "runs_added": 3}
    if lease is not None:
        data["lease"] = lease
    if foreign is not None:
        data["foreign_processes"] = foreign
    return "trial_result", data


def test_a_fully_leased_session() -> None:
    records = [("session_started", {}), _trial("O0-INCUMBENT", LEASE), _trial("O1", {**LEASE, "mode": "inherited"}, [DISCARD])]
    summary = summarize(records)
    assert (summary.trials, summary.leased, summary.all_leased, summary.unleased_rounds) == (2, 2, True, ())
    assert summary.modes == ("acquired", "inherited") and summary.roots == ("/locks",) and summary.device_ids == ((0, 1),)
    assert summary.discarded_runs == ({**DISCARD, "round": "O1"},)
    assert unleased_note(records) is None and recorded_lease(records) == ("/locks", (0, 1))


def test_unleased_trials_are_noted_honestly() -> None:
    records = [_trial("O0-INCUMBENT", None), _trial("O1", {"mode": None, "root": None, "device_ids": None}), _trial("O2", LEASE)]
    note = unleased_note(records)
    assert note is not None and note.startswith("unleased: 2 of 3 trial record(s) ran their clean runs without a device lease")
    assert "(rounds O0-INCUMBENT, O1)" in note and note.endswith("not a tampering finding")
    assert unleased_note([("session_started", {})]) is None  # no trial: nothing to say
    assert recorded_lease([_trial("O0-INCUMBENT", None)]) is None


def test_the_report_section_in_both_languages() -> None:
    blocked = ("lease_blocked", {"message": "NPU 1 is still leased by unknown holder after 0.5 s", "lease_mode": None})
    view = SimpleNamespace(records=[_trial("O0-INCUMBENT", {**LEASE, "root": "/tmp/s/.device-leases"}, [DISCARD]),
                                    _trial("O1", None), blocked])
    en = "\n".join(devices_section(view, "en"))  # type: ignore[arg-type]
    assert "## Devices and leases" in en
    assert "- Lease: held by this session (acquired); root `<session>/.device-leases`; NPUs 0,1" in en  # no session path
    assert "- 1 of 2 trial records ran their clean runs inside the lease" in en
    assert "- Rounds that held no device lease: O1." in en
    assert "| O0-INCUMBENT | run-2 | 1 | pid 77 (sk-run sim --foreign-load 1) NPU 1 |" in en
    assert "- Device lease not obtained (nothing ran, nothing decided): NPU 1 is still leased by unknown holder" in en
    zh = "\n".join(devices_section(view, "zh"))  # type: ignore[arg-type]
    assert "## 设备与租约" in zh and "未持有设备租约的轮次：O1" in zh
    assert devices_section(SimpleNamespace(records=[("session_started", {})]), "en") == []  # type: ignore[arg-type]
