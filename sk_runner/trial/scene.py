"""Failure scenes (protocol §8) and environment blockers.

Once a workload command has started, any failure first seals a scene:
``<round dir>/FAILURE_SCENES/attempt-<n>/`` with ``scene.json`` (the eight
required parts), ``scene.md`` (the same as Markdown, in the trial's
language: the catalogs' ``scene.*`` messages) and ``artifacts/`` (raw
stdout, stderr, rank logs, correctness and config copied as they were, each
with its SHA-256). The attempt folder is created exclusively, files are
made read-only and ``scene.json`` is written last, so a scene is never
overwritten and a half-written one is never mistaken for a sealed one.

Failures *before* a command starts are environment blockers: one JSON line
each in ``<round dir>/environment-blockers.jsonl``, never a scene.
"""

from __future__ import annotations

import json
import os
import shlex
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sk_analytics.files.atomic import write_json, write_text
from sk_analytics.files.io_seam import append_bytes, copy_file, copy_tree, environment_errno
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.fingerprint import sha256_file
from sk_analytics.messages import DEFAULT_LANG, ids, normal, text
from sk_analytics.stage_o.layout import ENVIRONMENT_BLOCKERS_FILE
from sk_runner.process import ProcessResult
from sk_runner.process.attempts import ATTEMPT, new_attempt_dir
from sk_runner.process.faults import tail_text

SCENE_SCHEMA = "sk-tune-failure-scene-v1"
SCENES_DIR = "FAILURE_SCENES"
BLOCKERS_FILE = ENVIRONMENT_BLOCKERS_FILE
STDERR_TAIL_CHARS = 4000

#: outcome -> category of the preliminary judgement; its sentence and next step are the catalogs'
#: ``scene.judgement.<outcome>`` and ``scene.next.<outcome>`` (``unknown`` for an outcome not listed)
CATEGORIES: dict[str, str] = {
    "crash": "execution",
    "timeout": "hang",
    "wrong_output": "correctness",
    "bad_logs": "artifacts",
    "invalid_value": "option_value",
    "value_differs": "option_value",
}


@dataclass
class SceneRecord:
    """Everything known about one failed attempt, before it is sealed."""

    session: Path
    round: str
    stage: str
    run: str
    outcome: str
    message: str
    argv: list[str]
    cwd: Path
    contract_env: Mapping[str, str]
    env_hash: str
    config_path: Path
    config_sha256: str
    config_diff: list[dict[str, Any]]
    timeout_s: float | None
    backend: str
    process: ProcessResult | None
    raw_dir: Path
    stdout_path: Path | None
    stderr_path: Path | None
    fingerprints: dict[str, Any]
    gate_progress: dict[str, Any]
    incumbent_config: Path
    incumbent_sha256: str
    rerun_command: list[str] = field(default_factory=list)
    words: dict[str, Any] | None = None
    """The failure's ``message`` as a recorded message (:func:`sk_runner.trial.outcome.worded`), kept in the scene so
    that the failed run is settled from it where its caller was killed before recording it (:func:`sealed_scene`)."""
    lang: str = DEFAULT_LANG
    """The language of the scene's sentences (``zh``: the keys ``judgement_zh``, ``note_zh``, ``next_step_zh``; ``en``: ``_en``)."""


def scenes_root(round_dir: Path) -> Path:
    return round_dir / SCENES_DIR


def _copy_artifacts(record: SceneRecord, dest: Path) -> list[dict[str, Any]]:
    """Copy raw outputs into ``dest`` unchanged; return their manifest."""
    dest.mkdir()
    if record.raw_dir.is_dir():
        copy_tree(record.raw_dir, dest / "run")
    if record.config_path.is_file():
        copy_file(record.config_path, dest / "config.json")
    files = []
    for path in sorted(p for p in dest.rglob("*") if p.is_file() and not p.is_symlink()):
        files.append({"path": path.relative_to(dest.parent).as_posix(), "sha256": sha256_file(path), "size": path.stat().st_size})
    return files


def scene_document(record: SceneRecord, attempt: int, folder: Path, files: list[dict[str, Any]]) -> dict[str, Any]:
    """The eight parts of protocol §8 as one JSON document."""
    lang = normal(record.lang)
    known = record.outcome in CATEGORIES
    category = CATEGORIES.get(record.outcome, "unknown")
    worded = record.outcome if known else "unknown"
    proc = record.process
    return {
        "schema_version": SCENE_SCHEMA,
        "identity": {
            "session": str(record.session),
            "round": record.round,
            "stage": record.stage,
            "run": record.run,
            "attempt": attempt,
            "scene_dir": str(folder),
            "sealed_ns": time.time_ns(),
            "trial_fingerprint": record.fingerprints.get("trial_fingerprint"),
        },
        "invocation": {
            "backend": record.backend,
            "argv": list(record.argv),
            "cwd": str(record.cwd),
            "contract_env": dict(record.contract_env),
            "env_hash": record.env_hash,
            "config_path": str(record.config_path),
            "config_sha256": record.config_sha256,
            "config_diff": record.config_diff,
            "timeout_s": record.timeout_s,
        },
        "observable_failure": {
            "outcome": record.outcome,
            # the scene names its own copy of a file, not the run folder that is moved aside after sealing
            "message": record.message.replace(f"{record.raw_dir}{os.sep}", f"{folder / 'artifacts' / 'run'}{os.sep}"),
            **({} if proc is None else proc.to_json()),
            "stderr_tail": tail_text(record.stderr_path, STDERR_TAIL_CHARS),
            **({} if record.words is None else {"words": record.words}),
        },
        "artifacts": {"files": files, "fingerprints": record.fingerprints},
        "gate_progress": record.gate_progress,
        "preliminary_judgement": {"category": category, "outcome": record.outcome, f"judgement_{lang}": text(f"scene.judgement.{worded}", lang)},
        "control_and_rollback": {
            "action": "restore_incumbent",
            "incumbent_config": str(record.incumbent_config),
            "incumbent_sha256": record.incumbent_sha256,
            "trial_status": "failed",
            f"note_{lang}": text("scene.rollback_note", lang),
        },
        "follow_up": {
            "rerun_trial": list(record.rerun_command),
            "reproduce_process": list(record.argv),
            "raw_outputs": [f["path"] for f in files],
            f"next_step_{lang}": text(f"scene.next.{worded}", lang),
        },
    }


def render_scene_md(doc: Mapping[str, Any], lang: str = DEFAULT_LANG) -> str:
    """Markdown of a scene document in ``lang`` (same facts as scene.json; its sentences are the document's own)."""
    lang = normal(lang)
    ident, inv, obs = doc["identity"], doc["invocation"], doc["observable_failure"]
    gate, judge, ctrl, follow = doc["gate_progress"], doc["preliminary_judgement"], doc["control_and_rollback"], doc["follow_up"]

    def line(msg_id: str, **facts: Any) -> str:  # every fact as an f-string shows it (None as "None", as before)
        return text(f"scene.md.{msg_id}", lang, **{name: str(value) for name, value in facts.items()})

    stage = text(f"scene.stage.{ident['stage']}", lang) if f"scene.stage.{ident['stage']}" in ids(lang) else ident["stage"]
    exit_text = obs.get("exit_code") if obs.get("signal") is None else line("signal", signal=obs.get("signal_name"))
    lines = [
        line("title", round=ident["round"], stage=stage, run=ident["run"], attempt=ident["attempt"]),
        "",
        line("h1"),
        line("session", session=ident["session"]),
        line("round", round=ident["round"], stage=stage, run=ident["run"]),
        line("trial_fingerprint", fingerprint=ident["trial_fingerprint"]),
        "",
        line("h2"),
        line("backend", backend=inv["backend"], timeout_s=inv["timeout_s"]),
        line("command", argv=json.dumps(inv["argv"], ensure_ascii=False)),
        line("cwd", cwd=inv["cwd"], env_hash=inv["env_hash"]),
        line("config", path=inv["config_path"], sha256=inv["config_sha256"]),
        line("config_diff", diff=json.dumps(inv["config_diff"], ensure_ascii=False)),
        "",
        line("h3"),
        line("outcome", outcome=obs["outcome"], message=obs["message"]),
        line("exit", exit=exit_text, timed_out=line("yes") if obs.get("timed_out") else line("no"), seconds=_seconds(obs.get("duration_s"))),
        "",
        "```text",
        obs.get("stderr_tail", "").rstrip()[-2000:],
        "```",
        "",
        line("h4"),
        *[line("file", path=f["path"], size=f["size"], sha256=f["sha256"]) for f in doc["artifacts"]["files"]],
        line("fingerprints", fingerprints=json.dumps(doc["artifacts"]["fingerprints"].get("fingerprints", {}), ensure_ascii=False)),
        "",
        line("h5"),
        line("gate", correctness=gate.get("correctness"), completed=gate.get("clean_runs_completed"), target=gate.get("clean_runs_target")),
        line("last_gate", last=gate.get("last_gate_passed")),
        "",
        line("h6"),
        line("category", category=judge["category"]),
        f"- {_worded(judge, 'judgement', lang)}",
        "",
        line("h7"),
        f"- {_worded(ctrl, 'note', lang)}",
        line("incumbent", path=ctrl["incumbent_config"], sha256=ctrl["incumbent_sha256"]),
        "",
        line("h8"),
        line("rerun", command=shlex.join(follow["rerun_trial"])) if follow["rerun_trial"] else line("rerun_unknown"),
        line("reproduce", command=shlex.join(follow["reproduce_process"])),
        line("next", next=_worded(follow, "next_step", lang)),
        "",
    ]
    return "\n".join(lines)


def _worded(part: Mapping[str, Any], name: str, lang: str) -> str:
    """A scene's own sentence ``<name>_<lang>``, else the one it was written with (a scene is never rewritten)."""
    return str(part.get(f"{name}_{lang}") or next(v for k, v in part.items() if k.startswith(f"{name}_")))


def _seconds(value: Any) -> str:
    return "—" if value is None else f"{float(value):.3f}"


def seal_scene(round_dir: Path, record: SceneRecord) -> Path:
    """Seal a new, never-overwritten scene folder for ``record``; return it."""
    attempt, folder = new_attempt_dir(scenes_root(round_dir))
    files = _copy_artifacts(record, folder / "artifacts")
    doc = scene_document(record, attempt, folder, files)
    write_text(folder / "scene.md", render_scene_md(doc, record.lang))
    write_json(folder / "scene.json", doc)  # last: its presence means "sealed"
    _make_read_only(folder)
    return folder


def sealed_scene(round_dir: Path, stage: str, run: str, trial_fingerprint: str) -> tuple[Path, dict[str, Any]] | None:
    """The newest sealed scene (folder, ``scene.json``) of ``run`` at ``stage`` of the trial ``trial_fingerprint`` in
    ``round_dir``; None when there is none (a half-written scene has no ``scene.json`` and is no scene)."""
    found = []
    for folder in scenes_root(round_dir).glob("attempt-*"):
        number = ATTEMPT.match(folder.name)
        if number is None or number.group(2) or not (folder / "scene.json").is_file():
            continue
        doc = load_json_file(folder / "scene.json")
        ident = doc.get("identity") or {}
        if (ident.get("stage"), ident.get("run"), ident.get("trial_fingerprint")) == (stage, run, trial_fingerprint):
            found.append((int(number.group(1)), folder, doc))
    return max(found, key=lambda item: item[0])[1:] if found else None


def _make_read_only(folder: Path) -> None:
    for path in folder.rglob("*"):
        if path.is_file() and not path.is_symlink():
            path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def record_blocker(round_dir: Path, *, round_name: str, stage: str, message: str,
                   extra: Mapping[str, Any] | None = None) -> Path | None:
    """Append one environment blocker (a failure before any command started, or of the machine).

    None when it could not be written because of the environment itself (the
    disk that stopped the step may still be full): the caller's error still
    says what happened, and the step is retried on resume.
    """
    path = round_dir / BLOCKERS_FILE
    line = json.dumps({"ts_ns": time.time_ns(), "round": round_name, "stage": stage, "message": message, **dict(extra or {})},
                      ensure_ascii=False, sort_keys=True)
    try:
        round_dir.mkdir(parents=True, exist_ok=True)
        append_bytes(path, (line + "\n").encode("utf-8"))
    except OSError as exc:
        if environment_errno(exc) is None:
            raise
        return None
    return path
