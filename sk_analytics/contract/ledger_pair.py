"""Rule ledger-pair: inside a sweep, a DCCI pair is exactly the collections the ledger recorded.

At finalize the sweep appends a ``profile_result`` record naming the collection
root and its ``manifest_fingerprint``; the ledger is signed, the manifest is
signed too. A pair whose manifest is not the recorded one — another collection
moved into the recorded root, a different (validly signed) collection of another
session, or a root the ledger never recorded — is refused before attribution.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from os import PathLike
from pathlib import Path

from sk_analytics.contract.rules import ContractIntegrityError
from sk_analytics.ledger.chain import LedgerRecord, read_records


def recorded_collections(session: Path, records: list[LedgerRecord]) -> dict[str, tuple[int, str | None]]:
    """Real path of each completed collection root -> (seq, manifest fingerprint) of its last record (pure)."""
    out: dict[str, tuple[int, str | None]] = {}
    for record in records:
        if record.kind == "profile_result" and record.data.get("ok") and record.data.get("root"):
            out[os.path.realpath(session / record.data["root"])] = (record.seq, record.data.get("manifest_fingerprint"))
    return out


def check_recorded_pair(
    session: str | PathLike[str], roots: Mapping[str, str | PathLike[str]], manifest_fingerprints: Mapping[str, str]
) -> None:
    """Each role's root is a collection the session's (verified) ledger recorded, with this manifest."""
    session = Path(session)
    recorded = recorded_collections(session, read_records(session))
    for role, root in roots.items():
        found = recorded.get(os.path.realpath(root))
        if found is None:
            raise ContractIntegrityError(
                "ledger-pair", root, f"the ledger of {session} records no completed {role} collection at this root"
            )
        seq, expected = found
        actual = manifest_fingerprints[role]
        if actual != expected:
            raise ContractIntegrityError(
                "ledger-pair", root,
                f"the {role} manifest {actual[:12]} is not the one the ledger recorded at seq {seq} ({str(expected)[:12]})",
            )
