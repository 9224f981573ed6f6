"""The message catalogs: compiled files that match their sources, two languages with the same messages and
fields, English without Chinese, and the language chosen by --lang, SK_LANG, the locale, in that order."""

from __future__ import annotations

import io
import re
import string
import subprocess
import sys
from pathlib import Path

import pytest
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from zh_words import stray_english

from sk_analytics.errors import UsageError
from sk_analytics.messages import (
    DOMAIN,
    LANGS,
    LOCALE_DIR,
    Messages,
    coded,
    ids,
    lang_of_locale,
    render,
    render_problem,
    rendered_fields,
    resolve_lang,
    template,
    text,
)

CJK = re.compile(r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]")
"""Chinese characters and the full-width punctuation that goes with them."""


ONE_SIDED = {
    "profile.buffer_full": {"lines"},  # the English attempt record quotes the log lines, the Chinese one says what to do
    "profile.contract": {"rule"},  # the English detail line already names the rule
    "lease.lock_unopenable": {"strerror"},  # the system's English words for the error: the Chinese line names its errno (EACCES)
    "lease.lock_unreadable": {"strerror"},
}
"""Messages whose two languages name different facts (the fields that only one of them uses)."""


def _po(lang: str) -> Path:
    return LOCALE_DIR / lang / "LC_MESSAGES" / f"{DOMAIN}.po"


def _fields(message: str) -> set[str]:
    return {name for _, name, _, _ in string.Formatter().parse(message) if name is not None}


@pytest.mark.parametrize("lang", LANGS)
def test_committed_mo_is_the_compiled_po(lang: str) -> None:
    """A .po edited without `make catalogs` (or a .mo edited by hand) fails here, not in a user's report."""
    with _po(lang).open("rb") as f:
        catalog = read_po(f, locale=lang)
    compiled = io.BytesIO()
    write_mo(compiled, catalog)
    assert _po(lang).with_suffix(".mo").read_bytes() == compiled.getvalue(), f"run `make catalogs`: {lang} .mo is stale"


def test_both_languages_hold_the_same_messages_with_the_same_fields() -> None:
    catalogs = {}
    for lang in LANGS:
        with _po(lang).open("rb") as f:
            catalogs[lang] = {m.id: m.string for m in read_po(f) if m.id}
    assert set(catalogs["zh"]) == set(catalogs["en"])
    for msg_id, zh in catalogs["zh"].items():
        assert zh and catalogs["en"][msg_id], f"{msg_id}: empty translation"
        if msg_id in ONE_SIDED:  # the two sentences name different facts of the same parameters, on purpose
            assert _fields(zh) ^ _fields(catalogs["en"][msg_id]) == ONE_SIDED[msg_id], msg_id
        else:
            assert _fields(zh) == _fields(catalogs["en"][msg_id]), msg_id
    assert ids("en") == frozenset(catalogs["en"])


def test_english_catalog_has_no_chinese() -> None:
    with _po("en").open("rb") as f:
        bad = [m.id for m in read_po(f) if m.id and CJK.search(m.string)]
    assert bad == []


def test_chinese_catalog_has_no_stray_english_words() -> None:
    """A Chinese sentence keeps identifiers (option names, files, commands, BASE) but no English word: "gain",
    "spread", "worst-rank", "incumbent", "vs" were left in them (the fields are filled elsewhere: not checked here)."""
    with _po("zh").open("rb") as f:
        bad = {m.id: words for m in read_po(f) if m.id and (words := stray_english(re.sub(r"\{[^{}]*\}", " ", m.string)))}
    assert bad == {}


def test_text_fills_named_parameters_and_shows_a_missing_fact_as_a_question_mark() -> None:
    assert text("report.lease_runs", "en", n=3, m=2).startswith("2 of 3 trial records")
    assert text("report.lease_runs", "zh", n=3, m=2).startswith("3 个试验记录中 2 个")
    assert text("reason.gate_failed", "en", label="a=1", mean_pct=None) == "a=1 did not pass the gate (mean improvement ?%); incumbent restored"
    assert render(coded("reason.gate_failed", label="a=1", mean_pct=1.5), "zh") == "a=1 未通过门禁（均值改善 +1.500%），恢复原基线"


def test_rendered_fields_put_both_languages_of_one_message_under_a_field_and_its_zh_twin() -> None:
    message = coded("reason.gate_failed", label="a=1", mean_pct=1.5)
    assert rendered_fields("reason", message) == {"reason": render(message, "en"), "reason_zh": render(message, "zh")}
    assert rendered_fields("reason", message)["reason"].startswith("a=1 did not pass the gate")


def test_an_unknown_id_is_an_error_not_the_id_printed() -> None:
    with pytest.raises(KeyError, match="no message 'report.nope'"):
        template("report.nope", "zh")
    t = Messages("report.", "en")
    assert t.get("nope", "fallback") == "fallback" and "title" in t and "nope" not in t
    assert t["title"] == "Stage O experiment report" and len(t) == len(list(t)) > 100


@pytest.mark.parametrize(("env", "expected"), [
    ({}, "zh"),
    ({"LANG": "en_US.UTF-8"}, "en"),
    ({"LANG": "zh_CN.UTF-8"}, "zh"),
    ({"LANG": "C.UTF-8"}, "zh"),
    ({"LANG": "de_DE.UTF-8"}, "zh"),
    ({"LC_ALL": "C", "LANG": "en_US.UTF-8"}, "zh"),  # the first set variable decides, as in POSIX
    ({"LC_MESSAGES": "en_GB", "LANG": "zh_CN"}, "en"),
    ({"SK_LANG": "en", "LANG": "zh_CN.UTF-8"}, "en"),
    ({"SK_LANG": "zh", "LC_ALL": "en_US.UTF-8"}, "zh"),
])
def test_language_from_sk_lang_then_the_locale(env: dict[str, str], expected: str) -> None:
    assert resolve_lang(None, env) == expected
    assert resolve_lang("en", env) == "en" and resolve_lang("zh", env) == "zh"  # --lang wins over both


def test_a_wrong_sk_lang_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="SK_LANG='fr': expected one of zh, en"):
        resolve_lang(None, {"SK_LANG": "fr"})


def test_locale_names() -> None:
    assert [lang_of_locale(v) for v in ("en", "en-US", "zh_TW.Big5", "", None, "POSIX")] == ["en", "en", "zh", None, None, None]


def test_no_module_words_a_message_at_import() -> None:
    """Sentences are worded where a record or a page is made (:func:`sk_analytics.messages.rendered_fields`), never
    kept rendered by a module: importing the gate, the policies, the DCCI analysis and the reports reads no catalog."""
    code = ("import sk_analytics.option_trial.api, sk_analytics.dcci.analysis, sk_analytics.dcci.report, "
            "sk_analytics.report.render, sk_analytics.stage_o.machine\n"
            "from sk_analytics.messages import catalog\nprint(catalog.cache_info().currsize)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert done.stdout.strip() == "0"


def test_a_spread_is_said_without_a_sign() -> None:
    """A spread (max - min over the mean) is never negative: the stability summary said ``+1.250%`` like a change."""
    stable = coded("summary.stability", round="O0-INCUMBENT", spread_pct=1.25, stable=coded("summary.stable"))
    assert render(stable, "en") == "O0-INCUMBENT stability: spread 1.250%, stable"
    assert render(stable, "zh").startswith("O0-INCUMBENT 稳定性：极差 1.250%，")


def test_the_empty_id_is_no_message() -> None:
    """gettext answers the empty id with the catalog's header (``Project-Id-Version: …``): it is no message."""
    with pytest.raises(KeyError, match="no message ''"):
        text("", "zh")
    assert render_problem({"code": "", "params": {}}) is not None


@pytest.mark.parametrize(("stage", "message", "en", "zh"), [
    ("crash", "exit status 1", "process crash or device error (exit status 1)", "进程崩溃或设备错误（exit status 1）"),
    ("crash", "", "process crash or device error", "进程崩溃或设备错误"),
    ("timeout", None, "timeout/hang, process group terminated", "超时/挂起，进程组已被终止"),
    ("wrong_output", "", "correctness check failed (wrong output)", "正确性校验失败（输出错误）"),
    ("invalid_value", "", "the runtime did not take the exact value", "运行时未采用该精确取值"),
    ("value_differs", "", "another value than the one set took effect", "实际生效的不是所设置的取值"),  # a kind of its own
    ("mystery", "", "mystery", "mystery"),
    ("mystery", "odd", "mystery (odd)", "mystery（odd）"),
])
def test_a_failure_says_the_runners_message_in_parentheses_only_when_there_is_one(
        stage: str, message: str | None, en: str, zh: str) -> None:
    """An empty runner message said "process crash or device error ()"; the parenthesis now comes with the message
    (``{message:paren}``), in each language's own parentheses, also for a record written before (the same facts)."""
    from sk_analytics.stage_o.steps import failure_message

    recorded = failure_message({"stage": stage, "message": message})
    assert render(recorded, "en") == en and render(recorded, "zh") == zh
    old = coded(f"failure.{stage}" if stage != "mystery" else "failure.other", stage=stage, message=message)
    assert render(old, "en") == en and render(old, "zh") == zh


def test_a_list_fact_is_said_as_its_items_in_the_readers_language() -> None:
    """A record holds a list of codes (the failed checks); each is worded where it is read, joined by the language's
    list separator, and a word the catalogs do not know stays as recorded."""
    from sk_analytics.messages import coded, render

    reason = coded("reason.gate_failed_checks", label="x=1", mean_pct=-0.3,
                   checks=[coded("check.mean_improvement"), coded("check.median_run_direction"), "new_check"])
    en, zh = render(reason, "en"), render(reason, "zh")
    assert "failed checks: mean, median run, new_check" in en
    assert text("check.mean_improvement", "zh") + "、" + text("check.median_run_direction", "zh") + "、new_check" in zh
