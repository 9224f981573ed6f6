"""The decision JSON of hard DCCI scenarios, byte for byte the one the code wrote before issue 47.

Issue 47 rewrote the sk_prof parse and the dcci-diff load for speed; the answers must not move. The
golden digests in ``tests/golden/dcci_decisions.json`` were written by the tree before that work
(``PYTHONPATH=tests python tests/test_dcci_golden.py --write`` on 277e997): the SHA-256 of the JSON exactly as
``dcci-diff --json-out`` writes it, of

* the hard MoE scenarios of ``dcci_scenarios`` (a decode graph on 4 ranks with two re-fused layers, an
  odd rank with an extra look-alike expert SK and one rank missing an SK; a graph split across two dumps),
  analysed from their frames;
* the same scenarios with every rank's events written as an sk_prof trace (the runtime's layout, one record
  a line, in the file order of the frames) and parsed back, so the parser's rows feed the analysis.

A changed digest means a changed answer: find why before writing new digests.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import polars as pl
import pytest
from dcci_scenarios import DISABLE_ALL, WARMUP, Scenario, build_side
from test_dcci_cross_rank import odd_rank_scenario
from test_dcci_graph_split import _scenario as split_scenario

from sk_analytics.dcci.analysis import SideInput, analyze
from sk_analytics.ingest.sk_prof import parse_sk_prof

GOLDEN = Path(__file__).parent / "golden" / "dcci_decisions.json"

SCENARIOS: dict[str, Callable[[], Scenario]] = {
    "moe_odd_rank": odd_rank_scenario,
    "moe_odd_rank_0_missing_1": lambda: odd_rank_scenario(odd=0, missing_on=1),
    "graph_split_candidate": lambda: split_scenario("candidate"),
}


def decision_bytes(result: dict[str, Any]) -> bytes:
    """The JSON as ``dcci-diff --json-out`` writes it (sk_analytics.atomic.write_json)."""
    return (json.dumps(result, ensure_ascii=False, indent=2, sort_keys=False) + "\n").encode()


def trace_text(events: pl.DataFrame) -> str:
    """``events`` (sk_events rows) as an sk_prof trace in the runtime's layout: ts/dur in µs with 6 decimals."""
    def us(column: str) -> pl.Expr:
        ns = pl.col(column)
        return pl.concat_str((ns // 1000).cast(pl.Utf8), pl.lit("."), (ns % 1000).cast(pl.Utf8).str.zfill(3), pl.lit("000"))

    node = pl.when(pl.col("node_id").is_null()).then(pl.lit("")).otherwise(
        pl.concat_str(pl.lit(',"nodeId":'), pl.col("node_id").cast(pl.Utf8)))
    parts = ['{"ph":"X","name":"', pl.col("name"), '","pid":"', pl.col("lane"), '","tid":', pl.col("core").cast(pl.Utf8),
             ',"ts":', us("ts_ns"), ',"dur":', us("dur_ns"), ',"args":{"modelId":"', pl.col("model_id"), '","skId":',
             pl.col("sk_id").cast(pl.Utf8), node, "}},"]
    lines = events.select(pl.concat_str([pl.lit(p) if isinstance(p, str) else p for p in parts]))
    return "[\n" + "\n".join(lines.to_series().to_list()) + "\n{}\n]\n"


def via_traces(side: SideInput, folder: Path) -> SideInput:
    """``side`` with each process's events written as ``<folder>/<process>/sk_prof_device_<device>.json`` and parsed back."""
    frames = []
    events = side.events.collect()
    for (process,), rows in events.partition_by("process", as_dict=True, maintain_order=True).items():
        (device,) = rows.get_column("device_id").unique().to_list()
        path = folder / str(process) / f"sk_prof_device_{device}.json"
        path.parent.mkdir(parents=True)
        path.write_text(trace_text(rows), encoding="utf-8")
        parsed = parse_sk_prof(path, root=folder).frame
        frames.append(parsed.with_columns(pl.lit(process, dtype=pl.Utf8).alias("process")))
    return dataclasses.replace(side, events=pl.concat(frames).lazy())


def decisions(name: str, tmp: Path) -> dict[str, str]:
    """SHA-256 of the decision JSON of scenario ``name``, from its frames and from its traces parsed back."""
    scenario = SCENARIOS[name]()
    sides = [build_side(scenario, side) for side in ("baseline", "candidate")]
    from_frames = analyze(*sides, warmup=WARMUP, disable_all_config=DISABLE_ALL)
    parsed = [via_traces(side, tmp / side.root.name) for side in sides]
    from_traces = analyze(*parsed, warmup=WARMUP, disable_all_config=DISABLE_ALL)
    return {f"{name}/frames": hashlib.sha256(decision_bytes(from_frames)).hexdigest(),
            f"{name}/traces": hashlib.sha256(decision_bytes(from_traces)).hexdigest()}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_decision_json_is_the_one_written_before_issue_47(name: str, tmp_path: Path) -> None:
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert decisions(name, tmp_path) == {k: v for k, v in golden.items() if k.startswith(f"{name}/")}


def test_the_trace_layout_is_the_runtimes(tmp_path: Path) -> None:
    """The traces written here take the parser's runtime-layout path: one record a line, nothing left over."""
    side = build_side(SCENARIOS["moe_odd_rank"](), "baseline")
    rows = side.events.collect().filter(pl.col("process") == pl.col("process").first())
    text = trace_text(rows)
    lines = text.splitlines()
    assert lines[0] == "[" and lines[-2:] == ["{}", "]"] and len(lines) == rows.height + 3
    assert lines[1].startswith('{"ph":"X","name":"[0/2] sk_x","pid":"AIV","tid":0,"ts":') and lines[1].endswith("}},")


if __name__ == "__main__" and sys.argv[1:] == ["--write"]:
    import tempfile

    digests: dict[str, str] = {}
    for scenario_name in sorted(SCENARIOS):
        with tempfile.TemporaryDirectory() as tmp_dir:
            digests.update(decisions(scenario_name, Path(tmp_dir)))
    GOLDEN.parent.mkdir(exist_ok=True)
    GOLDEN.write_text(json.dumps(digests, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {len(digests)} digests to {GOLDEN}")
