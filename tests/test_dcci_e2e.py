"""dcci-diff end to end on simulated profiles under the artifact contract, checked against ground truth.

Each test collects an O0 and a disable-all diagnostic profile with the
simulator (separate processes: new pid, model id, scope ids and hash tails),
seals them with the contract, runs the CLI / API and compares with the
simulator's ground truth (which the analysis never reads).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from sk_analytics.cli import cli
from sk_analytics.cli._base import run_cli
from sk_analytics.contract import BASELINE_PROFILE, CANDIDATE_PROFILE, ProducerInfo, begin, command_fingerprint, finalize
from sk_analytics.dcci.pattern import matches
from sk_analytics.dcci.pipeline import dcci_diff
from sk_analytics.errors import InputError, SkTuneError
from sk_analytics.tables import scan_table
from sk_runner.sim.runner import SimRequest, run

O0 = {"static_kernel_compile": True, "super_kernel_optimize": True, "super_kernel_optimize_options": {"auto_op_parallel": 0}}
DISABLE_ALL = {
    "static_kernel_compile": True,
    "super_kernel_optimize": True,
    "super_kernel_optimize_options": {"auto_op_parallel": 0, "dcci_disable_on_kernel": [".*"]},
}
WORKLOAD = {"model": "sim", "input": "prompts", "batch_size": 1, "rank": 1, "mode": "decode", "warmup": 2,
            "iterations": 6, "runtime": "sim"}
ITERATIONS = 6
WARMUP = 2


def collect(base: Path, role: str, config: dict[str, Any], *, network: str, seed: int, sk_prof_kb: int = 1024,
            truth: Path | None = None, finalize_root: bool = True, export_type: str = "text", ranks: int = 1) -> Path:
    """begin -> simulated profile process (every rank profiled) -> finalize (the producer is this test process)."""
    root, session = base / role / "root", base / role / "session.json"
    begin(role, root, session)
    config_file = base / role / "config.json"
    config_file.write_text(json.dumps(config), encoding="utf-8")
    started = time.time_ns()
    env = {**os.environ, "ASCEND_PROF_SK_ON": str(sk_prof_kb), "ASCEND_OP_COMPILE_SAVE_KERNEL_META": "1"}
    request = SimRequest(config=config_file, run_dir=root, ranks=ranks, iterations=ITERATIONS, warmup=WARMUP, seed=seed,
                         profile=True, network=network, ground_truth=truth, env=env, export_type=export_type)
    assert run(request) == 0
    if finalize_root:
        finalize(session, source_revision="rev-1", config=config, control={"sk_prof_kb": sk_prof_kb},
                 workload={**WORKLOAD, "rank": ranks},
                 producer=ProducerInfo(os.getpid(), started, time.time_ns(), command_fingerprint(["sim", role])),
                 require_sk_prof=True)
    return root


def pair(tmp_path: Path, network: str, seeds: tuple[int, int], **kw: Any) -> tuple[Path, Path, dict[str, Any]]:
    truth = tmp_path / "truth.json"
    base = collect(tmp_path, BASELINE_PROFILE, O0, network=network, seed=seeds[0], export_type=kw.get("export_type", "text"),
                   ranks=kw.get("ranks", 1))
    cand = collect(tmp_path, CANDIDATE_PROFILE, DISABLE_ALL, network=network, seed=seeds[1], truth=truth, **kw)
    return base, cand, json.loads(truth.read_text(encoding="utf-8"))["dcci"]


def _sk_key(sk: dict[str, Any]) -> tuple[str, tuple[str, ...], int]:
    return (sk["scope_name"], tuple(sk["child_ops"]), sk.get("occurrence_index", sk.get("occurrence")))


def check_against_truth(result: dict[str, Any], truth: dict[str, Any]) -> None:
    """The SKs decided slower (on their deciding rank), their significant children and the repair are the truth's."""
    slower = {_sk_key(s) for s in result["sks"] if s["class"] == "significantly_slower" and s["deciding"]}
    assert slower == {_sk_key(s) for s in truth["regressed_sks"]}
    by_uid = {s["uid"]: s for s in result["sks"]}
    found = {
        (*_sk_key(by_uid[c["uid"]]), row["child_index"], row["canonical_op"])
        for c in result["children"] for row in c["rows"] if row["significant"]
    }
    expected = {(*_sk_key(c["sk"]), c["child_index"], c["canonical_op"]) for c in truth["regressed_children"]}
    assert found == expected
    repair = result["repair"]
    assert repair["tokens"] == list(dict.fromkeys(truth["repair_ops"]))
    if truth["repair"] is None:
        assert repair["proposed"] is False
        return
    assert repair["proposed"] and repair["list"] == truth["repair"]["patterns"]
    for choice in repair["patterns"]:
        assert choice["token"] in choice["pattern"]
        assert all(matches(choice["pattern"], s) for s in choice["matched_symbols"])
        assert set(choice["matched_symbols"]) == set(choice["intended_symbols"])
    intended = set(truth["repair_symbols"])
    assert intended <= {s for c in repair["patterns"] for s in c["matched_symbols"]}
    opts = repair["config"]["super_kernel_optimize_options"]
    assert opts["dcci_before_kernel_start"] == opts["dcci_after_kernel_end"] == repair["list"]
    assert repair["changed_pointers"] == ["/super_kernel_optimize_options/dcci_after_kernel_end",
                                          "/super_kernel_optimize_options/dcci_before_kernel_start"]


def unstable_ids(root: Path) -> tuple[frozenset[str], frozenset[str]]:
    """Folder names under sk_meta (pid and model dirs) and the scope ids of the fused-nodes logs."""
    dirs = frozenset(p.relative_to(root).as_posix() for p in root.glob("sk_meta/*/model_*"))
    scopes = frozenset(m for log in root.glob("sk_meta/*/model_*/sk_fused_nodes.log")
                       for m in re.findall(r"scope id: (\d+)", log.read_text(encoding="utf-8")))
    return dirs, scopes


@pytest.mark.parametrize(("network", "seeds"), [("moe-decode", (11, 12)), ("moe-decode", (21, 5)), ("dcci-neutral", (3, 4)), ("dcci-gain", (5, 6))])
def test_finds_exactly_the_regressed_sks_children_and_symbols(tmp_path: Path, network: str, seeds: tuple[int, int]) -> None:
    base, cand, truth = pair(tmp_path, network, seeds)
    result = dcci_diff(base, cand, warmup=WARMUP)
    # the two processes numbered pids, model dirs and scope ids independently (a
    # single id may collide by chance; all of them together do not)
    assert unstable_ids(base) != unstable_ids(cand)
    assert all(s["align_status"] == "aligned" for s in result["sks"])
    check_against_truth(result, truth)


def test_cli_writes_json_and_chinese_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, cand, truth = pair(tmp_path, "dcci-unrepairable", (7, 8))
    out, report = tmp_path / "out" / "dcci.json", tmp_path / "out" / "dcci.md"
    tables = tmp_path / "out" / "data"
    code = run_cli(cli, "sk-analyze", ["dcci-diff", "--baseline", str(base), "--candidate", str(cand),
                                       "--warmup", str(WARMUP), "--json-out", str(out), "--report-md", str(report),
                                       "--tables-out", str(tables)])
    result = json.loads(out.read_text(encoding="utf-8"))
    occ = scan_table(tables, "sk_occurrences").collect()
    children = scan_table(tables, "sk_children").collect()
    for role in ("baseline", "candidate"):
        assert occ.filter(pl.col("role") == role).height == result[role]["sk_occurrences"]
        assert children.filter(pl.col("role") == role).height > occ.filter(pl.col("role") == role).height
    assert set(occ["round"]) == {"dcci-diff"} and occ["wall_us"].min() > 0
    assert code == 0 and "repair: proposed" in capsys.readouterr().out
    check_against_truth(result, truth)
    assert result["contract"]["change_set"]["allowed_json_pointers"] == ["/super_kernel_optimize_options/dcci_disable_on_kernel"]
    assert result["candidate"]["manifest_fingerprint"] == result["contract"]["roles"]["candidate_profile"]["manifest_fingerprint"]
    text = report.read_text(encoding="utf-8")
    assert "相关不等于根因" in text and result["contract"]["set_fingerprint"] in text


def test_buffer_full_blocks_child_attribution(tmp_path: Path) -> None:
    # same collection control on both sides (the set check demands it): a 64 KB buffer per core fills
    base = collect(tmp_path, BASELINE_PROFILE, O0, network="moe-decode", seed=1, sk_prof_kb=64)
    cand = collect(tmp_path, CANDIDATE_PROFILE, DISABLE_ALL, network="moe-decode", seed=2, sk_prof_kb=64)
    result = dcci_diff(base, cand, warmup=WARMUP)
    assert result["candidate"]["buffer_full"] and result["baseline"]["buffer_full"]
    assert result["summary"]["classes"]["significantly_slower"] > 0  # per-SK classification still stands
    assert all(c["attribution"] == "blocked" and "buffer_full:candidate" in c["blockers"] for c in result["children"])
    assert result["repair"]["proposed"] is False and result["repair"]["reason"] == "child_attribution_blocked"


def test_missing_manifest_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = collect(tmp_path, BASELINE_PROFILE, O0, network="dcci-neutral", seed=1)
    cand = collect(tmp_path, CANDIDATE_PROFILE, DISABLE_ALL, network="dcci-neutral", seed=2, finalize_root=False)
    code = run_cli(cli, "sk-analyze", ["dcci-diff", "--baseline", str(base), "--candidate", str(cand),
                                       "--json-out", str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert code == 2 and "required-files" in err and "no manifest" in err
    assert not (tmp_path / "x.json").exists()


def test_other_difference_than_the_dcci_option_is_refused(tmp_path: Path) -> None:
    base = collect(tmp_path, BASELINE_PROFILE, O0, network="dcci-neutral", seed=1)
    other = {**DISABLE_ALL, "super_kernel_optimize_options": {**DISABLE_ALL["super_kernel_optimize_options"], "early_start": 1}}
    cand = collect(tmp_path, CANDIDATE_PROFILE, other, network="dcci-neutral", seed=2)
    with pytest.raises(SkTuneError, match="declared-change-only"):
        dcci_diff(base, cand, warmup=WARMUP)


def test_truncated_sk_prof_blocks_children_and_is_reported(tmp_path: Path) -> None:
    base = collect(tmp_path, BASELINE_PROFILE, O0, network="moe-decode", seed=1)
    cand_role = tmp_path / CANDIDATE_PROFILE
    root, session = cand_role / "root", cand_role / "session.json"
    begin(CANDIDATE_PROFILE, root, session)
    started = time.time_ns()
    config_file = cand_role / "config.json"
    config_file.write_text(json.dumps(DISABLE_ALL), encoding="utf-8")
    env = {**os.environ, "ASCEND_PROF_SK_ON": "1024", "ASCEND_OP_COMPILE_SAVE_KERNEL_META": "1"}
    assert run(SimRequest(config=config_file, run_dir=root, ranks=1, iterations=ITERATIONS, warmup=WARMUP, seed=2,
                          profile=True, network="moe-decode", env=env)) == 0
    prof = next(root.glob("sk_meta/*/sk_*_device_*.json"))  # seed 2: the legacy sk_event_dev_device_0.json
    data = prof.read_bytes()
    prof.write_bytes(data[: int(len(data) * 0.9)])  # the process was killed mid-write
    finalize(session, source_revision="rev-1", config=DISABLE_ALL, control={"sk_prof_kb": 1024}, workload=WORKLOAD,
             producer=ProducerInfo(os.getpid(), started, time.time_ns(), command_fingerprint(["sim"])), require_sk_prof=True)
    result = dcci_diff(base, root, warmup=WARMUP)
    assert result["candidate"]["truncated_sk_prof_processes"] and any("truncated" in w for w in result["candidate"]["warnings"])
    assert result["children"] and all("truncated_sk_prof:candidate" in c["blockers"] for c in result["children"])
    assert result["repair"]["proposed"] is False


def test_a_side_whose_trace_recorded_no_event_is_refused_and_nothing_written(tmp_path: Path,
                                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The candidate's sk_prof is the empty trace [{}]: every SK was 'insufficient evidence', no repair (exit 1) and
    the candidate's tables of no rows and an empty track were written. Refused by name instead (exit 2), nothing written."""
    base = collect(tmp_path, BASELINE_PROFILE, O0, network="dcci-neutral", seed=1)
    cand = collect(tmp_path, CANDIDATE_PROFILE, DISABLE_ALL, network="dcci-neutral", seed=2, finalize_root=False)
    prof = next(cand.glob("sk_meta/*/sk_*_device_*.json"))
    prof.write_text("[{}]\n", encoding="utf-8")
    now = time.time_ns()
    finalize(tmp_path / CANDIDATE_PROFILE / "session.json", source_revision="rev-1", config=DISABLE_ALL,
             control={"sk_prof_kb": 1024}, workload=WORKLOAD,
             producer=ProducerInfo(os.getpid(), now - 1000, now, command_fingerprint(["sim"])), require_sk_prof=True)
    out = tmp_path / "out"
    code = run_cli(cli, "sk-analyze", ["dcci-diff", "--baseline", str(base), "--candidate", str(cand), "--json-out", str(out / "d.json"),
                                       "--report-md", str(out / "d.md"), "--tables-out", str(out / "t"), "--trace-out", str(out / "t.json")])
    [line] = capsys.readouterr().err.splitlines()
    assert code == 2 and line == (f"sk-analyze: error: {prof}: no SK event, the empty trace [{{}}] or one cut before its first record: "
                                  "SK time profiling recorded no launch; nothing was written (expected 'X' events of SK launches "
                                  "before the closing {}, formats.md §3: a workload that launches SKs, profiled with "
                                  "ASCEND_PROF_SK_ON=<KB per core>)"), line
    assert not out.exists()


def test_given_disable_all_config_must_be_the_candidates(tmp_path: Path) -> None:
    base = collect(tmp_path, BASELINE_PROFILE, O0, network="dcci-neutral", seed=1)
    cand = collect(tmp_path, CANDIDATE_PROFILE, DISABLE_ALL, network="dcci-neutral", seed=2)
    with pytest.raises(InputError, match="not the candidate profile's config"):
        dcci_diff(base, cand, warmup=WARMUP, disable_all_config=O0)
    assert dcci_diff(base, cand, warmup=WARMUP, disable_all_config=DISABLE_ALL)["repair"]["proposed"] is False
