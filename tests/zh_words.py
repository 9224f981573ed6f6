"""English words in Chinese text: what ``sk-run demo`` (Chinese by default) must not mix into its sentences.

A token of ASCII letters is an identifier, never a stray word, when it carries a digit or one of
``_ . / = < > [ ] * + #`` (option names and values, file names, paths, ``ready=true``, round names such as
``O13``, ``P50``), is an option (``--gate``), is all capitals (``SK``, ``DCCI``, ``BASE``, ``NPU``), sits in backquotes, or is one of
:data:`IDENTIFIERS`: commands, JSON keys and values, product and method names, units that stay as they are.
Everything else written in ASCII letters is an English word left in a Chinese sentence.
"""

from __future__ import annotations

import re

from sk_analytics.stage_o.steps import FAILURE_KINDS

IDENTIFIERS = frozenset({
    # names of products, methods, formats and stages
    "Stage", "Sbest-BASE", "Sbest-SMAP", "Sbest-P", "sk-tune", "Ray", "Parquet", "Welch", "npu-smi", "plog", "stderr",
    # commands and their words
    "sk-run", "sweep", "campaign", "resume", "trial", "dcci-diff",
    # recorded keys and values (JSON, the matrix, the lease record, the log lines)
    "rank", "decode", "token", "nodeId", "passed", "true", "blocked", "disable-all", "acquired", "inherited", "unleased",
    "family", "gate", "pid",
    *FAILURE_KINDS,  # a failed trial's status code in its result line (scripts grep it: `O1：失败（crash）——…`)
    # units and statistics symbols
    "ms", "s", "p",
})
LITERALS = ("buffer is full",)
"""Lines of a log quoted as they are (super_kernel.log's ``buffer is full, stop dump …``)."""
_TOKEN = re.compile(r"[A-Za-z0-9_./=<>\[\]*+#-]+")
_IDENTIFIER_MARK = re.compile(r"[0-9_./=<>\[\]*+#]")


def stray_english(text: str) -> list[str]:
    """The English words of ``text`` that are no identifier (see the module docstring), in order."""
    text = re.sub(r"`[^`]*`", " ", text)
    for literal in LITERALS:
        text = text.replace(literal, " ")
    words = (token.rstrip("-") for token in _TOKEN.findall(text) if not token.startswith("-"))
    return [w for w in words if re.search("[A-Za-z]", w) and not _IDENTIFIER_MARK.search(w) and not w.isupper() and w not in IDENTIFIERS]
