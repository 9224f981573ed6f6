"""Repair list: token union, narrow verified patterns, over-match refusal, config diff."""

from __future__ import annotations

import polars as pl
import pytest
from dcci_frames import symbols

from sk_analytics.dcci.pattern import matches
from sk_analytics.dcci.repair import (
    candidate_patterns,
    changed_pointers,
    choose_pattern,
    repair_config,
    symbol_inventory,
    union_tokens,
)
from sk_analytics.errors import InputError

H1 = "5f3c0a9e1b2d4c6f8a7e9d0c1b2a3f4e"
H2 = "0123456789abcdef0123456789abcdef"


def _inventory(pairs: list[tuple[str, str]]) -> pl.DataFrame:
    return symbol_inventory(symbols(pairs))


def test_union_is_stable_and_deduplicated() -> None:
    frame = pl.DataFrame({"canonical_op": ["MatMul", "RmsNorm", "MatMul", None, "Add", "RmsNorm"]})
    assert union_tokens(frame) == ["MatMul", "RmsNorm", "Add"]


def test_simple_pattern_matches_all_symbols_of_the_op_only() -> None:
    inv = _inventory(
        [
            (f"static_kernel_MatMul_{H1}_1_d0", "MatMul"),
            (f"static_kernel_MatMul_{H2}_7_d0", "MatMul"),
            (f"static_kernel_MatMulV2_{H1}_1_d0", "MatMulV2"),
            ("sk_3_none_start_MatMul_end_Add", "sk_3_none_start_MatMul_end_Add"),
        ]
    )
    choice = choose_pattern("MatMul", inv)
    assert choice.status == "verified"
    assert choice.pattern == "static_kernel_MatMul_.*"
    assert choice.matched_symbols == (f"static_kernel_MatMul_{H2}_7_d0", f"static_kernel_MatMul_{H1}_1_d0")
    assert "MatMul" in choice.pattern


def test_over_matching_simple_pattern_falls_back_to_hash_shape() -> None:
    inv = _inventory([(f"static_kernel_RmsNorm_{H1}_9_d0", "RmsNorm"), (f"static_kernel_RmsNorm_Grad_{H2}_1_d0", "RmsNorm_Grad")])
    choice = choose_pattern("RmsNorm", inv)
    assert choice.rejected[0] == {
        "pattern": "static_kernel_RmsNorm_.*",
        "over_matched_symbols": [f"static_kernel_RmsNorm_Grad_{H2}_1_d0"],
        "missed_symbols": [],
    }
    assert choice.status == "verified"
    assert choice.pattern == "static_kernel_RmsNorm_" + "." * 32 + "_.*"
    assert choice.matched_symbols == (f"static_kernel_RmsNorm_{H1}_9_d0",)
    assert not matches(choice.pattern, f"static_kernel_RmsNorm_Grad_{H2}_1_d0")


def test_pattern_that_would_over_match_is_refused() -> None:
    # an op whose every symbol is a strict prefix-extension of another op's: no narrow pattern exists
    inv = _inventory([("Cast", "Cast"), ("CastX", "CastX"), ("xCast", "Other")])
    assert candidate_patterns("Cast", ["Cast"]) == ["Cast", "Cast.*"]
    assert choose_pattern("Cast", inv).status == "verified"  # exact whole name is narrow enough
    inv2 = _inventory([("Cast_1", "Cast"), ("Cast_1x", "Other")])
    choice = choose_pattern("Cast", inv2)
    assert choice.status == "over_match" and choice.pattern is None
    assert [r["pattern"] for r in choice.rejected] == ["Cast_.*", "Cast.*"]
    assert all(r["over_matched_symbols"] == ["Cast_1x"] for r in choice.rejected)


def test_differing_prefixes_use_a_leading_any() -> None:
    assert candidate_patterns("Gelu", ["static_kernel_Gelu_a", "Gelu_b"]) == [".*Gelu_.*", ".*Gelu.*"]


def test_unusable_tokens() -> None:
    inv = _inventory([("hcom/allReduce", "hcom/allReduce"), ("A", "A")])
    assert choose_pattern("Missing", inv).status == "no_symbols"
    assert choose_pattern("hcom/allReduce", inv).status == "unexpressible"


def test_repair_config_diff_touches_exactly_two_pointers() -> None:
    config = {"static_kernel_compile": True, "super_kernel_optimize_options": {"dcci_disable_on_kernel": [".*"], "early_start": 0}}
    repaired, patch = repair_config(config, ["static_kernel_MatMul_.*", "Add_.*"])
    opts = repaired["super_kernel_optimize_options"]
    assert opts["dcci_before_kernel_start"] == opts["dcci_after_kernel_end"] == ["static_kernel_MatMul_.*", "Add_.*"]
    assert opts["dcci_disable_on_kernel"] == [".*"] and opts["early_start"] == 0
    assert changed_pointers(patch) == [
        "/super_kernel_optimize_options/dcci_after_kernel_end",
        "/super_kernel_optimize_options/dcci_before_kernel_start",
    ]
    assert config["super_kernel_optimize_options"] == {"dcci_disable_on_kernel": [".*"], "early_start": 0}  # untouched


def test_repair_config_yaml_layout_and_missing_disable_all() -> None:
    yaml_like = {"model_config": {"custom_params": {"super_kernel_optimize_options": {"dcci_disable_on_kernel": [".*"]}}}}
    _, patch = repair_config(yaml_like, ["A.*"])
    assert changed_pointers(patch)[0].startswith("/model_config/custom_params/super_kernel_optimize_options/")
    with pytest.raises(InputError, match="disable-all"):
        repair_config({"super_kernel_optimize_options": {}}, ["A.*"])


def test_prefixes_of_one_length_merge_position_by_position() -> None:
    inv = _inventory([(f"aiv_kernel_Gelu_{H1}_1_d0", "Gelu"), (f"aic_kernel_Gelu_{H2}_2_d0", "Gelu"),
                      ("aiv_kernel_Gelu2_x", "Gelu2"), ("bic_kernel_Gelu_y", "Other")])
    choice = choose_pattern("Gelu", inv)
    assert choice.status == "verified"
    assert choice.pattern == "ai._kernel_Gelu_.*"
    assert set(choice.matched_symbols) == {f"aiv_kernel_Gelu_{H1}_1_d0", f"aic_kernel_Gelu_{H2}_2_d0"}


def test_differing_prefixes_keep_their_common_suffix_instead_of_over_matching() -> None:
    # a bare leading ".*" would also match the fused op's symbol; the common suffix "ic_kernel_" does not
    inv = _inventory([(f"static_kernel_Gelu_{H1}_1_d0", "Gelu"), (f"dynamic_kernel_Gelu_{H2}_1_d0", "Gelu"),
                      (f"fused_Gelu_{H1}_1_d0", "FusedGelu")])
    choice = choose_pattern("Gelu", inv)
    assert choice.status == "verified"
    assert choice.pattern == ".*ic_kernel_Gelu_.*"
    assert not matches(choice.pattern, f"fused_Gelu_{H1}_1_d0")
    assert candidate_patterns("Gelu", [f"static_kernel_Gelu_{H1}_1_d0", f"dynamic_kernel_Gelu_{H2}_1_d0"])[-1] == ".*Gelu.*"


TWO_FAMILIES = [
    (f"static_kernel_MatMulV2_{H1}_1_d0", "MatMulV2"),
    (f"static_kernel_MatMulV2_{H2}_3_d0", "MatMulV2"),
    (f"MatMulV2_{H1}_mix_aiv", "MatMulV2"),
    # look-alikes that must not match
    (f"static_kernel_BatchMatMulV2_{H1}_1_d0", "BatchMatMulV2"),
    (f"BatchMatMulV2_{H2}_mix_aiv", "BatchMatMulV2"),
    ("sk_7_none_start_RmsNorm_end_MatMulV2", "sk_7_none_start_RmsNorm_end_MatMulV2"),
    (f"static_kernel_MatMulV2Ex_{H2}_1_d0", "MatMulV2Ex"),
]


def test_token_with_two_prefix_families_gets_one_verified_pattern_per_family() -> None:
    inv = _inventory(TWO_FAMILIES)
    choice = choose_pattern("MatMulV2", inv)
    assert choice.status == "verified"
    assert choice.patterns == ["MatMulV2_.*", "static_kernel_MatMulV2_.*"]
    assert [list(m) for _, m in choice.parts] == [
        [f"MatMulV2_{H1}_mix_aiv"],
        [f"static_kernel_MatMulV2_{H2}_3_d0", f"static_kernel_MatMulV2_{H1}_1_d0"],
    ]
    assert set(choice.matched_symbols) == set(choice.intended_symbols)
    # the union matches exactly the op's symbols and nothing else of the inventory
    for name, op in TWO_FAMILIES:
        assert any(matches(p, name) for p in choice.patterns) == (op == "MatMulV2"), name
    # no single pattern could: the rejected single candidates over-match or miss
    assert any(r["over_matched_symbols"] for r in choice.rejected)
    as_json = choice.to_json()
    assert as_json["pattern"] == "MatMulV2_.*"
    assert [p["pattern"] for p in as_json["patterns"]] == choice.patterns


def test_token_is_blocked_only_when_no_family_set_exists() -> None:
    # a look-alike of the second family with the same start and hash shape: that family has no narrow pattern
    decoy = (f"MatMulV2_{H2}_mix_aiv", "MatMulV2Mix")
    choice = choose_pattern("MatMulV2", _inventory([*TWO_FAMILIES, decoy]))
    assert choice.status == "over_match" and choice.pattern is None and choice.patterns == []
    assert choice.to_json()["patterns"] == []
