"""Config derivation, the joint-DCCI rule, diff proof, debug refusal, env cleanliness, wrapper rules."""

from __future__ import annotations

import pytest

from sk_analytics.errors import EnvironmentBlocker, InputError, UsageError
from sk_runner.backends.wrapper_rules import registry_verdict
from sk_runner.config import (
    debug_violations,
    derive_config,
    parse_set,
    refuse_dirty_env,
    scrub_env,
    verify_patch,
)

OPT = "/model_config/custom_params/super_kernel_optimize_options"
BASE = {"model_config": {"custom_params": {"super_kernel_optimize_options": {"dcci_disable_on_kernel": [".*"], "auto_op_parallel": 0}}}}


def test_single_pointer_replace_and_add() -> None:
    d = derive_config(BASE, [parse_set(f"{OPT}/auto_op_parallel=1")])
    assert d.patch == [{"op": "replace", "path": f"{OPT}/auto_op_parallel", "value": 1}]
    assert d.originals == (0,)
    assert BASE["model_config"]["custom_params"]["super_kernel_optimize_options"]["auto_op_parallel"] == 0  # base untouched
    d2 = derive_config(BASE, [parse_set(f"{OPT}/early_start=1")])
    assert d2.patch == [{"op": "add", "path": f"{OPT}/early_start", "value": 1}] and d2.originals == (None,)


def test_joint_dcci_rule() -> None:
    before, after = f"{OPT}/dcci_before_kernel_start", f"{OPT}/dcci_after_kernel_end"
    ok = derive_config(BASE, [parse_set(f'{before}=["MatMul.*"]'), parse_set(f'{after}=["MatMul.*"]')], joint_dcci=True)
    assert sorted(op["path"] for op in ok.patch) == [after, before]
    with pytest.raises(UsageError, match="exactly one"):
        derive_config(BASE, [parse_set(f'{before}=["a"]'), parse_set(f'{after}=["a"]')])
    with pytest.raises(UsageError, match="exactly the same list"):
        derive_config(BASE, [parse_set(f'{before}=["a"]'), parse_set(f'{after}=["b"]')], joint_dcci=True)
    with pytest.raises(UsageError, match="must end in"):
        derive_config(BASE, [parse_set(f'{before}=["a"]'), parse_set(f'{OPT}/dcci_disable_on_kernel=["a"]')], joint_dcci=True)
    with pytest.raises(UsageError, match="--joint-dcci needs"):
        derive_config(BASE, [parse_set(f'{before}=["a"]')], joint_dcci=True)


def test_bad_set_inputs() -> None:
    with pytest.raises(UsageError, match="not JSON"):
        parse_set(f"{OPT}/auto_op_parallel=fast")
    with pytest.raises(UsageError, match="expected /json/pointer"):
        parse_set("auto_op_parallel")
    with pytest.raises(UsageError, match="not an RFC 6901 pointer"):
        parse_set("auto=1")
    with pytest.raises(UsageError, match="change nothing"):
        derive_config(BASE, [parse_set(f"{OPT}/auto_op_parallel=0")])
    with pytest.raises(InputError, match="does not resolve"):
        derive_config(BASE, [parse_set("/nope/deeper/x=1")])


def test_verify_patch_rejects_ops_outside_allowed() -> None:
    verify_patch([{"op": "replace", "path": "/a/b/0", "value": 1}], ["/a/b"])
    with pytest.raises(InputError, match="outside"):
        verify_patch([{"op": "move", "from": "/c", "path": "/a/b"}], ["/a/b"])


def test_debug_options_found_in_both_layouts() -> None:
    cfg = {"super_kernel_optimize_options": {"debug_sync_all": 0}, "super_kernel_debug_options": {"debug_op_exec_trace": 1},
           "model_config": {"custom_params": {"super_kernel_debug_options": {}}}}
    assert debug_violations(cfg) == ["/super_kernel_optimize_options/debug_sync_all", "/super_kernel_debug_options"]


def test_env_cleanliness() -> None:
    refuse_dirty_env({"ASCEND_PROF_SK_ON": "0", "PATH": "/bin"})
    with pytest.raises(EnvironmentBlocker, match="ASCEND_PROF_SK_ON=1024, SK_RUN_PROFILE=1"):
        refuse_dirty_env({"ASCEND_PROF_SK_ON": "1024", "SK_RUN_PROFILE": "1"})
    assert scrub_env({"ASCEND_PROF_SK_ON": "0", "MSPROF_X": "", "ASCEND_RT_VISIBLE_DEVICES": "0"}) == {"ASCEND_RT_VISIBLE_DEVICES": "0"}


@pytest.mark.parametrize(
    ("option", "value", "accepted"),
    [
        ("auto_op_parallel", 1, True),
        ("auto_op_parallel", 7, True),  # out of range: the wrapper passes it, the runtime defaults it
        ("auto_op_parallel", -1, False),
        ("auto_op_parallel", True, False),
        ("dcci_disable_on_kernel", [".*"], True),
        ("dcci_disable_on_kernel", ["*x"], False),
        ("dcci_disable_on_kernel", ".*", False),
        ("aggressive_opt_strategies", {"value_breaker_bypass": 2, "task_breaker_bypass": 0}, True),
        ("aggressive_opt_strategies", {"value_breaker": 2}, False),
        ("opt_extend_option", "k=v1,v2:k2=v3", True),
        ("opt_extend_option", "k" * 1025 + "=1", False),
        ("kernel_map", {}, False),
        ("debug_sync_all", 1, False),
        ("no_such_option", 1, False),
    ],
)
def test_wrapper_rules(option: str, value: object, accepted: bool) -> None:
    assert registry_verdict(option, value).accepted is accepted
