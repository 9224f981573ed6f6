"""The Stage O hand-off (protocol §2): handoff.json, the settled matrix and the reports.

What the files say is derived in :mod:`sk_analytics.handoff.outputs` (so that
``sk-analyze ledger verify`` can re-derive and cross-check them); this module writes them.
"""

from __future__ import annotations

from pathlib import Path

from sk_analytics.files.atomic import write_json, write_text
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.fingerprint import fingerprint
from sk_analytics.handoff.outputs import REPORT_HTML, REPORT_LANGS, REPORT_MD, next_steps, report_digests, report_texts, settled_matrix
from sk_analytics.ledger.chain import head_path, read_records
from sk_analytics.ledger.signing import signer
from sk_analytics.report.render import load_view
from sk_analytics.stage_o.contradictions import contradictions_block
from sk_analytics.stage_o.layout import HANDOFF_FILE
from sk_analytics.stage_o.leases import summarize
from sk_runner.sweep.truth import trial_truths

HANDOFF_SCHEMA = "superkernel-stage-o-handoff-v1"


def write_handoff(root: Path, *, outcome: str, fresh_session: list[str] | None = None) -> dict[str, Path]:
    """Write ``matrix.settled.json`` and ``handoff.json``; ``fresh_session``: after a stop, the exact command of a
    fresh session of the same task (:func:`sk_runner.sweep.session.fresh_session_argv`), None at BASE."""
    view = load_view(root)
    settled = settled_matrix(view)
    write_json(root / "matrix.settled.json", settled)
    scenes = sorted({str(d["failure"]["scene"]) for k, d in view.records if k == "trial_result" and d.get("failure") and d["failure"].get("scene")})
    anchor = load_json_file(head_path(root / "ledger.jsonl"))
    # seq and hash only: a signed head copied into the hand-off would let a rollback to this point pass
    head = {"seq": anchor["seq"], "hash": anchor["hash"]}
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
        "signing_key": signer(outside=root).fingerprint,  # the key that signs the handoff_written record binding this file
        "matrix": {"path": "matrix.json", "fingerprint": view.matrix["freeze"]["fingerprint"], "settled_path": "matrix.settled.json",
                   "settled_fingerprint": fingerprint(settled)},
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
        "devices": summarize(view.records).to_json(),  # protocol §9: the lease the clean runs held, the runs it could not prove
        # issue 43: decisions of the protocol gate its statistics contradict, and the one command that re-decides them
        "contradictions": contradictions_block(view.records, str(root.resolve())),
        "fresh_session_argv": fresh_session,  # a stopped session stays stopped: the command of the fresh one, as printed
        "next_steps_zh": next_steps(view, "zh"),  # protocol §2: next-step guidance in Chinese
        "seal_after_agent_result": True,
        # sessions on the simulator: its noise-free effect per gated round, for the report's comparison only
        "simulator_truth": trial_truths(root, view.records),
    }
    handoff["handoff_fingerprint"] = fingerprint(handoff)
    write_json(root / HANDOFF_FILE, handoff)
    return {"handoff": root / HANDOFF_FILE, "settled_matrix": root / "matrix.settled.json"}


def write_reports(root: Path, *, lang: str = "zh") -> dict[str, Path]:
    """Render EXPERIMENT_REPORT.md and report.html in ``lang`` (derived files, re-rendered on demand)."""
    _write_texts(root, report_texts(load_view(root), lang))
    return {"report": root / REPORT_MD, "html": root / REPORT_HTML}


def _write_texts(root: Path, texts: dict[str, str]) -> None:
    for name, text in texts.items():
        write_text(root / name, text)


def write_outputs(root: Path, *, outcome: str, lang: str = "zh", fresh_session: list[str] | None = None
                  ) -> tuple[dict[str, Path], dict[str, dict[str, str]]]:
    """Hand-off plus reports (the WriteHandoff action), and the digests of the reports in every language.

    The digests go into the ``handoff_written`` record (:data:`~sk_analytics.handoff.outputs.REPORTS_KEY`):
    ``ledger verify`` then compares the report bytes with what the signer rendered from the inputs that
    record vouches for and re-renders only reports that match neither language (a newer renderer)."""
    paths = write_handoff(root, outcome=outcome, fresh_session=fresh_session)
    view = load_view(root)
    texts = {each: report_texts(view, each) for each in REPORT_LANGS}
    _write_texts(root, texts["en" if lang == "en" else "zh"])
    return {**paths, "report": root / REPORT_MD, "html": root / REPORT_HTML}, report_digests(texts)
