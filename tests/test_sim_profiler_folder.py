"""The simulator's complete torch_npu profiler folder (issue 35): every file a real export holds that the
simulator can make truthful, consistent with itself and with the rank logs, and read or ignored by
sk-tune's ingest by name. Offline: the real msprof-analyze run is tests/test_msprof_interop.py."""

from __future__ import annotations

import csv
import io
import json
import sqlite3
from pathlib import Path

import pytest

from sk_analytics.contract.roles import OTHER, classify
from sk_analytics.files.atomic import atomic_dir
from sk_analytics.ingest.discover import discover, kind_of
from sk_analytics.ingest.timings import parse_rank_log
from sk_runner.sim.network import AIC_CORES, AIV_CORES
from sk_runner.sim.profiler import MSPROF_STEP_TRACE_HEADER, OP_SUMMARY_HEADER
from sk_runner.sim.runner import SimRequest, run

ITERATIONS = 5
RANKS = 2
ENV = {"SK_RUN_PROFILE": "1", "ASCEND_LAUNCH_BLOCKING": "1"}
NEW_TEXT_FILES = {
    "profiler_info_{r}.json", "profiler_metadata.json", "ASCEND_PROFILER_OUTPUT/communication.json",
    "ASCEND_PROFILER_OUTPUT/communication_matrix.json", "PROF/host/info.json", "PROF/host/host_start.log", "PROF/host/start_info",
    "PROF/host/end_info", "PROF/device_{r}/info.json.{r}", "PROF/device_{r}/sample.json", "PROF/device_{r}/start_info.{r}",
    "PROF/device_{r}/end_info.{r}", "PROF/mindstudio_profiler_output/op_summary_S.csv", "PROF/mindstudio_profiler_output/step_trace_S.csv",
}  # fmt: skip
"""Files besides the ones sk-tune already wrote (kernel_details, trace_view, step_trace_time, task_time);
``PROF`` = the ``PROF_*`` folder, ``S`` = the msprof export stamp."""


def _run(tmp_path: Path, export: str) -> Path:
    cfg = tmp_path / "cfg.json"
    cfg.write_text(json.dumps({"super_kernel_optimize_options": {}}), encoding="utf-8")
    network = tmp_path / "small.json"
    network.write_text(json.dumps({"name": "small", "base": "moe-decode", "layers": 2}), encoding="utf-8")
    out = tmp_path / export
    assert run(SimRequest(config=cfg, run_dir=out, ranks=RANKS, iterations=ITERATIONS, seed=9, network=str(network), env=ENV,
                          export_type=export)) == 0  # fmt: skip
    return out


@pytest.fixture(scope="module")
def text_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("text"), "text")


@pytest.fixture(scope="module")
def db_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _run(tmp_path_factory.mktemp("db"), "db")


def _rank_folder(run_dir: Path, rank: int) -> Path:
    return next(d for d in run_dir.glob("*_ascend_pt") if (d / f"profiler_info_{rank}.json").is_file())


def _generic(folder: Path, rank: int) -> set[str]:
    """The folder's files with the PROF_* name, the rank and the export stamp made generic."""
    prof = next(folder.glob("PROF_*")).name
    names = set()
    for p in folder.rglob("*"):
        if p.is_file():
            rel = p.relative_to(folder).as_posix().replace(prof, "PROF").replace(f"_{rank}.", "_{r}.")
            rel = rel.replace(f"device_{rank}/", "device_{r}/").replace(f".json.{rank}", ".json.{r}").replace(f"info.{rank}", "info.{r}")
            stem, _, ext = rel.rpartition(".")
            names.add(f"{stem.rsplit('_', 1)[0]}_S.{ext}" if stem.rsplit("_", 1)[-1].isdigit() and len(stem.rsplit("_", 1)[-1]) == 14 else rel)
    return names


def test_text_export_is_the_complete_folder(text_run: Path) -> None:
    for rank in range(RANKS):
        names = _generic(_rank_folder(text_run, rank), rank)
        old = {"ASCEND_PROFILER_OUTPUT/kernel_details.csv", "ASCEND_PROFILER_OUTPUT/trace_view.json",
               "ASCEND_PROFILER_OUTPUT/step_trace_time.csv", "PROF/mindstudio_profiler_output/task_time_S.csv"}  # fmt: skip
        assert names == old | NEW_TEXT_FILES, names ^ (old | NEW_TEXT_FILES)
    assert not list(text_run.rglob(".*.tmp"))  # the atomic folder's temp is gone


def test_db_export_is_the_public_db_sample_layout(db_run: Path) -> None:
    for rank in range(RANKS):
        folder = _rank_folder(db_run, rank)
        assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == [
            "ASCEND_PROFILER_OUTPUT/analysis.db", f"ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_{rank}.db", f"profiler_info_{rank}.json"]
        assert json.loads((folder / f"profiler_info_{rank}.json").read_text())["config"]["experimental_config"]["_export_type"] == "db"


def test_clocks_agree_across_the_files(text_run: Path) -> None:
    """profiler_info's system counter, the msprof start/end files and host_start.log tell one clock:
    epoch - monotonic is the same offset everywhere, the counter runs at freq MHz, and the collection holds every step."""
    for rank in range(RANKS):
        folder = _rank_folder(text_run, rank)
        info = json.loads((folder / f"profiler_info_{rank}.json").read_text())
        assert info["rank_id"] == rank
        env = json.loads((folder / "profiler_metadata.json").read_text())["ENV_VARIABLES"]
        assert env["ASCEND_LAUNCH_BLOCKING"] == "1" and env["HCCL_RDMA_TC"] == ""  # the process's own environment
        start, end = info["start_info"], info["end_info"]
        assert start["syscnt_enable"] is True and start["start_cnt"] == start["start_monotonic"] * start["freq"] // 1000
        offset = end["collectionTimeEnd"] - end["MonotonicTimeEnd"]
        prof = next(folder.glob("PROF_*"))
        for part in ("host/start_info", f"device_{rank}/start_info.{rank}"):
            s = json.loads((prof / part).read_text())
            assert int(s["collectionTimeBegin"]) * 1000 - int(s["clockMonotonicRaw"]) == pytest.approx(offset, abs=1000)
            assert int(s["clockMonotonicRaw"]) == start["start_monotonic"]
        e = json.loads((prof / f"device_{rank}/end_info.{rank}").read_text())
        assert int(e["collectionTimeEnd"]) == end["collectionTimeEnd"] // 1000
        host_start = dict(line.split(": ") for line in (prof / "host/host_start.log").read_text().splitlines()[1:])
        assert int(host_start["clock_monotonic_raw"]) == start["start_monotonic"]
        device = json.loads((prof / f"device_{rank}/info.json.{rank}").read_text())["DeviceInfo"][0]
        assert (device["id"], device["ai_core_num"], device["aiv_num"]) == (rank, AIC_CORES, AIV_CORES)
        trace = json.loads((folder / "ASCEND_PROFILER_OUTPUT/trace_view.json").read_text())
        step_marks = [e for e in trace if e.get("name", "").startswith("ProfilerStep#")]
        assert start["start_monotonic"] + offset <= float(step_marks[0]["ts"]) * 1000
        assert (float(step_marks[-1]["ts"]) + step_marks[-1]["dur"]) * 1000 <= end["collectionTimeEnd"] + 1000


def _csv(path: Path) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8"))))


def test_step_breakdown_adds_up_to_the_logged_step_time(text_run: Path) -> None:
    """Computing + Communication(Not Overlapped) + Free is the rank's logged decode time (the figure
    msprof-analyze's cluster reports per rank), in step_trace_time.csv and msprof's step_trace_*.csv alike."""
    for rank in range(RANKS):
        folder = _rank_folder(text_run, rank)
        decode = parse_rank_log(text_run / f"log_{rank}.log").frame.filter(phase="decode").sort("sample_index")["value_ms"].to_list()
        rows = _csv(folder / "ASCEND_PROFILER_OUTPUT/step_trace_time.csv")
        assert [int(r["Step"]) for r in rows] == list(range(1, ITERATIONS + 1))
        for r, ms in zip(rows, decode, strict=True):
            wall = float(r["Computing"]) + float(r["Communication(Not Overlapped)"]) + float(r["Free"])
            assert wall == pytest.approx(ms * 1000.0, abs=0.6)
            assert float(r["Overlapped"]) == pytest.approx(float(r["Communication"]) - float(r["Communication(Not Overlapped)"]), abs=0.002)
            assert min(float(r[c]) for c in ("Computing", "Communication", "Free", "Overlapped")) >= 0
        msprof = next(folder.glob("PROF_*/mindstudio_profiler_output/step_trace_*.csv"))
        assert msprof.read_text().splitlines()[0] == MSPROF_STEP_TRACE_HEADER
        iterations = _csv(msprof)
        assert [float(r["Iteration Time(us)"]) for r in iterations] == pytest.approx([ms * 1000.0 for ms in decode], abs=0.6)
        assert all(r["Iteration End(us)"].endswith("\t") and r["Device_id"] == str(rank) for r in iterations)


def test_op_summary_is_kernel_details_under_msprofs_names(text_run: Path) -> None:
    folder = _rank_folder(text_run, 0)
    details = _csv(folder / "ASCEND_PROFILER_OUTPUT/kernel_details.csv")
    summary_path = next(folder.glob("PROF_*/mindstudio_profiler_output/op_summary_*.csv"))
    assert summary_path.read_text().splitlines()[0] == OP_SUMMARY_HEADER
    summary = _csv(summary_path)
    assert [r["Op Name"] for r in summary] == [r["Name"] for r in details]
    assert [r["Task Start Time(us)"] for r in summary] == [r["Start Time(us)"] for r in details]
    hcom = [r for r in summary if r["Task Type"] == "COMMUNICATION"]
    assert hcom and all((r["Task ID"], r["Stream ID"], r["Task Wait Time(us)"]) == ("N/A", "N/A", "0") for r in hcom)
    assert len(list(folder.glob("PROF_*/mindstudio_profiler_output/task_time_*.csv"))) == 1


def test_communication_json_lists_every_hcom_op_of_every_step(text_run: Path) -> None:
    folder = _rank_folder(text_run, 1)
    details = _csv(folder / "ASCEND_PROFILER_OUTPUT/kernel_details.csv")
    comm = json.loads((folder / "ASCEND_PROFILER_OUTPUT/communication.json").read_text())
    assert list(comm) == [f"step{s}" for s in range(1, ITERATIONS + 1)]
    other = json.loads((_rank_folder(text_run, 0) / "ASCEND_PROFILER_OUTPUT/communication.json").read_text())
    groups = {key.split("@")[1] for step in (comm, other) for key in step["step1"]["collective"] if key != "Total Op Info"}
    assert len(groups) == 1  # one tensor-parallel group on every rank
    for step in range(1, ITERATIONS + 1):
        ops = {k.split("@")[0]: v for k, v in comm[f"step{step}"]["collective"].items() if k != "Total Op Info"}
        expected = {r["Name"]: float(r["Duration(us)"]) for r in details if r["Step Id"] == str(step) and r["Accelerator Core"] == "COMMUNICATION"}
        assert {k: v["Communication Time Info"]["Elapse Time(ms)"] * 1000 for k, v in ops.items()} == pytest.approx(expected, abs=0.01)
        total = comm[f"step{step}"]["collective"]["Total Op Info"]["Communication Time Info"]["Elapse Time(ms)"]
        assert total * 1000 == pytest.approx(sum(expected.values()), abs=0.01)
    matrix = json.loads((folder / "ASCEND_PROFILER_OUTPUT/communication_matrix.json").read_text())
    assert matrix == {f"step{s}": {"p2p": {}, "collective": {}} for s in range(1, ITERATIONS + 1)}


def test_analysis_db_holds_the_same_breakdown(db_run: Path) -> None:
    folder = _rank_folder(db_run, 0)
    decode = parse_rank_log(db_run / "log_0.log").frame.filter(phase="decode").sort("sample_index")["value_ms"].to_list()
    with sqlite3.connect(folder / "ASCEND_PROFILER_OUTPUT/analysis.db") as db:
        rows = db.execute("SELECT step, computing + communication_not_overlapped + free FROM StepTraceTime ORDER BY CAST(step AS INT)").fetchall()
        hcom = db.execute("SELECT COUNT(*), COUNT(DISTINCT group_name) FROM CommAnalyzerTime").fetchone()
    assert [int(s) for s, _ in rows] == list(range(1, ITERATIONS + 1))
    assert [w for _, w in rows] == pytest.approx([ms * 1000 for ms in decode], abs=0.6)
    assert hcom[0] > 0 and hcom[1] == 1
    with sqlite3.connect(folder / "ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db") as db:
        marks = db.execute("SELECT s.value, p.startNs, p.endNs FROM PYTORCH_API p JOIN STRING_IDS s ON p.name = s.id ORDER BY p.startNs").fetchall()
        steps = db.execute("SELECT id, startNs, endNs FROM STEP_TIME ORDER BY id").fetchall()
    assert [(f"ProfilerStep#{i}", str(s), str(e)) for i, s, e in steps] == marks


@pytest.mark.parametrize("export", ["text", "db"])
def test_ingest_reads_the_new_files_by_name_or_not_at_all(text_run: Path, db_run: Path, export: str) -> None:
    """Discovery finds exactly the kernels source of each rank (kernel_details.csv or the profiler DB), never
    op_summary, analysis.db or a PROF_* file; the contract lists the new files as ``other``."""
    run_dir = text_run if export == "text" else db_run
    found = [a for a in discover(run_dir) if a.kind.table == "kernels"]
    expected = "kernel_details.csv" if export == "text" else "ascend_pytorch_profiler_{}.db"
    assert sorted(a.path.relative_to(_rank_folder(run_dir, r)).as_posix() for r in range(RANKS) for a in found
                  if a.path.is_relative_to(_rank_folder(run_dir, r))) == sorted(
        f"ASCEND_PROFILER_OUTPUT/{expected.format(r)}" for r in range(RANKS))
    assert len(found) == RANKS
    for folder in run_dir.glob("*_ascend_pt"):
        for path in folder.rglob("*"):
            if (path.is_file() and path.name not in ("kernel_details.csv", "trace_view.json")
                    and not path.name.startswith(("ascend_pytorch_profiler_", "task_time_"))):
                assert kind_of(path) is None, path
                assert classify(path.relative_to(run_dir).as_posix()) == OTHER, path


def test_atomic_dir_is_complete_or_absent(tmp_path: Path) -> None:
    target = tmp_path / "rank_ascend_pt"
    with pytest.raises(RuntimeError), atomic_dir(target) as tmp:
        (tmp / "a.json").write_text("{}")
        raise RuntimeError("the writer died half way")
    assert list(tmp_path.iterdir()) == []  # neither the folder nor its temp
    with atomic_dir(target) as tmp:
        (tmp / "sub").mkdir()
        (tmp / "sub" / "b.csv").write_text("x\n")
    assert [p.relative_to(target).as_posix() for p in target.rglob("*")] == ["sub", "sub/b.csv"]
    with pytest.raises(OSError), atomic_dir(target) as tmp:  # never merged into an existing folder
        (tmp / "c").write_text("y")
    assert [p.name for p in tmp_path.iterdir()] == ["rank_ascend_pt"]


def _ns(event: dict) -> tuple[int, int]:
    """(start, end) in integer ns: ``ts`` is epoch µs text with 3 decimals (a float has only ~0.25 µs there)."""
    start = int(event["ts"].replace(".", ""))
    return start, start + round(event["dur"] * 1000)


def test_overlap_analysis_tiles_each_step(text_run: Path) -> None:
    """trace_view's Overlap Analysis: Computing, Communication(Not Overlapped) and Free segments tile every
    step without overlap, and their sums are step_trace_time.csv's columns."""
    folder = _rank_folder(text_run, 0)
    trace = json.loads((folder / "ASCEND_PROFILER_OUTPUT/trace_view.json").read_text())
    pid = next(e["pid"] for e in trace if e["ph"] == "M" and e["name"] == "process_name" and e["args"]["name"] == "Overlap Analysis")
    threads = {e["args"]["name"]: e["tid"] for e in trace if e["ph"] == "M" and e["name"] == "thread_name" and e["pid"] == pid}
    assert threads == {"Computing": 0, "Communication": 1, "Communication(Not Overlapped)": 2, "Free": 3}
    marks = sorted(_ns(e) for e in trace if e.get("name", "").startswith("ProfilerStep#"))
    segments = [e for e in trace if e["ph"] == "X" and e["pid"] == pid]
    assert all(threads[e["name"]] == e["tid"] for e in segments)
    for (start, end), row in zip(marks, _csv(folder / "ASCEND_PROFILER_OUTPUT/step_trace_time.csv"), strict=True):
        inside = [(e["name"], *_ns(e)) for e in segments if start <= _ns(e)[0] < end]
        tiles = sorted((s, e) for name, s, e in inside if name != "Communication")
        assert tiles[0][0] == start and tiles[-1][1] == end
        assert all(b[0] == a[1] for a, b in zip(tiles, tiles[1:], strict=False))  # contiguous, no overlap
        for name in ("Computing", "Free", "Communication", "Communication(Not Overlapped)"):
            total_us = sum(e - s for n, s, e in inside if n == name) / 1000
            assert total_us == pytest.approx(float(row[name]), abs=0.002), (name, row["Step"])
