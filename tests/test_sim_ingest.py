"""Every artifact of a simulated profiling process ingests with the foundation parsers into
Parquet, and the tables agree with each other: sk_prof (skId, nodeId) <-> sk_fused_nodes
(scope id, [i]) <-> graph dump symbols <-> kernel_details SK names <-> super_kernel.log options."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from sk_analytics.ingest.collect import ingest_run_dir
from sk_analytics.tables import scan_table
from sk_runner.sim.runner import SimRequest, run

ITERATIONS = 10
OPTIONS = {"dcci_disable_on_kernel": [".*"], "split_mode": 9, "auto_op_parallel": 1}


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    tmp = tmp_path_factory.mktemp("ingest")
    cfg = tmp / "config.json"
    cfg.write_text(json.dumps({"super_kernel_optimize_options": OPTIONS}))
    run_dir = tmp / "run-1"
    env = {"ASCEND_PROF_SK_ON": "1024", "ASCEND_OP_COMPILE_SAVE_KERNEL_META": "1", "SK_RUN_PROFILE": "1"}
    # one profiled process: the ids joined below are per process (every rank's layout: test_sim_profile)
    assert run(SimRequest(config=cfg, run_dir=run_dir, ranks=2, iterations=ITERATIONS, seed=3, env=env, profile_ranks="0")) == 0
    report = ingest_run_dir(run_dir, tmp / "data", "DIAG", "diag-candidate", "run-1")
    return tmp / "data", report


def _table(data_dir: Path, name: str) -> pl.DataFrame:
    return scan_table(data_dir, name).collect()


def test_every_artifact_ingests_without_warnings(data: tuple[Path, object]) -> None:
    data_dir, report = data
    kinds = sorted({f.kind for f in report.files})
    assert kinds == ["fused_nodes", "graph_dump", "kernel_details", "rank_log", "sk_prof", "super_kernel_log"]
    other = [w for f in report.files if f.kind != "super_kernel_log" for w in f.warnings]
    assert other == []
    rows = report.rows_by_table()
    assert rows["timings"] == 2 * (1 + ITERATIONS)
    assert rows["kernels"] == 164 * ITERATIONS
    assert rows["sk_structure"] == 450 and rows["sk_events"] > 100_000


def test_sk_prof_node_ids_are_fused_nodes_indices(data: tuple[Path, object]) -> None:
    data_dir, _ = data
    events = _table(data_dir, "sk_events")
    structure = _table(data_dir, "sk_structure")
    children = events.filter(~pl.col("is_span")).select("sk_id", "node_id", "func_name", "canonical_op").unique()
    joined = children.join(
        structure.select("scope_id", "child_index", "member_kind", pl.col("func_name").alias("fused_func"), pl.col("canonical_op").alias("fused_op")),
        left_on=["sk_id", "node_id"], right_on=["scope_id", "child_index"], how="left",
    )
    assert joined["member_kind"].to_list() == ["kernel"] * joined.height
    assert (joined["func_name"] == joined["fused_func"]).all()
    assert (joined["canonical_op"] == joined["fused_op"]).all()
    # every kernel member of every SK has events; event members never do
    kernels = structure.filter(pl.col("member_kind") == "kernel").select("scope_id", "child_index")
    assert kernels.join(children, left_on=["scope_id", "child_index"], right_on=["sk_id", "node_id"], how="anti").height == 0
    spans = events.filter(pl.col("is_span")).select("sk_id", "func_name").unique()
    heads = structure.select("scope_id", "sk_func_name").unique()
    assert spans.join(heads, left_on=["sk_id", "func_name"], right_on=["scope_id", "sk_func_name"], how="anti").height == 0
    assert spans.height == heads.height == 129


def test_symbols_cover_every_fused_child_and_sk(data: tuple[Path, object]) -> None:
    data_dir, _ = data
    symbols = _table(data_dir, "symbols")
    structure = _table(data_dir, "sk_structure")
    origin = set(symbols.filter(pl.col("graph") == "origin")["func_name"])
    assert set(structure["func_name"].drop_nulls()) <= origin
    updated_sk = set(symbols.filter((pl.col("graph") == "updated") & pl.col("func_name").str.starts_with("sk_"))["func_name"])
    assert updated_sk == set(structure["sk_func_name"])
    kernels = _table(data_dir, "kernels")
    assert set(kernels.filter(pl.col("is_sk"))["name"]) == updated_sk
    assert set(kernels.filter(~pl.col("is_sk"))["canonical_op"]) == {"Embedding", "hcom_allReduce", "hcom_allGather", "ArgMaxV2"}
    # the canonical op of each symbol is the op name of the spec
    ops = symbols.filter(pl.col("graph") == "origin").select("func_name", "canonical_op").unique()
    assert (ops.select(pl.col("func_name").str.extract(r"^static_kernel_([A-Za-z0-9]+)_") == ops["canonical_op"]).to_series()).all()


def test_super_kernel_log_markers(data: tuple[Path, object]) -> None:
    data_dir, _ = data
    markers = _table(data_dir, "sk_markers")
    sets = markers.filter(pl.col("kind") == "option_set").select("option_name", "value_text").rows()
    assert sets == [("dcci_disable_on_kernel", '[".*"]'), ("auto_op_parallel", "1")]
    invalid = markers.filter(pl.col("kind") == "option_invalid").row(0, named=True)
    assert (invalid["option_name"], invalid["value_text"], invalid["valid_range"], invalid["default_text"]) == ("split_mode", "9", "[1, 4]", "4")
    assert markers.filter(pl.col("kind") == "buffer_full").height == 0
    assert set(markers.filter(pl.col("kind") == "phase")["text"].str.extract(r"^(Begin|End)")) == {"Begin", "End"}
