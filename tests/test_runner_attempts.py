"""``attempt-<n>`` folders are created exclusively and never reused."""

from __future__ import annotations

from pathlib import Path

import pytest

import sk_runner.process.attempts as attempts
from sk_runner.process.attempts import new_attempt_dir, next_attempt


def test_numbering_counts_folders_and_companion_files(tmp_path: Path) -> None:
    assert next_attempt(tmp_path / "absent") == 1
    assert new_attempt_dir(tmp_path / "absent") == (1, tmp_path / "absent" / "attempt-1")
    (tmp_path / "attempt-2").mkdir()
    (tmp_path / "attempt-4.stdout.log").write_text("")  # a blocked attempt's companion still holds its number
    (tmp_path / "attempt-x").mkdir()
    (tmp_path / "notes-9").mkdir()
    assert new_attempt_dir(tmp_path) == (5, tmp_path / "attempt-5")
    assert new_attempt_dir(tmp_path) == (6, tmp_path / "attempt-6")


def test_a_number_taken_meanwhile_is_skipped(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "attempt-1").mkdir()  # created by a concurrent writer after our scan
    answers = iter([1])
    real = attempts.next_attempt
    monkeypatch.setattr(attempts, "next_attempt", lambda parent: next(answers, None) or real(parent))
    assert new_attempt_dir(tmp_path) == (2, tmp_path / "attempt-2")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["attempt-1", "attempt-2"]
