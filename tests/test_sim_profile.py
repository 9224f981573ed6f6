"""Profiling mode of the simulated device: every artifact in its real format, consistent across files."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sk_analytics.contract.roles import classify
from sk_analytics.errors import InputError
from sk_analytics.ingest.fused_nodes import parse_fused_nodes
from sk_analytics.ingest.kernel_details import parse_kernel_details
from sk_analytics.ingest.sk_prof import parse_sk_prof
from sk_runner.sim.profiler import KERNEL_DETAILS_HEADER
from sk_runner.sim.runner import SimRequest, run
from sk_runner.sim.skprof import BYTES_PER_EVENT
from sk_runner.sim.variants import LONG_MEMBER_SHARE, FormatVariant, draw_variant

PROFILE_ENV = {"ASCEND_PROF_SK_ON": "1024", "ASCEND_OP_COMPILE_SAVE_KERNEL_META": "1", "SK_RUN_PROFILE": "1"}
ITERATIONS = 12
FUSED_HEADER = re.compile(r"SK Function: (\S+), scope id: (\d+), Node Count: (\d+)$")
FUSED_MEMBER = re.compile(r"^\s+\[(\d+)\] \[nodeId:(\d+), streamId:(\d+), streamIdxInGraph:(\d+), nodeIdxInStream:(\d+)(.*)$")
PREFIX = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} \[\d+:\d+\] \[INFO\] \[sk_optimizer\.cpp:\d+\] \[PrintSKNodesDetail\] ")


def _profile(tmp_path: Path, name: str, env: dict[str, str] | None = None, options: dict | None = None, **kwargs) -> Path:
    """A profiled run of 2 ranks, by default only rank 0 profiled (seed 5: kernel lines past 4096 characters)."""
    cfg = tmp_path / f"{name}.json"
    cfg.write_text(json.dumps({"super_kernel_optimize_options": options or {}}))
    run_dir = tmp_path / name
    kwargs.setdefault("iterations", ITERATIONS)
    kwargs.setdefault("profile_ranks", "0")
    kwargs.setdefault("seed", 5)
    assert run(SimRequest(config=cfg, run_dir=run_dir, ranks=2, env=PROFILE_ENV if env is None else env, **kwargs)) == 0
    return run_dir


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _profile(tmp_path_factory.mktemp("prof"), "p")


def _one(run_dir: Path, pattern: str) -> Path:
    found = sorted(run_dir.glob(pattern))
    assert len(found) == 1, (pattern, found)
    return found[0]


def fused_payloads(path: Path) -> list[str]:
    """Logical lines of sk_fused_nodes.log: prefix required on every physical line, each
    ``[CONT:<n>]`` piece (n = 1, 2, ... after a full 4096-character line) joined to its line."""
    payloads: list[str] = []
    for line in path.read_text().splitlines():
        assert PREFIX.match(line), line
        payload = PREFIX.sub("", line)
        if cont := re.match(r"\[CONT:(\d+)\] ", payload):
            assert len(payloads[-1]) == 4096 * int(cont.group(1)), (len(payloads[-1]), cont.group(0))
            payloads[-1] += payload[cont.end():]
        else:
            payloads.append(payload)
    return payloads


def read_fused_nodes(path: Path) -> pl.DataFrame:
    """Minimal reader of sk_fused_nodes.log for cross-checks."""
    rows, header = [], None
    for payload in fused_payloads(path):
        if m := FUSED_HEADER.search(payload):
            header = (m.group(1), int(m.group(2)))
            continue
        m = FUSED_MEMBER.match(payload)
        assert m and header, payload
        func = re.search(r"funcName:([^,]+),", m.group(6))
        rows.append({"sk_name": header[0], "scope_id": header[1], "index": int(m.group(1)), "node_id": int(m.group(2)),
                     "func_name": func.group(1) if func else None})
    return pl.DataFrame(rows)


def test_layout_of_a_profile_run(profiled: Path) -> None:
    root = _one(profiled, "*_*_*_ascend_pt")
    assert re.fullmatch(r".+_\d+_\d{17}_ascend_pt", root.name)
    kinds = {classify(p.relative_to(profiled).as_posix()) for p in profiled.rglob("*") if p.is_file()}
    assert {"kernel_details", "task_time", "trace_view", "sk_prof", "sk_graph_origin", "sk_graph_updated", "sk_fused_nodes",
            "sk_scope_split", "super_kernel"} <= kinds
    model_dir = _one(profiled, "sk_meta/*/model_*_*")
    assert model_dir.parent.name.isdigit()
    assert {p.name for p in model_dir.iterdir()} == {"super_kernel.log", "sk_fused_nodes.log", "sk_graph_origin.json",
                                                      "sk_graph_updated.json", "sk_scope_split.log", "sk_task_queue.json"}
    assert _one(profiled, "sk_meta/*/sk_prof_device_0.json").parent == model_dir.parent
    assert len(list(profiled.glob("*_ascend_pt"))) == 1  # --profile-ranks 0: only rank 0 (device 0)


def test_kernel_details_real_header_rows_and_exact_times(profiled: Path) -> None:
    path = _one(profiled, "*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv")
    text = path.read_text()
    assert text.splitlines()[0] == KERNEL_DETAILS_HEADER
    result = parse_kernel_details(path)
    frame = result.frame
    assert result.warnings == []
    sk = frame.filter(pl.col("is_sk"))
    launches_per_step = frame.filter(pl.col("step_id") == 1).height
    assert frame.height == launches_per_step * ITERATIONS
    assert sk.filter(pl.col("step_id") == 1).height == 129  # 16 layers x 8 SKs + lm_head
    assert set(sk["accelerator_core"].unique()) <= {"MIX_AIC", "MIX_AIV"}
    assert (sk["type"] == "SuperKernel").all()
    assert sk["name"].str.contains(r"^sk_\d+_[a-z_]+_start_static_kernel_\w+_[0-9a-f]{32}_\d+_d0_end_static_kernel_\w+_d0$").all()
    assert "COMMUNICATION" in frame["accelerator_core"].to_list()
    # start times: 3 decimals, trailing TAB, exact integer ns
    row = text.splitlines()[1].split(",")
    assert re.fullmatch(r"\d{16}\.\d{3}\t", row[9])
    assert frame["start_ns"][0] == int(row[9].strip().replace(".", "")) * 1000 // 1000
    assert (frame["start_ns"].diff().drop_nulls() > 0).sum() > frame.height * 0.9


def test_trace_view_and_task_time(profiled: Path) -> None:
    trace = json.loads(_one(profiled, "*_ascend_pt/ASCEND_PROFILER_OUTPUT/trace_view.json").read_text())
    names = {(e["pid"], e["args"]["name"]) for e in trace if e["ph"] == "M" and e["name"] == "process_name"}
    device_pid = next(pid for pid, name in names if name == "Ascend Hardware")
    host_pid = next(pid for pid, name in names if name == "Python")
    events = [e for e in trace if e["ph"] == "X" and e["pid"] == device_pid]
    details = parse_kernel_details(_one(profiled, "*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv")).frame
    assert len(events) == details.height
    assert events[0]["ts"] == details["start_text"][0]
    # the host marks: one ProfilerStep#<n> per decode step, holding that step's device tasks
    steps = [e for e in trace if e["ph"] == "X" and e["pid"] == host_pid]
    assert [e["name"] for e in steps] == [f"ProfilerStep#{n}" for n in range(1, ITERATIONS + 1)]
    assert all(e["cat"] == "cpu_op" for e in steps)
    first = details.filter(pl.col("step_id") == 1)
    assert float(steps[0]["ts"]) <= first["start_ns"].min() / 1000 <= float(steps[1]["ts"])
    task_time = _one(profiled, "*_ascend_pt/PROF_*/mindstudio_profiler_output/task_time_*.csv").read_text().splitlines()
    assert task_time[0].startswith("Device_id,kernel_name,kernel_type,stream_id,task_id,task_time(us)")
    assert len(task_time) == details.height + 1


def test_sk_prof_format_and_order(profiled: Path) -> None:
    path = _one(profiled, "sk_meta/*/sk_prof_device_0.json")
    text = path.read_text()
    assert text.startswith("[\n{") and text.endswith("\n{}\n]\n")
    json.loads(text)  # names need no escaping here, so it is also strict JSON
    first = text.splitlines()[1]
    assert re.search(r'"ts":\d+\.\d{6},"dur":\d+\.\d{6},', first)
    result = parse_sk_prof(path)
    assert result.warnings == []
    ev = result.frame
    spans, children = ev.filter(pl.col("is_span")), ev.filter(~pl.col("is_span"))
    assert spans["name"].str.contains(r"^\[\d+/\d+\] sk_").all()
    assert children["name"].str.contains(r"^\[\d+/\d+\]static_kernel_").all()
    assert set(ev["lane"].unique()) == {"AIC", "AIV"}
    assert ((ev["lane"] == "AIC") == (ev["core"] < 25)).all() and ev["core"].max() < 75
    # file order: 100 ms poll, then core, then time
    end = (ev["ts_ns"] + ev["dur_ns"]).to_numpy()
    poll = (end - end.min()) // 100_000_000
    core = ev["core"].to_numpy()
    assert (np.diff(poll) >= -1).all()
    same_poll_core = (np.diff(core) == 0)
    assert (np.diff(ev["ts_ns"].to_numpy())[same_poll_core] > -1_000_000).all()
    # not sorted by time overall
    assert not (np.diff(ev["ts_ns"].to_numpy()) >= 0).all()
    model_dir = _one(profiled, "sk_meta/*/model_*_*").name
    assert ev["model_id"].unique().to_list() == [model_dir.removeprefix("model_")]


def test_one_event_per_participating_core_per_launch(profiled: Path) -> None:
    ev = parse_sk_prof(_one(profiled, "sk_meta/*/sk_prof_device_0.json")).frame
    fused = read_fused_nodes(_one(profiled, "sk_meta/*/model_*_*/sk_fused_nodes.log"))
    # moe_gate: AddRmsNorm (16 AIV), MatMulV3 (20 AIC), MoeGatingTopKSoftmax (8 AIV), MoeInitRoutingV2 (24 AIV)
    gate = fused.filter(pl.col("sk_name").str.contains("_moe_gate_"))["scope_id"].unique().sort()[0]
    mine = ev.filter(pl.col("sk_id") == gate)
    assert mine.filter(pl.col("is_span")).height == ITERATIONS * (20 + 24)  # union of cores
    per_child = mine.filter(~pl.col("is_span")).group_by("node_id").len().sort("node_id")
    assert per_child["len"].to_list() == [ITERATIONS * n for n in (16, 20, 8, 24)]
    assert per_child["node_id"].to_list() == [0, 1, 2, 3]  # the EventNotify member [4] has no event
    blocks = mine.filter(pl.col("node_id") == 1)
    assert sorted(blocks["block_idx"].unique().to_list()) == list(range(20)) and (blocks["block_num"] == 20).all()


def test_cross_file_consistency_ids_and_symbols(profiled: Path) -> None:
    """sk_prof (skId, nodeId) <-> sk_fused_nodes (scope id, [i]) <-> graph dump symbols <-> kernel_details names."""
    ev = parse_sk_prof(_one(profiled, "sk_meta/*/sk_prof_device_0.json")).frame
    fused = read_fused_nodes(_one(profiled, "sk_meta/*/model_*_*/sk_fused_nodes.log"))
    children = ev.filter(~pl.col("is_span")).select("sk_id", "node_id", "func_name").unique()
    joined = children.join(fused, left_on=["sk_id", "node_id"], right_on=["scope_id", "index"], how="left")
    assert joined["func_name_right"].null_count() == 0
    assert (joined["func_name"] == joined["func_name_right"]).all()
    spans = ev.filter(pl.col("is_span")).select("sk_id", "func_name").unique()
    sk_names = fused.select("scope_id", "sk_name").unique()
    assert spans.join(sk_names, left_on=["sk_id", "func_name"], right_on=["scope_id", "sk_name"], how="anti").height == 0
    model_dir = _one(profiled, "sk_meta/*/model_*_*")
    origin = json.loads((model_dir / "sk_graph_origin.json").read_text())
    inventory = {t["kernelParams"]["funcName"] for s in origin["streams"] for n in s["nodes"] for t in n["taskInfo"] if "kernelParams" in t}
    assert set(fused["func_name"].drop_nulls()) <= inventory
    assert set(ev.filter(~pl.col("is_span"))["func_name"]) <= inventory
    assert origin["totalNodes"] == sum(s["nodeCount"] for s in origin["streams"])
    updated = json.loads((model_dir / "sk_graph_updated.json").read_text())
    skinfos = {n["skinfos"]["scopeId"]: n["skinfos"] for s in updated["streams"] for n in s["nodes"] if "skinfos" in n}
    ends = fused.filter(pl.col("func_name").is_not_null()).group_by("scope_id", maintain_order=True).agg(
        pl.col("func_name").first().alias("f"), pl.col("func_name").last().alias("l"))
    for row in ends.iter_rows(named=True):
        assert skinfos[row["scope_id"]]["startKernelFuncName"] == row["f"]
        assert skinfos[row["scope_id"]]["endKernelFuncName"] == row["l"]
    details = parse_kernel_details(_one(profiled, "*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv")).frame
    assert set(details.filter(pl.col("is_sk"))["name"]) == set(sk_names["sk_name"])
    queue = json.loads((model_dir / "sk_task_queue.json").read_text())
    assert {t["dcciFlag"] for sk in queue["superKernels"] for t in sk["tasks"] if t["taskType"] == "KERNEL"} == {"0x20"}


def test_kernel_details_durations_match_sk_prof_envelopes(profiled: Path) -> None:
    ev = parse_sk_prof(_one(profiled, "sk_meta/*/sk_prof_device_0.json")).frame
    details = parse_kernel_details(_one(profiled, "*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv")).frame
    sk_id = int(ev["sk_id"].min())
    spans = ev.filter(pl.col("is_span") & (pl.col("sk_id") == sk_id)).sort("ts_ns")
    # occurrences: a new launch starts when the gap exceeds 1 ms
    occ = (spans["ts_ns"].diff().fill_null(0) > 1_000_000).cum_sum()
    env = (spans.with_columns(occ.alias("occ")).group_by("occ")
           .agg(((pl.col("ts_ns") + pl.col("dur_ns")).max() - pl.col("ts_ns").min()).alias("wall")).sort("occ"))
    name = spans["func_name"][0]
    host = details.filter(pl.col("name") == name).sort("start_ns")["duration_us"].to_numpy()
    assert env.height == ITERATIONS == host.size
    assert np.allclose(env["wall"].to_numpy() / 1000.0, host, atol=0.25)


def test_unstable_ids_differ_between_processes_symbols_do_not(tmp_path: Path) -> None:
    a, b = _profile(tmp_path, "a", iterations=9), _profile(tmp_path, "b", iterations=9)
    fa = read_fused_nodes(_one(a, "sk_meta/*/model_*_*/sk_fused_nodes.log"))
    fb = read_fused_nodes(_one(b, "sk_meta/*/model_*_*/sk_fused_nodes.log"))
    assert fa["func_name"].to_list() == fb["func_name"].to_list()
    assert fa["scope_id"].to_list() != fb["scope_id"].to_list()
    assert fa["node_id"].to_list() != fb["node_id"].to_list()
    assert fa["sk_name"].to_list() != fb["sk_name"].to_list()
    strip = lambda s: re.sub(r"^sk_\d+_", "sk_", s)  # noqa: E731
    assert [strip(s) for s in fa["sk_name"]] == [strip(s) for s in fb["sk_name"]]


def test_disable_all_changes_dcci_flags_and_regresses_sensitive_sks(tmp_path: Path) -> None:
    base = _profile(tmp_path, "o0", iterations=10, noise=0.0)
    dis = _profile(tmp_path, "dis", iterations=10, noise=0.0, options={"dcci_disable_on_kernel": [".*"]})
    queue = json.loads(_one(dis, "sk_meta/*/model_*_*/sk_task_queue.json").read_text())
    assert {t["dcciFlag"] for sk in queue["superKernels"] for t in sk["tasks"] if t["taskType"] == "KERNEL"} == {"0x1"}

    def median_wall(run_dir: Path, scope: str) -> float:
        details = parse_kernel_details(_one(run_dir, "*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv")).frame
        return float(details.filter(pl.col("name").str.contains(f"_{scope}_start_"))["duration_us"].median())

    assert median_wall(dis, "moe_gate") > median_wall(base, "moe_gate") * 1.2
    assert median_wall(dis, "attn_qkv") < median_wall(base, "attn_qkv")


def test_buffer_full_drops_later_events_and_logs_the_line(tmp_path: Path) -> None:
    run_dir = _profile(tmp_path, "small", env={**PROFILE_ENV, "ASCEND_PROF_SK_ON": "64"}, iterations=16)
    capacity = 64 * 1024 // BYTES_PER_EVENT
    ev = parse_sk_prof(_one(run_dir, "sk_meta/*/sk_prof_device_0.json")).frame
    counts = ev.group_by("core").len()
    assert counts["len"].max() == capacity
    log = _one(run_dir, "sk_meta/*/model_*_*/super_kernel.log").read_text()
    full_line = r"\[sk time profiling\]  device 0 core (\d+) buffer is full, stop dump the time of nodes on device 0 core \1"
    full = sorted(int(c) for c in re.findall(full_line, log))
    assert full == sorted(counts.filter(pl.col("len") == capacity)["core"].to_list())
    assert "buffer size per core: 64 KB" in log
    # a full core stops early: its last event ends long before the last event of a core that never filled
    last = ev.group_by("core").agg((pl.col("ts_ns") + pl.col("dur_ns")).max().alias("end"))
    free_cores = counts.filter(pl.col("len") < capacity)["core"].to_list()
    assert free_cores
    core0_end = last.filter(pl.col("core") == 0)["end"][0]
    assert 0 in full and core0_end < last.filter(pl.col("core").is_in(free_cores))["end"].max() - 50_000_000  # >= 50 ms earlier


def test_buffer_size_rounding(tmp_path: Path) -> None:
    for raw, expected in (("65", 128), ("99999", 5120)):
        run_dir = _profile(tmp_path, f"k{raw}", env={"ASCEND_PROF_SK_ON": raw}, iterations=9)
        assert f"buffer size per core: {expected} KB" in _one(run_dir, "sk_meta/*/model_*_*/super_kernel.log").read_text()
        assert not list(run_dir.glob("*_ascend_pt"))  # profiler off: only sk_prof


def test_clean_run_writes_no_profiling_artifacts(tmp_path: Path) -> None:
    run_dir = _profile(tmp_path, "clean", env={}, iterations=9)
    assert sorted(p.name for p in run_dir.iterdir()) == ["correctness.json", "log_0.log", "log_1.log"]


def test_profile_flag_equals_env_switch(tmp_path: Path) -> None:
    run_dir = _profile(tmp_path, "flag", env={}, iterations=9, profile=True)
    assert _one(run_dir, "*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv")
    assert not (run_dir / "sk_meta").exists()


def test_ground_truth_file(tmp_path: Path) -> None:
    truth = tmp_path / "truth.json"
    _profile(tmp_path, "gt", env={}, iterations=9, ground_truth=truth, network="dcci-gain")
    data = json.loads(truth.read_text())
    assert data["network"] == "dcci-gain" and data["dcci"]["disable_all"]["class"] == "gain"
    assert data["dcci"]["regressed_sks"] == [] and data["dcci"]["repair"] is None


def test_long_kernel_lines_continue_past_4096_characters(profiled: Path) -> None:
    """Seed 5 draws the variant with many resolved handles: the logger continues those lines on
    [CONT:n] lines, and the product's parser reads the same members as the minimal reader."""
    assert draw_variant(5).long_member_share > 0
    path = _one(profiled, "sk_meta/*/model_*_*/sk_fused_nodes.log")
    assert "[CONT:1] " in path.read_text()
    assert max(len(p) for p in fused_payloads(path)) > 4096
    mine = read_fused_nodes(path)
    parsed = parse_fused_nodes(path).frame
    assert parsed.get_column("func_name").to_list() == mine.get_column("func_name").to_list()
    assert parsed.height == mine.height


def _seed(*, legacy: bool, long_lines: bool) -> int:
    return next(s for s in range(100) if draw_variant(s) == FormatVariant(legacy, LONG_MEMBER_SHARE if long_lines else 0.0))


@pytest.fixture(scope="module")
def every_rank(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both ranks profiled (the default), pre-2026-05 sk_prof naming."""
    return _profile(tmp_path_factory.mktemp("ranks"), "r", profile_ranks=None, seed=_seed(legacy=True, long_lines=False), iterations=6)


def test_every_rank_writes_its_profile_in_torch_npus_layout(every_rank: Path) -> None:
    folders = sorted(every_rank.glob("*_ascend_pt"), key=lambda p: int(p.name.split("_")[-4]))
    assert len(folders) == 2
    pids = [int(f.name.split("_")[-4]) for f in folders]
    assert len(set(pids)) == 2
    for device, (folder, pid) in enumerate(zip(folders, pids, strict=True)):
        details = parse_kernel_details(folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").frame
        assert details.get_column("device_id").unique().to_list() == [device]
        queue = json.loads(_one(every_rank, f"sk_meta/{pid}/model_*_*/sk_task_queue.json").read_text())
        assert queue["deviceId"] == device
        trace = _one(every_rank, f"sk_meta/{pid}/sk_*.json")
        assert trace.name == f"sk_event_dev_device_{device}.json"  # the legacy name of this seed's build
        events = parse_sk_prof(trace).frame
        model_dir = _one(every_rank, f"sk_meta/{pid}/model_*_*").name
        assert events.get_column("model_id").unique().to_list() == [model_dir.split("_")[1]]  # args.modelRI
        assert '"modelRI":' in trace.read_text()
    # one graph, two processes: the same kernels, each rank numbering its own ids
    fused = [read_fused_nodes(_one(every_rank, f"sk_meta/{pid}/model_*_*/sk_fused_nodes.log")) for pid in pids]
    assert fused[0]["func_name"].to_list() == fused[1]["func_name"].to_list()
    assert fused[0]["scope_id"].to_list() != fused[1]["scope_id"].to_list()


def test_profile_ranks_limits_the_profiled_ranks(tmp_path: Path) -> None:
    run_dir = _profile(tmp_path, "one", profile_ranks="1", iterations=6)
    folder = _one(run_dir, "*_ascend_pt")
    details = parse_kernel_details(folder / "ASCEND_PROFILER_OUTPUT" / "kernel_details.csv").frame
    assert details.get_column("device_id").unique().to_list() == [1]
    assert _one(run_dir, "sk_meta/*/sk_prof_device_*.json").name == "sk_prof_device_1.json"
    with pytest.raises(InputError, match=r"SK_RUN_PROFILE_RANKS: value '2' names a rank outside the 2 ranks"):
        _profile(tmp_path, "bad", profile_ranks="2")
    with pytest.raises(InputError, match=r"value 'x' is not a list of ranks"):
        _profile(tmp_path, "bad2", env={**PROFILE_ENV, "SK_RUN_PROFILE_RANKS": "x"}, profile_ranks=None)


def test_db_export_of_every_rank(tmp_path: Path) -> None:
    run_dir = _profile(tmp_path, "db", profile_ranks="all", export_type="db", iterations=6)
    dbs = sorted(p.name for p in run_dir.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/*.db"))
    assert dbs == ["analysis.db", "analysis.db", "ascend_pytorch_profiler_0.db", "ascend_pytorch_profiler_1.db"]
    # as the public DB export sample: the databases and profiler_info_<rank>.json, no PROF_* folder
    for folder in run_dir.glob("*_ascend_pt"):
        rank_id = json.loads(next(folder.glob("profiler_info_*.json")).read_text())["rank_id"]
        assert {p.name for p in folder.iterdir()} == {"ASCEND_PROFILER_OUTPUT", f"profiler_info_{rank_id}.json"}
    for rank in (0, 1):
        path = _one(run_dir, f"*_ascend_pt/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_{rank}.db")
        with sqlite3.connect(path) as db:
            assert db.execute("SELECT rankId, deviceId FROM RANK_DEVICE_MAP").fetchall() == [(rank, rank)]
            assert db.execute("SELECT DISTINCT deviceId FROM TASK").fetchall() == [(rank,)]
