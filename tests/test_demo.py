"""sk-run demo: a small sample session generated, ingested and summarised."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sk_analytics.cli._base import run_cli
from sk_runner.cli import cli
from sk_runner.demo.cli import RANKS, RUNS, WARMUP


def _worst_rank_means(session: Path) -> dict[str, float]:
    """Independent reference: read the generated logs as text."""
    result = {}
    for run in sorted((session / "experiments/Sbest/O0-INCUMBENT/CLEAN").iterdir()):
        means = []
        for log in sorted(run.glob("log_*.log")):
            values = [float(v) for v in re.findall(r"Inference time \(decode\): ([0-9.]+) ms", log.read_text())]
            means.append(sum(values[WARMUP:]) / len(values[WARMUP:]))
        result[run.name] = max(means)
    return result


def test_demo_generates_ingests_and_summarises(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = tmp_path / "demo"
    assert run_cli(cli, "sk-run", ["demo", "--samples", "--session", str(session)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"sample session: {session} ({RUNS * RANKS + 1} artifacts ingested into {session / 'data'})\n")
    for run, mean in _worst_rank_means(session).items():
        assert f"  {run}: {mean:.3f} ms\n" in out
    assert "profile: 600 kernels, " in out and "SuperKernel rows" in out
    parts = sorted(p.relative_to(session / "data").as_posix() for p in (session / "data").rglob("*.parquet"))
    assert parts == [
        "kernels/round=O0-INCUMBENT/role=profile/run=profile/part-0.parquet",
        *[f"timings/round=O0-INCUMBENT/role=baseline/run=run-{k}/part-0.parquet" for k in range(1, RUNS + 1)],
    ]
    assert run_cli(cli, "sk-run", ["demo", "--samples", "--session", str(session)]) == 0  # a demo folder is replaced
    assert capsys.readouterr().out == out


def test_demo_refuses_a_folder_it_did_not_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "evidence.txt").write_text("keep me")
    assert run_cli(cli, "sk-run", ["demo", "--samples", "--session", str(tmp_path)]) == 2
    assert "is not a demo session" in capsys.readouterr().err
    assert (tmp_path / "evidence.txt").read_text() == "keep me"
