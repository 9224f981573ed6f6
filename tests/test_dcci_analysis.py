"""The pure DCCI diff on constructed profiles: alignment, classes, children, repair, unhappy paths."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import polars as pl
import pytest
from dcci_frames import profile, symbol_of, symbols

from sk_analytics.dcci.analysis import SideInput, analyze
from sk_analytics.schema import SK_MARKERS

DISABLE_ALL = {"super_kernel_optimize": True, "super_kernel_optimize_options": {"dcci_disable_on_kernel": [".*"]}}
REPEATED = ["RmsNorm", "MatMul", "Add"]
SKS_BASE = [(3, "layer", REPEATED), (4, "layer", REPEATED), (5, "mlp", ["Gelu", "MatMul"])]
SKS_CAND = [(11, "layer", REPEATED), (12, "layer", REPEATED), (13, "mlp", ["Gelu", "MatMul"])]  # renumbered


def _jitter(occ: int) -> int:
    return (occ % 3) * 40  # 0/40/80 ns: MAD 40 ns -> band stays 3 %


def base_ns(k: int, pos: int, occ: int) -> int:
    return 10_000 + 1_000 * pos + _jitter(occ)


def slow_second_matmul(k: int, pos: int, occ: int) -> int:
    # only the second occurrence of the repeated structure, only its MatMul (position 1): +3 us
    return base_ns(k, pos, occ) + (3_000 if (k, pos) == (1, 1) else 0)


def _markers(rows: list[dict[str, Any]]) -> pl.DataFrame:
    full = [dict(kind=r["kind"], device=r.get("device"), core=r.get("core"), option_name=None, value_text=None,
                 valid_range=None, default_text=None, text=r.get("text", ""), line=i + 1,
                 source_file="sk_meta/x/model/super_kernel.log") for i, r in enumerate(rows)]
    frame = SK_MARKERS.conform(pl.DataFrame(full, schema=SK_MARKERS.schema))
    return frame.with_columns(pl.Series("process", [r["process"] for r in rows], dtype=pl.Utf8))


def side(parts: dict[str, pl.DataFrame], *, markers: pl.DataFrame | None = None, truncated: frozenset[str] = frozenset(),
         symbol_frame: pl.DataFrame | None = None, name: str = "x") -> SideInput:
    return SideInput(
        root=Path(name),
        events=parts["events"].lazy(),
        structure=parts["structure"],
        markers=markers if markers is not None else _markers([]),
        symbols=symbol_frame if symbol_frame is not None else parts["symbols"],
        truncated_processes=truncated,
    )


def run(*, cand_fn=slow_second_matmul, n=10, warmup=2, base_kw=None, cand_kw=None, cand_parts=None,
        base_parts=None) -> dict[str, Any]:
    bp = base_parts or profile(process="100", model_id="1_0", sks=SKS_BASE, occurrences=n, child_ns=base_ns)
    cp = cand_parts or profile(process="200", model_id="7_2", sks=SKS_CAND, occurrences=n, child_ns=cand_fn, variant=1)
    return analyze(side(bp, **(base_kw or {})), side(cp, **(cand_kw or {})), warmup=warmup, disable_all_config=DISABLE_ALL)


def _by_occurrence(result: dict[str, Any]) -> dict[tuple[str, int], dict[str, Any]]:
    return {(s["scope_name"] + ":" + ",".join(s["child_ops"]), s["occurrence_index"]): s for s in result["sks"]}


def test_finds_exactly_the_regressed_sk_and_child_despite_renumbered_ids() -> None:
    result = run()
    sks = _by_occurrence(result)
    assert {k: s["class"] for k, s in sks.items()} == {
        ("layer:RmsNorm,MatMul,Add", 0): "neutral",
        ("layer:RmsNorm,MatMul,Add", 1): "significantly_slower",
        ("mlp:Gelu,MatMul", 0): "neutral",
    }
    slow = sks[("layer:RmsNorm,MatMul,Add", 1)]
    # SK wall = 100 + (10000+jit) + (11000+jit) + (12000+jit) + 100; 8 post-warm-up occurrences per side
    assert slow["baseline"]["count"] == slow["candidate"]["count"] == 8
    assert slow["delta_p50_us"] == pytest.approx(3.0)
    assert slow["noise_band_pct"] == 3.0
    assert result["summary"]["significantly_slower_uids"] == [slow["uid"]]
    [children] = result["children"]
    assert children["attribution"] == "complete" and children["blockers"] == []
    rows = {r["position"]: r for r in children["rows"]}
    assert [rows[p]["significant"] for p in (0, 1, 2)] == [False, True, False]
    assert rows[1]["canonical_op"] == "MatMul" and rows[1]["wall"]["delta_p50_us"] == pytest.approx(3.0)
    assert rows[1]["max_lane"]["class"] == "significantly_slower"
    repair = result["repair"]
    assert repair["proposed"] and repair["tokens"] == ["MatMul"]
    assert repair["list"] == ["static_kernel_MatMul_.*"]
    assert repair["patterns"][0]["matched_symbols"] == [symbol_of("MatMul", 1)]
    assert repair["changed_pointers"] == [
        "/super_kernel_optimize_options/dcci_after_kernel_end",
        "/super_kernel_optimize_options/dcci_before_kernel_start",
    ]
    assert repair["config"]["super_kernel_optimize_options"]["dcci_disable_on_kernel"] == [".*"]


def test_faster_and_neutral_and_advisory_columns() -> None:
    result = run(cand_fn=lambda k, p, o: base_ns(k, p, o) - (2_000 if k == 2 else 0))
    sks = _by_occurrence(result)
    assert sks[("mlp:Gelu,MatMul", 0)]["class"] == "significantly_faster"
    assert result["repair"]["proposed"] is False and result["repair"]["reason"] == "no_significantly_slower_sk"
    assert 0.0 <= sks[("mlp:Gelu,MatMul", 0)]["mwu_q"] <= 0.01
    assert result["summary"]["classes"] == {"significantly_slower": 0, "significantly_faster": 1, "neutral": 2,
                                            "insufficient_evidence": 0}


def test_too_few_post_warmup_occurrences_is_insufficient() -> None:
    result = run(n=4, warmup=2)
    assert {s["class"] for s in result["sks"]} == {"insufficient_evidence"}
    assert {s["reason"] for s in result["sks"]} == {"fewer_than_3_occurrences_baseline"}
    assert result["repair"]["proposed"] is False


def test_sk_without_a_launch_after_warmup_on_both_sides_is_classified_not_a_crash() -> None:
    """Every launch inside warm-up on both sides: nothing to compare, reported as insufficient evidence (it was KeyError: None)."""
    result = run(n=2, warmup=2)
    assert {(s["class"], s["reason"]) for s in result["sks"]} == {("insufficient_evidence", "no_occurrence_after_warmup")}
    assert all(s["class_zh"] == "证据不足" for s in result["sks"]) and result["repair"]["proposed"] is False


def test_ambiguous_scope_id_is_insufficient_not_guessed() -> None:
    cp = profile(process="200", model_id="7_2", sks=SKS_CAND, occurrences=10, child_ns=slow_second_matmul, variant=1)
    dup = cp["structure"].filter(pl.col("scope_id") == 12).with_columns(pl.lit(99).alias("line"), pl.lit("sk_dup").alias("sk_func_name"))
    cp["structure"] = pl.concat([cp["structure"], dup])
    result = run(cand_parts=cp)
    slow = _by_occurrence(result)[("layer:RmsNorm,MatMul,Add", 1)]
    assert (slow["class"], slow["reason"]) == ("insufficient_evidence", "ambiguous_mapping")
    assert any(u["map_status"] == "ambiguous_scope_id" and u["sk_id"] == 12 for u in result["unmapped_launches"])


def test_buffer_full_blocks_children_but_sk_class_stands() -> None:
    markers = _markers([dict(kind="buffer_full", device=0, core=1, process="200")])
    result = run(cand_kw={"markers": markers})
    assert _by_occurrence(result)[("layer:RmsNorm,MatMul,Add", 1)]["class"] == "significantly_slower"
    [children] = result["children"]
    assert children["attribution"] == "blocked" and children["blockers"] == ["buffer_full:candidate"]
    assert children["rows"] == []
    assert result["repair"]["proposed"] is False and result["repair"]["reason"] == "child_attribution_blocked"
    assert result["candidate"]["buffer_full"] == [{"process": "200", "device": 0, "core": 1}]


def test_truncated_sk_prof_and_missing_lanes_block_children() -> None:
    cp = profile(process="200", model_id="7_2", sks=SKS_CAND, occurrences=10, child_ns=slow_second_matmul, variant=1)
    result = run(cand_parts=cp, cand_kw={"truncated": frozenset({"200"})})
    assert result["children"][0]["blockers"] == ["truncated_sk_prof:candidate"]
    # drop core 1 of the last launch of scope 12 (a lane missing in one occurrence)
    ev = cp["events"]
    last = ev.filter(pl.col("sk_id") == 12)["ts_ns"].max()
    start = ev.filter((pl.col("sk_id") == 12) & pl.col("is_span") & (pl.col("ts_ns") <= last))["ts_ns"].max()
    cp["events"] = ev.filter(~((pl.col("sk_id") == 12) & (pl.col("core") == 1) & (pl.col("ts_ns") >= start)))
    result = run(cand_parts=cp)
    assert result["children"][0]["blockers"] == ["missing_lanes:candidate"]


def test_over_matching_pattern_blocks_the_repair() -> None:
    cp = profile(process="200", model_id="7_2", sks=SKS_CAND, occurrences=10, child_ns=slow_second_matmul, variant=1)
    # another op whose symbol starts like MatMul's and carries the same hash shape: no narrow pattern exists
    inv = pl.concat([cp["symbols"], symbols([(symbol_of("MatMul", 1) + "x", "MatMulX")]).with_columns(process=pl.lit("200"))])
    result = run(cand_parts=cp, cand_kw={"symbol_frame": inv})
    repair = result["repair"]
    assert repair["proposed"] is False and repair["reason"] == "pattern_not_verified"
    assert repair["failed_tokens"] == ["MatMul"]
    assert repair["patterns"][0]["status"] == "over_match"
    assert repair["config"] is None and repair["list"] == []


def test_structure_only_on_one_side_is_unaligned() -> None:
    cp = profile(process="200", model_id="7_2", sks=[*SKS_CAND, (14, "extra", ["Cast"])], occurrences=10,
                 child_ns=slow_second_matmul, variant=1)
    result = run(cand_parts=cp)
    extra = _by_occurrence(result)[("extra:Cast", 0)]
    assert (extra["class"], extra["reason"]) == ("insufficient_evidence", "only_in_candidate")
    assert extra["baseline"]["count"] == 0 and extra["candidate"]["count"] == 8


def test_launches_without_metadata_are_listed_and_nothing_is_guessed() -> None:
    cp = profile(process="200", model_id="7_2", sks=SKS_CAND, occurrences=10, child_ns=slow_second_matmul, variant=1)
    cp["structure"] = cp["structure"].clear()
    result = run(cand_parts=cp)
    assert {(s["class"], s["reason"]) for s in result["sks"]} == {("insufficient_evidence", "only_in_baseline")}
    assert sorted(u["sk_id"] for u in result["unmapped_launches"]) == [11, 12, 13]
    assert {u["map_status"] for u in result["unmapped_launches"]} == {"no_metadata"}
    assert result["repair"]["reason"] == "no_significantly_slower_sk"


def test_legacy_model_ri_maps_to_the_one_model_folder_of_its_rts_id() -> None:
    cp = profile(process="200", model_id="7_2", sks=SKS_CAND, occurrences=10, child_ns=slow_second_matmul, variant=1)
    cp["events"] = cp["events"].with_columns(pl.lit("7").alias("model_id"))  # legacy args.modelRI
    result = run(cand_parts=cp)
    assert result["summary"]["classes"]["significantly_slower"] == 1 and result["repair"]["proposed"]
    # a second folder of the same rtsModelId makes the legacy id ambiguous: unmapped, never guessed
    other = cp["structure"].with_columns(pl.lit("model_7_3").alias("model_dir"))
    cp["structure"] = pl.concat([cp["structure"], other])
    result = run(cand_parts=cp)
    assert {u["map_status"] for u in result["unmapped_launches"]} == {"no_metadata"}
    assert {s["class"] for s in result["sks"]} == {"insufficient_evidence"}


def test_repair_that_explains_under_half_of_the_slowdown_warns() -> None:
    from sk_analytics.dcci.report import render

    cp = profile(process="200", model_id="7_2", sks=SKS_CAND, occurrences=10, child_ns=slow_second_matmul, variant=1)
    # the mlp SK gets 5 us slower between its children: slower, but no child is
    cp["events"] = cp["events"].with_columns(
        pl.when(pl.col("is_span") & (pl.col("sk_id") == 13)).then(pl.col("dur_ns") + 5_000).otherwise(pl.col("dur_ns"))
        .alias("dur_ns"))
    result = run(cand_parts=cp)
    assert _by_occurrence(result)[("mlp:Gelu,MatMul", 0)]["class"] == "significantly_slower"
    repair = result["repair"]
    assert repair["proposed"] and repair["list"] == ["static_kernel_MatMul_.*"]
    explained = repair["explained"]
    assert (explained["slower_sks"], explained["explained_sks"], explained["sk_fraction"]) == (2, 1, 0.5)
    assert explained["slowdown_us_per_step"] == pytest.approx(8.0)
    assert explained["explained_us_per_step"] == pytest.approx(3.0)
    assert explained["us_fraction"] == pytest.approx(0.375) and explained["warning"] is True
    en, zh = render(result, "en"), render(result, "zh")
    assert explained["compared_time_share"] == 1.0 and explained["compared_sk_share"] == 1.0
    assert ("1 of 2 slower SKs have a significant child; 3.000 of 8.000 µs per step (explains 38% of the slowdown "
            "in the compared 100% of the candidate's SK time)") in en
    assert "**⚠ warning**: the repair's children explain only 1 of 2 slower SKs and 3.000 of 8.000 µs per step" in en
    assert "每步变慢 3.000/8.000 µs（解释 38%，仅就已比较的 100% 候选 SK 时间而言）" in zh and "不足一半" in zh


def test_explained_when_nothing_is_slower() -> None:
    result = run(cand_fn=base_ns)
    assert result["repair"]["explained"]["slower_sks"] == 0 and result["repair"]["explained"]["warning"] is False
