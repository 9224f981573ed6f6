"""How a super_kernel.log set-value line's value compares with the probed one, per registry kind."""

from __future__ import annotations

from typing import Any

import pytest

from sk_analytics.stage_o.logged_values import FORMS, same_value
from sk_analytics.stage_o.options import REGISTRY

STRUCT = "aggressive_opt_strategies"


@pytest.mark.parametrize(("option", "probed", "logged_name", "text", "same"), [
    ("split_mode", 2, "split_mode", "2", True),
    ("split_mode", 2, "split_mode", "3", False),
    ("split_mode", 1, "split_mode", "true", None),  # a boolean is no integer, whatever Python says of True == 1
    ("split_mode", 1, "split_mode", '"1"', None),
    ("dcci_disable_on_kernel", [".*"], "dcci_disable_on_kernel", '[".*"]', True),
    ("dcci_disable_on_kernel", [".*"], "dcci_disable_on_kernel", ".*", True),
    ("dcci_disable_on_kernel", [".*"], "dcci_disable_on_kernel", "[.*]", True),
    ("dcci_disable_on_kernel", [], "dcci_disable_on_kernel", "[]", True),
    ("dcci_disable_on_kernel", [".*"], "dcci_disable_on_kernel", "[.*", None),  # an unclosed bracket has no reading
    ("dcci_before_kernel_start", ["A.*", "B"], "dcci_before_kernel_start", "A.*, B", True),
    ("dcci_before_kernel_start", ["A.*", "B"], "dcci_before_kernel_start", "B, A.*", False),
    ("opt_extend_option", "a=1,2:b=3", "opt_extend", "a=1,2:b=3", True),
    ("opt_extend_option", {"a": ["1", "2"], "b": "3"}, "opt_extend_option", "a=1,2:b=3", True),
    ("opt_extend_option", {"a": ["1", "2"]}, "opt_extend_option", '{"a": ["1", "2"]}', True),
    ("opt_extend_option", "a=1", "opt_extend", "a=2", False),
    ("opt_extend_option", "a=1", "opt_extend", "7", None),
    (STRUCT, {"task_breaker_bypass": 1}, f"{STRUCT}.task_breaker_bypass", "1", True),
    (STRUCT, {"task_breaker_bypass": 1}, f"{STRUCT}.value_breaker_bypass", "0", True),  # a field not probed: its default
    (STRUCT, {"task_breaker_bypass": 1}, f"{STRUCT}.value_breaker_bypass", "2", False),
    (STRUCT, {"task_breaker_bypass": 1}, f"{STRUCT}.nonsense_bypass", "0", None),
    (STRUCT, {"task_breaker_bypass": 1}, STRUCT, '{"task_breaker_bypass": 1, "value_breaker_bypass": 0}', True),
    (STRUCT, {"task_breaker_bypass": 1}, STRUCT, '{"task_breaker_bypass": 0}', False),
    (STRUCT, {"task_breaker_bypass": 1}, STRUCT, "1", None),
    ("kernel_map", "x", "kernel_map", "x", None),  # not settable: nothing to compare
    ("my_flag", True, "my_flag", "true", True),  # an option the registry does not know: its JSON value, exactly
    ("my_flag", True, "my_flag", "1", False),
    ("my_name", "abc", "my_name", "abc", True),
    ("my_name", "abc", "my_name", '"abc"', True),
    ("my_name", "abc", "my_name", "abd", False),
    ("my_list", ["a", 1], "my_list", '["a",1]', True),
])
def test_a_logged_value_is_compared_in_the_normal_form_of_its_kind(option: str, probed: Any, logged_name: str, text: str,
                                                                   same: bool | None) -> None:
    assert same_value(option, probed, logged_name, text) is same


def test_every_registry_kind_says_how_its_values_are_logged() -> None:
    assert {spec.kind for spec in REGISTRY} | {None} == set(FORMS)
