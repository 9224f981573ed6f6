"""Canonical op token, SK-name parsing and structural SK identity (formats.md §4)."""

from __future__ import annotations

import hashlib

import polars as pl
import pytest
from hypothesis import given, settings, strategies as st

from sk_analytics.ingest.canonical import (
    SkName,
    canonical_op,
    canonical_op_column,
    canonical_op_expr,
    parse_sk_name,
    sk_identity,
    sk_scope_name_expr,
    structure_hash,
)
from sk_analytics.schema import SK_STRUCTURE

H32 = "5f3c0a9e1b2d4c6f8a7e9d0c1b2a3f4e"

CASES = [
    (f"static_kernel_RmsNorm_{H32}_9_d0", "RmsNorm"),  # formats.md example
    ("[3/48]te_matmul_v2_ND_FP16_10001__kernel0", "te_matmul_v2"),  # prefix, dtype cut, tails
    ("[0/24] [1/2]Add_1", "Add"),  # repeated prefixes with/without space
    ("hcom_allReduce__520_1_1", "hcom_allReduce"),  # communication: tails only
    ("HcclAllReduce_ND_FP16_1", "HcclAllReduce_ND_FP16"),  # communication: never cut at dtype
    ("HcclBroadcast_ND_FP16_1", "HcclBroadcast_ND_FP16"),  # a broadcast collective is communication
    ("hcom_broadcast__520_1_1", "hcom_broadcast"),
    ("BroadcastTo_FP16_ND_1_d0", "BroadcastTo"),  # the compute op BroadcastTo is not communication
    ("Add_0x1f_0x2_high_performance_1", "Add"),  # 0x tokens, high_performance tail
    ("Mul_0x7f_ND", "Mul"),
    (f"FlashAttentionScore_{H32}{H32}_mix_aic", "FlashAttentionScore"),  # 64-hex hash
    (f"Foo_{H32}0_bar", f"Foo_{H32}0_bar"),  # 33 hex digits is not a hash
    ("Cast_DT_BF16_1", "Cast"),
    ("GroupedMatmul_FRACTAL_NZ_INT8", "GroupedMatmul"),
    ("te_add_fp16", "te_add"),  # case-insensitive dtype
    ("ND_Foo", "ND_Foo"),  # never cut at the first token
    ("MatMulV2_9_d0", "MatMulV2"),  # compile tail without hash
    ("Conv2D", "Conv2D"),
    (H32, H32),  # nothing left: the symbol itself
    ("__kernel0", "__kernel0"),
    ("", ""),
    (
        f"sk_12_layer0_start_static_kernel_RmsNorm_{H32}_9_d0_end_MatMulV2_0x7f12_3",
        "sk_layer0_start_RmsNorm_end_MatMulV2",
    ),
    ("[0/24] sk_3_none_start_A_end_B_7", "sk_none_start_A_end_B"),
]


@pytest.mark.parametrize(("symbol", "expected"), CASES)
def test_canonical_op_hand_computed(symbol: str, expected: str) -> None:
    assert canonical_op(symbol) == expected


def test_canonical_op_expr_matches_cases_and_keeps_null() -> None:
    frame = pl.DataFrame({"s": [s for s, _ in CASES] + [None]})
    got = frame.select(canonical_op_expr(pl.col("s"))).to_series().to_list()
    assert got == [e for _, e in CASES] + [None]


def test_canonical_op_column_joins_distinct_values_in_order() -> None:
    frame = pl.DataFrame({"name": ["Add_1", None, f"static_kernel_RmsNorm_{H32}", "Add_1"], "k": [1, 2, 3, 4]})
    out = canonical_op_column(frame, "name").collect()
    assert out.get_column("k").to_list() == [1, 2, 3, 4]
    assert out.get_column("canonical_op").to_list() == ["Add", None, "RmsNorm", "Add"]


_ATOMS = st.sampled_from(
    ["_", "__", "[1/2]", "[0/48] ", "static_kernel_", "sk_", "_start_", "_end_", "0x", "0X1f", H32, H32[:31],
     "ND", "nz", "FRACTAL", "FP16", "bf16", "DT", "_9_d0", "__kernel3", "_high_performance", "hcom", "HCCL",
     "AllReduce", "Add", "MatMul", "12", "7", "a", "F", "\n", " ", "é", "\u212a", "ſ", "İ", "-", "."]
)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.one_of(_ATOMS, st.text(max_size=6)), max_size=12).map("".join))
def test_scalar_and_vectorized_agree(symbol: str) -> None:
    vectorized = pl.Series([symbol]).to_frame("s").select(canonical_op_expr(pl.col("s"))).item()
    assert vectorized == canonical_op(symbol)
    if symbol and "[" not in symbol:  # only a bare [i/n] prefix can leave an empty token
        assert canonical_op(symbol) != ""


def test_parse_sk_name() -> None:
    assert parse_sk_name("sk_12_layer0_attn_start_Add_1_end_Mul_2") == SkName(12, "layer0_attn", "Add_1", "Mul_2")
    assert parse_sk_name("[0/24] sk_3_none_start_A_end_B") == SkName(3, "none", "A", "B")
    assert parse_sk_name("sk_x_none_start_A_end_B") is None
    assert parse_sk_name("MatMul") is None
    names = pl.DataFrame({"n": ["sk_3_none_start_A_end_B", "sk_4_l0_l1_start_A_end_B", "Add", None]})
    assert names.select(sk_scope_name_expr(pl.col("n"))).to_series().to_list() == ["none", "l0_l1", "none", "none"]


def _member(model: str, sk: str, scope: int, idx: int, kind: str, op: str | None, line: int) -> dict[str, object]:
    return {
        "model_dir": model, "sk_func_name": sk, "scope_id": scope, "scope_name": "l0", "node_count": 0,
        "child_index": idx, "node_id": 100 + idx, "stream_id": 1, "member_kind": kind, "member_detail": None,
        "func_name": None if op is None else op + "_77", "canonical_op": op, "kernel_type": None,
        "num_blocks": None, "line": line, "source_file": f"{model}/sk_fused_nodes.log",
    }


def test_sk_identity_hand_computed() -> None:
    rows = [
        # SK A (scope 5): kernel members out of file order, one event member in the middle
        _member("model_1_1", "sk_5_l0_start_x_end_y", 5, 2, "kernel", "Mul", 4),
        _member("model_1_1", "sk_5_l0_start_x_end_y", 5, 0, "kernel", "Add", 2),
        _member("model_1_1", "sk_5_l0_start_x_end_y", 5, 1, "event", None, 3),
        # SK B (scope 9): same structure, appears later -> occurrence 1
        _member("model_1_1", "sk_9_l0_start_x_end_y", 9, 0, "kernel", "Add", 8),
        _member("model_1_1", "sk_9_l0_start_x_end_y", 9, 1, "kernel", "Mul", 9),
        # SK C (scope 7): different order -> different structure, occurrence 0
        _member("model_1_1", "sk_7_l0_start_x_end_y", 7, 0, "kernel", "Mul", 6),
        _member("model_1_1", "sk_7_l0_start_x_end_y", 7, 1, "kernel", "Add", 7),
        # another graph (other process): same structure as A again starts at 0
        _member("model_9_3", "sk_1_l0_start_x_end_y", 1, 0, "kernel", "Add", 2),
        _member("model_9_3", "sk_1_l0_start_x_end_y", 1, 1, "kernel", "Mul", 3),
    ]
    frame = SK_STRUCTURE.conform(pl.DataFrame(rows))
    out = sk_identity(frame).sort("model_dir", "scope_id")
    key_am = "scope=l0|first=Add|last=Mul|ops=Add,Mul"
    key_ma = "scope=l0|first=Mul|last=Add|ops=Mul,Add"
    assert out.select("model_dir", "scope_id", "structure_key", "occurrence_index").rows() == [
        ("model_1_1", 5, key_am, 0),
        ("model_1_1", 7, key_ma, 0),
        ("model_1_1", 9, key_am, 1),
        ("model_9_3", 1, key_am, 0),
    ]
    assert out.get_column("child_ops").to_list()[0] == ["Add", "Mul"]


    assert out.get_column("structure_hash").to_list()[0] == hashlib.sha256(key_am.encode()).hexdigest()[:16]
    assert structure_hash(key_am) == out.get_column("structure_hash").to_list()[3]


def test_sk_identity_without_kernel_members_has_null_boundary() -> None:
    frame = SK_STRUCTURE.conform(pl.DataFrame([_member("m", "sk_1_l0_start_a_end_b", 1, 0, "event", None, 1)]))
    out = sk_identity(frame)
    assert out.get_column("structure_key").to_list() == ["scope=l0|first=|last=|ops="]
    assert out.get_column("boundary_first").to_list() == [None]
