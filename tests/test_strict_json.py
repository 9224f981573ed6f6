"""Strict JSON/YAML file reading: unreadable and non-UTF-8 files are one-line bad input naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from sk_analytics.errors import InputError
from sk_analytics.files.strict_json import load_config_file, load_json_file


@pytest.mark.parametrize("loader", [load_json_file, load_config_file])
def test_folder_where_a_file_belongs(tmp_path: Path, loader) -> None:
    folder = tmp_path / "config.json"
    folder.mkdir()
    with pytest.raises(InputError) as info:
        loader(folder)
    assert info.value.one_line() == (f"{folder}: cannot read a JSON/YAML input: a folder, not a regular file "
                                     "(expected a regular file (a JSON/YAML input))")


@pytest.mark.parametrize("name", ["c.json", "c.yaml"])
def test_non_utf8_names_the_byte(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_bytes(b'{"a": "\xff"}')
    with pytest.raises(InputError) as info:
        load_config_file(path)
    assert info.value.one_line() == f"{path}: cannot read: not UTF-8 text (byte 7) (expected a UTF-8 text file)"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="file not found"):
        load_config_file(tmp_path / "nope.yaml")
