"""Source revision of a workload: only the workload's folder counts, and an
uncommitted edit is identified by its content, not by a count of files."""

from __future__ import annotations

import subprocess
from pathlib import Path

from sk_analytics.stage_o.identity import identity_differences
from sk_runner.fingerprint import source_revision
from sk_runner.profile import revision_text


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def _repo(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "workload").mkdir(parents=True)
    (repo / "workload" / "model.py").write_text("x = 1\n")
    (repo / "notes.md").write_text("a\n")
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qm", "init")
    return repo


def test_clean_workload_is_the_commit(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    record = source_revision(repo / "workload")
    assert record["dirty"] is False and record["dirty_sha256"] is None
    assert revision_text(record) == f"git-tree:{record['tree']}"
    assert len(record["commit"]) == 40 and record["tree"] != record["commit"]


def test_edit_outside_the_workload_folder_does_not_change_its_revision(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    before = revision_text(source_revision(repo / "workload"))
    (repo / "notes.md").write_text("b\n")
    assert revision_text(source_revision(repo / "workload")) == before


def test_commit_outside_the_workload_folder_keeps_its_identity(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    before = source_revision(repo / "workload")
    (repo / "notes.md").write_text("b\n")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", "notes")
    after = source_revision(repo / "workload")
    assert after["commit"] != before["commit"]
    assert revision_text(after) == revision_text(before)
    assert identity_differences({"source_revision": before}, {"source_revision": after}) == []


def test_commit_inside_changes_it(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    before = source_revision(repo / "workload")
    (repo / "workload" / "model.py").write_text("x = 2\n")
    _git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-qam", "model")
    after = source_revision(repo / "workload")
    assert revision_text(after) != revision_text(before)
    assert identity_differences({"source_revision": before}, {"source_revision": after}) == ["source_revision.tree"]


def test_edit_inside_is_identified_by_its_content(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    clean = revision_text(source_revision(repo / "workload"))
    (repo / "workload" / "model.py").write_text("x = 2\n")
    first = revision_text(source_revision(repo / "workload"))
    assert first != clean and "+dirty:" in first
    assert revision_text(source_revision(repo / "workload")) == first
    (repo / "workload" / "model.py").write_text("x = 3\n")
    assert revision_text(source_revision(repo / "workload")) not in {clean, first}


def test_outside_a_repository(tmp_path: Path) -> None:
    record = source_revision(tmp_path)
    assert record["kind"] == "none"
    assert revision_text(record).startswith("unversioned:")
