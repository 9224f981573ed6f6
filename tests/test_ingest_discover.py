"""Finding artifacts, deriving partitions, writing tables, the ingest CLI and the notebook API."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

import sk_analytics as ska
from sk_analytics.cli import cli
from sk_analytics.cli._base import run_cli
from sk_analytics.errors import InputError, UsageError
from sk_analytics.ingest import ingest_path, ingest_run_dir
from sk_analytics.ingest.discover import default_partition, discover, kind_of
from sk_analytics.schema import SCHEMA_VERSION
from sk_analytics.tables import read_schema_version
from sk_runner.demo.samples import VARIANTS, kernel_rows, write_kernel_details, write_rank_logs

DECODE = [["10.5", "10.25", "10.0"], ["11", "11.5", "12.125"]]


def make_session(root: Path) -> Path:
    """O1/CLEAN/run-{1,2} with 2 rank logs each, plus one profile collection."""
    for run in (1, 2):
        write_rank_logs(root / "O1" / "CLEAN" / f"run-{run}", 2, DECODE, prefill_ms="120.0")
    prof = root / "diag" / "baseline_profile"
    write_kernel_details(prof / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv", kernel_rows(4, 1), VARIANTS["level0_minimal"])
    (prof / "collection-manifest.json").write_text("{}")
    (root / "notes.txt").write_text("not an artifact")
    (root / "O1" / "log_0.log").write_text("rank log outside run-k: ignored")
    return root


@pytest.mark.parametrize(
    ("relative", "kind"),
    [
        ("run-3/log_7.log", "rank_log"),
        ("x/log_7.log", None),
        ("run-3/log_x.log", None),
        ("p/kernel_details.csv", "kernel_details"),
        ("sk_meta/1/sk_prof_device_3.json", "sk_prof"),
        ("sk_meta/1/sk_event_dev_device_0.json", "sk_prof"),
        ("sk_meta/1/sk_prof_device_x.json", None),
        ("m/sk_fused_nodes.log", "fused_nodes"),
        ("m/super_kernel.log", "super_kernel_log"),
        ("m/sk_graph_origin.json", "graph_dump"),
        ("m/sk_graph_updated.json", "graph_dump"),
        ("m/sk_mdl_origin.json", None),
    ],
)
def test_kind_of_file_names(relative: str, kind: str | None) -> None:
    found = kind_of(Path("/s") / relative)
    assert (found.name if found else None) == kind


def test_discover_and_default_partitions(tmp_path: Path) -> None:
    root = make_session(tmp_path / "sess")
    artifacts = discover(root)
    assert [a.path.relative_to(root).as_posix() for a in artifacts] == [
        "O1/CLEAN/run-1/log_0.log", "O1/CLEAN/run-1/log_1.log",
        "O1/CLEAN/run-2/log_0.log", "O1/CLEAN/run-2/log_1.log",
        "diag/baseline_profile/rank0_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv",
    ]  # fmt: skip
    parts = [default_partition(a, root) for a in artifacts]
    assert parts[0] == {"round": "O1", "role": "clean", "run": "run-1"}
    assert parts[2] == {"round": "O1", "role": "clean", "run": "run-2"}
    assert parts[4] == {"round": "sess", "role": "profile", "run": "baseline_profile"}
    assert default_partition(artifacts[0], root, round="R", role="trial") == {"round": "R", "role": "trial", "run": "run-1"}


def test_discover_a_run_folder_itself_and_a_single_file(tmp_path: Path) -> None:
    root = make_session(tmp_path / "sess")
    run = root / "O1" / "CLEAN" / "run-2"
    artifacts = discover(run)
    assert [default_partition(a, run) for a in artifacts] == [{"round": "O1", "role": "clean", "run": "run-2"}] * 2
    single = discover(run / "log_1.log")
    assert len(single) == 1 and single[0].run_dir == run


def test_ingest_path_writes_one_partition_per_run(tmp_path: Path) -> None:
    root = make_session(tmp_path / "sess")
    out = tmp_path / "data"
    report = ingest_path(root, out)
    assert report.rows_by_table() == {"timings": 4 * 4, "kernels": 4}
    assert sorted(p.relative_to(out).as_posix() for p in report.written) == [
        "kernels/round=sess/role=profile/run=baseline_profile/part-0.parquet",
        "timings/round=O1/role=clean/run=run-1/part-0.parquet",
        "timings/round=O1/role=clean/run=run-2/part-0.parquet",
    ]
    assert all(read_schema_version(p) == SCHEMA_VERSION for p in report.written)
    timings = pl.read_parquet(out / "timings/round=O1/role=clean/run=run-2/part-0.parquet")
    assert timings.filter(pl.col("phase") == "decode").sort("rank", "sample_index")["value_text"].to_list() == DECODE[0] + DECODE[1]
    assert report.warnings == []


def test_ingest_run_dir_uses_the_given_partition(tmp_path: Path) -> None:
    root = make_session(tmp_path / "sess")
    out = tmp_path / "data"
    report = ingest_run_dir(root / "O1" / "CLEAN" / "run-1", out, "O7", "trial", "run-9")
    assert [p.relative_to(out).as_posix() for p in report.written] == ["timings/round=O7/role=trial/run=run-9/part-0.parquet"]
    assert [f.path for f in report.files] == ["log_0.log", "log_1.log"]
    empty = tmp_path / "empty-run"
    empty.mkdir()
    assert ingest_run_dir(empty, out, "O7", "trial", "run-10").files == []


def test_bad_input_writes_nothing(tmp_path: Path) -> None:
    root = make_session(tmp_path / "sess")
    bad = root / "diag" / "baseline_profile" / "rank0_ascend_pt" / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv"
    bad.write_text(bad.read_text().replace(",224.380,", ",2x5,"))
    out = tmp_path / "data"
    with pytest.raises(InputError) as info:
        ingest_path(root, out)
    assert (info.value.path, info.value.line) == (str(bad), 2)
    assert not out.exists()


def test_ingest_refuses_missing_path_empty_folder_and_bad_partition(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such file"):
        ingest_path(tmp_path / "nope", tmp_path / "out")
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no SK artifact"):
        ingest_path(tmp_path / "empty", tmp_path / "out")
    root = make_session(tmp_path / "sess")
    with pytest.raises(UsageError, match="round"):
        ingest_path(root, tmp_path / "out", round="a/b")
    with pytest.raises(UsageError, match="bad round value ''"):
        ingest_path(root, tmp_path / "out", round="")  # an explicit empty round is refused, not defaulted
    with pytest.raises(UsageError, match="bad role value ''"):
        ingest_path(root, tmp_path / "out", role="")


@pytest.mark.parametrize("value", ["x=y", "O1,role=z", "a#b", "a%20b", "a*b", "a?b", "a[1]", "a{b}", "__HIVE_DEFAULT_PARTITION__"])
def test_a_partition_value_hive_cannot_read_back_is_refused(tmp_path: Path, value: str) -> None:
    """A round written as ``round=x=y``, ``round=a*b`` or ``round=a[1]`` made every later reader fail
    (open_session's scan lost the round column; option-trial's parquet source exited 70); ``a%20b``
    read back as ``a b`` and ``__HIVE_DEFAULT_PARTITION__`` as null; ``,`` and ``#`` cannot be selected
    by ``parquet:DIR#round=R,role=X``. Ingest refuses them, writing nothing, whether given or taken from
    a folder name (then it says to name the partition with --round/--role)."""
    root = make_session(tmp_path / "sess")
    out = tmp_path / "out"
    with pytest.raises(UsageError, match=r"bad round value .*hive partition") as given:
        ingest_path(root, out, round=value)
    assert repr(value) in str(given.value)
    folder = tmp_path / value / "run-1"
    write_rank_logs(folder, 1, [["1.0"]])
    with pytest.raises(UsageError, match=r"--round") as named:
        ingest_path(folder.parent, out)
    assert repr(value) in str(named.value)
    assert not out.exists()


def test_output_folder_inside_the_input_is_not_read_back(tmp_path: Path) -> None:
    root = make_session(tmp_path / "sess")
    ingest_path(root, root / "data")
    (root / "data" / "kernel_details.csv").write_text("not read")
    assert ingest_path(root, root / "data").rows_by_table() == {"timings": 16, "kernels": 4}


def test_cli_prints_summary_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_session(tmp_path / "sess")
    assert run_cli(cli, "sk-analyze", ["ingest", str(root), "--out", str(tmp_path / "d")]) == 0
    text = capsys.readouterr().out
    assert "ingested 5 file(s)" in text
    assert "  kernels           4  1" in text and "  timings          16  4" in text
    assert "O1/CLEAN/run-2/log_1.log: rank_log -> timings, 4 rows [round=O1 role=clean run=run-2]" in text
    assert "warnings: none" in text
    assert run_cli(cli, "sk-analyze", ["ingest", str(root), "--out", str(tmp_path / "d"), "--json", "--round", "R1"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["rows_by_table"] == {"timings": 16, "kernels": 4}
    assert {f["partition"]["round"] for f in data["files"]} == {"R1"}


def test_cli_bad_input_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p" / "kernel_details.csv"
    path.parent.mkdir()
    path.write_text("Name,Start Time(us),Duration(us)\nk,1.000,1\nk,1.5.0,1\n")
    assert run_cli(cli, "sk-analyze", ["ingest", str(tmp_path / "p"), "--out", str(tmp_path / "d")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith(f"sk-analyze: error: {path}:3: bad Start Time(us) value '1.5.0'")


def test_truncation_warning_is_printed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "p" / "kernel_details.csv"
    path.parent.mkdir()
    path.write_text("Name,Start Time(us),Duration(us),Block Dim\nk,1.000,1,3\nk,2.000,1")
    assert run_cli(cli, "sk-analyze", ["ingest", str(tmp_path / "p"), "--out", str(tmp_path / "d")]) == 0
    assert "warnings: 1\n  - " in capsys.readouterr().out


def test_open_session_and_profile_return_lazy_frames_with_hive_columns(tmp_path: Path) -> None:
    root = make_session(tmp_path / "sess")
    ingest_path(root, root / "data")
    tables = ska.open_session(root)
    assert all(isinstance(frame, pl.LazyFrame) for frame in tables.values())
    per_run = tables["timings"].group_by("round", "role", "run").len().sort("run").collect()
    assert per_run.rows() == [("O1", "clean", "run-1", 8), ("O1", "clean", "run-2", 8)]
    kernels = ska.open_profile(root / "data")["kernels"].collect()
    assert kernels.select("round", "role", "run").unique().rows() == [("sess", "profile", "baseline_profile")]
    assert kernels["start_ns"].to_list() == kernel_rows(4, 1)["start_ns"].to_list()
    assert tables["sk_events"].collect().height == 0
    with pytest.raises(InputError):
        ska.open_session(tmp_path / "missing")


def test_sk_prof_traces_of_two_devices_share_a_partition_and_truncation_is_reported(tmp_path: Path) -> None:
    from sk_samples import SkProfVariant, sk_prof_events, write_sk_prof

    prof = tmp_path / "prof"
    events = sk_prof_events(12, 1)
    write_sk_prof(prof / "sk_meta" / "4242" / "sk_prof_device_0.json", events)
    cut = write_sk_prof(prof / "sk_meta" / "4242" / "sk_event_dev_device_1.json", events, SkProfVariant(legacy=True))
    text = cut.read_text()
    cut.write_text(text[: text.index('{"name"', text.index('{"name"', 40) + 1) + 30])  # killed mid-record
    report = ingest_path(prof, tmp_path / "data")
    kinds = {f.path: (f.kind, f.table, f.partition["run"]) for f in report.files}
    assert kinds == {
        "sk_meta/4242/sk_event_dev_device_1.json": ("sk_prof", "sk_events", "prof"),
        "sk_meta/4242/sk_prof_device_0.json": ("sk_prof", "sk_events", "prof"),
    }
    rows = {f.path: f.rows for f in report.files}
    assert rows["sk_meta/4242/sk_prof_device_0.json"] == 12
    assert rows["sk_meta/4242/sk_event_dev_device_1.json"] == 2
    assert len(report.warnings) == 1 and "sk_event_dev_device_1.json" in report.warnings[0]
    assert [p.relative_to(tmp_path / "data").as_posix() for p in report.written] == ["sk_events/round=prof/role=profile/run=prof/part-0.parquet"]
    events_back = pl.read_parquet(report.written[0])
    assert sorted(events_back["device_id"].unique().to_list()) == [0, 1]


def test_every_artifact_kind_of_an_sk_meta_folder_is_ingested(tmp_path: Path) -> None:
    from sk_samples import (
        FusedMember,
        FusedSk,
        GraphDump,
        GraphNode,
        OptionLine,
        fused_nodes_text,
        sk_prof_events,
        super_kernel_log_text,
        write_sk_prof,
    )  # fmt: skip

    model = tmp_path / "prof" / "sk_meta" / "4242" / "model_1_0"
    sk = FusedSk("sk_3_layer0_start_A_end_B", 3, [FusedMember(10, 1, "A_1"), FusedMember(11, 1), FusedMember(12, 1, "B_2")])
    model.mkdir(parents=True)
    (model / "sk_fused_nodes.log").write_text(fused_nodes_text([sk]))
    (model / "super_kernel.log").write_text(
        super_kernel_log_text([OptionLine("split_mode", "9", ("1", "4"), "4")], buffer_full=[(0, 5)])
    )
    dump = GraphDump([[GraphNode(10, "KERNEL", "A_1"), GraphNode(11, "EVENT"), GraphNode(12, "KERNEL", "B_2")]])
    dump.write(model / "sk_graph_origin.json")
    dump.write(model / "sk_graph_updated.json")
    write_sk_prof(model.parent / "sk_prof_device_0.json", sk_prof_events(6, 2))
    report = ingest_path(tmp_path / "prof", tmp_path / "data")
    assert {(f.kind, f.table) for f in report.files} == {
        ("fused_nodes", "sk_structure"), ("super_kernel_log", "sk_markers"),
        ("graph_dump", "symbols"), ("sk_prof", "sk_events"),
    }  # fmt: skip
    assert report.rows_by_table()["sk_structure"] == 3
    assert report.rows_by_table()["symbols"] == 4  # two kernels in each of the two dumps
    assert report.rows_by_table()["sk_events"] == 6
    assert any("buffer full on device 0 core(s) 5" in w for w in report.warnings)
    assert any("option split_mode value 9 is outside" in w for w in report.warnings)
    assert sorted(p.parent.parent.parent.parent.name for p in report.written) == ["sk_events", "sk_markers", "sk_structure", "symbols"]
    assert {p.parent.name for p in report.written} == {"run=prof"}


_TIMING = b"Inference time (decode): 2 ms"
_LONG = 1 << 20  # text_stream.MAX_LINE_BYTES, spelled out: the documented limit
_BAD_LINES = {
    "bad-line": (b"Inference time (decode): 12.5x ms\n", "malformed timing line"),
    "not-utf8": (b"\xc3( Inference time (decode): 2 ms\n", "not UTF-8"),
    "binary": (b"\0" * 4096, "NUL byte"),
    # issue 38: nothing after the unit but spaces, tabs or \r (a dropped second value, a guessed unit, a second timing)
    "two-values": (b"Inference time (decode): 12.5 ms 13.0 ms\n", "text after the unit: ' 13.0 ms'"),
    "msec": (b"Inference time (decode): 12.5 msec\n", "text after the unit: 'ec'"),
    "two-timings": (b"Inference time (decode): 12.5 ms Inference time (decode): 13.0 ms\n", "2 timings on one line"),
    # issue 38: a line one byte over 1 MiB (newline not counted) is refused, whatever it holds and wherever it ends
    "long-line": (b"x" * (_LONG + 1) + b"\nInference time (decode): 2 ms\n", "line longer than 1048576 bytes"),
    "long-timing": (b"x" * (_LONG + 1 - len(_TIMING)) + _TIMING + b"\r\n", "line longer than 1048576 bytes"),
    "long-last-line": (b"x" * (_LONG + 1), "line longer than 1048576 bytes"),
}


@pytest.mark.parametrize("kind", ["folder", "loop", "dangling", "fifo", *_BAD_LINES])
def test_every_command_refuses_the_same_bad_rank_log_alike(tmp_path: Path, capsys: pytest.CaptureFixture[str], kind: str) -> None:
    """Issue 29: a rank log that is not a readable regular text file of samples is exit 2 naming it in
    ``ingest``, ``option-trial`` and ``stability`` alike (ingest used to leave the run out, "warnings: none");
    issue 38: so is a timing line with anything after its unit, and a line over 1 MiB."""
    from ot_logs import NOT_REGULAR, make_not_regular, write_candidate

    folder = write_candidate(tmp_path / "c", [{0: ["1", "2", "3"], 1: ["1", "2", "3"]}] * 5)
    log = folder / "run-3" / "log_1.log"
    log.unlink()
    if kind in NOT_REGULAR:
        make_not_regular(log, kind)
    else:
        log.write_bytes(b"Inference time (decode): 1 ms\n" + _BAD_LINES[kind][0])
    where = f"{log}:2: " if kind in _BAD_LINES else f"{log}: symbolic link loop" if kind == "loop" else f"{log}: cannot read rank log"
    what = _BAD_LINES[kind][1] if kind in _BAD_LINES else ""
    commands = [
        ["ingest", str(folder), "--out", str(tmp_path / "d")],
        ["option-trial", "--baseline", str(folder), "--candidate", f"X={folder}", "--expected-ranks", "2", "--warmup", "1"],
        ["stability", str(folder), "--expected-ranks", "2", "--warmup", "1"],
    ]
    for argv in commands:
        assert run_cli(cli, "sk-analyze", argv) == 2, argv
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"sk-analyze: error: {where}") and what in err, (argv, err)
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("ending", [b"\n", b"\r\n", b""])
def test_a_line_of_exactly_1_mib_is_read_by_every_command(tmp_path: Path, capsys: pytest.CaptureFixture[str], ending: bytes) -> None:
    """Issue 38: the limit is exact: a line of 1 MiB (the newline not counted, a ``\\r`` counted) ending in a
    timing is one sample and a 1 MiB line of other output is ignored, in ``ingest``, ``option-trial``
    and ``stability`` alike (one byte more is refused: the test above)."""
    from ot_logs import write_candidate

    folder = write_candidate(tmp_path / "c", [{0: ["1", "2", "3"], 1: ["1", "2", "3"]}] * 5)
    line = b"x" * (_LONG - len(_TIMING) - len(ending.rstrip(b"\n"))) + _TIMING + ending.rstrip(b"\n")
    assert len(line) == _LONG
    log = folder / "run-3" / "log_1.log"
    log.write_bytes(b"y" * _LONG + b"\n" + log.read_bytes() + line + (b"\n" if ending else b""))
    commands = [
        ["ingest", str(folder), "--out", str(tmp_path / "d")],
        ["option-trial", "--baseline", str(folder), "--candidate", f"X={folder}", "--expected-ranks", "2", "--warmup", "1"],
        ["stability", str(folder), "--expected-ranks", "2", "--warmup", "1"],
    ]
    for argv in commands:
        assert run_cli(cli, "sk-analyze", argv) in (0, 1), (argv, capsys.readouterr().err)
    capsys.readouterr()
    timings = pl.read_parquet(tmp_path / "d" / "timings" / "**" / "*.parquet")
    assert timings.height == 5 * 2 * 3 + 1 and timings.filter(pl.col("value_text") == "2", pl.col("rank") == 1).height == 5 + 1


EMPTY_GRAPH = json.dumps({"version": "1", "modelId": 1, "deviceId": 0, "totalStreams": 1, "totalNodes": 0,
                          "streams": [{"streamIdxInGraph": 0, "nodeCount": 0, "nodes": []}]})


@pytest.mark.parametrize(("relative", "text", "says"), [
    ("O1/run-1/log_1.log", "", "no timing line: the log holds no sample of its rank"),  # a 0-byte log
    ("O1/run-1/log_1.log", "[default1]:loading\r\n[default1]:step done\r\n", "no timing line"),  # torchrun prefix, CRLF
    ("prof/kernel_details.csv", "Step Id,Name,Type,Accelerator Core,Start Time(us),Duration(us),Wait Time(us),Block Dim\n",
     "no data rows (header only): the profiler exported no kernel"),
    ("prof/sk_meta/7/sk_prof_device_0.json", "[{}]\n", "no SK event, the empty trace [{}]"),
    ("prof/sk_meta/7/model_1_1/sk_fused_nodes.log", "[INFO] nothing fused\n", "no fused SK"),
    ("prof/sk_meta/7/model_1_1/super_kernel.log", "", "no SK marker"),
    ("prof/sk_meta/7/model_1_1/sk_graph_origin.json", EMPTY_GRAPH, "no kernel symbol"),
])
def test_a_file_that_gives_no_row_is_refused_by_name_and_nothing_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], relative: str, text: str, says: str) -> None:
    """One such file beside files with rows (rank 0's log): exit 2, one line naming it, what it lacks and what it
    must hold; no table of the others is written either (a run short of a rank would read as one rank less)."""
    src = tmp_path / "src"
    write_rank_logs(src / "O1" / "run-1", 1, [["10.5", "10.25"]])
    path = src / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    out = tmp_path / "out"
    assert run_cli(cli, "sk-analyze", ["ingest", str(src), "--out", str(out)]) == 2
    said = capsys.readouterr()
    [line] = said.err.splitlines()
    kind = kind_of(path)
    assert kind is not None and line == f"sk-analyze: error: {path}: {kind.hollow}; nothing was written (expected {kind.holds})"
    assert says in line and said.out == "" and not out.exists()


def test_a_model_that_fused_no_sk_beside_one_that_did_is_ingested_and_alone_is_refused(tmp_path: Path) -> None:
    """SK metadata is written per model: a graph that fused no SK (its sk_fused_nodes.log, super_kernel.log and dumps
    give no row) is a fact beside a model that did; a collection whose models all fused none is refused."""
    from sk_samples import FusedMember, FusedSk, GraphDump, GraphNode, OptionLine, fused_nodes_text, super_kernel_log_text

    meta = tmp_path / "prof" / "sk_meta" / "4242"
    fused, plain = meta / "model_1_0", meta / "model_2_0"
    for model in (fused, plain):
        model.mkdir(parents=True)
    sk = FusedSk("sk_3_layer0_start_A_end_B", 3, [FusedMember(10, 1, "A_1"), FusedMember(11, 1, "B_2")])
    (fused / "sk_fused_nodes.log").write_text(fused_nodes_text([sk]))
    (fused / "super_kernel.log").write_text(super_kernel_log_text([OptionLine("split_mode", "1")]))
    GraphDump([[GraphNode(10, "KERNEL", "A_1"), GraphNode(11, "KERNEL", "B_2")]]).write(fused / "sk_graph_origin.json")
    (plain / "sk_fused_nodes.log").write_text("[INFO] nothing fused\n")
    (plain / "super_kernel.log").write_text("")
    (plain / "sk_graph_origin.json").write_text(EMPTY_GRAPH)
    report = ingest_path(tmp_path / "prof", tmp_path / "data")
    assert report.rows_by_table()["sk_structure"] == 2 and report.rows_by_table()["symbols"] == 2
    rows = {(f.kind, Path(f.path).parent.name): f.rows for f in report.files}
    assert rows[("fused_nodes", "model_2_0")] == rows[("super_kernel_log", "model_2_0")] == rows[("graph_dump", "model_2_0")] == 0
    for name in ("sk_fused_nodes.log", "super_kernel.log", "sk_graph_origin.json"):  # the model that did, gone
        (fused / name).unlink()
    with pytest.raises(InputError) as refused:
        ingest_path(tmp_path / "prof", tmp_path / "again")
    assert [line.split(": ", 1)[0] for line in refused.value.details] == [
        str(plain / name) for name in ("sk_fused_nodes.log", "sk_graph_origin.json", "super_kernel.log")]
    assert not (tmp_path / "again").exists()


def test_every_empty_rank_log_of_a_run_is_named_then_counted(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A whole run without a timing line: each log named on its own line, then one line counting them (exit 2)."""
    run = tmp_path / "src" / "O1" / "run-1"
    run.mkdir(parents=True)
    for rank in range(3):
        (run / f"log_{rank}.log").write_text(f"rank {rank} started\n", encoding="utf-8")
    assert run_cli(cli, "sk-analyze", ["ingest", str(tmp_path / "src"), "--out", str(tmp_path / "out")]) == 2
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(": no timing line")[0] for line in lines[:3]] == [f"sk-analyze: error: {run / f'log_{r}.log'}" for r in range(3)]
    assert lines[3] == (f"sk-analyze: error: {run / 'log_0.log'}: this and 2 more file(s) hold no row (each listed above); nothing "
                        "was written (expected every file that is read to hold rows of its table)")
    assert not (tmp_path / "out").exists()


def test_a_log_of_a_prefill_line_only_holds_a_sample_and_is_ingested(tmp_path: Path) -> None:
    """Its row is what it claims; option-trial refuses the run later for having no decode sample after warm-up."""
    run = tmp_path / "src" / "O1" / "run-1"
    run.mkdir(parents=True)
    (run / "log_0.log").write_text("Inference time (prefill): 120.5 ms\n", encoding="utf-8")
    report = ingest_path(tmp_path / "src", tmp_path / "out")
    assert report.rows_by_table() == {"timings": 1} and pl.read_parquet(report.written[0])["phase"].to_list() == ["prefill"]


def test_a_table_with_an_unreadable_partition_folder_is_refused_by_name(tmp_path: Path) -> None:
    """Data an older ingest wrote under ``round=a*b`` made open_session and option-trial's parquet source fail
    inside Polars (exit 70): the folder is now bad input naming it."""
    root = make_session(tmp_path / "sess")
    out = tmp_path / "data"
    ingest_path(root, out)
    (out / "timings" / "round=O1").rename(out / "timings" / "round=a*b")
    with pytest.raises(InputError, match=r"partition folder 'round=a\*b' cannot be read back") as caught:
        ska.open_session(out)["timings"].collect()
    assert Path(caught.value.path) == out / "timings" / "round=a*b"
    code = run_cli(cli, "sk-analyze", ["option-trial", "--baseline", f"parquet:{out}#round=O1", "--candidate",
                                       f"X=parquet:{out}#round=O1", "--expected-ranks", "2"])
    assert code == 2


def test_a_gzip_file_under_an_artifact_name_is_named_as_gzip(tmp_path: Path) -> None:
    """kernel_details.csv, a rank log, an sk_prof trace or sk_fused_nodes.log that is really a .gz (copied out of
    an archive) said 'header is not UTF-8 text', 'NUL byte' or 'no fused SK': now it is named as gzip, line 1."""
    import gzip

    root = make_session(tmp_path / "sess")
    log = root / "O1" / "CLEAN" / "run-1" / "log_1.log"
    log.write_bytes(gzip.compress(log.read_bytes()))
    with pytest.raises(InputError, match="gzip-compressed data under a plain artifact name") as caught:
        ingest_path(root, tmp_path / "out")
    assert (caught.value.path, caught.value.line) == (str(log), 1)
    assert caught.value.expected is not None and "gunzip" in caught.value.expected
    assert not (tmp_path / "out").exists()
