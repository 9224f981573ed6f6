"""Option matrix: candidates, probes, schema, freeze and immutability, CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from sk_analytics.cli._base import run_cli
from sk_analytics.errors import InputError, IntegrityError
from sk_analytics.ledger.chain import read_records
from sk_analytics.stage_o.matrix import (
    build_matrix,
    check_frozen,
    excluded_reason,
    freeze_matrix,
    load_matrix,
    matrix_fingerprint,
    protocol_candidates,
    settle_matrix,
    validate_matrix,
)
from sk_analytics.stage_o.options import YAML_ROOT, option_pointer
from sk_runner.cli import cli

CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")
SEED = {"static_kernel_compile": True, "super_kernel_optimize": True, "super_kernel_optimize_options": {"split_mode": 4}}


def _all_ready() -> list[dict[str, Any]]:
    return [{"option": c.option, "value": c.value, "ready": True, "evidence": {"log": "ok"}} for c in protocol_candidates()]


def test_candidate_order_and_values() -> None:
    ids = [c.id for c in protocol_candidates()]
    assert ids == [
        "dcci-disable-all",
        "auto-op-parallel-1",
        "aggressive-task1-value0",
        "aggressive-task0-value1",
        "aggressive-task0-value2",
        "aggressive-task0-value3",
        "aggressive-event1-task0-value0",
        "early-start-1",
        "preload-code-0",
        "preload-code-2",
        "split-mode-1",
        "split-mode-2",
        "split-mode-3",
        "stream-fusion-0",
        "constant-codegen-1",
    ]
    by_id = {c.id: c for c in protocol_candidates()}
    assert by_id["dcci-disable-all"].value == [".*"]
    assert by_id["aggressive-event1-task0-value0"].value == {"event_breaker_bypass": 1, "task_breaker_bypass": 0, "value_breaker_bypass": 0}
    assert by_id["aggressive-event1-task0-value0"].authorisation == "event_breaker_bypass"
    assert by_id["early-start-1"].prerequisites == ("operator_adaptation",)
    assert not any(c.option.startswith("debug_") for c in protocol_candidates())


def test_build_matrix_entries() -> None:
    probes = _all_ready()
    probes[1]["ready"] = False  # auto_op_parallel=1 rejected by the wrapper
    matrix = build_matrix(SEED, probes[:-1])  # constant_codegen=1 never probed
    by_id = {e["id"]: e for e in matrix["entries"]}
    assert len(by_id) == len(protocol_candidates())
    dcci = by_id["dcci-disable-all"]
    assert dcci["pointer"] == "/super_kernel_optimize_options/dcci_disable_on_kernel"
    assert (dcci["original"], dcci["default"], dcci["status"]) == (None, [], "pending")
    assert by_id["split-mode-1"]["original"] == 4
    assert by_id["auto-op-parallel-1"]["probe_evidence"] == {"probed": True, "ready": False, "evidence": {"log": "ok"}}
    assert by_id["constant-codegen-1"]["probe_evidence"] == {"probed": False, "ready": False, "evidence": None}
    excluded = {x["option"] for x in matrix["excluded"]}
    assert {"debug_sync_all", "debug_extend_option", "dcci_before_kernel_start", "kernel_map"} <= excluded


def test_seed_value_excluded_and_yaml_root() -> None:
    seed = {"model_config": {"custom_params": {"super_kernel_optimize_options": {"auto_op_parallel": 1}}}}
    matrix = build_matrix(seed, _all_ready())
    assert matrix["options_root"] == YAML_ROOT
    assert "auto-op-parallel-1" not in {e["id"] for e in matrix["entries"]}
    seed_value = {"option": "auto_op_parallel", "value": 1, "reason": {"code": "excluded.seed_value", "params": {}}}
    assert seed_value in matrix["excluded"] and excluded_reason(seed_value, "zh") == "SEED 已采用该取值，无需试验"
    assert excluded_reason(seed_value, "en") == "the SEED already has this value: nothing to try"
    assert option_pointer("/a~0b", "x/y") == "/a~0b/x~1y"
    with pytest.raises(InputError, match="RFC 6901"):
        option_pointer("/a~b", "x")


def test_a_matrix_with_chinese_exclusion_reasons_still_loads_and_verifies(tmp_path: Path) -> None:
    """Matrices frozen before exclusion reasons were codes hold ``reason_zh``: they validate, keep their
    fingerprint and still word their reasons; an item with neither is refused."""
    old = build_matrix(SEED, _all_ready())
    old["excluded"] = [{k: v for k, v in x.items() if k != "reason"} | {"reason_zh": excluded_reason(x, "zh")} for x in old["excluded"]]
    frozen = freeze_matrix(old, frozen_ns=5)
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(frozen, ensure_ascii=False), encoding="utf-8")
    loaded = load_matrix(path)
    assert check_frozen(loaded, expected=frozen["freeze"]["fingerprint"]) == matrix_fingerprint(old)
    kernel_map = next(x for x in loaded["excluded"] if x["option"] == "kernel_map")
    assert excluded_reason(kernel_map, "en") == excluded_reason(kernel_map, "zh") == "运行时不可设置的选项"
    new = build_matrix(SEED, _all_ready())
    assert [excluded_reason(x, "zh") for x in new["excluded"]] == [x["reason_zh"] for x in old["excluded"]]
    assert not any(CJK.search(excluded_reason(x, "en")) for x in new["excluded"])
    bare = {**new, "excluded": [{"option": "kernel_map"}]}
    with pytest.raises(InputError, match="excluded"):
        validate_matrix(bare)


def test_debug_seed_and_bad_probe_refused() -> None:
    with pytest.raises(InputError, match="debug"):
        build_matrix({**SEED, "super_kernel_debug_options": {"debug_sync_all": 1}}, [])
    with pytest.raises(InputError, match="record 0"):
        build_matrix(SEED, [{"option": "early_start", "value": 1}])


def test_freeze_and_edit_detection() -> None:
    frozen = freeze_matrix(build_matrix(SEED, _all_ready()), frozen_ns=5)
    fp = check_frozen(frozen)
    assert fp == matrix_fingerprint(frozen) == frozen["freeze"]["fingerprint"]
    edited = json.loads(json.dumps(frozen))
    edited["entries"][1]["value"] = 0
    with pytest.raises(IntegrityError, match="edited after freezing"):
        check_frozen(edited)
    resealed = {**edited, "freeze": {"fingerprint": matrix_fingerprint(edited), "frozen_ns": 5}}
    assert check_frozen(resealed) != fp
    with pytest.raises(IntegrityError, match="recorded in the ledger"):
        check_frozen(resealed, expected=fp)
    with pytest.raises(IntegrityError, match="already frozen"):
        freeze_matrix(frozen, frozen_ns=6)
    with pytest.raises(IntegrityError, match="not frozen"):
        check_frozen(build_matrix(SEED, []))


def test_schema_rejects_bad_entries() -> None:
    matrix = build_matrix(SEED, _all_ready())
    bad = json.loads(json.dumps(matrix))
    bad["entries"][0]["status"] = "maybe"
    with pytest.raises(InputError, match="/entries/0/status"):
        validate_matrix(bad)
    bad = json.loads(json.dumps(matrix))
    bad["entries"][0]["option"] = "debug_sync_all"
    with pytest.raises(InputError, match="/entries/0/option"):
        validate_matrix(bad)
    bad = json.loads(json.dumps(matrix))
    bad["entries"][0]["status"] = "blocked"
    with pytest.raises(InputError, match="settlement"):
        validate_matrix(bad)
    bad = json.loads(json.dumps(matrix))
    bad["entries"][1]["id"] = bad["entries"][0]["id"]
    with pytest.raises(InputError, match="duplicate"):
        validate_matrix(bad)


def test_a_reason_no_catalog_can_word_is_refused_with_where_it_is(tmp_path: Path) -> None:
    """The schema checks a reason's shape only; an id no catalog holds, a missing fact or one of the wrong kind would
    end in a traceback where the reason is worded (the plan, the report): the matrix is refused when read."""
    matrix = build_matrix(SEED, _all_ready())
    unknown = json.loads(json.dumps(matrix))
    unknown["excluded"][1]["reason"] = {"code": "excluded.made_up", "params": {}}
    path = tmp_path / "matrix.json"
    path.write_text(json.dumps(unknown), encoding="utf-8")
    with pytest.raises(InputError, match=r"matrix.json.*/excluded/1/reason: message 'excluded.made_up' is in no zh catalog"):
        load_matrix(path)
    lacking = json.loads(json.dumps(matrix))
    lacking["entries"][0]["status"] = "rejected"
    lacking["entries"][0]["settlement"] = {"reason": {"code": "reason.gate_failed", "params": {"label": "x"}}, "evidence": {}}
    with pytest.raises(InputError, match=r"/entries/0/settlement/reason: .* needs the fact 'mean_pct'"):
        validate_matrix(lacking)
    lacking["entries"][0]["settlement"]["reason"]["params"]["mean_pct"] = "big"
    with pytest.raises(InputError, match="a fact of the wrong kind"):
        validate_matrix(lacking)
    lacking["entries"][0]["settlement"]["reason"]["params"]["mean_pct"] = -0.25
    validate_matrix(lacking)  # worded in every language: accepted


def test_settle_requires_every_entry() -> None:
    matrix = build_matrix(SEED, _all_ready())
    settlements = {e["id"]: {"status": "rejected", "reason_zh": "门禁未通过", "evidence": "x.json"} for e in matrix["entries"]}
    settled = settle_matrix(matrix, settlements)
    assert settled["settled"] and {e["status"] for e in settled["entries"]} == {"rejected"}
    del settlements["dcci-disable-all"]
    with pytest.raises(InputError, match="dcci-disable-all is not settled"):
        settle_matrix(matrix, settlements)


def test_cli_init_freeze_and_refuse_reinit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = tmp_path / "s"
    (tmp_path / "seed.json").write_text(json.dumps(SEED))
    (tmp_path / "probes.json").write_text(json.dumps(_all_ready()))
    args = ["matrix", "init", "--session", str(session), "--config", str(tmp_path / "seed.json"), "--probes", str(tmp_path / "probes.json")]
    assert run_cli(cli, "sk-run", args) == 0
    n = len(protocol_candidates())
    assert f"{n} entries ({n} probe-ready)" in capsys.readouterr().out
    assert run_cli(cli, "sk-run", ["matrix", "freeze", "--session", str(session)]) == 0
    matrix = load_matrix(session / "matrix.json")
    records = read_records(session)
    assert [r.kind for r in records] == ["matrix_frozen"]
    assert records[0].data["fingerprint"] == matrix["freeze"]["fingerprint"]
    assert run_cli(cli, "sk-run", args) == 2
    assert "frozen and immutable" in capsys.readouterr().err
    text = (session / "matrix.json").read_text().replace('"split_mode": 4', '"split_mode": 3')
    (tmp_path / "bad.json").write_text("{")
    assert run_cli(cli, "sk-run", [*args[:-1], str(tmp_path / "bad.json")]) == 2
    (session / "matrix.json").write_text(text.replace('"risk": "low"', '"risk": "medium"', 1))
    assert run_cli(cli, "sk-run", ["matrix", "freeze", "--session", str(session)]) == 2
    assert "edited after freezing" in capsys.readouterr().err
