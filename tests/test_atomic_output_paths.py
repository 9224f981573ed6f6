"""An output path a command cannot write is named as the user gave it (issue: outsider pass).

``--json-out run-1/log_0.log/x.json`` (a file where a folder must be) said
``run-1/log_0.log: File exists``, and a folder where no file can be created named the
writer's own temp file (``/dir/.x.json.nrr3jjqv.tmp: …``), a name the user never typed."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from sk_analytics.errors import InputError
from sk_analytics.files.atomic import atomic_path


def test_a_file_where_a_folder_must_be_is_named_as_not_a_folder(tmp_path: Path) -> None:
    blocker = tmp_path / "log_0.log"
    blocker.write_text("x\n")
    with pytest.raises(InputError) as caught, atomic_path(blocker / "sub" / "x.json") as tmp:
        tmp.write_text("{}")
    error = caught.value
    assert Path(error.path) == blocker
    assert "is a file, not a folder" in str(error)
    assert str(blocker / "sub" / "x.json") in str(error)
    assert blocker.read_text() == "x\n" and list(tmp_path.iterdir()) == [blocker]


def test_a_folder_refusing_the_temp_file_names_the_target(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> tuple[int, str]:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(tmp_path / ".x.json.abcdefgh.tmp"))

    monkeypatch.setattr("tempfile.mkstemp", refuse)
    target = tmp_path / "x.json"
    with pytest.raises(PermissionError) as caught, atomic_path(target):
        pass
    assert caught.value.filename == str(target)

