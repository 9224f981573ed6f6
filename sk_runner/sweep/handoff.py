"""The Stage O hand-off (protocol §2): handoff.json, the settled matrix and the reports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sk_analytics.atomic import write_json, write_text
from sk_analytics.fingerprint import fingerprint
from sk_analytics.ledger import head_path, read_records
from sk_analytics.stage_o.matrix import settle_matrix
from sk_analytics.stage_o.reasons import stop_reason
from sk_analytics.stage_o.report import SessionView, load_view, render_reports
from sk_analytics.strict_json import load_json_file

HANDOFF_SCHEMA = "superkernel-stage-o-handoff-v1"
REPORT_MD = "EXPERIMENT_REPORT.md"
REPORT_HTML = "report.html"


_STEPS: dict[str, tuple[str, str]] = {
    "verify": ("先运行 `sk-analyze ledger verify {root}` 确认账本（{ledger}）完整未被改写。",
               "First run `sk-analyze ledger verify {root}` to confirm the ledger ({ledger}) is complete and unaltered."),
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
    """Guidance for whoever continues after Stage O (Chinese in the hand-off; ``lang`` for the report)."""
    i = 1 if lang == "en" else 0

    def say(key: str, **values: str) -> str:
        return _STEPS[key][i].format(**values)

    steps = [say("verify", root=str(view.root), ledger="ledger.jsonl")]
    if view.state.stopped:
        return steps + [say("stopped", reason=stop_reason(view.state.stopped, view.state, lang)), say("restart")]
    steps += [say("seal"), say("frozen")]
    for status in ("failed", "blocked"):
        ids = [eid for eid, s in view.state.settled.items() if s["status"] == status]
        if ids:
            steps.append(say(status, ids=", ".join(ids)))
    return steps


def _settlements(view: SessionView) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for entry in view.matrix["entries"]:
        s = view.state.settled.get(entry["id"])
        if s is None:  # only possible in a stopped session
            out[entry["id"]] = {"status": "skipped", "reason_zh": "会话在 O0 阶段停止，本条目未执行",
                                "evidence": {"session_stopped": view.state.stopped}}
        else:
            out[entry["id"]] = {k: s[k] for k in ("status", "reason_zh", "evidence", "incumbent_round", "accepted_changes", "family_rejected")}
    return out


def write_handoff(root: Path, *, outcome: str) -> dict[str, Path]:
    """Write ``matrix.settled.json`` and ``handoff.json``."""
    view = load_view(root)
    settled = settle_matrix(view.matrix, _settlements(view))
    write_json(root / "matrix.settled.json", settled)
    scenes = sorted({str(d["failure"]["scene"]) for k, d in view.records if k == "trial_result" and d.get("failure") and d["failure"].get("scene")})
    head = load_json_file(head_path(root / "ledger.jsonl"))
    evidence = {
        name: {"phase": info.phase, "entry_id": info.entry_id, "clean_dir": info.trials[-1].get("clean_dir"),
               "config": info.trials[-1].get("config_path"), "summary": (info.gate or {}).get("summary_path"),
               "stability": (info.stability or {}).get("path")}
        for name, info in view.rounds.items()
    }
    handoff = {
        "schema_version": HANDOFF_SCHEMA,
        "outcome": outcome,
        "session_path": str(root.resolve()),
        "ledger": {"path": "ledger.jsonl", "records": len(read_records(root)), "head": head},
        "matrix": {"path": "matrix.json", "fingerprint": view.matrix["freeze"]["fingerprint"], "settled_path": "matrix.settled.json"},
        "entries": [{"id": e["id"], "status": e["status"], **e.get("settlement", {})} for e in settled["entries"]],
        "base": None if view.base is None else {
            "name": "Sbest-BASE", "round": view.base["round"], "path": "BASE/sbest-base.json",
            "base_fingerprint": view.base["base_fingerprint"], "config_fingerprint": view.base["config_fingerprint"],
            "options": view.base["options"], "option_changes": view.base["option_changes"],
        },
        "option_maps_kept": {c.pointer: c.value for c in view.state.option_changes},
        "stop": view.state.stopped,
        "evidence": evidence,
        "failure_scenes": scenes,
        "next_steps_zh": next_steps(view, "zh"),  # protocol §2: next-step guidance in Chinese
        "seal_after_agent_result": True,
    }
    handoff["handoff_fingerprint"] = fingerprint(handoff)
    write_json(root / "handoff.json", handoff)
    return {"handoff": root / "handoff.json", "settled_matrix": root / "matrix.settled.json"}


def write_reports(root: Path, *, lang: str = "zh") -> dict[str, Path]:
    """Render EXPERIMENT_REPORT.md and report.html in ``lang`` (derived files, re-rendered on demand)."""
    view = load_view(root)
    view.next_steps = next_steps(view, lang)
    markdown, page = render_reports(view, lang)
    write_text(root / REPORT_MD, markdown)
    write_text(root / REPORT_HTML, page)
    return {"report": root / REPORT_MD, "html": root / REPORT_HTML}


def write_outputs(root: Path, *, outcome: str, lang: str = "zh") -> dict[str, Path]:
    """Hand-off plus reports (the WriteHandoff action)."""
    return {**write_handoff(root, outcome=outcome), **write_reports(root, lang=lang)}
