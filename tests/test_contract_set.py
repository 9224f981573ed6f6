"""validate_set: roles, distinctness, identical identity and the declared change set."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from contract_support import (
    ALL_FILES,
    BASE_CONFIG,
    CONTROL,
    DCCI_POINTER,
    WORKLOAD,
    disable_all,
    edit_manifest,
    make_collection,
)

from sk_analytics.contract import (
    MANIFEST_NAME,
    ContractInputError,
    ContractIntegrityError,
    ProducerInfo,
    begin,
    command_fingerprint,
    finalize,
    validate_set,
)
from sk_analytics.fingerprint import fingerprint

CANDIDATE = disable_all(BASE_CONFIG)


def _pair(tmp_path: Path, **cand: object) -> dict[str, Path]:
    base = make_collection(tmp_path, "baseline_profile", config=BASE_CONFIG, pid=1001)
    kwargs = {"config": CANDIDATE, "pid": 1002}
    kwargs.update(cand)
    other = make_collection(tmp_path, "candidate_profile", **kwargs)  # type: ignore[arg-type]
    return {"baseline_profile": base, "candidate_profile": other}


def test_valid_pair_with_the_dcci_pointer(tmp_path: Path) -> None:
    roots = _pair(tmp_path)
    record = validate_set(roots, [DCCI_POINTER])
    base = json.loads((roots["baseline_profile"] / MANIFEST_NAME).read_text())
    cand = json.loads((roots["candidate_profile"] / MANIFEST_NAME).read_text())
    assert record["source_revision"] == "0123abcd"
    assert record["config_fingerprint"] == fingerprint(BASE_CONFIG)
    assert record["workload_fingerprint"] == base["workload_fingerprint"] == cand["workload_fingerprint"]
    assert record["control_fingerprint"] == fingerprint({"round": "DCCI", "timeout_s": 600, "sk_prof_kb": 1024})
    assert record["roles"] == {
        "baseline_profile": {
            "manifest_fingerprint": base["manifest_fingerprint"],
            "session_fingerprint": base["capture"]["session_fingerprint"],
            "config_fingerprint": fingerprint(BASE_CONFIG),
        },
        "candidate_profile": {
            "manifest_fingerprint": cand["manifest_fingerprint"],
            "session_fingerprint": cand["capture"]["session_fingerprint"],
            "config_fingerprint": fingerprint(CANDIDATE),
        },
    }
    assert record["change_set"]["allowed_json_pointers"] == [DCCI_POINTER]
    body = {k: v for k, v in record.items() if k != "set_fingerprint"}
    assert record["set_fingerprint"] == fingerprint(body)
    # manifests may also be given by their file path
    assert validate_set({r: p / MANIFEST_NAME for r, p in roots.items()}, [DCCI_POINTER]) == record


def test_identical_pair_without_declared_change(tmp_path: Path) -> None:
    roots = _pair(tmp_path, config=BASE_CONFIG)
    assert validate_set(roots)["change_set"]["allowed_json_pointers"] == []
    with pytest.raises(ContractInputError, match=f"rule declared-change-differs: declared change {DCCI_POINTER}"):
        validate_set(roots, [DCCI_POINTER])


def test_undeclared_difference_is_refused(tmp_path: Path) -> None:
    roots = _pair(tmp_path)
    with pytest.raises(ContractInputError, match=f"rule declared-change-only: .* at {DCCI_POINTER} \\(declared: none\\)"):
        validate_set(roots)


def test_two_differences_instead_of_one(tmp_path: Path) -> None:
    config = disable_all(BASE_CONFIG)
    config["super_kernel_optimize_options"]["early_start"] = 1
    roots = _pair(tmp_path, config=config)
    expected = "rule declared-change-only: .* at /super_kernel_optimize_options/early_start"
    with pytest.raises(ContractInputError, match=expected) as err:
        validate_set(roots, [DCCI_POINTER])
    assert err.value.rule == "declared-change-only"


def test_mismatching_workload(tmp_path: Path) -> None:
    roots = _pair(tmp_path, workload={**WORKLOAD, "iterations": 20})
    with pytest.raises(ContractInputError, match="rule identical-identity: workload of candidate_profile .*keys iterations"):
        validate_set(roots, [DCCI_POINTER])


def test_mismatching_source_revision_and_control(tmp_path: Path) -> None:
    roots = _pair(tmp_path, source_revision="ffff")
    with pytest.raises(ContractInputError, match="rule identical-identity: source_revision"):
        validate_set(roots, [DCCI_POINTER])
    roots = _pair(tmp_path / "b", control={"round": "DCCI", "timeout_s": 60, "sk_prof_kb": 1024})
    with pytest.raises(ContractInputError, match="rule identical-identity: control .*keys timeout_s"):
        validate_set(roots, [DCCI_POINTER])


def test_workload_aliases_make_the_same_identity(tmp_path: Path) -> None:
    aliased = {k: v for k, v in WORKLOAD.items() if k not in ("batch_size", "rank")} | {"bs": 4, "world_size": 8}
    roots = _pair(tmp_path, workload=aliased)
    validate_set(roots, [DCCI_POINTER])


def test_roles_must_be_a_pair_or_all_four(tmp_path: Path) -> None:
    roots = _pair(tmp_path)
    with pytest.raises(ContractInputError, match="rule set-roles"):
        validate_set({"baseline_profile": roots["baseline_profile"]})
    with pytest.raises(ContractInputError, match="rule set-roles: given as baseline_profile"):
        validate_set({"baseline_profile": roots["candidate_profile"], "candidate_profile": roots["candidate_profile"]})


def test_same_producer_twice_is_refused(tmp_path: Path) -> None:
    # one process wrote both collections: both sessions were opened first, then the same producer sealed both
    roots = {}
    for role in ("baseline_profile", "candidate_profile"):
        roots[role] = tmp_path / role / "root"
        begin(role, roots[role], tmp_path / role / "session.json")
    started = time.time_ns()
    for role, root in roots.items():
        for rel in ALL_FILES:
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(f"{role}:{rel}\n")
    producer = ProducerInfo(1001, started, time.time_ns(), command_fingerprint(["python", "-m", "workload"]))
    for role, config in (("baseline_profile", BASE_CONFIG), ("candidate_profile", CANDIDATE)):
        finalize(tmp_path / role / "session.json", source_revision="0123abcd", config=config, control=CONTROL,
                 workload=WORKLOAD, producer=producer)
    with pytest.raises(ContractInputError, match="rule distinct-producers"):
        validate_set(roots, [DCCI_POINTER])


def test_forged_shared_producer_moves_the_start_and_breaks_the_binding(tmp_path: Path) -> None:
    roots = _pair(tmp_path)
    base = json.loads((roots["baseline_profile"] / MANIFEST_NAME).read_text())

    def same_producer(data: dict[str, Any]) -> None:
        data["producer"]["native_pid"] = base["producer"]["native_pid"]
        data["producer"]["started_ns"] = base["producer"]["started_ns"]
        data["capture"]["started_ns"] = min(data["capture"]["started_ns"], base["producer"]["started_ns"])

    edit_manifest(roots["candidate_profile"], same_producer, refingerprint=True)
    with pytest.raises(ContractIntegrityError, match="rule session-binding") as err:
        validate_set(roots, [DCCI_POINTER])
    assert err.value.rule == "session-binding"


def test_tampered_member_fails_the_set(tmp_path: Path) -> None:
    roots = _pair(tmp_path)
    (roots["candidate_profile"] / "extra.csv").write_text("x")
    with pytest.raises(ContractIntegrityError, match="rule no-files-after-finalize"):
        validate_set(roots, [DCCI_POINTER])


def test_four_roles_share_the_candidate_config(tmp_path: Path) -> None:
    roots = _pair(tmp_path)
    meta_only = tuple(f for f in ("sk_meta/4242/model_1_1/" + n for n in (
        "sk_graph_origin.json", "sk_graph_updated.json", "sk_fused_nodes.log", "sk_scope_split.log", "super_kernel.log")))
    roots["candidate_compat"] = make_collection(tmp_path, "candidate_compat", config=CANDIDATE, pid=1003, files=meta_only)
    roots["candidate_verify"] = make_collection(tmp_path, "candidate_verify", config=CANDIDATE, pid=1004, files=meta_only)
    assert sorted(validate_set(roots, [DCCI_POINTER])["roles"]) == sorted(roots)
    other = disable_all(BASE_CONFIG)
    other["super_kernel_optimize_options"]["dcci_disable_on_kernel"] = ["Matmul.*"]
    roots["candidate_verify"] = make_collection(tmp_path, "candidate_verify", config=other, pid=1005,
                                                files=meta_only, name="verify2")
    expected = "rule declared-change-only: config of candidate_verify differs from candidate_profile"
    with pytest.raises(ContractInputError, match=expected):
        validate_set(roots, [DCCI_POINTER])


@pytest.mark.parametrize(
    ("pointers", "message"),
    [
        (["no-slash"], "is not an RFC 6901 pointer"),
        ([""], "whole config"),
        (["/super_kernel_optimize_options", DCCI_POINTER], "overlap"),
    ],
)
def test_bad_change_sets(tmp_path: Path, pointers: list[str], message: str) -> None:
    roots = _pair(tmp_path)
    with pytest.raises(ContractInputError, match=f"rule change-set: .*{message}"):
        validate_set(roots, pointers)


def test_joint_repair_declares_two_pointers(tmp_path: Path) -> None:
    base_cfg = disable_all(BASE_CONFIG)
    repair = disable_all(BASE_CONFIG)
    repair["super_kernel_optimize_options"] |= {"dcci_before_kernel_start": ["MatMul.*"], "dcci_after_kernel_end": ["MatMul.*"]}
    base = make_collection(tmp_path, "baseline_profile", config=base_cfg, pid=1)
    cand = make_collection(tmp_path, "candidate_profile", config=repair, pid=2)
    pointers = ["/super_kernel_optimize_options/dcci_before_kernel_start", "/super_kernel_optimize_options/dcci_after_kernel_end"]
    record = validate_set({"baseline_profile": base, "candidate_profile": cand}, pointers)
    assert record["change_set"]["allowed_json_pointers"] == pointers
    with pytest.raises(ContractInputError, match="rule declared-change-only: .*dcci_after_kernel_end"):
        validate_set({"baseline_profile": base, "candidate_profile": cand}, pointers[:1])
