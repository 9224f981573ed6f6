"""Failure scenes (protocol §8) and environment blockers.

Once a workload command has started, any failure first seals a scene:
``<round dir>/FAILURE_SCENES/attempt-<n>/`` with ``scene.json`` (the eight
required parts), ``scene.md`` (the same in Chinese) and ``artifacts/`` (raw
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
from sk_analytics.fingerprint import sha256_file
from sk_analytics.stage_o.layout import ENVIRONMENT_BLOCKERS_FILE
from sk_runner.process import ProcessResult
from sk_runner.process.attempts import new_attempt_dir
from sk_runner.process.faults import tail_text

SCENE_SCHEMA = "sk-tune-failure-scene-v1"
SCENES_DIR = "FAILURE_SCENES"
BLOCKERS_FILE = ENVIRONMENT_BLOCKERS_FILE
STDERR_TAIL_CHARS = 4000

#: outcome -> (category, Chinese judgement, Chinese next step)
JUDGEMENTS: dict[str, tuple[str, str, str]] = {
    "crash": (
        "execution",
        "进程非零退出或被信号终止（崩溃/设备错误），本次试验失败。",
        "查看 stderr 与 plog 中的设备错误码，确认是否由该选项值引起。",
    ),
    "timeout": (
        "hang",
        "进程在超时时间内未结束，疑似挂死；已先 TERM 再 KILL 整个进程组。",
        "在隔离进程中缩短迭代数复现，确认挂死与该选项值的关系。",
    ),
    "wrong_output": (
        "correctness",
        "输出校验失败（correctness.json 中 passed 不为 true），结果不可信。",
        "对比参考输出与实际输出的差异，确认该选项是否需要算子侧适配。",
    ),
    "bad_logs": (
        "artifacts",
        "进程正常结束，但 rank 日志或正确性结果缺失/无法解析，无法作为干净样本。",
        "检查工作负载是否按约定在 run 目录写入 log_<rank>.log 与 correctness.json。",
    ),
    "invalid_value": (
        "option_value",
        "运行时判定该选项值非法并回退为默认值（super_kernel.log），实际未生效。",
        "改用 probe 结果为 ready=true 的精确值，或将该候选记为 blocked。",
    ),
}

STAGE_ZH = {"probe": "精确值探测", "correctness": "正确性运行", "clean": "干净性能运行"}


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
    category, judgement_zh, next_zh = JUDGEMENTS.get(record.outcome, ("unknown", "未分类的失败。", "人工检查原始输出。"))
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
        },
        "artifacts": {"files": files, "fingerprints": record.fingerprints},
        "gate_progress": record.gate_progress,
        "preliminary_judgement": {"category": category, "outcome": record.outcome, "judgement_zh": judgement_zh},
        "control_and_rollback": {
            "action": "restore_incumbent",
            "incumbent_config": str(record.incumbent_config),
            "incumbent_sha256": record.incumbent_sha256,
            "trial_status": "failed",
            "note_zh": "本次尝试失败：恢复上一个 incumbent 配置；现场不可覆盖，重试会生成新的 attempt 目录。",
        },
        "follow_up": {
            "rerun_trial": list(record.rerun_command),
            "reproduce_process": list(record.argv),
            "raw_outputs": [f["path"] for f in files],
            "next_step_zh": next_zh,
        },
    }


def render_scene_md(doc: Mapping[str, Any]) -> str:
    """Chinese Markdown of a scene document (same facts as scene.json)."""
    ident, inv, obs = doc["identity"], doc["invocation"], doc["observable_failure"]
    gate, judge, ctrl, follow = doc["gate_progress"], doc["preliminary_judgement"], doc["control_and_rollback"], doc["follow_up"]
    exit_text = obs.get("exit_code") if obs.get("signal") is None else f"信号 {obs.get('signal_name')}"
    lines = [
        f"# 失败现场：{ident['round']} / {STAGE_ZH.get(ident['stage'], ident['stage'])} / {ident['run']} / 第 {ident['attempt']} 次尝试",
        "",
        "## 1. 身份与阶段",
        f"- 会话：`{ident['session']}`",
        f"- 轮次：{ident['round']}；阶段：{STAGE_ZH.get(ident['stage'], ident['stage'])}；运行：{ident['run']}",
        f"- 试验指纹：`{ident['trial_fingerprint']}`",
        "",
        "## 2. 冻结的调用",
        f"- 后端：{inv['backend']}；超时：{inv['timeout_s']} 秒",
        f"- 命令：`{json.dumps(inv['argv'], ensure_ascii=False)}`",
        f"- 工作目录：`{inv['cwd']}`；环境哈希：`{inv['env_hash']}`",
        f"- 配置：`{inv['config_path']}`（SHA-256 `{inv['config_sha256']}`）",
        f"- 配置差异（RFC 6902）：`{json.dumps(inv['config_diff'], ensure_ascii=False)}`",
        "",
        "## 3. 可观察的失败",
        f"- 结果：{obs['outcome']}；{obs['message']}",
        f"- 退出码：{exit_text}；超时被杀：{'是' if obs.get('timed_out') else '否'}；耗时：{_seconds(obs.get('duration_s'))} 秒",
        "",
        "```text",
        obs.get("stderr_tail", "").rstrip()[-2000:],
        "```",
        "",
        "## 4. 现场产物",
        *[f"- `{f['path']}`（{f['size']} 字节，SHA-256 `{f['sha256']}`）" for f in doc["artifacts"]["files"]],
        f"- 指纹：`{json.dumps(doc['artifacts']['fingerprints'].get('fingerprints', {}), ensure_ascii=False)}`",
        "",
        "## 5. 门禁进度",
        f"- 正确性：{gate.get('correctness')}；已完成干净运行：{gate.get('clean_runs_completed')} / {gate.get('clean_runs_target')}",
        f"- 最后通过的门禁：{gate.get('last_gate_passed')}",
        "",
        "## 6. 初步判断",
        f"- 类别：{judge['category']}",
        f"- {judge['judgement_zh']}",
        "",
        "## 7. 控制与回滚",
        f"- {ctrl['note_zh']}",
        f"- incumbent 配置：`{ctrl['incumbent_config']}`（SHA-256 `{ctrl['incumbent_sha256']}`）",
        "",
        "## 8. 后续入口",
        f"- 重新运行本试验：`{shlex.join(follow['rerun_trial'])}`" if follow["rerun_trial"] else "- 重新运行本试验：见 sk-run trial",
        f"- 单独复现进程：`{shlex.join(follow['reproduce_process'])}`",
        f"- 下一步：{follow['next_step_zh']}",
        "",
    ]
    return "\n".join(lines)


def _seconds(value: Any) -> str:
    return "—" if value is None else f"{float(value):.3f}"


def seal_scene(round_dir: Path, record: SceneRecord) -> Path:
    """Seal a new, never-overwritten scene folder for ``record``; return it."""
    attempt, folder = new_attempt_dir(scenes_root(round_dir))
    files = _copy_artifacts(record, folder / "artifacts")
    doc = scene_document(record, attempt, folder, files)
    write_text(folder / "scene.md", render_scene_md(doc))
    write_json(folder / "scene.json", doc)  # last: its presence means "sealed"
    _make_read_only(folder)
    return folder


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
