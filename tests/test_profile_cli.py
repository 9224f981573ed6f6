"""``sk-run profile`` exit codes and output (command backend, producer written by the test)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from test_profile_runner import CONFIG, PRODUCER, WORKLOAD

from sk_analytics.cli._base import run_cli
from sk_runner.cli import cli


def _args(tmp_path: Path, mode: str) -> list[str]:
    (tmp_path / "producer.py").write_text(PRODUCER)
    (tmp_path / "config.json").write_text(json.dumps(CONFIG))
    (tmp_path / "workload.json").write_text(json.dumps(WORKLOAD))
    (tmp_path / "s").mkdir(exist_ok=True)  # profile, like trial, refuses a missing session folder
    return ["profile", "--session", str(tmp_path / "s"), "--round", "DCCI", "--role", "candidate_profile",
            "--config", str(tmp_path / "config.json"), "--iterations", "12", "--warmup", "2", "--ranks", "1",
            "--backend", "command", "--workload", str(tmp_path / "workload.json"), "--no-ingest",
            "--", sys.executable, str(tmp_path / "producer.py"), mode]


def test_complete_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(cli, "sk-run", [*_args(tmp_path, "ok")[:-4], "--json", *_args(tmp_path, "ok")[-4:]]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["status"] == "complete" and result["iterations"] == 12
    assert result["ingest"] is None  # --no-ingest: nothing ingested, said as null (never {}, an ingest that found nothing)
    assert result["root"].endswith("experiments/Sbest/DCCI/diag/candidate_profile/attempt-1")


def test_blocked_exits_1_with_chinese_reason(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(cli, "sk-run", _args(tmp_path, "crash")) == 1
    out = capsys.readouterr().out
    assert "blocked: producer exited with code 3" in out and "阻断原因：采集进程退出码为 3" in out


def test_command_backend_needs_a_command(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _args(tmp_path, "ok")
    assert run_cli(cli, "sk-run", args[: args.index("--")]) == 2
    assert "needs the workload command" in capsys.readouterr().err
