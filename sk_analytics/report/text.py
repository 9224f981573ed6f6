"""The session report's words (the ``report.*`` messages of :mod:`sk_analytics.messages`) and number formats."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from sk_analytics.messages import Messages, tables, text as message

TEXT: dict[str, Messages] = tables("report.")
"""``TEXT[lang][key]``: the report's messages (``report.*`` of the catalogs) in each language."""


def paren(text: str, lang: str) -> str:
    """A parenthetical in the language's own brackets."""
    return message("format.paren", lang, text=text)


MS_DIGITS = 4
"""Decimals of every millisecond figure of the report (run metrics are ~10 ms; 0.1 µs resolution)."""


def num(value: Any, digits: int = MS_DIGITS) -> str:
    return "—" if value is None else f"{float(value):.{digits}f}"


def word(t: Mapping[str, str] | Any, kind: str, value: Any) -> str:
    """A recorded status or verdict word in the report's language (the word itself when the report does not know it)."""
    return t.get(f"{kind}_{value}", str(value))


def runs_label(t: Mapping[str, str] | Any, run_set: str | None, runs: int, round_name: str) -> str:
    """Which runs a figure is over, in the report's language: ``3 gate runs``, ``5 after top-up``, ``5 clean runs``."""
    if run_set == "gate":
        return t["runs_gate"].format(n=runs)
    return t["runs_clean" if round_name == "O0-INCUMBENT" else "runs_topped"].format(n=runs)


def pct(value: Any) -> str:
    return "—" if value is None else f"{float(value):+.2f}%"


def code(value: Any) -> str:
    return "`" + json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True) + "`"


def ci_text(interval: Sequence[float] | None) -> str:
    return "—" if not interval else "[" + ", ".join(f"{float(x):+.2f}%" for x in interval) + "]"
