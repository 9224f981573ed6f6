"""Environment blockers of every round, in time order, for the parent report (protocol §8)."""

from __future__ import annotations

import json
from pathlib import Path

from sk_analytics.report.render import load_environment_blockers
from sk_analytics.stage_o.layout import ENVIRONMENT_BLOCKERS_FILE, EXPERIMENTS


def test_blockers_of_all_rounds_in_time_order_and_a_cut_line_is_shown(tmp_path: Path) -> None:
    for round_name, lines in {
        "O2": [json.dumps({"ts_ns": 3, "round": "O2", "stage": "probe", "message": "wrapper rejects"}), '{"ts_ns": 4, "rou'],
        "O1": [json.dumps({"ts_ns": 1, "round": "O1", "stage": "environment", "message": "torch_npu missing"}), ""],
    }.items():
        folder = tmp_path / EXPERIMENTS / round_name
        folder.mkdir(parents=True)
        (folder / ENVIRONMENT_BLOCKERS_FILE).write_text("\n".join(lines) + "\n", encoding="utf-8")
    blockers = load_environment_blockers(tmp_path)
    assert [(b["round"], b["stage"]) for b in blockers] == [("O2", "?"), ("O1", "environment"), ("O2", "probe")]
    assert blockers[0]["message"] == f"{ENVIRONMENT_BLOCKERS_FILE}:2: unreadable line"


def test_no_blockers_no_rows(tmp_path: Path) -> None:
    assert load_environment_blockers(tmp_path) == []
