"""``sk-run demo --lang en`` speaks English: not one Chinese character on the console, in the report
(Markdown and HTML), in the failure scenes or in the hand-off's reasons; the session still verifies (issue 46).

The command runs as users run it, on the demo's seed and matrix, with the simulated workload of the small demo
sweeps (2 ranks, 30 decode samples, as test_sweep_e2e's ``sk-run sweep --demo``) instead of 8 x 120: the words
of the console, the report, the scenes and the hand-off do not depend on the workload's size, and this session
still settles entries of every kind (accepted, rejected, failed with a sealed scene, blocked) and diagnoses DCCI."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from sk_analytics.cli._base import run_cli
from sk_analytics.handoff.crosscheck import first_disagreement
from sk_analytics.ledger.chain import verify
from sk_analytics.messages import render
from sk_analytics.stage_o.matrix import protocol_candidates
from sk_runner.backends.base import Control
from sk_runner.cli import cli

CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")
"""Chinese characters and the full-width punctuation that goes with them."""


def _chinese(text: str) -> list[str]:
    """The lines of ``text`` that hold a Chinese character (what a failure shows)."""
    return [line for line in text.splitlines() if CJK.search(line)]


def _reasons(handoff: dict[str, Any]) -> list[Any]:
    """Every recorded reason of the hand-off: each entry's and the stop's."""
    reasons = [entry.get("reason", entry.get("reason_zh")) for entry in handoff["entries"]]
    return reasons + ([handoff["stop"].get("reason", handoff["stop"].get("reason_zh"))] if handoff["stop"] else [])


@pytest.mark.slow
def test_english_demo_has_no_chinese(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    import sk_runner.sweep.demo as demo

    small = Control(ranks=2, iterations=30, warmup=demo.DEMO_CONTROL.warmup)
    real = demo.demo_session
    monkeypatch.setattr(demo, "DEMO_CONTROL", small)  # the demo's lease: NPUs 0..1
    monkeypatch.setattr(demo, "demo_session", lambda folder, **kw: real(folder, control=small, **kw))
    session = tmp_path / "demo-session"
    assert run_cli(cli, "sk-run", ["demo", "--lang", "en", "--session", str(session)]) == 0
    out, progress = capsys.readouterr()  # the result lines, the progress (docs/sweep.md, "Streams")
    entries = len(protocol_candidates())
    assert "[O0-INCUMBENT] O0-INCUMBENT: O0 correctness + 5 clean runs" in progress
    assert f"Option matrix frozen: {entries} entries" in progress and "Report: " in out
    assert "→ accepted:" in progress and "→ blocked:" in progress and "[DCCI] dcci-diff: per-SK / child attribution" in progress
    assert _chinese(out) == [] and _chinese(progress) == []
    for name in ("EXPERIMENT_REPORT.md", "report.html"):
        assert _chinese((session / name).read_text(encoding="utf-8")) == [], name
    scenes = sorted(p for p in session.glob("experiments/Sbest/*/FAILURE_SCENES/attempt-*/scene.*") if p.suffix in (".json", ".md"))
    assert scenes  # the demo's failing candidates seal scenes: each in English
    for scene in scenes:
        assert _chinese(scene.read_text(encoding="utf-8")) == [], scene
    handoff = json.loads((session / "handoff.json").read_text(encoding="utf-8"))
    reasons = _reasons(handoff)
    assert len(reasons) == entries and all(isinstance(r, dict) and set(r) == {"code", "params"} for r in reasons)  # codes and facts
    assert _chinese(json.dumps(reasons, ensure_ascii=False)) == []
    assert _chinese("\n".join(render(r, "en") for r in reasons)) == []
    assert any("未授权" in render(r, "zh") for r in reasons)  # the same records word the Chinese report
    assert verify(session).ok and first_disagreement(session) is None
    assert json.loads((session / "session.json").read_text(encoding="utf-8"))["control"]["ranks"] == 2  # the small workload ran
