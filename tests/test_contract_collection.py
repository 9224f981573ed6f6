"""begin / finalize / load_manifest: each rule of formats.md §6 on one collection."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest
from contract_support import ALL_FILES, BASE_CONFIG, PROFILER_FILES, SK_META_FILES, WORKLOAD, edit_manifest, make_collection

from sk_analytics.contract import (
    MANIFEST_NAME,
    MARKER_NAME,
    ContractInputError,
    ContractIntegrityError,
    ProducerInfo,
    begin,
    finalize,
    load_manifest,
    load_session,
)
from sk_analytics.files.strict_json import DuplicateKeyError
from sk_analytics.fingerprint import fingerprint, sha256_file


def _producer() -> ProducerInfo:
    now = time.time_ns()
    return ProducerInfo(77, now, now, "a" * 64)


def _finalize(session: Path, **kw: object) -> dict:
    args = dict(source_revision="r1", config=BASE_CONFIG, control={"round": "DCCI"}, workload=WORKLOAD,
                producer=_producer())
    args.update(kw)
    return finalize(session, **args)  # type: ignore[arg-type]


def test_begin_writes_session_outside_root_and_marker_inside(tmp_path: Path) -> None:
    root = tmp_path / "root"
    before = time.time_ns()
    record = begin("baseline_profile", root, tmp_path / "s.json")
    assert sorted(record) == sorted(
        ["schema_version", "capture_role", "capture_root", "session_fingerprint", "started_ns", "root_was_empty"]
    )
    assert record["capture_root"] == str(root) and Path(record["capture_root"]).is_absolute()
    assert record["root_was_empty"] is True and record["started_ns"] <= time.time_ns()
    assert record["started_ns"] >= before - 1_000_000_000
    body = {k: v for k, v in record.items() if k != "session_fingerprint"}
    assert record["session_fingerprint"] == fingerprint(body)
    assert load_session(tmp_path / "s.json") == record
    assert os.listdir(root) == [MARKER_NAME]
    marker = json.loads((root / MARKER_NAME).read_text())
    assert marker["session_fingerprint"] == record["session_fingerprint"]


def test_begin_refuses_non_empty_root(tmp_path: Path) -> None:
    (tmp_path / "root").mkdir()
    (tmp_path / "root" / "old_kernel_details.csv").write_text("x")
    with pytest.raises(ContractInputError, match="rule empty-root") as err:
        begin("baseline_profile", tmp_path / "root", tmp_path / "s.json")
    assert err.value.rule == "empty-root" and "old_kernel_details.csv" in str(err.value)


def test_begin_accepts_a_root_holding_only_the_marker(tmp_path: Path) -> None:
    first = begin("candidate_profile", tmp_path / "root", tmp_path / "s1.json")
    time.sleep(0.05)  # more than one tick of the file-system clock
    second = begin("candidate_profile", tmp_path / "root", tmp_path / "s2.json")
    assert second["session_fingerprint"] != first["session_fingerprint"]
    assert os.listdir(tmp_path / "root") == [MARKER_NAME]
    # the first session lost the root: finalizing it is refused
    with pytest.raises(ContractIntegrityError, match="rule session-record"):
        _finalize(tmp_path / "s1.json")


def test_begin_refuses_session_record_inside_root(tmp_path: Path) -> None:
    with pytest.raises(ContractInputError, match="rule session-outside-root"):
        begin("baseline_profile", tmp_path / "root", tmp_path / "root" / "sub" / "s.json")


def test_begin_never_replaces_a_session_record(tmp_path: Path) -> None:
    (tmp_path / "s.json").write_text("{}")
    with pytest.raises(ContractInputError, match="rule session-record"):
        begin("baseline_profile", tmp_path / "root", tmp_path / "s.json")


def test_finalize_records_every_file_by_kind(tmp_path: Path) -> None:
    root = make_collection(tmp_path, "candidate_profile", config=BASE_CONFIG)
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    assert list(manifest) == [
        "schema_version", "capture_role", "capture_root", "capture", "source_revision", "config",
        "config_fingerprint", "control", "control_fingerprint", "producer", "workload", "workload_fingerprint",
        "files", "manifest_fingerprint", "signature",
    ]
    assert set(manifest["signature"]) == {"key", "sig"} and manifest["signature"]["key"].startswith("SHA256:")
    assert manifest["capture_root"] == "."
    assert sorted(manifest["files"]) == sorted(
        ["kernel_details", "task_time", "trace_view", "sk_graph_origin", "sk_graph_updated", "sk_fused_nodes",
         "sk_scope_split", "super_kernel", "sk_prof", "other"]
    )
    assert [r["path"] for r in manifest["files"]["other"]] == ["log_0.log", "sk_meta/4242/model_1_1/sk_task_queue.json"]
    rec = manifest["files"]["kernel_details"][0]
    assert rec["path"] == PROFILER_FILES[0]
    assert rec["sha256"] == sha256_file(root / PROFILER_FILES[0])
    assert rec["size"] == len(f"candidate_profile:{PROFILER_FILES[0]}\n")
    # aliases folded: batch_size -> batch
    assert manifest["workload"]["batch"] == 4 and "batch_size" not in manifest["workload"]
    assert manifest["workload_fingerprint"] == fingerprint(manifest["workload"])
    body = {k: v for k, v in manifest.items() if k not in ("manifest_fingerprint", "signature")}
    assert manifest["manifest_fingerprint"] == fingerprint(body)
    assert load_manifest(root) == manifest


def test_finalize_refuses_missing_required_files(tmp_path: Path) -> None:
    with pytest.raises(ContractInputError, match="rule required-files.*lacks sk_fused_nodes"):
        make_collection(tmp_path, "candidate_profile", config=BASE_CONFIG,
                        files=tuple(f for f in ALL_FILES if not f.endswith("sk_fused_nodes.log")))


def test_sk_prof_required_for_child_attribution(tmp_path: Path) -> None:
    files = (*PROFILER_FILES, *SK_META_FILES)
    root = make_collection(tmp_path, "candidate_profile", config=BASE_CONFIG, files=files)
    load_manifest(root)  # optional in general
    with pytest.raises(ContractInputError, match="rule required-files.*sk_prof"):
        load_manifest(root, require_sk_prof=True)


def test_finalize_twice_is_refused(tmp_path: Path) -> None:
    make_collection(tmp_path, "baseline_profile", config=BASE_CONFIG)
    with pytest.raises(ContractInputError, match="rule manifest-once"):
        _finalize(tmp_path / "baseline_profile" / "session.json")


def test_file_added_after_finalize(tmp_path: Path) -> None:
    root = make_collection(tmp_path, "baseline_profile", config=BASE_CONFIG)
    (root / "sk_meta" / "late.log").write_text("late")
    with pytest.raises(ContractIntegrityError, match="rule no-files-after-finalize.*sk_meta/late.log") as err:
        load_manifest(root)
    assert err.value.rule == "no-files-after-finalize"


def test_file_modified_after_finalize(tmp_path: Path) -> None:
    root = make_collection(tmp_path, "baseline_profile", config=BASE_CONFIG)
    target = root / PROFILER_FILES[0]
    target.write_text(target.read_text().upper())  # same size, other bytes
    with pytest.raises(ContractIntegrityError, match=f"rule file-unchanged: {PROFILER_FILES[0]} changed"):
        load_manifest(root)


def test_file_removed_after_finalize(tmp_path: Path) -> None:
    root = make_collection(tmp_path, "baseline_profile", config=BASE_CONFIG)
    (root / "log_0.log").unlink()
    with pytest.raises(ContractIntegrityError, match="rule file-unchanged: log_0.log was removed"):
        load_manifest(root)


def test_manifest_edited(tmp_path: Path) -> None:
    root = make_collection(tmp_path, "baseline_profile", config=BASE_CONFIG)
    edit_manifest(root, lambda m: m["workload"].update(iterations=20), refingerprint=False)
    with pytest.raises(ContractIntegrityError, match="rule fingerprint: manifest_fingerprint does not match"):
        load_manifest(root)


def test_manifest_with_unknown_key(tmp_path: Path) -> None:
    root = make_collection(tmp_path, "baseline_profile", config=BASE_CONFIG)
    edit_manifest(root, lambda m: m["producer"].update(host="elsewhere"), refingerprint=True)
    with pytest.raises(ContractInputError, match=r"rule unknown-key: .*/producer.*'host'"):
        load_manifest(root)


def test_manifest_with_duplicate_key(tmp_path: Path) -> None:
    root = make_collection(tmp_path, "baseline_profile", config=BASE_CONFIG)
    path = root / MANIFEST_NAME
    text = path.read_text()
    path.write_text(text.replace('"source_revision": "0123abcd"', '"source_revision": "0123abcd", "source_revision": "x"'))
    with pytest.raises(DuplicateKeyError, match="rule duplicate-key: key 'source_revision' appears twice"):
        load_manifest(root)


def test_metadata_copied_in_from_elsewhere(tmp_path: Path) -> None:
    shared = tmp_path / "shared_sk_meta" / "sk_fused_nodes.log"
    shared.parent.mkdir()
    shared.write_text("  SK Function: sk_0, scope id: 0, Node Count: 1\n")
    old = time.time_ns() - 3600 * 10**9
    os.utime(shared, ns=(old, old))
    root = tmp_path / "root"
    begin("candidate_profile", root, tmp_path / "s.json")
    for rel in ALL_FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        if rel.endswith("sk_fused_nodes.log"):
            shutil.copy2(shared, root / rel)  # copy keeps the old mtime
        else:
            (root / rel).write_text("x")
    with pytest.raises(ContractInputError, match="rule created-in-window: .*sk_fused_nodes.log has mtime_ns") as err:
        _finalize(tmp_path / "s.json")
    assert err.value.rule == "created-in-window"
    assert not (root / MANIFEST_NAME).exists()


def test_symlink_in_root_refused_at_finalize(tmp_path: Path) -> None:
    outside = tmp_path / "outside.csv"
    outside.write_text("x")
    root = tmp_path / "root"
    begin("baseline_profile", root, tmp_path / "s.json")
    for rel in PROFILER_FILES[1:]:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    (root / PROFILER_FILES[0]).symlink_to(outside)
    with pytest.raises(ContractInputError, match="rule no-symlinks: .*kernel_details.csv is a symbolic link"):
        _finalize(tmp_path / "s.json")


def test_symlinked_folder_added_after_finalize(tmp_path: Path) -> None:
    root = make_collection(tmp_path, "baseline_profile", config=BASE_CONFIG)
    (root / "more").symlink_to(tmp_path, target_is_directory=True)
    with pytest.raises(ContractInputError, match="rule no-symlinks: more is a symbolic link"):
        load_manifest(root)


def test_hard_link_to_outside_file_refused(tmp_path: Path) -> None:
    root = make_collection(tmp_path, "baseline_profile", config=BASE_CONFIG)
    os.link(root / "log_0.log", tmp_path / "elsewhere.log")
    with pytest.raises(ContractInputError, match=r"rule no-symlinks: log_0.log is a hard link \(2 names"):
        load_manifest(root)


def test_producer_outside_session_window(tmp_path: Path) -> None:
    root = tmp_path / "root"
    record = begin("baseline_profile", root, tmp_path / "s.json")
    for rel in PROFILER_FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x")
    early = ProducerInfo(9, record["started_ns"] - 1, time.time_ns(), "b" * 64)
    with pytest.raises(ContractInputError, match="rule producer-in-window"):
        _finalize(tmp_path / "s.json", producer=early)


def test_workload_missing_field_refused_at_finalize(tmp_path: Path) -> None:
    root = tmp_path / "root"
    begin("baseline_profile", root, tmp_path / "s.json")
    workload = {k: v for k, v in WORKLOAD.items() if k != "runtime"}
    with pytest.raises(ContractInputError, match="rule workload-fields: workload lacks runtime"):
        _finalize(tmp_path / "s.json", workload=workload)


def test_marker_replaced_after_finalize(tmp_path: Path) -> None:
    root = make_collection(tmp_path, "baseline_profile", config=BASE_CONFIG)
    marker = json.loads((root / MARKER_NAME).read_text())
    marker["session_fingerprint"] = "f" * 64
    (root / MARKER_NAME).write_text(json.dumps(marker))
    with pytest.raises(ContractIntegrityError, match="rule session-record"):
        load_manifest(root)


def test_session_record_tampered(tmp_path: Path) -> None:
    root = tmp_path / "root"
    begin("baseline_profile", root, tmp_path / "s.json")
    data = json.loads((tmp_path / "s.json").read_text())
    data["started_ns"] -= 10**12
    (tmp_path / "s.json").write_text(json.dumps(data))
    with pytest.raises(ContractIntegrityError, match="rule fingerprint: session_fingerprint"):
        _finalize(tmp_path / "s.json")
