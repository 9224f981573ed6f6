"""Pure pieces of the contract: workload aliases, path rules, classification, strict JSON."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from contract_support import BASE_CONFIG, WORKLOAD

from sk_analytics.contract import (
    ContractInputError,
    FileRecord,
    ProducerInfo,
    build_manifest,
    check_manifest,
    classify,
    normalize_workload,
    required_kinds,
)
from sk_analytics.errors import InputError
from sk_analytics.files.strict_json import DuplicateKeyError, load_config_file, loads_strict
from sk_analytics.fingerprint import fingerprint

START, END = 1_000, 2_000


def _session() -> dict[str, Any]:
    return {"schema_version": "sk-tune-collection-session-v1", "capture_role": "baseline_profile",
            "capture_root": "/x", "session_fingerprint": "c" * 64, "started_ns": START, "root_was_empty": True}


def _manifest(files: dict[str, list[FileRecord]]) -> dict[str, Any]:
    return build_manifest(
        _session(), files=files, finalized_ns=END, source_revision="r", config=BASE_CONFIG, control={},
        workload=normalize_workload(WORKLOAD), producer=ProducerInfo(5, 1_100, 1_900, "d" * 64),
    )


def _rec(path: str, t: int = 1_500) -> FileRecord:
    return FileRecord(path, "e" * 64, 1, t, t, 1, 1)


BASIC = {
    "kernel_details": [_rec("p/kernel_details.csv")],
    "task_time": [_rec("p/task_time.csv")],
    "trace_view": [_rec("p/trace_view.json")],
}


def test_normalize_workload_folds_aliases() -> None:
    raw = {"model_name": "m", "dataset": "d", "batch_size": 2, "tp": 8, "run_mode": "decode",
           "warmup_steps": 0, "iters": 10, "runtime_version": "sim", "seed": 3}
    assert normalize_workload(raw) == {"batch": 2, "input": "d", "iterations": 10, "mode": "decode", "model": "m",
                                       "rank": 8, "runtime": "sim", "seed": 3, "warmup": 0}
    assert normalize_workload(normalize_workload(raw)) == normalize_workload(raw)


def test_same_value_under_two_aliases_is_fine() -> None:
    assert normalize_workload({**WORKLOAD, "batch": 4})["batch"] == 4


def test_alias_conflict() -> None:
    with pytest.raises(ContractInputError, match="rule workload-alias-conflict: 'batch_size'=4 and 'bs'=8"):
        normalize_workload({**WORKLOAD, "bs": 8})
    with pytest.raises(ContractInputError, match="rule workload-alias-conflict"):
        normalize_workload({**WORKLOAD, "batch": True, "batch_size": 1})


@pytest.mark.parametrize(("field", "value"), [("batch_size", 0), ("warmup", -1), ("model", ""), ("iterations", 2.5),
                                              ("rank", True)])
def test_workload_field_values(field: str, value: object) -> None:
    with pytest.raises(ContractInputError, match="rule workload-fields"):
        normalize_workload({**WORKLOAD, field: value})


def test_build_manifest_passes_its_own_check() -> None:
    check_manifest(_manifest(BASIC), "m.json")


@pytest.mark.parametrize("bad", ["../kernel_details.csv", "/abs/kernel_details.csv", "a\\kernel_details.csv",
                                 "a//kernel_details.csv", "./kernel_details.csv"])
def test_path_form(bad: str) -> None:
    files = {**BASIC, "kernel_details": [_rec(bad)]}
    with pytest.raises(ContractInputError, match="rule path-form"):
        check_manifest(_manifest(files), "m.json")


def test_records_sorted_and_unique() -> None:
    files = {**BASIC, "other": [_rec("b.log"), _rec("a.log")]}
    with pytest.raises(ContractInputError, match="rule sorted-unique"):
        check_manifest(_manifest(files), "m.json")
    files = {**BASIC, "other": [_rec("a.log"), _rec("a.log")]}
    with pytest.raises(ContractInputError, match="rule sorted-unique"):
        check_manifest(_manifest(files), "m.json")


def test_no_file_in_two_roles() -> None:
    files = {**BASIC, "other": [_rec("p/kernel_details.csv")]}
    expected = "rule one-role-per-file: p/kernel_details.csv is listed under kernel_details and other"
    with pytest.raises(ContractInputError, match=expected):
        check_manifest(_manifest(files), "m.json")
    files = {**BASIC, "other": [_rec("p/trace_view.json")], "trace_view": [_rec("q/trace_view.json")]}
    with pytest.raises(ContractInputError, match="rule one-role-per-file"):
        check_manifest(_manifest(files), "m.json")


@pytest.mark.parametrize("t", [START - 1, END + 1])
def test_created_in_window_bounds(t: int) -> None:
    files = {**BASIC, "other": [_rec("x.log", t)]}
    with pytest.raises(ContractInputError, match="rule created-in-window: x.log"):
        check_manifest(_manifest(files), "m.json")
    files = {**BASIC, "other": [_rec("x.log", START), _rec("y.log", END)]}
    check_manifest(_manifest(files), "m.json")  # inclusive bounds


def test_workload_fingerprint_must_match() -> None:
    manifest = _manifest(BASIC)
    manifest["workload"]["iterations"] = 1
    manifest["manifest_fingerprint"] = fingerprint({k: v for k, v in manifest.items() if k != "manifest_fingerprint"})
    with pytest.raises(Exception, match="rule fingerprint: workload_fingerprint"):
        check_manifest(manifest, "m.json")


def test_missing_key_is_a_schema_violation() -> None:
    manifest = copy.deepcopy(_manifest(BASIC))
    del manifest["control"]
    with pytest.raises(ContractInputError, match="rule schema: .*'control' is a required property"):
        check_manifest(manifest, "m.json")


def test_classify_by_base_name() -> None:
    assert classify("a/ASCEND_PROFILER_OUTPUT/kernel_details.csv") == "kernel_details"
    assert classify("task_time_20260101.csv") == "task_time"
    assert classify("sk_meta/1/sk_prof_device_3.json") == "sk_prof"
    assert classify("sk_meta/1/sk_event_dev_device_0.json") == "sk_prof"  # legacy name
    assert classify("sk_meta/1/model_1_1/super_kernel.log") == "super_kernel"
    assert classify("sk_meta/1/model_1_1/sk_task_queue.json") == "other"
    assert classify("kernel_details.csv.bak") == "other"
    assert required_kinds("candidate_compat") == (
        "sk_graph_origin", "sk_graph_updated", "sk_fused_nodes", "sk_scope_split", "super_kernel")
    assert required_kinds("baseline_profile", require_sk_prof=True)[-1] == "sk_prof"


def test_strict_json_refuses_duplicates_and_nan() -> None:
    with pytest.raises(DuplicateKeyError, match="rule duplicate-key: key 'a'"):
        loads_strict('{"b": {"a": 1, "a": 1}}', "x.json")
    with pytest.raises(InputError, match="NaN"):
        loads_strict('{"a": NaN}', "x.json")
    with pytest.raises(InputError, match="x.json:2: invalid JSON"):
        loads_strict('{"a":\n ]', "x.json")


@pytest.mark.parametrize(("text", "line", "what"), [
    ('{"a": 1,\n "b": NaN}', 2, "NaN is not valid JSON"),
    ('{"s": "NaN {[ \\" Infinity",\n "x": [1,\n -Infinity]}', 3, "-Infinity is not valid JSON"),  # not inside a string
    ('NaN', 1, "NaN is not valid JSON"),
    ('{"a": 1,\n "c": {"a": 2},\n "a": 3}', 3, "key 'a' appears twice"),  # the same key in an inner object is no repeat
    ('[{"k": 1},\n {"k": 2,\n  "k": 3}]', 3, "key 'k' appears twice"),  # nor in the array's other object
], ids=["nan", "inside-strings", "bare", "nested-object", "array-of-objects"])
def test_strict_json_names_the_line_of_a_refused_constant_or_repeated_key(text: str, line: int, what: str) -> None:
    """Hypothesis found ``NaN`` refused without a line (file, line, what was expected is the rule for every input)."""
    with pytest.raises(InputError) as info:
        loads_strict(text, "x.json")
    assert info.value.line == line and what in info.value.one_line(), info.value.one_line()
    assert isinstance(info.value, DuplicateKeyError) == ("twice" in what)


def test_strict_yaml(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("model_config:\n  custom_params:\n    a: 1\n    a: 2\n")
    with pytest.raises(DuplicateKeyError, match="c.yaml:4: rule duplicate-key: key 'a'"):
        load_config_file(path)
    path.write_text("a: 2026-01-01\n")
    with pytest.raises(InputError, match="not JSON data"):
        load_config_file(path)
    path.write_text("{1: x}\n")
    with pytest.raises(InputError, match="key 1 is not a string"):
        load_config_file(path)
    path.write_text("a: [1, {b: c}]\n")
    assert load_config_file(path) == {"a": [1, {"b": "c"}]}

