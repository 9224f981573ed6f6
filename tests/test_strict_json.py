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


@pytest.mark.parametrize(("text", "said"), [
    ("a: 1\nsplit_mode: 010\n", "integer '010' is YAML 1.1 notation (octal, hex, binary, sexagesimal or with '_') that would be read as 8"),
    ("seed: 0x10\n", "integer '0x10' is YAML 1.1 notation"),
    ("seed: 0b11\n", "integer '0b11' is YAML 1.1 notation"),
    ("timeout_s: 1:30\n", "integer '1:30' is YAML 1.1 notation (octal, hex, binary, sexagesimal or with '_') that would be read as 90"),
    ("runs: 1_000\n", "integer '1_000' is YAML 1.1 notation"),
    ("timeout_s: 1:30.5\n", "number '1:30.5' is YAML 1.1 notation"),
    ("frozen: yes\n", "'yes' is a YAML 1.1 boolean that would be read as true"),
    ("operator_adaptation: off\n", "'off' is a YAML 1.1 boolean that would be read as false"),
])
def test_yaml_1_1_numbers_and_booleans_are_refused_with_their_line(tmp_path: Path, text: str, said: str) -> None:
    """PyYAML reads YAML 1.1: `010` is 8, `1:30` is 90, `yes`/`off` are booleans. A config or spec means what it says
    in JSON terms, or is refused by its line; never a silently different value."""
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_config_file(path)
    assert info.value.line == text.count("\n") and said in info.value.one_line(), info.value.one_line()


def test_yaml_numbers_and_booleans_as_json_writes_them_are_read(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("a: 0\nb: -12\nc: +5\nd: 1.5\ne: .5\nf: true\ng: False\nh: '010'\ni: 1.0e+3\nj: 10\n", encoding="utf-8")
    assert load_config_file(path) == {"a": 0, "b": -12, "c": 5, "d": 1.5, "e": 0.5, "f": True, "g": False, "h": "010", "i": 1000.0,
                                      "j": 10}
