"""Which raw files a Parquet table was parsed from, kept in the file's own metadata.

The ingest of ``sk_events`` records, per source file (relative to the
ingested root, as in ``source_file``): its SHA-256 at ingest time and the
parser's warnings. A later reader (dcci-diff) may then use the table instead
of parsing the large raw traces again, but only for files whose manifest
(re-verified against the disk) names the same SHA-256: the table is bound to
the very bytes that were vouched for, never to a path alone.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypedDict

from sk_analytics.contract.scan import MANIFEST_NAME
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.fingerprint import sha256_file

SOURCES_KEY = "sk_sources"
"""Parquet key/value metadata key holding the JSON source records."""
SOURCED_TABLES = frozenset({"sk_events"})
"""Tables whose ingest records its sources (the large traces worth not parsing twice)."""


class SourceRecord(TypedDict):
    """One raw file a table was parsed from."""

    sha256: str
    warnings: list[str]


def source_record(path: Path, warnings: Sequence[str], sha256: str | None = None) -> SourceRecord:
    """The record of one parsed file: ``sha256`` when the caller just sealed it with that digest, else its bytes hashed now."""
    return {"sha256": sha256 or sha256_file(path), "warnings": list(warnings)}


def encode_sources(records: Mapping[str, SourceRecord]) -> dict[str, str]:
    """Parquet metadata for ``records`` (source_file -> record, in row order)."""
    return {SOURCES_KEY: json.dumps(dict(records), ensure_ascii=False, separators=(",", ":"))}


def read_sources(path: Path) -> dict[str, SourceRecord] | None:
    """The source records of a Parquet file, in row order; None when it has none or cannot be read."""
    import pyarrow as pa  # only here: a dcci-diff of raw traces never reads a table, and pyarrow takes 0.1 s to import
    import pyarrow.parquet as pq

    try:
        raw = (pq.read_schema(path).metadata or {}).get(SOURCES_KEY.encode())
        records = None if raw is None else json.loads(raw)
    except (OSError, ValueError, pa.ArrowException):
        return None
    return records if isinstance(records, dict) else None


def sealed_hashes(root: Path) -> dict[str, str]:
    """Path (relative to ``root``) -> SHA-256 of every file its collection manifest lists.

    Only as trustworthy as the manifest: call it on a root just sealed or just re-verified (validate_set)."""
    groups = load_json_file(Path(root) / MANIFEST_NAME)["files"].values()
    return {rec["path"]: rec["sha256"] for group in groups for rec in group}
