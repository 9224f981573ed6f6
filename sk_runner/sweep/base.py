"""Freeze Sbest-BASE: the final incumbent's source, scope, config, options, command and five fingerprints."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from jsonpointer import resolve_pointer

from sk_analytics.errors import IntegrityError
from sk_analytics.files.atomic import write_json
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.fingerprint import fingerprint
from sk_analytics.stage_o.machine import FreezeBase
from sk_analytics.stage_o.matrix import load_matrix
from sk_runner.sweep.session import SweepSession, session_relative
from sk_runner.trial import complete_runs, round_dir_of

BASE_SCHEMA = "sk-tune-sbest-base-v1"
BASE_FILE = Path("BASE") / "sbest-base.json"


def freeze_base(session: SweepSession, action: FreezeBase) -> tuple[Path, dict[str, Any]]:
    """Write ``BASE/sbest-base.json`` once (a resumed freeze reuses and re-verifies it).

    Takes the session, not the executor that calls it: the executor imports this module, never the reverse."""
    root = session.root
    path = root / BASE_FILE
    if path.is_file():
        frozen: dict[str, Any] = load_json_file(path)
        body = {k: v for k, v in frozen.items() if k != "base_fingerprint"}
        if frozen.get("base_fingerprint") != fingerprint(body) or frozen.get("round") != action.round:
            raise IntegrityError(f"{path}: Sbest-BASE identity was edited or belongs to another round")
        return path, frozen
    round_dir = round_dir_of(root, action.round)
    config = load_json_file(round_dir / "config.json")
    trial = load_json_file(round_dir / "trial.json")
    runs = complete_runs(round_dir)
    family = session.policy.gate == "family"  # its incumbents keep every run they were extended to
    if len(runs) < session.policy.incumbent_runs or (len(runs) != session.policy.incumbent_runs and not family):
        needs = "at least" if family else "exactly"
        raise IntegrityError(f"{round_dir}: BASE needs {needs} {session.policy.incumbent_runs} clean runs, found {len(runs)}")
    metas = [load_json_file(round_dir / "CLEAN" / f"run-{k}" / "meta.json") for k in runs]
    matrix = load_matrix(root / "matrix.json")
    fps = trial["fingerprints"]
    identity: dict[str, Any] = {
        "schema_version": BASE_SCHEMA,
        "name": "Sbest-BASE",
        "round": action.round,
        "source_revision": fps.get("source_revision"),
        "scope": fps.get("workload"),
        "control": fps.get("control"),
        "config_path": session_relative(root, round_dir / "config.json"),
        "config": config,
        "config_fingerprint": fingerprint(config),
        "options_root": matrix["options_root"],
        "options": resolve_pointer(config, matrix["options_root"], None),
        "option_changes": [{"pointer": c.pointer, "value": c.value} for c in action.option_changes],
        "accepted_entries": list(action.accepted_entries),
        "command": metas[0]["command"],
        "run_fingerprints": [{"run": f"run-{k}", "fingerprint": meta["fingerprint"]} for k, meta in zip(runs, metas, strict=True)],
        "fingerprints": fps.get("fingerprints"),
        "trial_fingerprint": fps.get("trial_fingerprint"),
        "frozen_ns": time.time_ns(),
    }
    identity["base_fingerprint"] = fingerprint(identity)
    write_json(path, identity)
    return path, identity
