"""Strict JSON/YAML file reading: unreadable and non-UTF-8 files are one-line bad input naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest

from sk_analytics.errors import InputError
from sk_analytics.files.strict_json import load_config_file, load_json_file, loads_strict


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


@pytest.mark.parametrize(("text", "said"), [
    ('{\n  "a": "trunc', 't.json:2: invalid JSON: Unterminated string starting at column 8 (expected strict JSON)'),
    ('{"a": 1,}', "t.json:1: invalid JSON: Expecting property name enclosed in double quotes at column 9 (expected strict JSON)"),
    ('{"a": 1} x', "t.json:1: invalid JSON: Extra data at column 10 (expected strict JSON)"),
])
def test_a_syntax_error_names_its_line_and_column(text: str, said: str) -> None:
    """A truncated or mistyped file names where it broke, never a sentence that stops at 'starting at'."""
    with pytest.raises(InputError) as info:
        loads_strict(text, "t.json")
    assert info.value.one_line() == said
