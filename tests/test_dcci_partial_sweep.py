"""A partial DCCI diagnosis in the sweep (issue 25): recorded, and never a repair without saying so."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from dcci_scenarios import Sk, run
from test_dcci_analysis import DISABLE_ALL
from test_dcci_graph_split import _scenario
from test_stage_o_machine import DCCI_IDS, LOSS, Script, drive, make_matrix, zh

from sk_analytics.files.atomic import write_json
from sk_analytics.messages import coded, render
from sk_analytics.stage_o.actions import DcciDiff, Settle
from sk_runner.sweep.dcci import run_dcci_diff

NOTE = "部分诊断：只比较了候选 SK 时间的 61%（SK 数的 70%）；其余部分计算图未比较"
EN_NOTE = "PARTIAL diagnosis: only 61% of the candidate's SK time (70% of its SKs) was compared; the rest of the graph was not compared"
PARTIAL = coded("dcci.partial_note", time="61%", count="70%", rank="", unpaired="")
"""What a partial diagnosis's ``dcci_diff_result`` records (the note's message and facts)."""


def _partial_result() -> dict[str, Any]:
    return run(_scenario("candidate", extra=[("model_9_0", [Sk(f"S{i}", "sampler") for i in range(4)])]))


def test_the_sweep_step_carries_a_partial_diagnosis(tmp_path: Path) -> None:
    result = _partial_result()
    out = tmp_path / "dcci-diff.json"
    write_json(out, result)  # the step reads an existing diff rather than diffing again
    step = run_dcci_diff(tmp_path / "b", tmp_path / "c", out, warmup=2, disable_all_config=DISABLE_ALL, session=tmp_path)
    assert step.ok and step.patterns == result["repair"]["list"] and step.diagnosis == "partial"
    assert step.compared_time_share == result["coverage"]["time_share"] < 0.9
    assert step.partial_note == result["repair"]["partial_note"] and step.partial_note["code"] == "dcci.partial_note"
    assert render(step.partial_note, "zh") == result["repair"]["partial_note_zh"] and render(step.partial_note, "zh").startswith("部分诊断")
    assert render(step.partial_note, "en") == result["repair"]["partial_note_en"] and render(step.partial_note, "en").startswith("PARTIAL")
    complete = run(_scenario("candidate"))
    write_json(out, complete)
    step = run_dcci_diff(tmp_path / "b", tmp_path / "c", out, warmup=2, disable_all_config=DISABLE_ALL, session=tmp_path)
    assert (step.diagnosis, step.compared_time_share, step.partial_note) == ("complete", 1.0, None)


class _PartialScript(Script):
    def __call__(self, action: Any) -> tuple[str, dict[str, Any]]:
        kind, record = super().__call__(action)
        if isinstance(action, DcciDiff):
            record = {**record, "diagnosis": "partial", "compared_time_share": 0.61, "partial_note": PARTIAL}
        return kind, record


def test_a_partial_diagnosis_is_said_when_the_repair_is_accepted_or_rejected() -> None:
    actions, _ = drive(make_matrix(DCCI_IDS), _PartialScript(gate={("dcci-disable-all", "trial"): LOSS}))
    [accepted] = [a for a in actions if isinstance(a, Settle) and a.status == "accepted" and a.entry_id == "dcci-disable-all"]
    assert NOTE in zh(accepted) and EN_NOTE in render(accepted.reason, "en")
    actions, _ = drive(make_matrix(DCCI_IDS), _PartialScript(gate={
        ("dcci-disable-all", "trial"): LOSS,
        ("dcci-disable-all", "repair"): {"accepted": False, "mean_improvement_pct": -0.3, "verdict": "neutral"}}))
    [rejected] = [a for a in actions if isinstance(a, Settle) and a.entry_id == "dcci-disable-all"]
    assert rejected.status == "rejected" and NOTE in zh(rejected) and EN_NOTE in render(rejected.reason, "en")
    # a complete diagnosis says nothing of the kind
    actions, _ = drive(make_matrix(DCCI_IDS), Script(gate={("dcci-disable-all", "trial"): LOSS}))
    assert not any("部分诊断" in zh(a) for a in actions if isinstance(a, Settle))
