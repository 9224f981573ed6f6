"""What the Stage O hand-off files say, derived from the ledger alone (pure, no writes).

``sk_runner.sweep.handoff`` writes these texts; ``sk-analyze ledger verify``
re-derives them to prove the files on disk agree with the signed ledger
(:mod:`sk_analytics.handoff.crosscheck`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

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

_STEPS: dict[str, tuple[str, str]] = {
    "verify": ("先在本会话目录中运行 `sk-analyze ledger verify .`，确认账本（{ledger}）及其担保的全部证据文件完整未被改写。",
               "First run `sk-analyze ledger verify .` inside this session folder to confirm the ledger ({ledger}) and every "
               "evidence file it vouches for are complete and unaltered."),
    "stopped": ("Stage O 已停止：{reason}", "Stage O stopped: {reason}"),
    "restart": ("排查环境噪声或正确性问题后，用新的会话目录重新开始 Stage O；本会话的证据保持不变。",
                "After fixing the environment noise or correctness problem, start Stage O again in a new session directory; "
                "this session's evidence stays unchanged."),
    "seal": ("控制器封存本交接结果之前，不得开始 BASE 画像，也不得进入可选分支（多流隔离分支、Sbest-SMAP、Sbest-P*）。",
             "Until the controller seals this hand-off, do not start BASE profiling or any optional branch "
             "(isolated multistream branch, Sbest-SMAP, Sbest-P*)."),
    "frozen": ("Sbest-BASE 的选项映射自此冻结：P/FINAL 轮不得探测、增加、删除、替换、收窄、放宽或组合任何选项取值。",
               "The Sbest-BASE option map is frozen from now on: P/FINAL rounds may not probe, add, drop, replace, narrow, "
               "widen or combine any option value."),
    "failed": ("失败条目（{ids}）的失败现场在各轮 FAILURE_SCENES/ 下，按现场中的后续入口排查；现场不可覆盖。",
               "Failure scenes of the failed entries ({ids}) are under each round's FAILURE_SCENES/; follow the entry points "
               "in each scene; scenes are never overwritten."),
    "blocked": ("被阻断条目（{ids}）需要先满足其阻断原因（授权、算子适配、探测或预算），再在新的 Stage O 会话中试验。",
                "Blocked entries ({ids}) must first meet their blocker (authorisation, operator adaptation, probe or budget), "
                "then be tried in a new Stage O session."),
}


def next_steps(view: SessionView, lang: str = "zh") -> list[str]:
    """Guidance for whoever continues after Stage O (Chinese in the hand-off; ``lang`` for the report).

    Independent of where the session lies or how its path was typed, so the reports
    re-rendered by ``ledger verify`` match after ``cp -a``/``mv`` or from another cwd."""
    i = 1 if lang == "en" else 0

    def say(key: str, **values: str) -> str:
        return _STEPS[key][i].format(**values)

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
            out[entry["id"]] = {k: s[k] for k in ("status", "reason_zh", "evidence", "incumbent_round", "accepted_changes", "family_rejected")}
    return settle_matrix(matrix, out, validate=validate)
