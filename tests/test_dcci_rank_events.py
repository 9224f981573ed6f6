"""dcci-diff reads a multi-rank collection one rank at a time, and decides exactly as the whole-side read did (issue 34).

The "old" result below is the code before the change, run in place: every pass of
``analyze`` (and of ``--tables-out``) given the whole side's events at once. The
streamed result must be that result byte for byte (JSON and both reports), from the
raw traces and from the session's ingested table; every pass must see one process.
``--tables-out`` and ``--trace-out`` likewise give the whole-side files. The ingest
streams ``sk_events`` one trace per row group, the source records in the footer,
with the rows and metadata of the held write.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pyarrow.parquet as pq
import pytest
from polars.testing import assert_frame_equal
from test_dcci_e2e import WARMUP, pair
from test_dcci_ingested import _part, _session

from sk_analytics.cli import cli
from sk_analytics.cli._base import run_cli
from sk_analytics.dcci import analysis, pipeline, rank_events, trace
from sk_analytics.dcci.occurrences import EVENT_COLUMNS, SK_KEYS, child_timings, sk_occurrences
from sk_analytics.dcci.pipeline import dcci_diff, load_pair, write_derived_tables
from sk_analytics.dcci.rank_events import child_timings_by_process, occurrences_by_process, process_events
from sk_analytics.dcci.report import render
from sk_analytics.errors import InputError
from sk_analytics.ingest import collect, ingest_run_dir
from sk_analytics.ingest.sources import read_sources
from sk_analytics.tables import scan_table

RANKS = 3


@pytest.fixture(scope="module")
def collections(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base, cand, _ = pair(tmp_path_factory.mktemp("pair"), "moe-decode", (11, 12), ranks=RANKS)
    return base, cand


@pytest.fixture
def streamed_ingest(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every sk_events partition past one trace goes on the streamed path (a 3-rank test profile is small)."""
    monkeypatch.setattr(collect, "HOLD_ROWS", 1)


def _whole_side(monkeypatch: pytest.MonkeyPatch) -> None:
    """The code before the change: each pass over the whole side's events at once."""
    monkeypatch.setattr(analysis, "process_events", lambda events, by_process=None: {"*": events.select(EVENT_COLUMNS)})
    monkeypatch.setattr(analysis, "occurrences_by_process", lambda parts: sk_occurrences(parts["*"]))
    monkeypatch.setattr(analysis, "child_timings_by_process", lambda parts, occurrences: child_timings(parts["*"], occurrences))


def _outputs(base: Path, cand: Path, session: Path | None) -> tuple[str, str, str]:
    result = dcci_diff(base, cand, warmup=WARMUP, session=session)
    return json.dumps(result, ensure_ascii=False, sort_keys=True), render(result, "zh"), render(result, "en")


@pytest.mark.parametrize("source", ["raw traces", "ingested table"])
def test_streamed_diff_is_the_whole_side_diff(collections: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             streamed_ingest: None, source: str) -> None:
    base, cand = collections
    session = _session(tmp_path, base, cand) if source == "ingested table" else None
    streamed = _outputs(base, cand, session)
    with monkeypatch.context() as old:
        _whole_side(old)
        whole = _outputs(base, cand, session)
    assert streamed == whole
    result = json.loads(streamed[0])
    assert result["ranks"]["ranks"] == list(range(RANKS)) and result["summary"]["significantly_slower_uids"]
    assert result["children"] and result["repair"]["proposed"]


def test_each_pass_reads_one_process(collections: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: dict[str, list[list[str]]] = {"sk_occurrences": [], "child_timings": []}

    def recording(name: str, fn: Callable[..., pl.DataFrame]) -> Callable[..., pl.DataFrame]:
        def wrapper(events: pl.LazyFrame, *args: Any) -> pl.DataFrame:
            seen[name].append(events.select(pl.col("process").unique()).collect().get_column("process").to_list())
            return fn(events, *args)
        return wrapper

    monkeypatch.setattr(rank_events, "sk_occurrences", recording("sk_occurrences", sk_occurrences))
    monkeypatch.setattr(rank_events, "child_timings", recording("child_timings", child_timings))
    base, cand = collections
    result = dcci_diff(base, cand, warmup=WARMUP)
    assert len(seen["sk_occurrences"]) == 2 * RANKS  # both sides, one process at a time
    assert seen["child_timings"] and all(len(processes) == 1 for calls in seen.values() for processes in calls)
    for calls in seen.values():  # --trace-out's passes too
        calls.clear()
    loaded = load_pair(base, cand)
    sides = {"baseline": loaded.baseline, "candidate": loaded.candidate}
    trace.write_trace(tmp_path / "trace.json", result, {role: process_events(s.events, s.by_process) for role, s in sides.items()},
                      {role: s.structure for role, s in sides.items()})
    assert len(seen["sk_occurrences"]) == 2 * RANKS
    assert seen["child_timings"] and all(len(processes) == 1 for calls in seen.values() for processes in calls)


@pytest.mark.parametrize("source", ["raw traces", "ingested table"])
def test_by_process_gives_the_whole_side_rows(collections: tuple[Path, Path], tmp_path: Path, streamed_ingest: None,
                                             source: str) -> None:
    base, cand = collections
    session = _session(tmp_path, base, cand) if source == "ingested table" else None
    side = load_pair(base, cand, session=session).candidate
    parts = process_events(side.events, side.by_process)
    assert list(parts) == sorted(p.name for p in (base.parent.parent / "candidate_profile" / "root" / "sk_meta").iterdir())
    for process, events in parts.items():  # each scan holds its own process's rows, and only those
        frame = events.select(EVENT_COLUMNS).collect()
        assert frame.height and frame.get_column("process").unique().to_list() == [process]
    events = side.events.select(EVENT_COLUMNS)
    whole = sk_occurrences(events)
    assert_frame_equal(occurrences_by_process(parts), whole, check_exact=True)
    # a subset of SKs (what the diff decomposes), every rank taking part
    chosen = whole.select(SK_KEYS).unique(maintain_order=True).group_by("process", maintain_order=True).head(2)
    subset = whole.join(chosen, on=list(SK_KEYS), how="semi", maintain_order="left")
    for occurrences in (whole, subset):
        assert_frame_equal(child_timings_by_process(parts, occurrences), child_timings(events, occurrences), check_exact=True)
    # the per-process events of the loader and the filtered whole side give the same rows
    filtered = process_events(side.events)
    assert list(filtered) == list(parts)
    assert_frame_equal(occurrences_by_process(filtered), whole, check_exact=True)


def test_derived_tables_are_the_whole_side_tables(collections: tuple[Path, Path], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    base, cand = collections
    loaded = load_pair(base, cand)
    write_derived_tables(loaded, tmp_path / "streamed")
    with monkeypatch.context() as old:
        old.setattr(pipeline, "process_events", lambda events, by_process=None: {"*": events.select(EVENT_COLUMNS).collect().lazy()})
        old.setattr(pipeline, "occurrences_by_process", lambda parts: sk_occurrences(parts["*"]))
        old.setattr(pipeline, "child_timings_by_process", lambda parts, occurrences: child_timings(parts["*"], occurrences))
        write_derived_tables(loaded, tmp_path / "whole")
    for table in ("sk_occurrences", "sk_children"):
        new, old_rows = scan_table(tmp_path / "streamed", table).collect(), scan_table(tmp_path / "whole", table).collect()
        assert new.height > 0
        assert_frame_equal(new, old_rows, check_exact=True)


@pytest.mark.parametrize("source", ["raw traces", "ingested table"])
def test_trace_out_is_the_whole_side_trace(collections: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          streamed_ingest: None, source: str) -> None:
    """``dcci-diff --trace-out`` reads each side a process at a time and writes the trace the whole-side read wrote, byte for byte."""
    base, cand = collections
    session = _session(tmp_path, base, cand) if source == "ingested table" else None
    out = tmp_path / "trace.json"
    args = ["dcci-diff", "--baseline", str(base), "--candidate", str(cand), "--warmup", str(WARMUP),
            "--json-out", str(tmp_path / "diff.json"), "--trace-out", str(out)] + (["--session", str(session)] if session else [])
    assert run_cli(cli, "sk-analyze", args) == 0
    result = json.loads((tmp_path / "diff.json").read_text(encoding="utf-8"))
    loaded = load_pair(base, cand, session=session)
    with monkeypatch.context() as old:  # the code before: each side's events whole, one sk_occurrences / child_timings call
        old.setattr(trace, "occurrences_by_process", lambda parts: sk_occurrences(parts["*"]))
        old.setattr(trace, "child_timings_by_process", lambda parts, occurrences: child_timings(parts["*"], occurrences))
        whole = trace.write_trace(tmp_path / "whole.json", result, {
            "baseline": {"*": loaded.baseline.events.select(EVENT_COLUMNS)},
            "candidate": {"*": loaded.candidate.events.select(EVENT_COLUMNS)},
        }, {"baseline": loaded.baseline.structure, "candidate": loaded.candidate.structure})  # fmt: skip
    assert out.read_bytes() == whole.read_bytes()
    slices = [e for e in json.loads(out.read_text(encoding="utf-8"))["traceEvents"] if e["ph"] == "X"]
    assert {e["args"]["rank"] for e in slices} == set(range(RANKS))  # every rank, both threads, flags present
    assert {e["tid"] for e in slices} == {trace.SK_THREAD, trace.CHILD_THREAD} and any(e["cat"] == "sk,slower" for e in slices)


def test_occurrences_must_keep_each_process_together(collections: tuple[Path, Path]) -> None:
    side = load_pair(*collections).baseline
    parts = process_events(side.events, side.by_process)
    occurrences = occurrences_by_process(parts)
    interleaved = occurrences.sort("occurrence", *SK_KEYS)
    with pytest.raises(ValueError, match="rows of each process together"):
        child_timings_by_process(parts, interleaved)
    empty = child_timings_by_process(parts, occurrences.head(0))
    assert empty.height == 0 and empty.columns == child_timings(side.events.select(EVENT_COLUMNS), occurrences.head(0)).columns


def _events_file(written: list[Path]) -> Path:
    (part,) = [p for p in written if "sk_events" in p.parts]
    return part


def test_sk_events_stream_one_trace_per_row_group(collections: tuple[Path, Path], tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    base, _ = collections
    held = _events_file(ingest_run_dir(base, tmp_path / "held", "DCCI", "baseline_profile", base.name).written)
    monkeypatch.setattr(collect, "HOLD_ROWS", 1)
    streamed = _events_file(ingest_run_dir(base, tmp_path / "streamed", "DCCI", "baseline_profile", base.name).written)
    meta = pq.ParquetFile(streamed).metadata
    assert pq.ParquetFile(held).metadata.num_row_groups == 1 and meta.num_row_groups == RANKS
    files = []
    for i in range(meta.num_row_groups):  # each row group holds one trace: its statistics name that one source
        stats = meta.row_group(i).column(pq.read_schema(streamed).get_field_index("source_file")).statistics
        assert stats.min == stats.max
        files.append(stats.min)
    assert files == list(read_sources(streamed) or {})
    assert_frame_equal(pl.read_parquet(streamed), pl.read_parquet(held), check_exact=True)
    assert read_sources(streamed) == read_sources(held) and len(files) == RANKS
    assert pq.read_schema(streamed) == pq.read_schema(held) and pq.read_schema(streamed).metadata == pq.read_schema(held).metadata
    assert pq.ParquetFile(streamed).metadata.metadata == pq.ParquetFile(held).metadata.metadata  # the footer write_table makes
    assert sorted(p.name for p in streamed.parent.iterdir()) == ["part-0.parquet"]  # no temp left beside it
    # one trace streamed is one row group: byte for byte the held file
    one = next(base.glob("sk_meta/*"))
    monkeypatch.setattr(collect, "HOLD_ROWS", 1 << 30)
    whole = _events_file(ingest_run_dir(one, tmp_path / "one-held", "DCCI", "r", "k").written)
    monkeypatch.setattr(collect, "HOLD_ROWS", 1)
    assert _events_file(ingest_run_dir(one, tmp_path / "one-streamed", "DCCI", "r", "k").written).read_bytes() == whole.read_bytes()


def test_streamed_ingest_is_reused_by_the_diff(collections: tuple[Path, Path], tmp_path: Path, streamed_ingest: None) -> None:
    base, cand = collections
    session = _session(tmp_path, base, cand)
    assert pq.ParquetFile(_part(session, "candidate_profile", cand)).metadata.num_row_groups == RANKS
    reused = load_pair(base, cand, session=session)
    assert reused.baseline.spill is None and reused.candidate.spill is None  # the table, not a second parse
    assert dcci_diff(base, cand, warmup=WARMUP, session=session) == dcci_diff(base, cand, warmup=WARMUP)


def test_bad_later_trace_leaves_no_streamed_events(collections: tuple[Path, Path], tmp_path: Path, streamed_ingest: None) -> None:
    base, _ = collections
    copy = tmp_path / "root"
    for path in sorted(p for p in base.rglob("*") if p.is_file()):
        target = copy / path.relative_to(base)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    last = sorted(copy.glob("sk_meta/*/sk_*_device_*.json"))[-1]
    lines = last.read_text(encoding="utf-8").splitlines(keepends=True)
    lines[2] = lines[2].replace('"ph":"X"', '"ph":"B"', 1)
    assert '"ph":"B"' in lines[2]
    last.write_text("".join(lines), encoding="utf-8")
    out = tmp_path / "out"
    with pytest.raises(InputError, match=r"ph is not \"X\""):
        ingest_run_dir(copy, out, "DCCI", "baseline_profile", "attempt-1")
    assert not out.exists()  # the traces streamed before it, and every folder made for them, are gone
