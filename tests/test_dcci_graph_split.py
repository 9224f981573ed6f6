"""Graph dumps that split or merge between the sides (issue 25), and a dump that pairs with nothing.

The candidate compiles the decode graph as two SK models (``model_7_r`` runs the embed and the first half
of the layers, ``model_8_r`` the rest and the head), where the baseline had one — and the other way round.
The two dumps of one side are paired with the one of the other and aligned as one sequence across their
boundary: every SK is compared, and a child that truly regressed in the second dump on one rank only is in
the repair. A dump that shares nothing is reported with its SK count and time share, and under 90 % of
candidate SK time compared the diagnosis is partial.
"""

from __future__ import annotations

from typing import Any

import pytest
from dcci_scenarios import Graphs, Scenario, Sk, coverage_truth, decode_graph, run, slot_truth
from test_dcci_cross_rank import check_against_truth

from sk_analytics.dcci.report import render, summary_line

LAYERS = 8
RANKS = 2
SLOW = {**{(r, "L1.attn"): "MatMul" for r in range(RANKS)}, (1, "L5.moe"): "GroupedMatmul"}


def _split(rank: int) -> Graphs:
    whole = decode_graph(LAYERS)
    cut = 1 + 2 * (LAYERS // 2)  # embed + the first half of the layers
    return [(f"model_7_{rank}", whole[:cut]), (f"model_8_{rank}", whole[cut:])]


def _scenario(split_side: str, extra: Graphs | None = None) -> Scenario:
    layout = {}
    for r in range(RANKS):
        one: Graphs = [("model_1_0", decode_graph(LAYERS))]
        two = _split(r)
        sides = {"baseline": one, "candidate": two} if split_side == "candidate" else {"baseline": two, "candidate": one}
        if extra:
            sides["candidate"] = sides["candidate"] + extra
        layout[r] = sides
    return Scenario(layout, dict(SLOW))


def _pairs(result: dict[str, Any]) -> list[tuple[int, str, list[str] | None, list[str] | None]]:
    return [(p["rank"], p["correspondence"], p["baseline"] and p["baseline"]["model_dirs"],
             p["candidate"] and p["candidate"]["model_dirs"]) for p in result["alignment"]["graph_pairs"]]


@pytest.mark.parametrize("split_side", ["candidate", "baseline"])
def test_split_or_merged_graph_is_aligned_across_the_boundary(split_side: str) -> None:
    scenario = _scenario(split_side)
    result = run(scenario)
    check_against_truth(result, scenario)
    kind = "split" if split_side == "candidate" else "merge"
    two = lambda r: [f"model_7_{r}", f"model_8_{r}"]  # noqa: E731 - in execution order
    assert _pairs(result) == [(r, kind, *((["model_1_0"], two(r)) if kind == "split" else (two(r), ["model_1_0"])))
                              for r in range(RANKS)]
    assert all(s["align_status"] == "aligned" for s in result["sks"])
    assert not any(p["ambiguous_pairing"] for p in result["alignment"]["graph_pairs"])
    cov = result["coverage"]
    assert (cov["time_share"], cov["sk_share"], cov["diagnosis"], cov["unpaired_graphs"]) == (1.0, 1.0, "complete", [])
    repair = result["repair"]
    assert repair["proposed"] and repair["tokens"] == ["MatMul", "GroupedMatmul"] and not repair["partial"]
    slower = {(s["rank"], s["alignment"]["candidate"]["model_dir"]) for s in result["sks"] if s["class"] == "significantly_slower"}
    second = "model_8_1" if kind == "split" else "model_1_0"
    assert (1, second) in slower  # the regressed child of the second dump, on rank 1 only
    en = render(result, "en")
    label = f"200/model_7_0+model_8_0 ({kind})" if kind == "split" else f"100/model_7_0+model_8_0 ({kind})"
    assert label in en


def test_unpairable_dump_is_reported_and_the_diagnosis_is_partial() -> None:
    sampler = [Sk(f"S{i}", "sampler") for i in range(4)]
    scenario = _scenario("candidate", extra=[("model_9_0", sampler)])
    result = run(scenario)
    check_against_truth(result, scenario)
    truth = slot_truth(scenario)
    cov = result["coverage"]
    assert cov["diagnosis"] == "partial" and cov["time_share"] < 0.9
    unpaired = cov["unpaired_graphs"]
    assert [(g["rank"], g["side"], g["model_dir"], g["sks"]) for g in unpaired] == [(r, "candidate", "model_9_0", 4)
                                                                                    for r in range(RANKS)]
    for g in unpaired:
        rank_time = sum(t.cand_time_us for t in truth.values() if t.rank == g["rank"] and "candidate" in t.sides)
        sampler_time = sum(truth[(g["rank"], s.name)].cand_time_us for s in sampler)
        assert g["time_share"] == pytest.approx(sampler_time / rank_time)
        assert g["time_share"] == pytest.approx(1 - coverage_truth(truth)[g["rank"]])
    repair = result["repair"]
    # the repair still names the regressed children, but never without saying part of the graph was not compared
    assert repair["proposed"] and repair["partial"] and repair["tokens"] == ["MatMul", "GroupedMatmul"]
    assert repair["reason_zh"].startswith("部分诊断：只比较了候选 SK 时间的")
    line = summary_line(result)
    assert line.startswith(f"dcci-diff: PARTIAL diagnosis: only {cov['time_share']:.0%} of the candidate's SK time")
    assert "(2 graph dump(s) unpaired)" in line
    en = render(result, "en")
    summary = en[en.index("## Summary"):]
    assert summary.splitlines()[2].startswith("- **⚠ PARTIAL diagnosis: only")
    options = en[en.index("## Option settings"):]
    assert options.splitlines()[2].startswith("- **⚠ PARTIAL diagnosis: only") and '"dcci_before_kernel_start"' in options
    assert "### Graph dumps that could not be paired" in en
    assert "| 0 | candidate | 200/model_9_0 | 4 |" in en
    assert "- diagnosis: partial (part of the graph not compared)" in en


def test_leftover_graph_sharing_under_half_stays_unpaired() -> None:
    # a draft graph holding one attention SK of the decode structures and three of its own: not a split
    draft = [Sk("D.attn", "attn"), *(Sk(f"D.s{i}", "sampler") for i in range(3))]
    scenario = _scenario("candidate", extra=[("model_9_0", draft)])
    scenario.ranks = {r: {"baseline": [("model_1_0", decode_graph(LAYERS))],
                          "candidate": [(f"model_7_{r}", decode_graph(LAYERS)), ("model_9_0", draft)]} for r in range(RANKS)}
    result = run(scenario)
    check_against_truth(result, scenario)
    assert [p[1] for p in _pairs(result)] == ["one_to_one", "unpaired"] * RANKS
    assert [g["sks"] for g in result["coverage"]["unpaired_graphs"]] == [4] * RANKS


def _counts(graphs: dict[tuple[str, str], dict[str, int]]) -> Any:
    import polars as pl

    return pl.DataFrame([{"side": side, "process": "p" if side == "baseline" else "q", "model_dir": g, "structure_key": k, "n": n}
                         for (side, g), keys in graphs.items() for k, n in keys.items()])


def test_leftover_fitting_two_groups_equally_stays_unpaired_and_first_launch_orders_a_merge() -> None:
    from sk_analytics.dcci.pairing import RankPair, pair_graphs

    rank = RankPair(0, "p", "q", (0, 0))
    counts = _counts({("baseline", "b1"): {"X": 2}, ("baseline", "b2"): {"X": 2}, ("baseline", "b3"): {"X": 1},
                      ("candidate", "c1"): {"X": 3}, ("candidate", "c2"): {"X": 3}})
    pairs = pair_graphs(rank, counts)
    got = [(p.correspondence, [g[1] for g in p.baseline], [g[1] for g in p.candidate], p.ambiguous) for p in pairs]
    assert got == [("one_to_one", ["b1"], ["c1"], True), ("one_to_one", ["b2"], ["c2"], False), ("unpaired", ["b3"], [], False)]
    # two baseline dumps exactly as similar to the one candidate dump: a merge, not an ambiguity; execution order wins
    counts = _counts({("baseline", "b1"): {"X": 2}, ("baseline", "b2"): {"Y": 2}, ("candidate", "c1"): {"X": 2, "Y": 2}})
    first = {("baseline", "p", "b1"): 50, ("baseline", "p", "b2"): 10, ("candidate", "q", "c1"): 0}
    [pair] = pair_graphs(rank, counts, first)
    assert (pair.correspondence, [g[1] for g in pair.baseline], pair.ambiguous, pair.similarity) == ("merge", ["b2", "b1"], False, 4)
    assert pair.to_json()["baseline"] == {"process": "p", "model_dir": "b2+b1", "model_dirs": ["b2", "b1"]}
