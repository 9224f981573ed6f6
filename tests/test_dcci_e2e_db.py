"""dcci-diff end to end on a DB-exported pair (torch_npu export_type=Db): the simulator writes
ascend_pytorch_profiler_<rank>.db instead of kernel_details.csv/trace_view.json/task_time, the
contract accepts it as the profiler file role, and the diff is the text pair's."""

from __future__ import annotations

from pathlib import Path

import polars as pl
from test_dcci_e2e import WARMUP, check_against_truth, pair

from sk_analytics.dcci.pipeline import dcci_diff
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.ingest import ingest_path


def test_db_exported_pair_gives_the_text_pairs_diff(tmp_path: Path) -> None:
    base, cand, truth = pair(tmp_path / "db", "moe-decode", (11, 12), export_type="db")
    text_base, text_cand, _ = pair(tmp_path / "text", "moe-decode", (11, 12))
    for root in (base, cand):
        assert list(root.rglob("kernel_details.csv")) == [] and list(root.rglob("trace_view.json")) == []
        (db,) = root.rglob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db")
        files = load_json_file(root / "collection-manifest.json")["files"]
        assert [r["path"] for r in files["profiler_db"]] == [db.relative_to(root).as_posix()]
    result = dcci_diff(base, cand, warmup=WARMUP)
    check_against_truth(result, truth)
    text = dcci_diff(text_base, text_cand, warmup=WARMUP)
    assert [(s["scope_name"], s["class"]) for s in result["sks"]] == [(s["scope_name"], s["class"]) for s in text["sks"]]
    assert result["repair"]["list"] == text["repair"]["list"]
    # the DB export ingests to kernels like the text one (the same launches written both ways is
    # checked row for row in test_ingest_profiler_db; two processes differ in pids and clocks)
    db_kernels = pl.read_parquet(ingest_path(base, tmp_path / "data-db").written[0])
    text_kernels = pl.read_parquet(next(p for p in ingest_path(text_base, tmp_path / "data-text").written if "kernels" in p.as_posix()))
    assert db_kernels.height == text_kernels.height > 0
    assert db_kernels["is_sk"].sum() == text_kernels["is_sk"].sum() > 0
    assert db_kernels["step_id"].unique().sort().to_list() == text_kernels["step_id"].unique().sort().to_list()
