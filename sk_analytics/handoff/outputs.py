"""What the Stage O hand-off files say, derived from the ledger alone (pure, no writes).

``sk_runner.sweep.handoff`` writes these texts; ``sk-analyze ledger verify``
re-derives them to prove the files on disk agree with the signed ledger
(:mod:`sk_analytics.handoff.crosscheck`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sk_analytics.messages import text
from sk_analytics.session_view import SessionView
from sk_analytics.stage_o.matrix import settle_matrix
from sk_analytics.stage_o.reasons import stop_reason
from sk_analytics.stage_o.state import SessionState, skipped_settlement

REPORT_MD = "EXPERIMENT_REPORT.md"
REPORT_HTML = "report.html"
REPORT_LANGS = ("zh", "en")
REPORTS_KEY = "reports"
"""Key of the ``handoff_written`` record that binds the reports: ``{lang: {file name: BLAKE3 of its UTF-8 text}}``
for every language in :data:`REPORT_LANGS`, rendered by the sweep from the inputs that same record vouches for."""


def next_steps(view: SessionView, lang: str = "zh") -> list[str]:
    """Guidance for whoever continues after Stage O (Chinese in the hand-off; ``lang`` for the report).

    Independent of where the session lies or how its path was typed, so the reports
    re-rendered by ``ledger verify`` match after ``cp -a``/``mv`` or from another cwd."""

    def say(key: str, **values: str) -> str:
        return text(f"handoff.step.{key}", lang, **values)

    steps = [say("verify", ledger="ledger.jsonl")]  # never the path: a copied or moved session renders the same text
    if view.state.stopped:
        return steps + [say("stopped", reason=stop_reason(view.state.stopped, view.state, lang)), say("restart")]
    steps += [say("seal"), say("frozen")]
    for status in ("failed", "blocked"):
        ids = [eid for eid, s in view.state.settled.items() if s["status"] == status]
        if ids:
            steps.append(say(status, ids=", ".join(ids)))
    return steps


def report_texts(view: SessionView, lang: str = "zh") -> dict[str, str]:
    """File name -> text of EXPERIMENT_REPORT.md and report.html in ``lang``."""
    from sk_analytics.report.render import render_reports  # the renderer pulls in scipy: only when a report is rendered

    view.next_steps = next_steps(view, lang)
    markdown, page = render_reports(view, lang)
    return {REPORT_MD: markdown, REPORT_HTML: page}


def text_digest(text: str | bytes) -> str:
    """BLAKE3 (hex) of a report's UTF-8 bytes, as :data:`REPORTS_KEY` binds it."""
    from blake3 import blake3

    return blake3(text.encode("utf-8") if isinstance(text, str) else text).hexdigest()


def report_digests(texts: Mapping[str, Mapping[str, str]]) -> dict[str, dict[str, str]]:
    """``{lang: {file name: digest}}`` of rendered reports (``texts``: lang -> :func:`report_texts`)."""
    return {lang: {name: text_digest(text) for name, text in files.items()} for lang, files in texts.items()}


def settled_matrix(view: SessionView) -> dict[str, Any]:
    """``matrix.settled.json``: every entry with the status and settlement the ledger gave it
    (``skipped`` for entries a stopped session never ran)."""
    return settled_from(view.matrix, view.state)


def settled_from(matrix: Mapping[str, Any], state: SessionState, *, validate: bool = True) -> dict[str, Any]:
    """:func:`settled_matrix` from the frozen matrix and the folded ledger alone (no other session file read);
    ``validate=False`` for a copy that is only compared with the file (see :func:`~sk_analytics.stage_o.matrix.settle_matrix`)."""
    out: dict[str, dict[str, Any]] = {}
    for entry in matrix["entries"]:
        s = state.settled.get(entry["id"])
        if s is None:  # only possible in a stopped session
            out[entry["id"]] = skipped_settlement(state.stopped or {})
        else:
            # "reason" (a message id and facts) in sessions recorded since reasons are codes, "reason_zh" before
            out[entry["id"]] = {k: s[k] for k in ("status", "reason", "reason_zh", "evidence", "incumbent_round", "accepted_changes",
                                                 "family_rejected") if k in s}
    return settle_matrix(matrix, out, validate=validate)
