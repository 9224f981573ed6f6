"""dcci-diff on generated pairs that a bare occurrence counter gets wrong (formats.md §4, graph context).

* one expert SK of a middle layer fused without one child on the candidate side;
* the same structures in two graphs of one process, the draft graph run twice per step;
* two ranks, only one of them regressed.

Each asserts the exact classes, the partners (baseline scope id -> candidate scope id) and the repair list.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from dcci_frames import profile
from test_dcci_analysis import DISABLE_ALL, _markers

from sk_analytics.dcci.analysis import SideInput, analyze

ATTN = ("attn", ["RmsNorm", "MatMul"])
MOE = ("moe", ["Gate", "GroupedMatmul", "Add"])
LAYERS = 6
CAND_OFFSET = 100  # candidate scope ids are renumbered


def _layer_sks(offset: int, refused_layer: int | None = None, first: int = 1) -> list[tuple[int, str, list[str]]]:
    sks: list[tuple[int, str, list[str]]] = [(first + offset, "embed", ["Gather"])]
    for layer in range(LAYERS):
        sks.append((first + 1 + 2 * layer + offset, *ATTN))
        ops = MOE[1][:-1] if layer == refused_layer else MOE[1]
        sks.append((first + 2 + 2 * layer + offset, MOE[0], ops))
    sks.append((first + 1 + 2 * LAYERS + offset, "head", ["LmHead"]))
    return sks


def _ns(slow: set[tuple[int, int]] = frozenset()):  # type: ignore[assignment]
    """Every SK has its own duration (a mispairing shows as a large delta); +3 us on (sk index, position) in ``slow``."""
    def fn(k: int, pos: int, occ: int) -> int:
        return 10_000 + 1_500 * k + 700 * pos + (occ % 3) * 40 + (3_000 if (k, pos) in slow else 0)
    return fn


def _side(parts: list[dict[str, pl.DataFrame]], name: str) -> SideInput:
    return SideInput(
        root=Path(name),
        events=pl.concat([p["events"] for p in parts]).lazy(),
        structure=pl.concat([p["structure"] for p in parts]),
        markers=_markers([]),
        symbols=pl.concat([p["symbols"] for p in parts]),
    )


def _on_device(parts: dict[str, pl.DataFrame], device: int) -> dict[str, pl.DataFrame]:
    return {**parts, "events": parts["events"].with_columns(pl.lit(device, dtype=parts["events"]["device_id"].dtype).alias("device_id"))}


def _run(base: list[dict[str, pl.DataFrame]], cand: list[dict[str, pl.DataFrame]]) -> dict[str, Any]:
    return analyze(_side(base, "base"), _side(cand, "cand"), warmup=2, disable_all_config=DISABLE_ALL)


def _partners(result: dict[str, Any]) -> dict[tuple[Any, ...], Any]:
    """(rank, baseline process, baseline scope id) -> (candidate scope id, class); one-sided SKs keyed by side."""
    out: dict[tuple[Any, ...], Any] = {}
    for sk in result["sks"]:
        a = sk["alignment"]
        base, cand = a["baseline"], a["candidate"]
        if base and cand:
            out[(a["rank"], base["model_dir"], base["sk_id"])] = (cand["model_dir"], cand["sk_id"], sk["class"])
        else:
            where = base or cand
            out[(a["rank"], "only", where["model_dir"], where["sk_id"])] = sk["reason"]
    return out


def test_refused_sk_mid_layers_is_one_sided_and_nothing_shifts() -> None:
    refused = 3
    moe_k = 2 + 2 * 4  # sk index of layer 4's moe in the list
    base = profile(process="100", model_id="1_0", sks=_layer_sks(0), occurrences=10, child_ns=_ns())
    cand = profile(process="200", model_id="7_2", sks=_layer_sks(CAND_OFFSET, refused), occurrences=10,
                   child_ns=_ns({(moe_k, 1)}), variant=1)
    result = _run([base], [cand])
    got = _partners(result)
    expected: dict[tuple[Any, ...], Any] = {}
    for k, (scope, _name, _ops) in enumerate(_layer_sks(0)):
        if k == 2 + 2 * refused:
            continue
        cls = "significantly_slower" if k == moe_k else "neutral"
        expected[(0, "model_1_0", scope)] = ("model_7_2", scope + CAND_OFFSET, cls)
    refused_scope = 2 + 2 * refused + 1
    expected[(0, "only", "model_1_0", refused_scope)] = "only_in_baseline"
    expected[(0, "only", "model_7_2", refused_scope + CAND_OFFSET)] = "only_in_candidate"
    assert got == expected
    assert result["summary"]["classes"] == {"significantly_slower": 1, "significantly_faster": 0,
                                            "neutral": 2 * LAYERS + 2 - 2, "insufficient_evidence": 2}
    assert result["repair"]["proposed"] and result["repair"]["list"] == ["static_kernel_GroupedMatmul_.*"]
    [pair] = result["alignment"]["graph_pairs"]
    assert pair["anchors"] == 2 and pair["only_in_baseline"] == 1 and pair["only_in_candidate"] == 1
    assert pair["ambiguous"] == {"baseline": 0, "candidate": 0}
    slow = next(s for s in result["sks"] if s["class"] == "significantly_slower")
    assert slow["alignment"]["paired_by"] == "run"
    # between the embed and the head anchors (graph positions 0 and 13 on both sides)
    assert slow["alignment"]["anchor_before"] == {"baseline_position": 0, "candidate_position": 0}
    assert slow["alignment"]["anchor_after"] == {"baseline_position": 13, "candidate_position": 13}


def test_same_structures_in_two_graphs_of_one_process_draft_run_twice_per_step() -> None:
    draft_sks = lambda off: [(50 + off, *ATTN), (51 + off, *MOE)]  # noqa: E731 - structures of the main graph too
    base = [
        profile(process="100", model_id="1_0", sks=_layer_sks(0), occurrences=10, child_ns=_ns()),
        profile(process="100", model_id="2_0", sks=draft_sks(0), occurrences=20, child_ns=_ns()),
    ]
    cand = [
        profile(process="200", model_id="7_2", sks=_layer_sks(CAND_OFFSET), occurrences=10, child_ns=_ns(), variant=1),
        profile(process="200", model_id="8_2", sks=draft_sks(CAND_OFFSET), occurrences=20, child_ns=_ns({(1, 2)}),
                variant=1),
    ]
    result = _run(base, cand)
    got = _partners(result)
    expected = {(0, "model_1_0", s): ("model_7_2", s + CAND_OFFSET, "neutral") for s, _n, _o in _layer_sks(0)}
    expected[(0, "model_2_0", 50)] = ("model_8_2", 150, "neutral")
    expected[(0, "model_2_0", 51)] = ("model_8_2", 151, "significantly_slower")
    assert got == expected
    draft = next(s for s in result["sks"] if s["class"] == "significantly_slower")
    assert draft["baseline"]["count"] == draft["candidate"]["count"] == 18  # twice per step, after 2 dropped
    pairs = {(p["baseline"]["model_dir"], p["candidate"]["model_dir"]): p for p in result["alignment"]["graph_pairs"]}
    assert set(pairs) == {("model_1_0", "model_7_2"), ("model_2_0", "model_8_2")}
    assert not any(p["ambiguous_pairing"] for p in pairs.values())
    assert result["repair"]["list"] == ["static_kernel_Add_.*"]
    assert result["unmapped_launches"] == []


def test_rank_specific_regression_is_found_on_that_rank_only() -> None:
    moe_k = 2 + 2 * 2
    base = [_on_device(profile(process=p, model_id="1_0", sks=_layer_sks(0), occurrences=10, child_ns=_ns()), d)
            for p, d in (("100", 0), ("101", 1))]
    cand = [
        _on_device(profile(process="200", model_id="7_2", sks=_layer_sks(CAND_OFFSET), occurrences=10, child_ns=_ns(),
                           variant=1), 0),
        _on_device(profile(process="201", model_id="7_3", sks=_layer_sks(CAND_OFFSET), occurrences=10,
                           child_ns=_ns({(moe_k, 0)}), variant=1), 1),
    ]
    result = _run(base, cand)
    got = _partners(result)
    expected = {}
    for rank, model in ((0, "model_7_2"), (1, "model_7_3")):
        for k, (scope, _n, _o) in enumerate(_layer_sks(0)):
            cls = "significantly_slower" if (rank, k) == (1, moe_k) else "neutral"
            expected[(rank, "model_1_0", scope)] = (model, scope + CAND_OFFSET, cls)
    assert got == expected
    slow = [s for s in result["sks"] if s["class"] == "significantly_slower"]
    assert [(s["rank"], s["alignment"]["baseline"]["process"], s["alignment"]["candidate"]["process"]) for s in slow] == [
        (1, "101", "201")]
    assert result["repair"]["list"] == ["static_kernel_Gate_.*"]


def test_report_shows_the_alignment_in_both_languages() -> None:
    from sk_analytics.dcci.report import render

    base = profile(process="100", model_id="1_0", sks=_layer_sks(0), occurrences=10, child_ns=_ns())
    cand = profile(process="200", model_id="7_2", sks=_layer_sks(CAND_OFFSET, 3), occurrences=10, child_ns=_ns(), variant=1)
    result = _run([base], [cand])
    zh, en = render(result, "zh"), render(result, "en")
    assert "## 图上下文对齐" in zh and "## Graph-context alignment" in en
    # the graph pair row: 2 anchors, 1 paired by anchor pair... counts of one-sided SKs on each side
    assert "| 0 | 100/model_1_0 | 200/model_7_2 | 13 | 2 | 2 | 11 | 1 | 1 | 0/0 |  |" in en
    assert "| model_1_0:8 [9] | — | only_in_baseline | 0/0 → 13/13 |" in en
    assert "| — | model_7_2:8 [109] | only_in_candidate | 0/0 → 13/13 |" in en
    assert "| model_1_0:0 [1] | model_7_2:0 [101] | anchor |  |" in en


def test_token_with_two_prefix_families_and_decoys_gets_a_pattern_list() -> None:
    from dcci_frames import HASHES, symbols

    from sk_analytics.dcci.report import render

    moe = ("moe", ["Gate", "MatMulV2", "Add"])
    sks = lambda off: [(1 + off, "embed", ["Gather"]), (2 + off, *moe), (3 + off, "bmm", ["BatchMatMulV2"]),  # noqa: E731
                       (4 + off, "head", ["LmHead"])]
    base = profile(process="100", model_id="1_0", sks=sks(0), occurrences=10, child_ns=_ns())
    cand = profile(process="200", model_id="7_2", sks=sks(CAND_OFFSET), occurrences=10, child_ns=_ns({(1, 1)}), variant=1)
    extra = symbols([
        (f"MatMulV2_{HASHES[2]}_mix_aiv", "MatMulV2"),  # the op's second prefix family
        (f"BatchMatMulV2_{HASHES[2]}_mix_aiv", "BatchMatMulV2"),  # decoys
        ("sk_102_moe_start_Gate_end_MatMulV2", "sk_102_moe_start_Gate_end_MatMulV2"),
        (f"static_kernel_MatMulV2Ex_{HASHES[0]}_1_d0", "MatMulV2Ex"),
    ]).with_columns(process=pl.lit("200"))
    cand["symbols"] = pl.concat([cand["symbols"], extra])
    result = _run([base], [cand])
    got = _partners(result)
    assert got == {(0, "model_1_0", s): ("model_7_2", s + CAND_OFFSET, "significantly_slower" if s == 2 else "neutral")
                   for s in (1, 2, 3, 4)}
    repair = result["repair"]
    assert repair["proposed"] and repair["tokens"] == ["MatMulV2"]
    assert repair["list"] == ["MatMulV2_.*", "static_kernel_MatMulV2_.*"]
    [choice] = repair["patterns"]
    assert choice["patterns"] == [
        {"pattern": "MatMulV2_.*", "matched_symbols": [f"MatMulV2_{HASHES[2]}_mix_aiv"]},
        {"pattern": "static_kernel_MatMulV2_.*", "matched_symbols": [f"static_kernel_MatMulV2_{HASHES[1]}_2_d0"]},
    ]
    assert repair["config"]["super_kernel_optimize_options"]["dcci_before_kernel_start"] == repair["list"]
    en = render(result, "en")
    assert f"| MatMulV2 | MatMulV2_.* | verified | MatMulV2_{HASHES[2]}_mix_aiv |" in en
    assert f"| MatMulV2 | static_kernel_MatMulV2_.* | verified | static_kernel_MatMulV2_{HASHES[1]}_2_d0 |" in en


def test_draft_graph_slowdown_counts_twice_per_step() -> None:
    draft_sks = lambda off: [(50 + off, *ATTN), (51 + off, *MOE)]  # noqa: E731
    base = [profile(process="100", model_id="1_0", sks=_layer_sks(0), occurrences=10, child_ns=_ns()),
            profile(process="100", model_id="2_0", sks=draft_sks(0), occurrences=20, child_ns=_ns())]
    cand = [profile(process="200", model_id="7_2", sks=_layer_sks(CAND_OFFSET), occurrences=10, child_ns=_ns(), variant=1),
            profile(process="200", model_id="8_2", sks=draft_sks(CAND_OFFSET), occurrences=20, child_ns=_ns({(1, 2)}),
                    variant=1)]
    explained = _run(base, cand)["repair"]["explained"]
    assert explained["steps"] == 10
    assert [r["launches_per_step"] for r in explained["per_sk"]] == [2.0]
    assert explained["slowdown_us_per_step"] == pytest.approx(6.0)
    assert explained["explained_us_per_step"] == pytest.approx(6.0)
    assert (explained["sk_fraction"], explained["us_fraction"], explained["warning"]) == (1.0, pytest.approx(1.0), False)


def _two_ranks(slow0: set[tuple[int, int]], slow1: set[tuple[int, int]], extra1: int = 0) -> dict[str, Any]:
    base = [_on_device(profile(process=p, model_id="1_0", sks=_layer_sks(0), occurrences=10, child_ns=_ns()), d)
            for p, d in (("100", 0), ("101", 1))]
    slow_more = lambda k, pos, occ: _ns(slow1)(k, pos, occ) + (extra1 if (k, pos) in slow1 else 0)  # noqa: E731
    cand = [
        _on_device(profile(process="200", model_id="7_2", sks=_layer_sks(CAND_OFFSET), occurrences=10,
                           child_ns=_ns(slow0), variant=1), 0),
        _on_device(profile(process="201", model_id="7_3", sks=_layer_sks(CAND_OFFSET), occurrences=10,
                           child_ns=slow_more, variant=1), 1),
    ]
    return _run(base, cand)


def test_rank_specific_regression_names_the_deciding_rank_and_every_ranks_delta() -> None:
    moe_k = 2 + 2 * 2
    result = _two_ranks(set(), {(moe_k, 0)})
    assert result["ranks"]["ranks"] == [0, 1]
    [entry] = [e for e in result["ranks"]["sks"] if e["class"] == "significantly_slower"]
    assert entry["deciding_rank"] == 1
    deltas = {r["rank"]: (r["class"], r["delta_p50_us"]) for r in entry["per_rank"]}
    assert deltas[0][0] == "neutral" and abs(deltas[0][1]) < 0.5
    assert deltas[1][0] == "significantly_slower" and deltas[1][1] == pytest.approx(3.0)
    assert len(result["ranks"]["sks"]) == len(_layer_sks(0))  # one cross-rank SK per structure slot
    assert [c["uid"] for c in result["children"]] == [entry["deciding_uid"]]


def test_slower_on_both_ranks_the_worse_rank_decides_and_only_it_is_decomposed() -> None:
    moe_k = 2 + 2 * 2
    result = _two_ranks({(moe_k, 0)}, {(moe_k, 0)}, extra1=2_000)  # rank 1: +5 us, rank 0: +3 us
    slower = [s for s in result["sks"] if s["class"] == "significantly_slower"]
    assert sorted(s["rank"] for s in slower) == [0, 1]
    assert result["summary"]["significantly_slower_uids"] == sorted(s["uid"] for s in slower)
    [decider] = [s for s in slower if s["deciding"]]
    assert decider["rank"] == 1 and all(s["deciding_rank"] == 1 for s in slower)
    assert result["summary"]["deciding_slower_uids"] == [decider["uid"]]
    assert [c["uid"] for c in result["children"]] == [decider["uid"]]
    assert result["repair"]["list"] == ["static_kernel_Gate_.*"]
    [entry] = [e for e in result["ranks"]["sks"] if e["class"] == "significantly_slower"]
    assert {r["rank"]: round(r["delta_p50_us"], 1) for r in entry["per_rank"]} == {0: 3.0, 1: 5.0}


def test_report_lists_per_rank_deltas_and_the_deciding_rank() -> None:
    from sk_analytics.dcci.report import render

    result = _two_ranks({(6, 0)}, {(6, 0)}, extra1=2_000)
    en, zh = render(result, "en"), render(result, "zh")
    assert "## Several ranks: per-rank deltas of each SK and the deciding rank" in en and "决定 rank" in zh
    [row] = [line for line in en.splitlines() if "0: 3.000 (significantly slower); 1: 5.000 (significantly slower)" in line]
    assert "| 1 | significantly slower |" in row
