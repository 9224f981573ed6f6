"""Protocol §5.1: only the declared option may differ between a trial and its baseline."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from sk_analytics.stage_o.identity import identity_differences

BASE: dict[str, Any] = {
    "source_revision": {"kind": "git", "root": "/a", "commit": "c1", "tree": "t1", "dirty": False,
                        "modified_files": 0, "dirty_sha256": None},
    "control": {"ranks": 8, "iterations": 120, "warmup": 8, "timeout_s": 120.0},
    "workload": {"model": "m", "input": "i", "batch": 1, "ranks": 8, "mode": "decode"},
    "environment": {"backend": "sim", "device": "d", "packages": {"polars": "2.1.0"}},
}


def _with(path: str, value: Any) -> dict[str, Any]:
    out = copy.deepcopy(BASE)
    part, key = path.split(".")
    out[part][key] = value
    return out


def test_identical_identities_may_be_compared() -> None:
    assert identity_differences(BASE, copy.deepcopy(BASE)) == []


@pytest.mark.parametrize("path", ["source_revision.root", "source_revision.commit", "source_revision.modified_files",
                                  "control.timeout_s"])
def test_location_and_timeout_do_not_count(path: str) -> None:
    assert identity_differences(BASE, _with(path, "elsewhere")) == []


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("source_revision.tree", "t2"),
        ("source_revision.dirty_sha256", "abc"),
        ("control.warmup", 4),
        ("control.iterations", 200),
        ("workload.batch", 2),
        ("environment.device", "other"),
        ("environment.packages", {"polars": "2.2.0"}),
    ],
)
def test_any_other_difference_is_named(path: str, value: Any) -> None:
    assert identity_differences(BASE, _with(path, value)) == [path]


def test_missing_part_or_field_is_a_difference() -> None:
    cand = copy.deepcopy(BASE)
    del cand["workload"]["mode"]
    del cand["environment"]
    assert identity_differences(BASE, cand) == [
        "workload.mode", "environment.backend", "environment.device", "environment.packages"]
