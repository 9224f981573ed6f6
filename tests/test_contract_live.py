"""The live check of a sealed collection (issue 13, points 1-2): every tampering the reference
contract catches is refused here too, through ``contract verify`` and ``validate-set`` with exit 2
and the rule named in the one-line message; ``--archive`` drops only the live rules."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from contract_support import BASE_CONFIG, DCCI_POINTER, PROFILER_FILES, disable_all, edit_manifest, make_collection

from sk_analytics.cli import cli
from sk_analytics.cli._base import run_cli
from sk_analytics.contract import MANIFEST_NAME, MARKER_NAME, ContractIntegrityError, load_manifest
from sk_analytics.fingerprint import sha256_file

TARGET = PROFILER_FILES[0]
TICK_S = 0.05
"""File systems stamp times with a coarse clock; tampering happens later than one tick in real life."""


def _root(tmp_path: Path, role: str = "baseline_profile", **kw: Any) -> Path:
    root = make_collection(tmp_path, role, config=kw.pop("config", BASE_CONFIG), **kw)
    time.sleep(TICK_S)
    return root


def _verify_cli(root: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, str]:
    capsys.readouterr()
    code = run_cli(cli, "sk-analyze", ["contract", "verify", str(root), *extra])
    captured = capsys.readouterr()
    return code, captured.err + captured.out


def _refused(root: Path, rule: str, capsys: pytest.CaptureFixture[str], detail: str = "") -> str:
    code, text = _verify_cli(root, capsys)
    assert code == 2, text
    assert f"rule {rule}:" in text and detail in text, text
    with pytest.raises(ContractIntegrityError) as err:
        load_manifest(root)
    assert err.value.rule == rule
    return text


def _reseal_file(root: Path, rel: str, *, times: str) -> None:
    """Re-seal the manifest over the file's current bytes, as a forger would: sha256 and size updated,
    the times either left as recorded (``kept``) or set to the live ones (``live``)."""
    st = (root / rel).stat()

    def edit(m: dict[str, Any]) -> None:
        for records in m["files"].values():
            for rec in records:
                if rec["path"] == rel:
                    rec["sha256"], rec["size"] = sha256_file(root / rel), st.st_size
                    if times == "live":
                        rec["ctime_ns"], rec["mtime_ns"] = st.st_ctime_ns, st.st_mtime_ns
                        m["capture"]["finalized_ns"] = max(m["capture"]["finalized_ns"], st.st_ctime_ns)

    edit_manifest(root, edit, refingerprint=True)


# --------------------------------------------------------------------------- point 1: live stat


def test_modified_file_with_resealed_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _root(tmp_path)
    (root / TARGET).write_text("forged kernel details with other bytes\n")
    _reseal_file(root, TARGET, times="kept")
    _refused(root, "live-stat", capsys, f"{TARGET} has ctime_ns=")


def test_touched_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _root(tmp_path)
    os.utime(root / TARGET)  # `touch`: same bytes, new times
    _refused(root, "live-stat", capsys, f"{TARGET} has ctime_ns=")


def test_file_rewritten_with_identical_bytes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _root(tmp_path)
    data = (root / TARGET).read_bytes()
    (root / TARGET).write_bytes(data)
    _refused(root, "live-stat", capsys, TARGET)


def test_file_replaced_by_a_copy_with_the_old_mtime(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _root(tmp_path)
    copy = tmp_path / "copy.csv"
    shutil.copy2(root / TARGET, copy)  # same bytes, same mtime, another inode
    os.replace(copy, root / TARGET)
    _refused(root, "live-stat", capsys, TARGET)


def test_recorded_inode_must_match(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _root(tmp_path)

    def other_inode(m: dict[str, Any]) -> None:
        for records in m["files"].values():
            for rec in records:
                if rec["path"] == TARGET:
                    rec["inode"] += 1

    edit_manifest(root, other_inode, refingerprint=True)
    _refused(root, "live-stat", capsys, f"{TARGET} has inode=")


@pytest.mark.parametrize("times", ["live", "window"])
def test_file_added_and_listed(tmp_path: Path, capsys: pytest.CaptureFixture[str], times: str) -> None:
    root = _root(tmp_path)
    extra = "sk_meta/4242/model_1_1/late_extra.log"
    (root / extra).write_text("added after finalize\n")
    st = (root / extra).stat()
    manifest = json.loads((root / MANIFEST_NAME).read_text())
    stamp = st.st_ctime_ns if times == "live" else manifest["capture"]["finalized_ns"]

    def listed(m: dict[str, Any]) -> None:
        rec = {"path": extra, "sha256": sha256_file(root / extra), "size": st.st_size, "ctime_ns": stamp,
               "mtime_ns": stamp, "inode": st.st_ino, "device": st.st_dev}
        m["files"]["other"] = sorted([*m["files"].get("other", []), rec], key=lambda r: r["path"])

    edit_manifest(root, listed, refingerprint=True)
    capsys.readouterr()
    code, text = _verify_cli(root, capsys)
    assert code == 2
    if times == "live":  # honest times of a late file lie after finalized_ns
        assert f"rule created-in-window: {extra} has ctime_ns" in text
    else:  # times forged into the window do not match the file's live stat
        assert f"rule live-stat: {extra} has ctime_ns" in text


def test_dcci_pair_with_a_resealed_candidate_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = make_collection(tmp_path, "baseline_profile", config=BASE_CONFIG, pid=1001)
    cand = make_collection(tmp_path, "candidate_profile", config=disable_all(BASE_CONFIG), pid=1002)
    time.sleep(TICK_S)
    args = ["contract", "validate-set", "--manifest", f"baseline_profile={base}",
            "--manifest", f"candidate_profile={cand}", "--allow-change", DCCI_POINTER]
    assert run_cli(cli, "sk-analyze", args) == 0
    (cand / TARGET).write_text("a kernel table that moves the repair list\n")
    _reseal_file(cand, TARGET, times="kept")
    capsys.readouterr()
    assert run_cli(cli, "sk-analyze", args) == 2
    assert "rule live-stat:" in capsys.readouterr().err


# --------------------------------------------------------------------------- point 2: session binding


def test_started_ns_moved_in_marker_and_manifest(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _root(tmp_path)
    earlier = 1_577_836_800 * 10**9  # 2020-01-01: widen the window so that a file dated 2020 fits
    marker = json.loads((root / MARKER_NAME).read_text())
    marker["started_ns"] = earlier
    (root / MARKER_NAME).write_text(json.dumps(marker))
    edit_manifest(root, lambda m: m["capture"].update(started_ns=earlier), refingerprint=True)
    _refused(root, "session-binding", capsys, f"started_ns {earlier}")


def test_started_ns_moved_in_manifest_only(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _root(tmp_path)
    marker = json.loads((root / MARKER_NAME).read_text())
    edit_manifest(root, lambda m: m["capture"].update(started_ns=marker["started_ns"] - 10**9), refingerprint=True)
    _refused(root, "session-binding", capsys)


def _moved(tmp_path: Path, how: Callable[[Path, Path], None]) -> Path:
    root = _root(tmp_path)
    moved = tmp_path / "elsewhere" / "R2"
    moved.parent.mkdir()
    how(root, moved)
    return moved


@pytest.mark.parametrize("how", ["mv", "cp -a"])
def test_moved_or_copied_root(tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str) -> None:
    argv = {"mv": ["mv"], "cp -a": ["cp", "-a"]}[how]
    moved = _moved(tmp_path, lambda a, b: subprocess.run([*argv, str(a), str(b)], check=True))
    text = _refused(moved, "session-binding", capsys, f"root {moved}")
    assert "moved or copied" in text


def test_archive_check_accepts_a_copy_and_refuses_one_changed_byte(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = _moved(tmp_path, lambda a, b: subprocess.run(["cp", "-a", str(a), str(b)], check=True))
    code, text = _verify_cli(copy, capsys, "--archive")
    assert code == 0 and "archive check" in text
    data = bytearray((copy / TARGET).read_bytes())
    data[0] ^= 0x01
    (copy / TARGET).write_bytes(bytes(data))
    code, text = _verify_cli(copy, capsys, "--archive")
    assert code == 2 and f"rule file-unchanged: {TARGET} changed" in text


def test_live_check_passes_on_an_untouched_root_reached_through_a_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _root(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(root.parent, target_is_directory=True)
    assert _verify_cli(root, capsys)[0] == 0
    assert load_manifest(link / "root")["capture_role"] == "baseline_profile"


def test_manifest_of_an_earlier_version_is_refused_by_name(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _root(tmp_path)
    edit_manifest(root, lambda m: m.update(schema_version="sk-tune-collection-manifest-v1"), refingerprint=True)
    code, text = _verify_cli(root, capsys)
    assert code == 2 and "rule manifest-version:" in text and "collect the profile again" in text
