"""``dcci-diff --trace-out``: a Chrome trace (trace event format) of both sides' SK timelines with the
slower SKs and children flagged exactly as the JSON result classes them, one complete event for every
analysed SK launch of every rank and side, in both sk_prof layouts (the demo's collections are often the
legacy one: ``sk_event_dev_device_<id>.json`` whose launches carry only the rts model id, issue 44 point 6)."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from test_dcci_e2e import WARMUP, pair
from test_dcci_ingested import _session

from sk_analytics.cli import cli
from sk_analytics.cli._base import run_cli
from sk_analytics.dcci.trace import trace_document
from sk_runner.sim.variants import draw_variant

RANKS = 2
SMALL = {"name": "trace-small", "base": "moe-decode", "layers": 2}


@pytest.fixture(scope="module")
def diffed(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], dict[str, Any]]:
    """(dcci-diff JSON result, the trace document) of a 2-rank simulated pair with regressed SKs."""
    base = tmp_path_factory.mktemp("trace")
    network = base / "small.json"
    network.write_text(json.dumps(SMALL), encoding="utf-8")
    baseline, candidate, _ = pair(base, str(network), (41, 42), ranks=RANKS)
    out = base / "out"
    code = run_cli(cli, "sk-analyze", ["dcci-diff", "--baseline", str(baseline), "--candidate", str(candidate), "--warmup", str(WARMUP),
                                       "--json-out", str(out / "diff.json"), "--trace-out", str(out / "trace.json")])  # fmt: skip
    assert code == 0
    result = json.loads((out / "diff.json").read_text(encoding="utf-8"))
    return result, json.loads((out / "trace.json").read_text(encoding="utf-8"))


def _seeds(legacy: bool) -> tuple[int, int]:
    """Two simulator seeds whose runs write the ``legacy`` sk_prof layout (or the current one)."""
    found = [seed for seed in range(41, 400) if draw_variant(seed).legacy_sk_prof is legacy][:2]
    return found[0], found[1]


@pytest.fixture(scope="module", params=["current layout", "legacy layout"])
def collections(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """(baseline root, candidate root, a session that recorded and ingested both) of a 2-rank simulated pair."""
    base = tmp_path_factory.mktemp("layout")
    network = base / "small.json"
    network.write_text(json.dumps(SMALL), encoding="utf-8")
    baseline, candidate, _ = pair(base, str(network), _seeds(request.param == "legacy layout"), ranks=RANKS)
    assert any(baseline.glob("sk_meta/*/sk_event_dev_device_*.json")) is (request.param == "legacy layout")
    return baseline, candidate, _session(base, baseline, candidate)


@pytest.mark.parametrize("source", ["raw traces", "--session"])
def test_every_analysed_launch_is_one_event(collections: tuple[Path, Path, Path], tmp_path: Path, source: str) -> None:
    """The SK events of the trace are exactly the launches the diff analysed (per SK, side and rank: its
    ``count``), every rank and side present, the slower slots flagged on both sides."""
    baseline, candidate, session = collections
    out = tmp_path / "out"
    args = ["dcci-diff", "--baseline", str(baseline), "--candidate", str(candidate), "--warmup", str(WARMUP),
            "--json-out", str(out / "diff.json"), "--trace-out", str(out / "trace.json")]
    assert run_cli(cli, "sk-analyze", args + (["--session", str(session)] if source == "--session" else [])) == 0
    result = json.loads((out / "diff.json").read_text(encoding="utf-8"))
    trace = json.loads((out / "trace.json").read_text(encoding="utf-8"))
    launches: dict[tuple[int, str], int] = defaultdict(int)
    for e in _slices(trace):
        if e["tid"] == 1:
            launches[(e["args"]["uid"], e["args"]["side"])] += 1
    analysed = {(sk["uid"], side): sk[side]["count"] for sk in result["sks"] for side in ("baseline", "candidate")
                if (sk.get(side) or {}).get("count")}  # fmt: skip
    assert analysed and dict(launches) == analysed
    assert sum(launches.values()) == sum(analysed.values())
    assert sorted(_process_names(trace).values()) == sorted(f"rank {r} {side}" for r in range(RANKS) for side in ("baseline", "candidate"))
    slower = {sk["uid"] for sk in result["sks"] if sk["class"] == "significantly_slower"}
    assert slower
    for side in ("baseline", "candidate"):
        flagged = {e["args"]["uid"] for e in _slices(trace) if e["tid"] == 1 and e["args"]["side"] == side and e["cat"] == "sk,slower"}
        assert flagged == slower


def _slices(trace: dict[str, Any]) -> list[dict[str, Any]]:
    return [e for e in trace["traceEvents"] if e["ph"] == "X"]


def _process_names(trace: dict[str, Any]) -> dict[int, str]:
    return {e["pid"]: e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}


def test_is_the_trace_event_format(diffed: tuple[dict[str, Any], dict[str, Any]]) -> None:
    _, trace = diffed
    assert set(trace) >= {"traceEvents"} and trace["displayTimeUnit"] in ("ms", "ns")
    assert {e["ph"] for e in trace["traceEvents"]} == {"M", "X"}
    for e in _slices(trace):
        assert isinstance(e["name"], str) and e["name"] and isinstance(e["cat"], str)
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert isinstance(e["ts"], (int, float)) and isinstance(e["dur"], (int, float)) and e["ts"] >= 0 and e["dur"] >= 0
    for e in trace["traceEvents"]:
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "process_sort_index", "thread_name") and "args" in e
    # one process per rank and side, every slice in one of them
    names = _process_names(trace)
    assert sorted(names.values()) == sorted(f"rank {r} {side}" for r in range(RANKS) for side in ("baseline", "candidate"))
    assert {e["pid"] for e in _slices(trace)} == set(names)
    for e in _slices(trace):
        assert names[e["pid"]] == f"rank {e['args']['rank']} {e['args']['side']}"


def test_times_are_microseconds(diffed: tuple[dict[str, Any], dict[str, Any]]) -> None:
    """The median duration of an SK's slices on a side is the P50 (µs) the JSON result reports for it."""
    result, trace = diffed
    durs: dict[tuple[int, str], list[float]] = defaultdict(list)
    for e in _slices(trace):
        if e["tid"] == 1:
            durs[(e["args"]["uid"], e["args"]["side"])].append(e["dur"])
    checked = 0
    for sk in result["sks"]:
        for side in ("baseline", "candidate"):
            if sk.get(side) and sk[side].get("count"):
                got = durs[(sk["uid"], side)]
                assert len(got) == sk[side]["count"]
                assert statistics.median(got) == pytest.approx(sk[side]["p50_us"], abs=1e-3)
                checked += 1
    assert checked >= len(result["sks"])


def test_flagged_slices_are_exactly_the_slower_sks_and_children(diffed: tuple[dict[str, Any], dict[str, Any]]) -> None:
    result, trace = diffed
    slower = {sk["uid"] for sk in result["sks"] if sk["class"] == "significantly_slower"}
    assert slower  # the scenario has regressed SKs
    sk_slices = [e for e in _slices(trace) if e["tid"] == 1]
    flagged = [e for e in sk_slices if "slower" in e["cat"].split(",")]
    assert {e["args"]["uid"] for e in flagged} == slower
    assert all(e["cname"] == "terrible" and e["args"]["flag"] == "slower" and e["args"]["class"] == "significantly_slower" for e in flagged)
    assert all("cname" not in e and e["args"]["uid"] not in slower for e in sk_slices if e not in flagged)
    for side in ("baseline", "candidate"):  # flagged on both sides of the pair
        assert {e["args"]["uid"] for e in flagged if e["args"]["side"] == side} == slower
    slow_children = {(c["uid"], row["child_index"]) for c in result["children"] for row in c["rows"]
                     if row["significant"] and row["wall"]["class"] == "significantly_slower"}  # fmt: skip
    assert slow_children
    child_slices = [e for e in _slices(trace) if e["tid"] == 2]
    flagged_children = {(e["args"]["uid"], e["args"]["child_index"]) for e in child_slices if e["cat"] == "child,slower"}
    assert flagged_children == slow_children
    assert {e["args"]["uid"] for e in child_slices} <= slower | {c["uid"] for c in result["children"]}


def test_both_sides_of_a_rank_are_aligned_launch_for_launch(diffed: tuple[dict[str, Any], dict[str, Any]]) -> None:
    _, trace = diffed
    tracks: dict[tuple[int, str], list[dict[str, Any]]] = defaultdict(list)
    for e in _slices(trace):
        if e["tid"] == 1:
            tracks[(e["args"]["rank"], e["args"]["side"])].append(e)
    for rank in range(RANKS):
        base = sorted(tracks[(rank, "baseline")], key=lambda e: e["ts"])
        cand = sorted(tracks[(rank, "candidate")], key=lambda e: e["ts"])
        assert base[0]["ts"] == 0 and cand[0]["ts"] == 0
        assert [e["name"] for e in base] == [e["name"] for e in cand]
        assert [e["args"]["uid"] for e in base] == [e["args"]["uid"] for e in cand]


def test_empty_sides_give_an_empty_valid_trace() -> None:
    empty = pl.DataFrame(schema={"process": pl.Utf8, "model_dir": pl.Utf8, "sk_id": pl.Int64, "occurrence": pl.Int32,
                                 "start_ns": pl.Int64, "end_ns": pl.Int64, "node_id": pl.Int64})  # fmt: skip
    text = trace_document({"sks": [], "children": [], "warmup": 0}, {"baseline": empty, "candidate": empty},
                          {"baseline": empty, "candidate": empty})
    assert json.loads(text)["traceEvents"] == []


def test_trace_out_at_a_folder_is_refused_in_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = run_cli(cli, "sk-analyze", ["dcci-diff", "--baseline", str(tmp_path), "--candidate", str(tmp_path), "--json-out",
                                       str(tmp_path / "d.json"), "--trace-out", str(tmp_path)])  # fmt: skip
    err = capsys.readouterr().err
    assert code == 2 and "--trace-out" in err and "Traceback" not in err
