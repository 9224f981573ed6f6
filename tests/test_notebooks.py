"""The example notebooks: stored without outputs, their DuckDB cell agrees with Polars, and both run
top to bottom with a real Jupyter kernel on a simulator session that has a DCCI diagnosis."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl
import pytest

if not os.environ.get("CI"):  # a virtualenv made before the notebooks extra existed: say so, do not break collection
    pytest.importorskip("nbclient", reason="the notebooks extra is not installed: make .venv/.installed (or pip install -e '.[notebooks]')")
import nbformat
from nbclient import NotebookClient
from sweep_helpers import SHORT_PROFILE_POLICY, settled_statuses, small_session

from sk_analytics import explore as ex
from sk_analytics.schema import TIMINGS
from sk_analytics.stage_o.machine import O0
from sk_analytics.tables import write_table
from sk_runner.sweep.driver import run_sweep

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
NAMES = ["dcci-deep-dive.ipynb", "explore-stage-o-session.ipynb"]
EXPECTED = {  # what the session's evidence must surface in each notebook's outputs
    "dcci-deep-dive.ipynb": ["repair_proposed", "significantly_slower", "static_kernel_MoeInitRoutingV2_", "aligned"],
    "explore-stage-o-session.ipynb": ["O0 spread", "Sbest-BASE", "auto-op-parallel-1", "p90_no_material_regression"],
}
FIRST_CELL = re.compile(r'^SESSION = "\.\./demo-session"$', re.MULTILINE)


def _read(name: str) -> nbformat.NotebookNode:
    return nbformat.read(EXAMPLES / name, as_version=4)


def test_notebooks_are_stored_without_outputs_and_start_with_the_session_path() -> None:
    assert sorted(p.name for p in EXAMPLES.glob("*.ipynb")) == NAMES
    for name in NAMES:
        nb = _read(name)
        nbformat.validate(nb)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert [(c.outputs, c.execution_count) for c in code] == [([], None)] * len(code), f"{name} is stored with outputs"
        assert nb.cells[0].cell_type == "code" and FIRST_CELL.search(nb.cells[0].source), f"{name}: first cell is not the path"


def problems(nb: nbformat.NotebookNode) -> list[str]:
    """Every error output and everything a cell wrote to stderr (warnings, e.g. a missing column)."""
    found = []
    for index, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []):
            if out.get("output_type") == "error" or (out.get("output_type") == "stream" and out.get("name") == "stderr"):
                what = " ".join(str(part) for part in (out.get("ename"), out.get("evalue"), out.get("text")) if part)
                found.append(f"cell {index}: {what}")
    return found


def test_problems_finds_warnings_and_errors() -> None:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x"), nbformat.v4.new_code_cell("y")])
    nb.cells[0].outputs = [nbformat.v4.new_output("stream", name="stdout", text="fine\n")]
    assert problems(nb) == []
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stderr", text="MissingColumnWarning: dcci-diff sks: no record has mwu_q")]
    assert problems(nb) == ["cell 1: MissingColumnWarning: dcci-diff sks: no record has mwu_q"]


def _write_timings(data: Path) -> None:
    """Two rounds, two ranks, a tie (O0 run-2: both ranks average 10.25) that must go to the lowest rank."""
    means = {(O0, "baseline", "run-1"): ["10.0", "10.4"], (O0, "baseline", "run-2"): ["10.25", "10.25"],
             ("O1", "trial", "run-1"): ["9.9", "9.5"], ("O1", "trial", "run-10"): ["9.4", "9.8"]}
    for (round_, role, run), per_rank in means.items():
        rows: list[dict[str, Any]] = []
        for rank, value in enumerate(per_rank):
            texts = ["50.0", "50.0", *([value] * 10)]  # two warm-up samples that a wrong filter would average in
            rows += [{"run_index": int(run.split("-")[1]), "rank": rank, "phase": "decode", "sample_index": i,
                      "value_ms": float(t), "value_text": t, "line": i + 1, "source_file": f"{run}/log_{rank}.log"}
                     for i, t in enumerate(texts)]
        write_table(pl.DataFrame(rows), TIMINGS, data, {"round": round_, "role": role, "run": run})


def test_the_duckdb_cell_answers_like_polars(tmp_path: Path) -> None:
    """Run the notebook's own DuckDB cell (its SQL and its asserts) over a Parquet tree with a tie."""
    _write_timings(tmp_path / "data")
    cell = next(c for c in _read("explore-stage-o-session.ipynb").cells if "duckdb" in c.metadata.get("tags", []))
    metrics = ex.run_metrics(pl.scan_parquet(str(tmp_path / "data/timings/**/*.parquet"), hive_partitioning=True), 2)
    namespace: dict[str, Any] = {"SESSION": str(tmp_path), "metrics": metrics, "Path": Path, "pl": pl}
    exec(compile(cell.source.replace('"warmup": 8', '"warmup": 2'), "duckdb-cell", "exec"), namespace)  # noqa: S102 -- the notebook's own cell, the point of the test
    in_sql = namespace["in_sql"].sort("round", "run")
    assert in_sql.select("round", "run", "worst_rank").rows() == [
        (O0, "run-1", 1), (O0, "run-2", 0), ("O1", "run-1", 0), ("O1", "run-10", 1)]
    assert in_sql["worst_rank_mean_ms"].to_list() == pytest.approx([10.4, 10.25, 9.9, 9.8], abs=1e-12)


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The smallest simulator session with every chart's data: noisy runs, an accepted and a rejected
    option, and DCCI's regression -> diagnosis -> accepted repair (≈1 min on 2 cores)."""
    from sk_runner.profile import engine as profile

    root = tmp_path_factory.mktemp("nb") / "session"
    with pytest.MonkeyPatch.context() as patch:  # pin the collections' source revision (see test_sweep_dcci)
        patch.setattr(profile, "source_revision", lambda path, files=(): {"revision": "pinned-for-test"})
        run_sweep(small_session(root, ["dcci-disable-all", "auto-op-parallel-1", "split-mode-3"], network="moe-decode", noise=0.5,
                                policy=SHORT_PROFILE_POLICY), say=lambda _: None)
    assert settled_statuses(root) == {"dcci-disable-all": "accepted", "auto-op-parallel-1": "accepted", "split-mode-3": "rejected"}
    yield root


@pytest.mark.slow
@pytest.mark.parametrize("name", NAMES)
def test_notebook_runs_top_to_bottom_on_a_session(session: Path, name: str) -> None:
    nb = _read(name)
    nb.cells[0].source = f"SESSION = {str(session)!r}"
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(EXAMPLES)}}).execute()
    assert problems(nb) == []
    charts = sum("image/png" in out.get("data", {}) for cell in nb.cells for out in cell.get("outputs", []))
    assert charts == 5, f"{name}: {charts} charts"
    texts = "\n".join(out.get("text", "") or str(out.get("data", {}).get("text/plain", ""))
                      for cell in nb.cells for out in cell.get("outputs", []))
    for expected in EXPECTED[name]:
        assert expected in texts, f"{name}: no output mentions {expected!r}"
