"""dcci-diff reads the sk_events a sweep already ingested for the vouched bytes, and nothing else (issue 27)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import polars as pl
import pyarrow.parquet as pq
import pytest
from polars.testing import assert_frame_equal
from test_dcci_e2e import WARMUP, pair

from sk_analytics.contract.scan import MANIFEST_NAME
from sk_analytics.dcci.pipeline import SESSION_DATA, dcci_diff, load_pair
from sk_analytics.fingerprint import sha256_file
from sk_analytics.ingest import ingest_run_dir
from sk_analytics.ingest.sources import SOURCES_KEY, read_sources, sealed_hashes
from sk_analytics.ledger.chain import Ledger

RANKS = 2


@pytest.fixture(scope="module")
def collections(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base, cand, _ = pair(tmp_path_factory.mktemp("pair"), "moe-decode", (11, 12), ranks=RANKS)
    return base, cand


def _session(tmp_path: Path, base: Path, cand: Path) -> Path:
    """A session whose ledger recorded the pair and whose data folder holds both ingests, as a sweep leaves them."""
    session = tmp_path / "session"
    session.mkdir()
    ledger = Ledger(session)
    ledger.append("session_started", {})
    for role, root in (("baseline_profile", base), ("candidate_profile", cand)):
        fp = json.loads((root / MANIFEST_NAME).read_text(encoding="utf-8"))["manifest_fingerprint"]
        ledger.append("profile_result", {"role": role, "ok": True, "root": os.path.relpath(root, session), "manifest_fingerprint": fp})
        ingest_run_dir(root, session / SESSION_DATA, "DCCI", role, root.name, hashes=sealed_hashes(root))
    return session


def _part(session: Path, role: str, root: Path) -> Path:
    return session / SESSION_DATA / f"sk_events/round=DCCI/role={role}/run={root.name}/part-0.parquet"


@pytest.mark.parametrize("sealed", [True, False])
def test_ingest_records_each_trace_with_its_sha256(collections: tuple[Path, Path], tmp_path: Path, sealed: bool) -> None:
    """With the sealed digests (as the sweep ingests) or hashing the files itself, the records hold the files' SHA-256."""
    base, _ = collections
    ingest_run_dir(base, tmp_path, "DCCI", "baseline_profile", base.name, hashes=sealed_hashes(base) if sealed else None)
    records = read_sources(tmp_path / f"sk_events/round=DCCI/role=baseline_profile/run={base.name}/part-0.parquet")
    traces = sorted(base.glob("sk_meta/*/sk_prof_device_*.json"))
    assert records is not None and len(traces) == RANKS
    assert list(records) == [p.relative_to(base).as_posix() for p in traces]
    assert [r["sha256"] for r in records.values()] == [sha256_file(p) for p in traces]
    assert all(r["warnings"] == [] for r in records.values())


def test_reused_events_give_the_parsed_side_and_diff(collections: tuple[Path, Path], tmp_path: Path) -> None:
    base, cand = collections
    session = _session(tmp_path, base, cand)
    reused, parsed = load_pair(base, cand, session=session), load_pair(base, cand)
    for a, b in ((reused.baseline, parsed.baseline), (reused.candidate, parsed.candidate)):
        assert a.spill is None and b.spill is not None  # the session's table was read, not a second parse
        assert_frame_equal(a.events.collect(), b.events.collect())
        assert (a.warnings, a.truncated_processes) == (b.warnings, b.truncated_processes)
    assert dcci_diff(base, cand, warmup=WARMUP, session=session) == dcci_diff(base, cand, warmup=WARMUP)


def _rewrite_sources(part: Path, edit: dict[str, str] | None) -> None:
    """Replace (or drop, with None) the source records of an ingested file."""
    table = pq.read_table(part)
    metadata = dict(table.schema.metadata or {})
    records = json.loads(metadata.pop(SOURCES_KEY.encode()))
    if edit is not None:
        for rel, sha in edit.items():
            records[rel]["sha256"] = sha
        metadata[SOURCES_KEY.encode()] = json.dumps(records).encode()
    pq.write_table(table.replace_schema_metadata(metadata), part)


@pytest.mark.parametrize("edit", ["stale_sha", "no_record", "other_root"])
def test_a_table_not_bound_to_the_vouched_bytes_is_parsed_again(
    collections: tuple[Path, Path], tmp_path: Path, edit: str
) -> None:
    base, cand = collections
    session = _session(tmp_path, base, cand)
    part = _part(session, "baseline_profile", base)
    first = next(iter(read_sources(part) or {}))
    if edit == "stale_sha":
        _rewrite_sources(part, {first: "0" * 64})
    elif edit == "no_record":
        _rewrite_sources(part, None)
    else:  # another ingest of the same partition (here: of one process folder) holds other sources
        ingest_run_dir(next(base.glob("sk_meta/*")), session / SESSION_DATA, "DCCI", "baseline_profile", base.name)
    loaded, parsed = load_pair(base, cand, session=session), load_pair(base, cand)
    assert loaded.baseline.spill is not None and loaded.candidate.spill is None
    assert_frame_equal(loaded.baseline.events.collect(), parsed.baseline.events.collect())
    assert loaded.baseline.events.collect().height > 0 and pl.scan_parquet(part).collect().height > 0
