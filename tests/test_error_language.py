"""The language rule of error lines (docs/design.md, "Messages live in catalogs"): the one line a command ends with
on exit 2 or 3 is English by design, like click's own usage errors, whatever ``--lang``/``SK_LANG`` say. These are the
errors a user of ``sk-run sweep`` and ``sk-run trial`` hits first: a Chinese console shows each as one English line,
never an error half in Chinese (sentences only some layers could translate) beside click's English ones."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sk_analytics.cli._base import run_cli
from sk_runner.cli import cli

CHINESE = re.compile("[\u4e00-\u9fff]")


@pytest.mark.parametrize(("argv", "needle"), [
    (["sweep", "--task", "{tmp}/missing.json"], "missing.json: cannot read: file not found"),
    (["sweep", "--task", "{tmp}/bad.json"], "bad.json:2: invalid JSON: Expecting value at column 1 (expected strict JSON)"),
    (["sweep", "--demo", "--gate", "bogus"], "Invalid value for '--gate': 'bogus' is not one of"),
    (["sweep", "--lang", "zh"], "give exactly one of --task FILE, --resume SESSION, --demo or --redecide SESSION"),
    (["trial", "--session", "{tmp}/s", "--round", "O1", "--base-config", "{tmp}/bad.json", "--incumbent"], "bad.json:2: invalid JSON"),
    (["trial", "--session", "{tmp}/s", "--round", "O1", "--base-config", "{tmp}/bad.json", "--incumbent", "--runs", "x"],
     "Invalid value for '--runs'"),
])
@pytest.mark.parametrize("lang", ["zh", "en"])
def test_the_first_user_errors_are_one_english_line_in_either_language(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                       capsys: pytest.CaptureFixture[str], argv: list[str],
                                                                       needle: str, lang: str) -> None:
    monkeypatch.setenv("SK_LANG", lang)
    (tmp_path / "bad.json").write_text('{"a":\n', encoding="utf-8")
    (tmp_path / "s").mkdir()
    assert run_cli(cli, "sk-run", [a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    said = capsys.readouterr()
    [line] = said.err.splitlines()
    assert said.out == "" and re.match(r"sk-run( \w+)?: error: ", line) and needle in line, line
    assert not CHINESE.search(line)
