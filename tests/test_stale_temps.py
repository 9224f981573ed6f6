"""Which files count as temp files a killed writer left (sk_analytics.files.stale_temps): sk-tune's own names only."""

from __future__ import annotations

from pathlib import Path

from sk_analytics.files.atomic import TEMP_NAME, atomic_path, temp_beside
from sk_analytics.files.stale_temps import describe, find, is_leftover, remove


def test_the_pattern_is_the_one_atomic_writes_use(tmp_path: Path) -> None:
    for target in (tmp_path / "handoff.json", tmp_path / "a" / "EXPERIMENT_REPORT.md", tmp_path / ".hidden.x.tmp"):
        tmp = temp_beside(target)
        assert TEMP_NAME.fullmatch(tmp.name) and TEMP_NAME.fullmatch(tmp.name)["target"] == target.name
        assert is_leftover(tmp.name)
    with atomic_path(tmp_path / "report.html") as tmp:
        assert is_leftover(tmp.name)


def test_other_names_are_never_leftovers() -> None:
    for name in ("handoff.json", ".notes.tmp", ".handoff.json.tmp", ".handoff.json.ABCDEFGH.tmp", ".x.abc.tmp", "x.abcdefgh.tmp",
                 ".handoff.json.abcdefgh.tmp.bak", ".sweep.lock"):
        assert not is_leftover(name), name
    assert is_leftover(".ledger.jsonl.head.append.tmp") and is_leftover(".ledger.jsonl.head.k2mx0q9a.tmp")


def test_find_and_remove_walk_the_folder_without_following_links(tmp_path: Path) -> None:
    root = tmp_path / "s"
    kept = temp_beside(root / "experiments" / "O1" / "trial.json")
    gone = temp_beside(root / "handoff.json")
    (root / ".notes.tmp").write_text("planted")
    outside = temp_beside(tmp_path / "elsewhere" / "x.json")
    (root / "link").symlink_to(outside.parent, target_is_directory=True)
    rels = [kept.relative_to(root).as_posix(), gone.relative_to(root).as_posix()]
    assert find(root) == sorted(rels)
    assert describe(find(root), shown=1) == f"2 temp file(s) of interrupted writes ({sorted(rels)[0]}, …)"
    assert remove(root, keep=lambda rel: rel.startswith("experiments/")) == [gone.relative_to(root).as_posix()]
    assert kept.exists() and not gone.exists() and outside.exists() and (root / ".notes.tmp").exists()
