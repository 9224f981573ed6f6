"""Huawei's own analyzer reads the simulator's profiles: the real ``msprof-analyze`` (the ``interop``
extra) runs ``cluster``, ``compare`` and ``advisor`` on a small simulated DCCI pair of each export
type, exits 0 without one ERROR line, and its step breakdown is sk-tune's step time. The text
export is run through all three; the DB export through ``cluster`` (the same readers of the step
breakdown and communication, from SQLite).

Skipped with one line when msprof-analyze is not installed (``pip install -e '.[interop]'``).
"""

from __future__ import annotations

import csv
import json
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from test_dcci_e2e import DISABLE_ALL, ITERATIONS, O0, collect

from sk_analytics.contract import BASELINE_PROFILE, CANDIDATE_PROFILE
from sk_analytics.ingest.timings import parse_rank_log

MSPROF = Path(sys.executable).with_name("msprof-analyze")
pytestmark = pytest.mark.skipif(not MSPROF.exists(), reason="msprof-analyze not installed (pip install -e '.[interop]')")
RANKS = 2
SMALL_NETWORK = {"name": "interop-small", "base": "moe-decode", "layers": 2}
"""The default network with 2 layers instead of 16: every artifact kind, hcom ops included, in a small profile."""


@pytest.fixture(scope="module")
def pairs(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[Path, Path]]:
    """``pairs(export)`` -> (baseline root, candidate root): O0 and disable-all collections of RANKS ranks,
    sealed; each export type built once for the module."""
    built: dict[str, tuple[Path, Path]] = {}

    def get(export: str) -> tuple[Path, Path]:
        if export not in built:
            base = tmp_path_factory.mktemp(f"pair-{export}")
            network = base / "interop-small.json"
            network.write_text(json.dumps(SMALL_NETWORK), encoding="utf-8")
            kw = {"network": str(network), "export_type": export, "ranks": RANKS}
            built[export] = (collect(base, BASELINE_PROFILE, O0, seed=31, **kw), collect(base, CANDIDATE_PROFILE, DISABLE_ALL, seed=32, **kw))
        return built[export]

    return get


def _snapshot(root: Path) -> dict[str, int]:
    return {p.relative_to(root).as_posix(): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def _msprof(*args: str | Path, cwd: Path) -> str:
    """Run msprof-analyze, return its output; it must exit 0 and log no ERROR line."""
    done = subprocess.run([str(MSPROF), *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=600, check=False)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-3000:]
    errors = [line for line in output.splitlines() if "ERROR" in line]
    assert errors == [], "\n".join(errors)
    return output


def _rank_dirs(root: Path) -> list[Path]:
    return sorted(root.glob("*_ascend_pt"), key=lambda d: int(next(d.glob("profiler_info_*.json")).stem.split("_")[-1]))


def _cluster_step_rows(out: Path, export: str) -> list[dict[str, str]]:
    """The per-rank rows of cluster's step breakdown: ``cluster_step_trace_time.csv`` (text) or the
    ``ClusterStepTraceTime`` table of ``cluster_analysis.db`` (DB), under the CSV's column names."""
    folder = out / "cluster_analysis_output"
    if export == "text":
        with open(folder / "cluster_step_trace_time.csv", encoding="utf-8") as fh:
            return [r for r in csv.DictReader(fh) if r["Type"] == "rank"]
    with sqlite3.connect(folder / "cluster_analysis.db") as db:
        rows = db.execute('SELECT step, "index", computing, communication_not_overlapped, free FROM ClusterStepTraceTime WHERE type = ?',
                          ("rank",)).fetchall()  # fmt: skip
    return [dict(zip(("Step", "Index", "Computing", "Communication(Not Overlapped)", "Free"), map(str, r), strict=True)) for r in rows]


@pytest.mark.slow
@pytest.mark.parametrize("export", ["text", "db"])
def test_cluster_reads_every_rank_and_its_step_time_is_sk_tunes(pairs: Callable[[str], tuple[Path, Path]], export: str, tmp_path: Path) -> None:
    _, candidate = pairs(export)
    before = _snapshot(candidate)
    output = _msprof("cluster", "-d", candidate, "-m", "all", "-o", tmp_path / "out", cwd=tmp_path)
    assert f"Finish allocate profiling data: {RANKS} ranks, data type: {export}, profiling type: pytorch" in output
    assert _snapshot(candidate) == before  # the sealed collection is only read
    rows = _cluster_step_rows(tmp_path / "out", export)
    assert {int(r["Index"]) for r in rows} == set(range(RANKS))
    assert len(rows) == RANKS * ITERATIONS
    for rank in range(RANKS):
        decode = parse_rank_log(candidate / f"log_{rank}.log").frame.filter(phase="decode").sort("sample_index")["value_ms"].to_list()
        cluster = {int(r["Step"]): float(r["Computing"]) + float(r["Communication(Not Overlapped)"]) + float(r["Free"])
                   for r in rows if int(r["Index"]) == rank}  # fmt: skip
        assert sorted(cluster) == list(range(1, ITERATIONS + 1))
        for step, wall_us in cluster.items():  # the log has 3 decimals in ms: 0.5 µs, plus the CSV's rounding
            assert wall_us == pytest.approx(decode[step - 1] * 1000.0, abs=0.6), (rank, step)


@pytest.mark.slow
def test_compare_reads_both_sides(pairs: Callable[[str], tuple[Path, Path]], tmp_path: Path) -> None:
    baseline, candidate = pairs("text")
    output = _msprof("compare", "-d", _rank_dirs(candidate)[0], "-bp", _rank_dirs(baseline)[0], "-o", tmp_path / "cmp", cwd=tmp_path)
    assert "Failed to read profiler_info" not in output
    assert list((tmp_path / "cmp").glob("performance_comparison_result_*.xlsx"))


@pytest.mark.slow
def test_advisor_all(pairs: Callable[[str], tuple[Path, Path]], tmp_path: Path) -> None:
    _, candidate = pairs("text")
    _msprof("advisor", "all", "-d", candidate, "-o", tmp_path / "adv", cwd=tmp_path)
    assert list((tmp_path / "adv").glob("mstt_advisor_*.html"))
