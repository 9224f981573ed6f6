"""Option effects of the simulated SK runtime, hand-computed on a two-kernel network."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sk_runner.sim.model import compile_model
from sk_runner.sim.network import load_network
from sk_runner.sim.options import dcci_bits, find_options, resolve
from sk_runner.sim.truth import ground_truth

# One SK [A (AIV, 10 us, coherence penalty 6), B (AIC, 20 us)], flush 1 us,
# launch overhead 4, host gap 1, iteration overhead 100:
#   O0: A = 10 + 1 (0x20 flush), B = 20 + 1 -> SK = 4 + 32 = 36 -> step = 36 + 1 + 100 = 137
TINY = {
    "name": "tiny",
    "build_id": "tiny-1",
    "layers": 1,
    "timing": {"launch_overhead_us": 4, "host_gap_us": 1, "iteration_overhead_us": 100, "dcci_flush_us": 1, "split_sync_us": 8},
    "ops": {
        "Aop": {"kernel_type": "AIV_ONLY", "blocks": 8, "base_us": 10, "coherence_penalty_us": 6},
        "Bop": {"kernel_type": "AIC_ONLY", "blocks": 4, "base_us": 20},
        "Cop": {"kernel_type": "MIX_1_2", "blocks": 2, "base_us": 50},
    },
    "layer": [{"scope": "s", "members": ["Bop", "Aop"]}],
}


def _net(tmp_path: Path, spec: dict = TINY):
    path = tmp_path / "tiny.json"
    path.write_text(json.dumps(spec))
    return load_network(str(path))


def _step(net, options: dict, debug: dict | None = None) -> float:
    return compile_model(net, resolve(options, debug or {})).step_us


A_SYM_PATTERN = "static_kernel_Aop_.*"


def test_baseline_and_dcci_variants_hand_computed(tmp_path: Path) -> None:
    net = _net(tmp_path)
    # B first (covered on entry), A second: O0 B=21, A=11 -> 4+32 = 36 -> 137
    assert _step(net, {}) == pytest.approx(137.0)
    # disable-all: B = 20; A = 10 + 6 (input not flushed by B, output not flushed) -> 4+36 -> 141
    assert _step(net, {"dcci_disable_on_kernel": [".*"]}) == pytest.approx(141.0)
    # joint repair on A: A = 10 + 1 before + 1 after, B = 20 -> 4 + 32 -> 137
    repair = {"dcci_disable_on_kernel": [".*"], "dcci_before_kernel_start": [A_SYM_PATTERN], "dcci_after_kernel_end": [A_SYM_PATTERN]}
    assert _step(net, repair) == pytest.approx(137.0)
    # before only: input covered, output not -> A = 10 + 1 + 3 -> 4 + 34 -> 139
    assert _step(net, {"dcci_disable_on_kernel": [".*"], "dcci_before_kernel_start": [A_SYM_PATTERN]}) == pytest.approx(139.0)
    # disabling only B: B = 20, A = 10 + 1 + 3 (its input is no longer flushed) -> 139
    assert _step(net, {"dcci_disable_on_kernel": ["static_kernel_Bop_.*"]}) == pytest.approx(139.0)


def test_dcci_task_bits(tmp_path: Path) -> None:
    net = _net(tmp_path)
    syms = [net.symbol("Bop", ""), net.symbol("Aop", "")]
    assert dcci_bits(resolve({}, {}), syms).tolist() == [0x20, 0x20]
    assert dcci_bits(resolve({"dcci_disable_on_kernel": [".*"]}, {}), syms).tolist() == [0x1, 0x1]
    joint = {"dcci_disable_on_kernel": [".*"], "dcci_before_kernel_start": [".*"], "dcci_after_kernel_end": [".*"]}
    assert dcci_bits(resolve(joint, {}), syms).tolist() == [0x2D, 0x2D]
    assert dcci_bits(resolve({"dcci_after_kernel_end": ["static_kernel_B.*"]}, {}), syms).tolist() == [0x28, 0x20]
    assert dcci_bits(resolve({}, {"debug_sync_all": 1, "debug_cross_core_sync_check": 1}), syms).tolist() == [0x32, 0x32]


def test_patterns_match_the_whole_name_only(tmp_path: Path) -> None:
    net = _net(tmp_path)
    syms = [net.symbol("Aop", "")]
    assert dcci_bits(resolve({"dcci_disable_on_kernel": ["Aop"]}, {}), syms).tolist() == [0x20]  # substring: no match
    assert dcci_bits(resolve({"dcci_disable_on_kernel": ["static_kernel_A.*_d0"]}, {}), syms).tolist() == [0x1]


def test_small_option_effects_hand_computed(tmp_path: Path) -> None:
    net = _net(tmp_path)
    # auto_op_parallel: A (AIV) overlaps B (AIC) by 0.4 * min(21, 11) = 4.4
    assert _step(net, {"auto_op_parallel": 1}) == pytest.approx(137.0 - 4.4)
    assert _step(net, {"preload_code": 0}) == pytest.approx(137.0 + 2 * 0.8)
    assert _step(net, {"preload_code": 2}) == pytest.approx(137.0 - 2 * 0.1)
    assert _step(net, {"constant_codegen": 1}) == pytest.approx(137.0 - 2 * 0.04)
    assert _step(net, {"ubuf_lock_ignore_kernel": ["static_kernel_Bop_.*"]}) == pytest.approx(137.0 - 20 * 0.005)
    # early start halves the SK launch overhead
    assert _step(net, {"early_start": 1}) == pytest.approx(137.0 - 2.0)
    assert _step(net, {"opt_extend_option": "a=1,2:b=3"}) == pytest.approx(137.0)


def test_split_mode_slows_mix_kernels_only(tmp_path: Path) -> None:
    spec = {**TINY, "layer": [{"scope": "s", "members": ["Bop", "Cop"]}]}
    net = _net(tmp_path, spec)
    # O0 = 4 + 21 + 51 + 1 + 100 = 177; split_mode=1: Cop 50 * 1.12 = 56
    assert _step(net, {}) == pytest.approx(177.0)
    assert _step(net, {"split_mode": 1}) == pytest.approx(183.0)
    assert _step(net, {"split_mode": 2}) == pytest.approx(179.5)


def test_debug_options_are_much_slower(tmp_path: Path) -> None:
    net = _net(tmp_path)
    # sync_all: A = 10*1.5+3 = 18 (+1), B = 20*1.5+3 = 33 (+1) -> 4 + 53 + 1 + 100 = 158
    assert _step(net, {}, {"debug_sync_all": 1}) == pytest.approx(158.0)
    for name in ("debug_op_exec_trace", "debug_cross_core_sync_check", "debug_per_op_max_core_num"):
        assert _step(net, {}, {name: 1}) > 137.0 + 0.3 * 30


def test_breakers_split_scopes_and_bypass_fuses(tmp_path: Path) -> None:
    spec = {**TINY, "layer": [{"scope": "s", "members": ["Bop", {"event": "EventWait", "breaker": "paired"}, "Aop"]}]}
    net = _net(tmp_path, spec)
    base = compile_model(net, resolve({}, {}))
    assert int(base.graph.launch_is_sk.sum()) == 2
    # two SKs: 4 + 21, then 4 + 8 (split sync) + 11 (A covered on entry) -> 48 + 2 gaps + 100 = 150
    assert base.step_us == pytest.approx(150.0)
    fused = compile_model(net, resolve({"aggressive_opt_strategies": {"value_breaker_bypass": 1}}, {}))
    assert int(fused.graph.launch_is_sk.sum()) == 1
    assert fused.step_us == pytest.approx(137.0)
    unpaired_only = compile_model(net, resolve({"aggressive_opt_strategies": {"value_breaker_bypass": 2}}, {}))
    assert int(unpaired_only.graph.launch_is_sk.sum()) == 2


def test_failure_outcomes() -> None:
    net = load_network("moe-decode")
    kinds = {
        json.dumps(v): compile_model(net, resolve({"aggressive_opt_strategies": v}, {})).outcome.kind
        for v in ({"task_breaker_bypass": 1}, {"event_breaker_bypass": 1}, {"value_breaker_bypass": 3}, {"value_breaker_bypass": 1})
    }
    assert list(kinds.values()) == ["crash", "device_fault", "hang", "ok"]
    assert compile_model(net, resolve({"early_start": 1}, {})).outcome.kind == "wrong_output"


def test_early_start_is_correct_when_the_workload_is_adapted(tmp_path: Path) -> None:
    net = _net(tmp_path, {**TINY, "early_start_adapted": True})
    assert compile_model(net, resolve({"early_start": 1}, {})).outcome.kind == "ok"


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({"split_mode": 7}, "OptionName: split_mode, set value is invalid, value is 7, valid range is [1, 4], the process will use default value: 4"),
        ({"preload_code": True}, "OptionName: preload_code, set value is invalid, value is true, valid range is [0, 2], the process will use default value: 1"),
        ({"dcci_disable_on_kernel": ["*abc"]}, 'OptionName: dcci_disable_on_kernel, set value is invalid, value is ["*abc"], valid range is [N/A, N/A], the '
                                               'process will use default value: []'),
        ({"dcci_disable_on_kernel": "abc"}, 'OptionName: dcci_disable_on_kernel, set value is invalid, value is "abc", valid range is [N/A, N/A], the '
                                            'process will use default value: []'),
        ({"aggressive_opt_strategies": {"task_breaker_bypass": 2}}, "OptionName: aggressive_opt_strategies.task_breaker_bypass, set value is invalid, value "
                                                                    "is 2, valid range is [0, 1], the process will use default value: 0"),
        ({"kernel_map": {"a": 1}}, 'OptionName: kernel_map, set value is invalid, value is {"a":1}, valid range is [N/A, N/A], the process will use default '
                                   'value: none'),
        ({"no_such_option": 1}, "OptionName: no_such_option, set value is invalid, value is 1, valid range is [N/A, N/A], the process will use default "
                                "value: none"),
        ({"opt_extend_option": "x" * 1025}, None),
    ],
)
def test_invalid_values_log_and_fall_back_to_default(options: dict, expected: str | None) -> None:
    eff = resolve(options, {})
    assert len(eff.invalid) == 1
    if expected is not None:
        assert eff.invalid[0].text() == expected
    name = next(iter(options))
    if name in ("split_mode", "preload_code"):
        assert eff.get(name) == {"split_mode": 4, "preload_code": 1}[name]
    if name == "aggressive_opt_strategies":
        assert eff.aggressive == {"value_breaker_bypass": 0, "task_breaker_bypass": 0, "event_breaker_bypass": 0}


def test_valid_values_log_set_lines() -> None:
    eff = resolve({"auto_op_parallel": 1, "dcci_disable_on_kernel": [".*"], "aggressive_opt_strategies": {"value_breaker_bypass": 2}}, {})
    assert [line.text() for line in eff.lines] == [
        "OptionName: auto_op_parallel, set value: 1",
        'OptionName: dcci_disable_on_kernel, set value: [".*"]',
        "OptionName: aggressive_opt_strategies.value_breaker_bypass, set value: 2",
    ]
    assert not eff.invalid


def test_find_options_layouts(tmp_path: Path) -> None:
    p = tmp_path / "c.json"
    found = find_options({"super_kernel_optimize_options": {"a": 1}, "super_kernel_debug_options": {"debug_sync_all": 1}}, p)
    assert found == ({"a": 1}, {"debug_sync_all": 1})
    yaml_layout = {"model_config": {"custom_params": {"super_kernel_optimize_options": {"b": 2}}}}
    assert find_options(yaml_layout, p) == ({"b": 2}, {})
    assert find_options({"x": {"opts": {"c": 3}, "super_kernel_debug_options": {"d": 4}}}, p, "/x/opts") == ({"c": 3}, {"d": 4})
    assert find_options({}, p) == ({}, {})


def test_builtin_scenarios_have_their_documented_dcci_shape() -> None:
    by_name = {name: ground_truth(load_network(name))["dcci"] for name in ("moe-decode", "dcci-gain", "dcci-neutral", "dcci-unrepairable")}
    moe = by_name["moe-decode"]
    assert moe["disable_all"]["class"] == "regression" and moe["disable_all"]["delta_pct"] > 3
    assert moe["repair_ops"] == ["MoeInitRoutingV2", "GroupedMatmul"]
    assert moe["repair"]["beats_o0"] and moe["repair"]["delta_pct_vs_o0"] < -1.5
    assert len(moe["regressed_sks"]) == 32  # moe_gate and the first moe_experts SK of each of 16 layers
    assert {s["occurrence"] for s in moe["regressed_sks"]} == set(range(16))
    assert by_name["dcci-gain"]["disable_all"]["class"] == "gain" and by_name["dcci-gain"]["disable_all"]["delta_pct"] < -2
    assert by_name["dcci-neutral"]["disable_all"]["class"] == "neutral"
    unrep = by_name["dcci-unrepairable"]
    assert unrep["disable_all"]["class"] == "regression" and not unrep["repair"]["beats_o0"]


def test_option_effect_signs_on_default_network() -> None:
    effects = {(e["option"], json.dumps(e["value"], sort_keys=True)): e for e in ground_truth(load_network("moe-decode"))["option_effects"]}
    assert effects[("auto_op_parallel", "1")]["sign"] == -1
    assert effects[("preload_code", "0")]["sign"] == 1
    assert effects[("stream_fusion", "0")]["sign"] == 1
    assert effects[("constant_codegen", "1")]["sign"] == 0
    assert effects[("split_mode", "3")]["sign"] == 0
    assert effects[("early_start", "1")]["outcome"] == "wrong_output"
    assert effects[("aggressive_opt_strategies", '{"event_breaker_bypass": 0, "task_breaker_bypass": 0, "value_breaker_bypass": 1}')]["sign"] == -1
    assert effects[("aggressive_opt_strategies", '{"event_breaker_bypass": 0, "task_breaker_bypass": 1, "value_breaker_bypass": 0}')]["outcome"] == "crash"


def test_symbols_are_stable_and_realistic() -> None:
    a, b = load_network("moe-decode"), load_network("moe-decode")
    sym = a.symbol("RmsNorm", "")
    assert sym == b.symbol("RmsNorm", "")
    import re

    assert re.fullmatch(r"static_kernel_RmsNorm_[0-9a-f]{32}_\d+_d0", sym)
    assert a.symbol("RmsNorm", "q_norm") != sym
    assert np.unique([a.symbol(op, "") for op in a.ops]).size == len(a.ops)


def test_truth_child_index_counts_events_kernel_position_does_not() -> None:
    truth = ground_truth(load_network("dcci-unrepairable"))["dcci"]
    shared = [c for c in truth["regressed_children"] if c["sk"]["scope_name"] == "shared_expert" and c["sk"]["occurrence"] == 0]
    # shared_expert = [EventWait, DynamicQuant, MatMulV3, SwiGlu, MatMulV3, EventNotify]
    assert [(c["canonical_op"], c["child_index"], c["kernel_position"]) for c in shared] == [
        ("DynamicQuant", 1, 0), ("MatMulV3", 2, 1), ("SwiGlu", 3, 2), ("MatMulV3", 4, 3)]
    for c in truth["regressed_children"]:
        assert c["sk"]["child_ops"][c["kernel_position"]] == c["canonical_op"]
