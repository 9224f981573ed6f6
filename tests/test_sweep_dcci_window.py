"""The two DCCI diagnostic collections end with one iteration window (protocol §6, validate_set).

A buffer-full re-collection shortens one side's window; the sweep then
re-collects the other side into a new root at the shorter window, bounded by
the policy's collection attempts. Driven by scripted ledgers (the state
machine is pure), with the collections' final windows chosen per attempt.
"""

from __future__ import annotations

from typing import Any

from test_stage_o_machine import DCCI_IDS, LOSS, Script, drive, kinds, make_matrix, zh

from sk_analytics.messages import render
from sk_analytics.stage_o.machine import CollectProfile, DcciDiff, Policy, Settle

DEFAULT_WINDOW = 40


class WindowScript(Script):
    """:class:`Script` whose collections end at a chosen window: ``finals[(side, attempt)]``,
    else the window they were asked for (no buffer-full)."""

    def __init__(self, finals: dict[tuple[str, int], int], **kw: Any) -> None:
        super().__init__(gate={("dcci-disable-all", "trial"): LOSS}, **kw)
        self.finals = finals

    def __call__(self, action: Any) -> tuple[str, dict[str, Any]]:
        kind, data = super().__call__(action)
        if isinstance(action, CollectProfile):
            data["iterations"] = self.finals.get((action.side, action.attempt), action.iterations or DEFAULT_WINDOW)
        return kind, data


def _collections(actions: list[Any]) -> list[tuple[str, int, int | None]]:
    return [(a.side, a.attempt, a.iterations) for a in actions if isinstance(a, CollectProfile)]


def test_disable_all_shortened_recollects_o0_at_its_window_into_a_new_root() -> None:
    actions, _ = drive(make_matrix(DCCI_IDS), WindowScript({("disable_all", 1): 20}))
    assert kinds(actions)[4:8] == ["Profile:o0:1", "Profile:disable_all:1", "Profile:o0:2", "DcciDiff"]
    # disable-all starts at O0's final window; O0 is then re-collected at disable-all's shorter one
    assert _collections(actions) == [("o0", 1, None), ("disable_all", 1, 40), ("o0", 2, 20)]
    diff = actions[7]
    assert diff == DcciDiff("dcci-disable-all", "DCCI/diag/o0-2", "DCCI/diag/disable_all-1", "O0-INCUMBENT", "O1")


def test_o0_shortened_first_makes_disable_all_start_at_the_short_window() -> None:
    actions, _ = drive(make_matrix(DCCI_IDS), WindowScript({("o0", 1): 20}))
    assert _collections(actions) == [("o0", 1, None), ("disable_all", 1, 20)]
    assert isinstance(actions[6], DcciDiff) and actions[6].baseline_root == "DCCI/diag/o0-1"


def test_a_recollection_that_shortens_again_realigns_the_other_side() -> None:
    finals = {("disable_all", 1): 20, ("o0", 2): 11}
    actions, _ = drive(make_matrix(DCCI_IDS), WindowScript(finals), Policy(max_collect_attempts=3))
    assert _collections(actions) == [("o0", 1, None), ("disable_all", 1, 40), ("o0", 2, 20), ("disable_all", 2, 11)]
    diff = next(a for a in actions if isinstance(a, DcciDiff))
    assert (diff.baseline_root, diff.candidate_root) == ("DCCI/diag/o0-2", "DCCI/diag/disable_all-2")


def test_windows_that_cannot_be_aligned_within_the_attempts_reject_the_family() -> None:
    actions, records = drive(make_matrix(DCCI_IDS), WindowScript({("disable_all", 1): 20}), Policy(max_collect_attempts=1))
    assert kinds(actions)[4:7] == ["Profile:o0:1", "Profile:disable_all:1", "Settle:dcci-disable-all:rejected"]
    settle = actions[6]
    assert isinstance(settle, Settle) and settle.family_rejected and settle.incumbent_round == "O0-INCUMBENT"
    assert "迭代窗口不同（40 与 20 次）" in zh(settle) and "1 次采集内未能对齐" in zh(settle)
    assert "different iteration windows (40 and 20)" in render(settle.reason, "en")
    assert [p["iterations"] for p in settle.evidence["profiles"]] == [40, 20]
    assert not any(isinstance(a, DcciDiff) for a in actions)


def test_a_failed_recollection_retries_at_the_aligned_window() -> None:
    script = WindowScript({("disable_all", 1): 20}, profile_ok={("o0", 2): False})
    actions, _ = drive(make_matrix(DCCI_IDS), script, Policy(max_collect_attempts=3))
    assert _collections(actions) == [("o0", 1, None), ("disable_all", 1, 40), ("o0", 2, 20), ("o0", 3, 20)]
    assert next(a for a in actions if isinstance(a, DcciDiff)).baseline_root == "DCCI/diag/o0-3"
