"""The one canonical-JSON / SHA-256 helper of the product.

Fingerprints (formats.md §6) are the SHA-256 of *canonical JSON*: sorted keys,
compact separators, ASCII only, no NaN/Infinity. Every module that binds
evidence (contract manifests, the ledger chain, the frozen option matrix)
uses these functions so that the same value always has the same fingerprint.
"""

from __future__ import annotations

import hashlib
import json
from os import PathLike
from typing import Any

from sk_analytics.errors import InputError

_CHUNK = 1 << 20


def canonical_json(value: Any) -> str:
    """Canonical JSON text of ``value`` (sorted keys, ``,``/``:``, ASCII, no NaN)."""
    try:
        return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)
    except (ValueError, TypeError) as exc:
        raise InputError(None, f"value cannot be fingerprinted: {exc}", expected="JSON data without NaN/Infinity") from exc


def sha256_bytes(data: bytes) -> str:
    """Hex SHA-256 of raw bytes."""
    return hashlib.sha256(data).hexdigest()


def fingerprint(value: Any) -> str:
    """Hex SHA-256 of the canonical JSON of ``value``."""
    return sha256_bytes(canonical_json(value).encode("ascii"))


def sha256_file(path: str | PathLike[str]) -> str:
    """Hex SHA-256 of a file's bytes, read in chunks (artifacts can be large)."""
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()
