"""``open_campaign``: one hive-partitioned scan per table over every session, read alike by Polars, DuckDB and pyarrow."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

import sk_analytics as ska
from sk_analytics.campaign import campaign_files, campaign_glob
from sk_analytics.campaign.options import ENTRY_SCHEMA, option_summary
from sk_analytics.errors import InputError
from sk_analytics.schema import TIMINGS
from sk_analytics.tables import write_table


def timings(values: list[float]) -> pl.DataFrame:
    n = len(values)
    return pl.DataFrame({"run_index": [1] * n, "rank": [0] * n, "phase": ["decode"] * n, "sample_index": list(range(n)),
                         "value_ms": values, "value_text": [str(v) for v in values], "line": list(range(1, n + 1)),
                         "source_file": ["run-1/log_0.log"] * n})


def make_campaign(root: Path, sessions: dict[str, dict[str, list[float]]]) -> None:
    """Session folders laid out as a campaign writes them, each with timings per round."""
    for name, rounds in sessions.items():
        data = root / "sessions" / f"session={name}" / "data"
        for rnd, values in rounds.items():
            write_table(timings(values), TIMINGS, data, {"round": rnd, "role": "trial", "run": "run-1"})


SESSIONS = {"a-1": {"O0-INCUMBENT": [10.0, 12.0], "O1": [9.0]}, "b-1": {"O0-INCUMBENT": [20.0]}, "b-2": {}}


def test_one_scan_with_a_session_column_in_polars_duckdb_and_pyarrow(tmp_path: Path) -> None:
    make_campaign(tmp_path, SESSIONS)
    tables = ska.open_campaign(tmp_path)
    assert set(tables) >= {"timings", "runs", "kernels"}
    lf = tables["timings"]
    plan = lf.explain()
    assert plan.count("Parquet SCAN") == 1 or plan.count("SCAN") == 1  # one scan, not a concat of per-session scans
    polars_rows = lf.group_by("session", "round").agg(pl.col("value_ms").sum()).sort("session", "round").collect().rows()
    expected = [("a-1", "O0-INCUMBENT", 22.0), ("a-1", "O1", 9.0), ("b-1", "O0-INCUMBENT", 20.0)]
    assert polars_rows == expected
    duckdb = pytest.importorskip("duckdb")
    duck_rows = duckdb.sql(f"select session, round, sum(value_ms) from read_parquet('{campaign_glob(tmp_path, 'timings')}', "
                           "hive_partitioning = true) group by all order by all").fetchall()
    assert duck_rows == expected
    schema = pa.schema([("session", pa.string()), ("round", pa.string()), ("role", pa.string()), ("run", pa.string())])
    dataset = ds.dataset([str(f) for f in campaign_files(tmp_path, "timings")], format="parquet",
                         partitioning=ds.partitioning(schema, flavor="hive"), partition_base_dir=str(tmp_path / "sessions"))
    arrow = dataset.to_table(columns=["session", "round", "value_ms"]).group_by(["session", "round"]).aggregate([("value_ms", "sum")])
    assert sorted(zip(*(arrow.column(c).to_pylist() for c in ("session", "round", "value_ms_sum")), strict=True)) == expected
    # a table no session has is an empty frame with the right columns
    assert tables["kernels"].collect().height == 0 and "session" in tables["kernels"].collect_schema()


def test_a_damaged_file_and_a_non_campaign_are_named(tmp_path: Path) -> None:
    make_campaign(tmp_path, SESSIONS)
    bad = next(iter(campaign_files(tmp_path, "timings")))
    bad.write_bytes(b"PAR1 not really")
    with pytest.raises(InputError, match="not a readable Parquet file"):
        ska.open_campaign(tmp_path)
    with pytest.raises(InputError, match="not a campaign root"):
        ska.open_campaign(tmp_path / "sessions")


def test_option_summary_verdicts() -> None:
    rows = [
        # session, node, entry, option, value, status, gain
        ("s1", "a", "x-1", "x", "1", "accepted", 3.0), ("s2", "b", "x-1", "x", "1", "accepted", 4.0),
        ("s1", "a", "y-1", "y", "1", "accepted", 2.0), ("s2", "b", "y-1", "y", "1", "rejected", -1.0),
        ("s1", "a", "z-1", "z", "1", "accepted", 5.0), ("s2", "b", "z-1", "z", "1", "blocked", None),
        ("s1", "a", "w-1", "w", "1", "failed", None), ("s2", "b", "w-1", "w", "1", "rejected", 0.1),
        ("s1", "a", "v-1", "v", "1", "blocked", None), ("s2", "b", "v-1", "v", "1", "blocked", None),
    ]
    entries = pl.DataFrame(rows, schema=ENTRY_SCHEMA, orient="row")
    summary = option_summary(entries)
    assert summary.select("entry_id", "verdict").rows() == [
        ("x-1", "generalises"), ("y-1", "mixed"), ("z-1", "single"), ("w-1", "never"), ("v-1", "untested")]
    x = summary.row(0, named=True)
    assert (x["sessions"], x["accepted"], x["rejected"], x["failed"], x["blocked"]) == (2, 2, 0, 0, 0)
    assert (x["improvement_median_pct"], x["improvement_min_pct"], x["improvement_max_pct"]) == (3.5, 3.0, 4.0)
    w = summary.row(3, named=True)
    assert (w["failed"], w["rejected"], w["improvement_median_pct"]) == (1, 1, 0.1)


def test_open_session_still_reads_one_session_of_a_campaign(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    make_campaign(tmp_path, SESSIONS)
    for where in (tmp_path, tmp_path / "sessions"):  # absolute and relative paths alike
        monkeypatch.chdir(where)
        folder = Path("sessions/session=a-1" if where == tmp_path else "session=a-1")
        lf = ska.open_session(folder)["timings"]
        assert "session" not in lf.collect_schema()
        assert lf.group_by("round").len().sort("round").collect().rows() == [("O0-INCUMBENT", 2), ("O1", 1)]
    assert ska.open_session(tmp_path / "sessions" / "session=b-1")["timings"].collect().height == 1


DOC = Path(__file__).resolve().parents[1] / "docs" / "campaign.md"


def _doc_block(marker: str) -> str:
    """The ```python block of docs/campaign.md that contains ``marker``."""
    blocks = DOC.read_text(encoding="utf-8").split("```python\n")[1:]
    return next(b.split("```", 1)[0] for b in blocks if marker in b)


def test_the_docs_pyarrow_and_duckdb_snippet_runs_as_written(tmp_path: Path) -> None:
    """docs/campaign.md's cross-session snippet (it once used an undefined `schema`) runs on a campaign tree."""
    pytest.importorskip("duckdb")
    make_campaign(tmp_path, SESSIONS)
    namespace: dict[str, object] = {}
    exec(compile(_doc_block("campaign_files").replace('root = "ROOT"', f"root = {str(tmp_path)!r}"), "campaign.md", "exec"),  # noqa: S102 -- the doc's own snippet
         namespace)
    counts = namespace["timings"].to_table(columns=["session", "value_ms"]).group_by("session").aggregate([("value_ms", "count")])
    assert sorted(zip(counts.column("session").to_pylist(), counts.column("value_ms_count").to_pylist(), strict=True)) == [("a-1", 3), ("b-1", 1)]


def test_the_docs_task_recipe_writes_a_task_that_validates(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from sk_runner.sweep.phase import validate_task

    monkeypatch.chdir(tmp_path)
    exec(compile(_doc_block("superkernel-stage-o-task-v1"), "campaign.md", "exec"), {})  # noqa: S102 -- the doc's own recipe
    task = validate_task(tmp_path / "tasks" / "sim" / "task.json")
    assert task is not None
    broken = tmp_path / "tasks" / "sim" / "seed.json"
    broken.write_text('{"super_kernel_optimize": false}', encoding="utf-8")  # the SEED no longer hashes to its fingerprint
    from sk_analytics.errors import IntegrityError

    with pytest.raises(IntegrityError, match="does not match seed.config_fingerprint"):
        validate_task(tmp_path / "tasks" / "sim" / "task.json")


def test_a_campaign_report_of_no_session_is_refused_and_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A campaign root whose sessions folder holds no session: the report would be an empty table, so exit 2 names
    the folder and nothing is written; a session that has not finished is still reported (a fact, not a hollow report)."""
    from sk_analytics.cli import cli
    from sk_analytics.cli._base import run_cli

    (tmp_path / "root" / "sessions" / "not-a-session").mkdir(parents=True)
    out = tmp_path / "out"
    assert run_cli(cli, "sk-analyze", ["campaign", str(tmp_path / "root"), "--lang", "en", "--out", str(out)]) == 2
    assert capsys.readouterr().err == (f"sk-analyze: error: {tmp_path / 'root' / 'sessions'}: no session folder: the campaign "
                                       "holds no session to report on (expected sessions/session=<name>/ folders written by "
                                       "sk-run campaign)\n")
    assert not out.exists()
    (tmp_path / "root" / "sessions" / "session=a-1").mkdir()
    assert run_cli(cli, "sk-analyze", ["campaign", str(tmp_path / "root"), "--lang", "en", "--out", str(out)]) == 0
    assert "| a-1 | — | unfinished | — |" in (out / "CAMPAIGN_REPORT.md").read_text(encoding="utf-8")
