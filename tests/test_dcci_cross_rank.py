"""Cross-rank correspondence by alignment (issue 25): one rank's graph differs from the others'.

The generator (``dcci_scenarios``) lays out a decode graph per rank with two layers re-fused on the
candidate of every rank, one rank with an extra expert SK (a look-alike of every moe SK, so a counter would
shift every later one by one) and one rank missing an SK. Every SK's class on every rank, every cross-rank
group (ranks, deciding rank, class), the repair tokens and the coverage are checked against its truth.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from dcci_scenarios import Scenario, Sk, coverage_truth, decode_graph, group_truth, named_slots, run, slot_truth

from sk_analytics.dcci.crossrank import reference_rank
from sk_analytics.dcci.report import render, summary_line

LAYERS = 24
REFUSED = (2, 5)


def odd_rank_scenario(odd: int = 2, missing_on: int = 3, ranks: int = 4) -> Scenario:
    layout = {}
    for r in range(ranks):
        kw: dict[str, Any] = {}
        if r == odd:
            kw["extra_after"] = {"E": Sk("X.expert", "moe")}
        if r == missing_on:
            kw["missing"] = ["L6.moe"]
        layout[r] = {"baseline": [("model_1_0", decode_graph(LAYERS, **kw))],
                     "candidate": [(f"model_7_{r}", decode_graph(LAYERS, refused=REFUSED, **kw))]}
    slow = {(r, "L1.moe"): "GroupedMatmul" for r in range(ranks)}  # slower everywhere
    slow[(1, "L4.attn")] = "MatMul"  # on one rank only
    slow[(odd, "L7.moe")] = "Add"  # on the odd rank, after its extra look-alike
    slow.update({(r, "L6.moe"): "Gate" for r in range(ranks) if r != missing_on})  # missing on one rank
    return Scenario(layout, slow)


def _groups(result: dict[str, Any], scenario: Scenario) -> dict[tuple[str, tuple[str, ...]], dict[str, Any]]:
    """(SK name, sides) -> the result's cross-rank group; a group mixing SKs fails loudly."""
    by_uid = {sk["uid"]: key for key, sk in named_slots(result, scenario).items()}
    truth = slot_truth(scenario)
    out = {}
    for entry in result["ranks"]["sks"]:
        keys = {(by_uid[r["uid"]][1], truth[by_uid[r["uid"]]].sides) for r in entry["per_rank"]}
        assert len(keys) == 1, f"cross-rank SK {entry['cross_rank_sk']} mixes {sorted(keys)}"
        key = keys.pop()
        assert key not in out, f"{key} split across groups"
        out[key] = entry
    return out


def check_against_truth(result: dict[str, Any], scenario: Scenario) -> None:
    """Every slot's class/reason, every cross-rank group and the coverage against the generator's truth."""
    truth = slot_truth(scenario)
    slots = named_slots(result, scenario)
    assert set(slots) == set(truth)
    assert {k: (s["class"], s["reason"]) for k, s in slots.items()} == {k: (t.cls, t.reason) for k, t in truth.items()}
    groups = _groups(result, scenario)
    expected = group_truth(truth)
    assert set(groups) == set(expected)
    for key, entry in groups.items():
        want = expected[key]
        assert (entry["ranks_present"], entry["deciding_rank"], entry["class"]) == (
            want["ranks"], want["deciding_rank"], want["class"]), key
    coverage = coverage_truth(truth)
    assert result["coverage"]["time_share"] == pytest.approx(coverage[None])
    assert {r["rank"]: r["time_share"] for r in result["coverage"]["per_rank"]} == pytest.approx(
        {r: v for r, v in coverage.items() if r is not None})
    assert result["summary"]["diagnosis"] == ("partial" if min(coverage.values()) < 0.9 else "complete")


def test_odd_rank_extra_and_missing_sk_with_two_refused_layers_matches_the_truth() -> None:
    scenario = odd_rank_scenario()
    result = run(scenario)
    check_against_truth(result, scenario)
    groups = _groups(result, scenario)
    ranks = result["ranks"]
    assert ranks["reference_rank"] == 0  # ranks 0 and 1 share the most common sequence
    extra = groups[("X.expert", ("baseline", "candidate"))]
    assert (extra["correspondence"], extra["ranks_present"], extra["missing_ranks"]) == ("some_ranks", [2], [0, 1, 3])
    missing = groups[("L6.moe", ("baseline", "candidate"))]
    assert (missing["correspondence"], missing["missing_ranks"], missing["class"]) == ("some_ranks", [3], "significantly_slower")
    assert ranks["correspondence"] == {"all_ranks": len(groups) - 2, "some_ranks": 2, "ambiguous": 0}
    assert groups[("L7.moe", ("baseline", "candidate"))]["deciding_rank"] == 2  # the odd rank's own layer 7
    assert groups[("L4.attn", ("baseline", "candidate"))]["deciding_rank"] == 1
    statuses = {s["cross_rank_status"] for s in result["sks"] if s["rank"] == 2}
    assert statuses == {"paired", "only_some_ranks"}
    # re-fused layers: one-sided on every rank, each its own cross-rank SK with all four ranks
    assert groups[("L2.moe", ("baseline",))]["ranks_present"] == [0, 1, 2, 3]
    assert groups[("L5.add", ("candidate",))]["class"] == "insufficient_evidence"
    # tokens in the reference rank's graph order (layer 1, 4, 6, 7), then child position
    repair = result["repair"]
    assert repair["proposed"] and repair["tokens"] == ["GroupedMatmul", "MatMul", "Gate", "Add"]
    assert repair["list"] == [f"static_kernel_{op}_.*" for op in repair["tokens"]]
    assert result["summary"]["diagnosis"] == "complete" and not repair["partial"]
    assert 0.9 < result["coverage"]["time_share"] < 0.95  # the re-fused layers' SKs are not compared
    assert [c["uid"] for c in result["children"]] == result["summary"]["deciding_slower_uids"]


def test_the_odd_rank_never_becomes_the_reference() -> None:
    scenario = odd_rank_scenario(odd=0, missing_on=-1, ranks=3)
    result = run(scenario)
    check_against_truth(result, scenario)
    assert result["ranks"]["reference_rank"] == 1
    extra = _groups(result, scenario)[("X.expert", ("baseline", "candidate"))]
    assert extra["ranks_present"] == [0] and extra["cross_rank_sk"] == 1  # right after the embed SK it follows


def test_adjacent_look_alike_makes_the_correspondence_ambiguous_per_sk() -> None:
    layout = {}
    for r in range(3):
        extra = {"L3.moe": Sk("X.expert", "moe")} if r == 1 else None
        graph = decode_graph(6, extra_after=extra)
        layout[r] = {"baseline": [("model_1_0", graph)], "candidate": [(f"model_7_{r}", graph)]}
    scenario = Scenario(layout, {(r, "L1.moe"): "Gate" for r in range(3)})
    result = run(scenario)
    slots = named_slots(result, scenario)
    truth = slot_truth(scenario)
    assert {k: s["class"] for k, s in slots.items()} == {k: t.cls for k, t in truth.items()}
    # rank 1: L3.moe, X.expert — which of the two is the others' layer-3 moe, structure alone cannot tell
    ambiguous = sorted(k for k, s in slots.items() if s["cross_rank_status"] == "ambiguous")
    assert ambiguous == [(1, "L3.moe"), (1, "X.expert")]
    by_uid = {s["uid"]: k for k, s in slots.items()}
    entries = {tuple(sorted(by_uid[r["uid"]] for r in e["per_rank"])): e for e in result["ranks"]["sks"]}
    ref = entries[((0, "L3.moe"), (2, "L3.moe"))]
    assert (ref["correspondence"], ref["ambiguous_ranks"], ref["missing_ranks"]) == ("ambiguous", [1], [1])
    for key in ambiguous:
        assert entries[(key,)]["correspondence"] == "ambiguous" and entries[(key,)]["ambiguous_ranks"] == [1]
    assert result["ranks"]["correspondence"]["ambiguous"] == 3
    en = render(result, "en")
    assert "### SKs not on every rank, or with an ambiguous cross-rank correspondence" in en
    assert "| ambiguous | 0, 2 | 1 | 1 |" in en


def test_reference_rank_is_the_most_common_sequence_ties_the_lowest() -> None:
    a, b = np.array([1, 2, 3]), np.array([1, 2, 2, 3])
    assert reference_rank({0: b, 1: a, 2: a}) == 1
    assert reference_rank({3: a, 1: b}) == 1
    assert reference_rank({5: a}) == 5


def test_summary_line_and_report_state_the_coverage() -> None:
    result = run(odd_rank_scenario())
    line = summary_line(result)
    share = result["coverage"]["time_share"]
    assert line.startswith("dcci-diff: 216 SKs ") and f"compared {share:.0%} of candidate SK time" in line
    assert "of SKs; per rank 0: 93%, 1: 93%, 2: 93%, 3: 92%)" in line
    assert "(explains 100% of the slowdown in the compared" in line
    en, zh = render(result, "en"), render(result, "zh")
    assert "## Coverage (candidate SK time and SK count compared in aligned pairs)" in en and "比较覆盖率" in zh
    assert "- diagnosis: complete" in en
    assert "| overall | 208 | 192 | 92% |" in en
