"""Every user-facing sentence, looked up by id in gettext catalogs and rendered in Chinese or English.

Records (ledger, hand-off) hold codes and facts; the words are chosen here, at the edge, in the
reader's language. The catalogs are ``locale/<lang>/LC_MESSAGES/sk_tune.po`` (the sources, one
message per id such as ``report.title`` or ``reason.gate_failed``, ``str.format`` fields for the
named parameters) compiled by Babel into the ``.mo`` files beside them (``make catalogs``;
``tests/test_messages.py`` fails when a ``.mo`` differs from its ``.po``). Reading needs only the
standard library's :mod:`gettext`.

The language: the ``--lang`` of the command, else ``SK_LANG``, else the locale
(``LC_ALL``, ``LC_MESSAGES``, ``LANG``: a ``zh*`` or ``en*`` one), else Chinese.
"""

from __future__ import annotations

import gettext
import os
import string
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any, Final, TypeGuard

LANGS: Final = ("zh", "en")
DEFAULT_LANG: Final = "zh"
DOMAIN: Final = "sk_tune"
LOCALE_DIR: Final = Path(__file__).parent / "locale"
LANG_ENV: Final = "SK_LANG"
LOCALE_ENVS: Final = ("LC_ALL", "LC_MESSAGES", "LANG")
"""The POSIX order in which the locale's language is looked up (the first one set wins)."""


def lang_of_locale(value: str | None) -> str | None:
    """``zh`` or ``en`` of a locale name (``zh_CN.UTF-8``, ``en_US``, ``en``); None for others (``C``, ``POSIX``, ``de_DE``)."""
    head = (value or "").split(".", 1)[0].split("_", 1)[0].split("-", 1)[0].lower()
    return head if head in LANGS else None


def resolve_lang(option: str | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The output language: ``option`` (``--lang``), else ``SK_LANG``, else the locale, else :data:`DEFAULT_LANG`.

    A ``SK_LANG`` that is neither ``zh`` nor ``en`` is a usage error (said once, not ignored)."""
    if option is not None:
        return option
    env = os.environ if environ is None else environ
    chosen = env.get(LANG_ENV)
    if chosen:
        if chosen not in LANGS:
            from sk_analytics.errors import UsageError

            raise UsageError(f"{LANG_ENV}={chosen!r}: expected one of {', '.join(LANGS)}")
        return chosen
    for name in LOCALE_ENVS:
        if env.get(name):  # the first set variable decides, as in POSIX: LC_ALL=C wins over LANG=en_US
            return lang_of_locale(env[name]) or DEFAULT_LANG
    return DEFAULT_LANG


def normal(lang: str | None) -> str:
    """``en`` for English, else the default language (callers that took a free string keep their old rule)."""
    return "en" if lang == "en" else DEFAULT_LANG


@cache
def catalog(lang: str) -> gettext.GNUTranslations:
    """The compiled catalog of ``lang`` (no fallback: a missing catalog is a broken install)."""
    found = gettext.translation(DOMAIN, localedir=LOCALE_DIR, languages=[normal(lang)])
    assert isinstance(found, gettext.GNUTranslations)
    return found


PAREN: Final = "paren"
"""The format spec of a fact said in parentheses only when there is one: ``{message:paren}`` is `` (exit 1)`` in
English, ``（exit 1）`` in Chinese (``format.paren``), and nothing for an empty or missing fact."""


class _Formatter(string.Formatter):
    """``str.format`` in one language that shows a missing fact (None) as ``?`` whatever its format spec, and fills
    ``{fact:paren}`` (:data:`PAREN`)."""

    def __init__(self, lang: str) -> None:
        self.lang = lang

    def format_field(self, value: Any, format_spec: str) -> str:
        if format_spec == PAREN:
            return "" if value is None or value == "" else text("format.paren", self.lang, text=value)
        return "?" if value is None else super().format_field(value, format_spec)


_FORMATTERS: Final = {lang: _Formatter(lang) for lang in LANGS}


def template(msg_id: str, lang: str) -> str:
    """The raw message ``msg_id`` in ``lang`` (its ``{fields}`` unfilled); KeyError for an id no catalog holds (the
    empty id too: gettext answers it with the catalog's header)."""
    found: str = catalog(lang).gettext(msg_id)
    if found == msg_id or not msg_id:
        raise KeyError(f"no message {msg_id!r} in the {normal(lang)} catalog")
    return found


def text(msg_id: str, lang: str, /, **params: Any) -> str:
    """Message ``msg_id`` in ``lang`` with its named parameters filled in; a parameter that is itself a
    recorded message (:func:`coded`) is rendered first, in the same language, and a list of them (or of plain
    words) is said as its items joined by the language's list separator (``format.list_sep``)."""
    filled = {name: _fill(value, lang) for name, value in params.items()}
    return _FORMATTERS[normal(lang)].vformat(template(msg_id, lang), (), filled)


def _fill(value: Any, lang: str) -> Any:
    if is_coded(value) or is_bilingual(value):
        return render(value, lang)
    if isinstance(value, (list, tuple)):
        return text("format.list_sep", lang).join(str(_fill(item, lang)) for item in value)
    return value


def is_bilingual(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """Whether ``value`` is a ``{"zh": ..., "en": ...}`` pair: a fact that a lower layer (a collection's refusal, a
    diff's decision) still words itself in both languages; the message takes the reader's one."""
    return isinstance(value, Mapping) and set(value) == {"zh", "en"}


def is_coded(value: Any) -> TypeGuard[Mapping[str, Any]]:
    """Whether ``value`` is a recorded message (``{"code": id, "params": {...}}``)."""
    return isinstance(value, Mapping) and isinstance(value.get("code"), str) and set(value) <= {"code", "params"}


def render(message: Mapping[str, Any], lang: str) -> str:
    """A recorded ``{"code": id, "params": {...}}`` (or a ``{"zh", "en"}`` pair) in ``lang``."""
    if is_bilingual(message):
        return str(message[normal(lang)])
    return text(str(message["code"]), lang, **dict(message.get("params") or {}))


def render_problem(message: Any) -> str | None:
    """Why a recorded message read from a file (a matrix's reason) cannot be worded in every language, in one phrase;
    None when it can. :func:`render` itself trusts what sk-tune recorded: an id the catalogs lack, a fact its sentence
    needs and the record lacks, or a fact of the wrong kind would end in a traceback there."""
    if is_bilingual(message):
        return None
    if not is_coded(message):
        return "not a recorded message ({code, params})"
    code = str(message["code"])
    for lang in LANGS:
        if code not in ids(lang):
            return f"message {code!r} is in no {lang} catalog of this sk-tune"
        try:
            render(message, lang)
        except KeyError as exc:
            return f"message {code!r} needs the fact {exc.args[0]!r}, which its params lack"
        except (ValueError, TypeError, IndexError, AttributeError) as exc:
            return f"message {code!r}: a fact of the wrong kind ({exc})"
    return None


def coded(msg_id: str, **params: Any) -> dict[str, Any]:
    """What a record holds instead of a sentence: the message id and its facts."""
    return {"code": msg_id, "params": params}


def rendered_fields(field: str, message: Mapping[str, Any]) -> dict[str, str]:
    """``{field: English, field + "_zh": Chinese}`` of a recorded message: for the records whose format still
    carries a sentence in both languages beside the facts (``assumes``/``assumes_zh``). Rendered where the
    record is built, from the message, so no module keeps rendered sentences of its own."""
    return {field: render(message, "en"), f"{field}_zh": render(message, "zh")}


class Messages(Mapping[str, str]):
    """The messages under one id prefix in one language, as a read-only mapping (``t["title"]``).

    Raw templates: a caller fills their fields with ``.format``; :meth:`get` gives the default for an
    id the catalog lacks (a recorded word the report does not know)."""

    def __init__(self, prefix: str, lang: str) -> None:
        self.prefix = prefix
        self.lang = normal(lang)

    def __getitem__(self, key: str) -> str:
        return template(self.prefix + key, self.lang)

    def __iter__(self) -> Iterator[str]:
        n = len(self.prefix)
        return iter(sorted(k[n:] for k in ids(self.lang) if k.startswith(self.prefix)))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and (self.prefix + key) in ids(self.lang)


@cache
def ids(lang: str) -> frozenset[str]:
    """Every message id of ``lang``'s catalog."""
    return frozenset(k for k in catalog(lang)._catalog if isinstance(k, str) and k)  # type: ignore[attr-defined]


def tables(prefix: str) -> dict[str, Messages]:
    """``{lang: Messages(prefix, lang)}`` for every language: the shape of the old ``TEXT[lang][key]`` tables."""
    return {lang: Messages(prefix, lang) for lang in LANGS}
