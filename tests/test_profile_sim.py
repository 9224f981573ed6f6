"""``collect_profile`` on the simulated device: a valid DCCI pair and the buffer-full path.

The backend's source path is pinned to a folder outside any repository so
that both sides record the same source revision while other work changes
this checkout (the revision itself is tested in test_profile_runner).
"""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from sk_analytics.contract import load_manifest, validate_set
from sk_runner.backends.base import Control
from sk_runner.backends.sim import SimBackend
from sk_runner.profile import ProfileResult, ProfileSpec, collect_profile

DCCI_POINTER = "/super_kernel_optimize_options/dcci_disable_on_kernel"


class _PinnedSim(SimBackend):
    def __init__(self, source: Path) -> None:
        super().__init__()
        self.source = source

    def source_path(self) -> Path:
        return self.source


def _collect(base: Path, role: str, options: dict, **kw: object) -> ProfileResult:
    config = base / f"{role}.json"
    config.write_text(json.dumps({"static_kernel_compile": True, "super_kernel_optimize": True,
                                  "super_kernel_optimize_options": options}))
    args = dict(session=base / "session", round="DCCI", role=role, config=config, backend=_PinnedSim(base),
                control=Control(ranks=2, iterations=8, warmup=2, timeout_s=120), seed=5)
    args.update(kw)
    Path(args["session"]).mkdir(exist_ok=True)  # type: ignore[arg-type]
    return collect_profile(ProfileSpec(**args))  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, ProfileResult, ProfileResult]:
    base = tmp_path_factory.mktemp("pair")
    return (base, _collect(base, "baseline_profile", {}),
            _collect(base, "candidate_profile", {"dcci_disable_on_kernel": [".*"]}))


def test_valid_pair_on_the_simulator(pair: tuple[Path, ProfileResult, ProfileResult]) -> None:
    _, baseline, candidate = pair
    assert baseline.status == candidate.status == "complete"
    record = validate_set({"baseline_profile": baseline.root, "candidate_profile": candidate.root}, [DCCI_POINTER],
                          require_sk_prof=True)
    assert record["roles"]["baseline_profile"]["manifest_fingerprint"] == baseline.manifest_fingerprint
    assert record["roles"]["candidate_profile"]["manifest_fingerprint"] == candidate.manifest_fingerprint
    manifest = load_manifest(candidate.root)
    pid = manifest["producer"]["native_pid"]
    sk_prof = [r["path"] for r in manifest["files"]["sk_prof"]]
    # rank 0 is the producer itself, rank 1 the process after it (the simulator stands in for both)
    assert sorted(sk_prof) == sorted([f"sk_meta/{pid}/sk_prof_device_0.json", f"sk_meta/{pid + 1}/sk_prof_device_1.json"])
    assert manifest["workload"]["iterations"] == 8 and manifest["workload"]["rank"] == 2


def test_pair_is_ingested_under_round_role_attempt(pair: tuple[Path, ProfileResult, ProfileResult]) -> None:
    base, baseline, candidate = pair
    assert baseline.ingest["rows_by_table"]["sk_events"] > 0
    kernels = pl.scan_parquet(base / "session" / "data" / "kernels" / "**" / "*.parquet", hive_partitioning=True)
    parts = kernels.select("round", "role", "run").unique().sort("role").collect()
    assert parts.rows() == [("DCCI", "baseline_profile", "attempt-1"), ("DCCI", "candidate_profile", "attempt-1")]


def test_buffer_full_on_the_simulator_recollects_shorter(tmp_path: Path) -> None:
    # 64 KB per core holds fewer events than 16 or 8 iterations produce; 5 (warm-up 2 + 3) fit
    result = _collect(tmp_path, "candidate_profile", {}, sk_prof_kb=64, max_attempts=4,
                      control=Control(ranks=2, iterations=16, warmup=2, timeout_s=120))
    assert [(a.iterations, a.status) for a in result.attempts] == [
        (16, "child_incomplete"), (8, "child_incomplete"), (5, "complete")]
    assert result.status == "complete" and result.root.endswith("attempt-3")
    markers = pl.read_parquet(tmp_path / "session" / "data" / "sk_markers" / "**" / "*.parquet", hive_partitioning=True)
    assert markers["run"].unique().to_list() == ["attempt-3"]  # only the complete collection is ingested
    assert markers.filter(pl.col("kind") == "buffer_full").height == 0
    first = load_manifest(result.attempts[0].root)  # the incomplete root stays sealed and separate
    assert first["workload"]["iterations"] == 16


def test_relative_session_path_works_from_any_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # the producer runs inside the profile root; the config path it receives must
    # not be relative to the caller's cwd (``sk-run sweep --demo --session demo``)
    monkeypatch.chdir(tmp_path)
    result = _collect(Path("."), "baseline_profile", {}, session=Path("rel-session"))
    assert result.status == "complete", result.reason
    assert Path(result.root).is_absolute() or (tmp_path / result.root).is_dir()


def test_db_export_collection_is_sealed_and_ingested(tmp_path: Path) -> None:
    """``sk-run profile --export-type db``: the simulator writes torch_npu's DB export only; the
    contract seals it as the profiler_db file role and the kernels table is ingested from it."""
    result = _collect(tmp_path, "baseline_profile", {}, export_type="db")
    assert result.status == "complete", result.reason
    manifest = load_manifest(result.root)
    dbs = sorted(r["path"].rsplit("/", 1)[-1] for r in manifest["files"]["profiler_db"])
    assert dbs == ["ascend_pytorch_profiler_0.db", "ascend_pytorch_profiler_1.db"]  # one per rank
    assert "kernel_details" not in manifest["files"] or manifest["files"]["kernel_details"] == []
    assert manifest["control"]["profile_env"]["SK_RUN_PROFILE_EXPORT"] == "db"
    assert result.ingest["rows_by_table"]["kernels"] > 0
    kernels = pl.read_parquet(tmp_path / "session" / "data" / "kernels" / "**" / "*.parquet", hive_partitioning=True)
    assert kernels["source_file"].str.contains(r"ascend_pytorch_profiler_[01]\.db$").all() and kernels["is_sk"].any()
    assert kernels.group_by("device_id").agg(pl.col("source_file").n_unique()).sort("device_id").rows() == [(0, 1), (1, 1)]
