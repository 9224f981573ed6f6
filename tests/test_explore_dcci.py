"""The notebook API's DCCI frames against a hand-made dcci-diff JSON (sk_analytics.explore.dcci)."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from sk_analytics import explore as ex
from sk_analytics.errors import InputError


def _stats(count: int, p50: float, p90: float, mad: float = 0.5) -> dict[str, Any]:
    return {"count": count, "p50_us": p50, "p90_us": p90, "mad_us": mad, "min_us": p50 - 1, "max_us": p90 + 1}


def _sk(uid: int, occ: int, cls: str, base: tuple[float, float], cand: tuple[float, float], status: str = "aligned") -> dict[str, Any]:
    (b50, b90), (c50, c90) = base, cand
    side = {"process": "10", "model_dir": "model_1_1", "graph_position": uid, "sk_id": uid + 100, "occurrence_index": occ}
    alignment = {"rank": "0", "graph_pair": 0, "paired_by": None if status != "aligned" else "anchor" if occ == 0 else "run",
                 "run": None, "anchor_before": None, "anchor_after": None, "ambiguous_pairing": False,
                 "baseline": side, "candidate": None if status == "only_in_baseline" else side}
    return {"uid": uid, "rank": "0", "cross_rank_sk": uid, "deciding_rank": "0", "deciding": True, "alignment": alignment,
            "structure_hash": "h1", "occurrence_index": occ, "structure_key": "scope=moe|first=A|last=B|ops=A,B",
            "scope_name": "moe", "boundary_first": "A", "boundary_last": "B", "child_ops": ["A", "B"], "align_status": status,
            "class": cls, "reason": None, "noise_band_pct": 3.0, "baseline": _stats(8, b50, b90), "candidate": _stats(8, c50, c90),
            "delta_p50_us": c50 - b50, "delta_p50_pct": (c50 - b50) / b50 * 100, "delta_p90_us": c90 - b90,
            "mwu_p": 0.001, "mwu_q": 0.002}


def _child(position: int, op: str, significant: bool, base: float, cand: float) -> dict[str, Any]:
    side = {"baseline": _stats(8, base, base + 1), "candidate": _stats(8, cand, cand + 1), "delta_p50_us": cand - base,
            "delta_p50_pct": (cand - base) / base * 100, "class": "significantly_slower" if significant else "neutral"}
    return {"position": position, "child_index": position + 1, "canonical_op": op, "func_name": f"static_kernel_{op}_x",
            "significant": significant, "wall": side, "max_lane": side}


DIFF: dict[str, Any] = {
    "sks": [
        _sk(0, 0, "significantly_slower", (100.0, 110.0), (150.0, 165.0)),   # +50 % P50, +50 % P90
        _sk(1, 1, "significantly_slower", (100.0, 120.0), (140.0, 150.0)),   # +40 % P50, +25 % P90
        _sk(2, 0, "insufficient_evidence", (50.0, 55.0), (50.0, 55.0), status="only_in_baseline"),
    ],
    "unmapped_launches": [{"side": "candidate", "process": "12", "device_id": 0, "model_id": "3_1", "sk_id": 7,
                           "model_dir": None, "map_status": "ambiguous_scope_id"}],
    "children": [
        {"uid": 0, "attribution": "complete", "blockers": [], "rows": [_child(0, "A", False, 20.0, 20.2), _child(1, "B", True, 40.0, 80.0)]},
        {"uid": 1, "attribution": "blocked", "blockers": ["buffer_full:candidate"], "rows": []},
    ],
    "repair": {"proposed": False, "reason": "pattern_not_verified", "list": ["static_kernel_B_.*"], "patterns": [
        {"token": "B", "status": "verified", "pattern": "static_kernel_B_.*",
         "patterns": [{"pattern": "static_kernel_B_.*", "matched_symbols": ["static_kernel_B_x"]}], "intended_symbols": ["static_kernel_B_x"],
         "matched_symbols": ["static_kernel_B_x"], "rejected_candidates": []},
        {"token": "C", "status": "over_match", "pattern": None, "patterns": [], "intended_symbols": ["ai_kernel_C_1"], "matched_symbols": [],
         "rejected_candidates": [{"pattern": ".*C_.*", "over_matched_symbols": ["x_C_2"], "missed_symbols": []}]},
    ]},
}


def test_dcci_sks_deltas_and_classes() -> None:
    sks = ex.dcci_sks(DIFF)
    assert sks.select("uid", "occurrence_index", "class", "base_p50_us", "cand_p50_us", "base_count", "cand_count").rows() == [
        (0, 0, "significantly_slower", 100.0, 150.0, 8, 8), (1, 1, "significantly_slower", 100.0, 140.0, 8, 8),
        (2, 0, "insufficient_evidence", 50.0, 50.0, 8, 8)]
    assert sks["delta_p50_pct"].to_list() == pytest.approx([50.0, 40.0, 0.0])
    assert sks["delta_p90_pct"].to_list() == pytest.approx([50.0, 25.0, 0.0])  # delta_p90_us / base P90
    assert sks["child_ops"].to_list()[0] == ["A", "B"] and sks.columns[-2:] == ["mwu_p", "mwu_q"]
    assert sks.select("rank", "cross_rank_sk", "deciding_rank", "deciding").row(0) == (0, 0, 0, True)
    assert sks.schema["rank"] == sks.schema["deciding_rank"] == pl.Int32  # as in the Parquet tables


def test_dcci_structures_is_the_report_grouping() -> None:
    groups = ex.dcci_structures(DIFF)
    slower = groups.filter(pl.col("class") == "significantly_slower").row(0, named=True)
    assert (slower["occurrences"], slower["occurrence_indices"], slower["median_delta_p50_pct"]) == (2, "0–1", pytest.approx(45.0))
    assert (slower["min_delta_p50_pct"], slower["max_delta_p50_pct"]) == (pytest.approx(40.0), pytest.approx(50.0))
    assert slower["short_name"] == "moe · A→B" and groups.height == 2


def test_dcci_alignment_and_unmapped() -> None:
    align = ex.dcci_alignment(DIFF)
    assert align.select("uid", "occurrence_index", "align_status").rows() == [(0, 0, "aligned"), (1, 1, "aligned"), (2, 0, "only_in_baseline")]
    assert align["structure_key"].unique().to_list() == ["scope=moe|first=A|last=B|ops=A,B"]
    assert align.select("rank", "graph_pair", "paired_by", "base_graph_position", "cand_graph_position").rows() == [
        (0, 0, "anchor", 0, 0), (0, 0, "run", 1, 1), (0, 0, None, 2, None)]  # absent on one side: null there


def test_a_parent_null_in_every_record_is_data_not_a_missing_column() -> None:
    one_sided = {"sks": [DIFF["sks"][2]]}  # only_in_baseline: alignment.candidate is null
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ex.dcci_alignment(one_sided)["cand_graph_position"].to_list() == [None]
    unmapped = ex.dcci_unmapped(DIFF)
    assert unmapped.select("side", "process", "device_id", "model_id", "sk_id", "map_status").rows() == [
        ("candidate", "12", "0", "3_1", "7", "ambiguous_scope_id")]


def test_dcci_children_rows_and_blocked_sk() -> None:
    children = ex.dcci_children(DIFF)
    assert children.select("uid", "attribution", "position", "canonical_op", "significant").rows() == [
        (0, "complete", 0, "A", False), (0, "complete", 1, "B", True), (1, "blocked", None, None, None)]
    assert children.filter(significant=True).select("wall_base_p50_us", "wall_cand_p50_us", "wall_delta_p50_us",
                                                    "wall_delta_p50_pct", "lane_class").row(0) == (40.0, 80.0, 40.0, 100.0, "significantly_slower")
    assert children["blockers"].to_list()[2] == ["buffer_full:candidate"]


def test_dcci_repair_patterns_and_matched_symbols() -> None:
    repair = ex.dcci_repair(DIFF)
    assert repair.select("token", "status", "pattern", "in_list").rows() == [
        ("B", "verified", "static_kernel_B_.*", True), ("C", "over_match", None, False)]
    assert repair["matched_symbols"].to_list() == [["static_kernel_B_x"], []]
    assert repair["rejected_candidates"].to_list() == [[], [".*C_.*"]]
    assert repair["patterns"].to_list() == [["static_kernel_B_.*"], []]
    two = {"repair": {"list": ["a_.*", "b_.*"], "patterns": [{"token": "A", "status": "verified", "pattern": "a_.*",
           "patterns": [{"pattern": "a_.*"}, {"pattern": "b_.*"}], "intended_symbols": [], "matched_symbols": [], "rejected_candidates": []}]}}
    assert ex.dcci_repair(two).select("patterns", "in_list").rows() == [(["a_.*", "b_.*"], True)]  # a pattern set per token


def test_a_field_missing_from_the_json_warns_and_gives_a_null_column() -> None:
    old = {"sks": [{k: v for k, v in sk.items() if k != "mwu_q"} for sk in DIFF["sks"]]}
    with pytest.warns(ex.MissingColumnWarning, match="dcci-diff sks: no record has mwu_q"):
        sks = ex.dcci_sks(old)
    assert sks["mwu_q"].to_list() == [None, None, None] and sks["mwu_p"].to_list() == [0.001] * 3


def test_complete_json_and_empty_diff_raise_no_warning() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for f in (ex.dcci_sks, ex.dcci_structures, ex.dcci_alignment, ex.dcci_unmapped, ex.dcci_children, ex.dcci_repair):
            assert f(DIFF).height > 0
            assert f({}).height == 0  # no diagnosis: empty frames with the same columns
            assert f({}).columns == f(DIFF).columns


def test_load_dcci_diff_reads_strict_json(tmp_path: Path) -> None:
    good = tmp_path / "dcci-diff.json"
    good.write_text(json.dumps(DIFF), encoding="utf-8")
    assert ex.dcci_sks(ex.load_dcci_diff(good)).height == 3
    bad = tmp_path / "cut.json"
    bad.write_text(json.dumps(DIFF)[:200], encoding="utf-8")
    with pytest.raises(InputError, match="cut.json"):
        ex.load_dcci_diff(bad)
