"""Builders of small capture roots for the contract and profile tests.

The files are written by the test itself between ``begin`` and ``finalize``,
exactly as a producer would write them (profiler output + SK metadata).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from sk_analytics.contract import ProducerInfo, begin, command_fingerprint, finalize
from sk_analytics.contract.manifest import UNSIGNED_KEYS, sign_manifest
from sk_analytics.contract.scan import MANIFEST_NAME
from sk_analytics.fingerprint import fingerprint

PROFILER_FILES = (
    "host_1_20260101_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
    "host_1_20260101_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json",
    "host_1_20260101_ascend_pt/ASCEND_PROFILER_OUTPUT/task_time.csv",
)
SK_META_FILES = (
    "sk_meta/4242/model_1_1/sk_graph_origin.json",
    "sk_meta/4242/model_1_1/sk_graph_updated.json",
    "sk_meta/4242/model_1_1/sk_fused_nodes.log",
    "sk_meta/4242/model_1_1/sk_scope_split.log",
    "sk_meta/4242/model_1_1/super_kernel.log",
    "sk_meta/4242/model_1_1/sk_task_queue.json",
)
SK_PROF_FILE = "sk_meta/4242/sk_prof_device_0.json"
ALL_FILES = (*PROFILER_FILES, *SK_META_FILES, SK_PROF_FILE, "log_0.log")

WORKLOAD: dict[str, Any] = {
    "model": "moe-decode",
    "input": "prompts-128",
    "batch_size": 4,
    "rank": 8,
    "mode": "decode",
    "warmup": 8,
    "iterations": 40,
    "runtime": "sim",
}
CONTROL: dict[str, Any] = {"round": "DCCI", "timeout_s": 600, "sk_prof_kb": 1024}
BASE_CONFIG: dict[str, Any] = {
    "static_kernel_compile": True,
    "super_kernel_optimize": True,
    "super_kernel_optimize_options": {"auto_op_parallel": 0},
}
DCCI_POINTER = "/super_kernel_optimize_options/dcci_disable_on_kernel"


def disable_all(config: dict[str, Any]) -> dict[str, Any]:
    """``config`` plus dcci_disable_on_kernel = [".*"] (the first DCCI trial)."""
    opts = dict(config["super_kernel_optimize_options"], dcci_disable_on_kernel=[".*"])
    return {**config, "super_kernel_optimize_options": opts}


def make_collection(
    base: Path,
    role: str,
    *,
    config: dict[str, Any],
    workload: dict[str, Any] | None = None,
    control: dict[str, Any] | None = None,
    files: tuple[str, ...] = ALL_FILES,
    pid: int = 4242,
    name: str | None = None,
    source_revision: str = "0123abcd",
    require_sk_prof: bool = False,
) -> Path:
    """begin -> write ``files`` -> finalize; return the sealed root."""
    label = name or role
    root = base / label / "root"
    session = base / label / "session.json"
    begin(role, root, session)
    started = time.time_ns()
    for rel in files:
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"{label}:{rel}\n", encoding="utf-8")
    finalize(
        session,
        source_revision=source_revision,
        config=config,
        control=control if control is not None else CONTROL,
        workload=workload if workload is not None else WORKLOAD,
        producer=ProducerInfo(pid, started, time.time_ns(), command_fingerprint(["python", "-m", "workload"])),
        require_sk_prof=require_sk_prof,
    )
    return root


def edit_manifest(
    root: Path, edit: Callable[[dict[str, Any]], None], *, refingerprint: bool, resign: bool = True
) -> None:
    """Change a sealed manifest in place, as a forger would. ``refingerprint``
    recomputes ``manifest_fingerprint`` and (``resign``) signs it again with the
    test run's trusted key — a forger *holding the key* — so that only the edit
    itself can be caught; ``resign=False`` keeps the old signature (a forger without the key)."""
    path = root / MANIFEST_NAME
    data = json.loads(path.read_text())
    edit(data)
    if refingerprint:
        data["manifest_fingerprint"] = fingerprint({k: v for k, v in data.items() if k not in UNSIGNED_KEYS})
        if resign:
            data = sign_manifest(data, root)
    path.write_text(json.dumps(data))
