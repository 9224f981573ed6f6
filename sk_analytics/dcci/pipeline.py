"""``dcci_diff``: the end-to-end DCCI diff of two contract-bound diagnostic collections.

Refuses any pair whose manifest set does not validate (formats.md §6): the two
profiles must be proven to come from their own collection sessions and to
differ only at the declared DCCI pointer. Then both roots are parsed and
:func:`sk_analytics.dcci.analysis.analyze` decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from sk_analytics.contract import BASELINE_PROFILE, CANDIDATE_PROFILE, MANIFEST_NAME, validate_set
from sk_analytics.contract.ledger_pair import check_recorded_pair
from sk_analytics.dcci.analysis import SideInput, analyze
from sk_analytics.dcci.load import load_side
from sk_analytics.dcci.rank_events import child_timings_by_process, occurrences_by_process, process_events
from sk_analytics.errors import InputError
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.fingerprint import fingerprint
from sk_analytics.ingest.sources import sealed_hashes
from sk_analytics.schema import SK_CHILDREN, SK_OCCURRENCES

SESSION_DATA: Final = "data"
"""A sweep session's Parquet folder, where each diagnostic collection was ingested after sealing."""
DCCI_POINTER: Final = "/super_kernel_optimize_options/dcci_disable_on_kernel"
"""The one declared difference between the O0 and the disable-all diagnostic profiles."""


def _identity(contract: dict[str, Any], role: str) -> dict[str, Any]:
    return {"role": role, **contract["roles"][role]}


def _load_side(root: Path, identity: dict[str, Any], session: Path | None) -> SideInput:
    """One side, its events from ``session``'s ingested table when that holds exactly the vouched bytes.

    The manifest was just re-verified by validate_set, so its SHA-256 per file is the disk's."""
    if session is None:
        return load_side(root, identity)
    return load_side(root, identity, data_dir=Path(session) / SESSION_DATA, vouched=sealed_hashes(root))


@dataclass(frozen=True)
class CollectionPair:
    """A validated O0 / disable-all pair, parsed, with the config the repair diff is proven against."""

    contract: dict[str, Any]
    baseline: SideInput
    candidate: SideInput
    disable_all_config: dict[str, Any]


def load_pair(
    baseline_root: Path, candidate_root: Path, *, disable_all_config: dict[str, Any] | None = None, session: Path | None = None,
    archive: bool = False,
) -> CollectionPair:
    """Validate the manifest set (refusing anything but the declared DCCI difference) and parse both roots.

    ``disable_all_config`` defaults to the candidate manifest's exact config;
    when given it must be that config. With ``session`` (a sweep session) both
    manifests must be the ones its ledger recorded at finalize (rule ledger-pair).
    ``archive``: check the collections in archive mode (a copied or moved session).
    """
    roots = {BASELINE_PROFILE: baseline_root, CANDIDATE_PROFILE: candidate_root}
    contract = validate_set(roots, allowed_changes=(DCCI_POINTER,), require_sk_prof=True, archive=archive)
    if session is not None:
        check_recorded_pair(session, roots, {role: contract["roles"][role]["manifest_fingerprint"] for role in roots})
    expected = contract["roles"][CANDIDATE_PROFILE]["config_fingerprint"]
    if disable_all_config is None:
        # the manifest was just re-verified by validate_set; read its config without hashing the files again
        disable_all_config = load_json_file(Path(candidate_root) / MANIFEST_NAME)["config"]
    if fingerprint(disable_all_config) != expected:
        raise InputError(candidate_root, "the disable-all config is not the candidate profile's config",
                         expected=f"config_fingerprint {expected}")
    return CollectionPair(
        contract=contract,
        baseline=_load_side(Path(baseline_root), _identity(contract, BASELINE_PROFILE), session),
        candidate=_load_side(Path(candidate_root), _identity(contract, CANDIDATE_PROFILE), session),
        disable_all_config=disable_all_config,
    )


def analyze_pair(pair: CollectionPair, *, warmup: int) -> dict[str, Any]:
    """The DCCI diff JSON of a loaded pair."""
    if warmup < 0:
        raise InputError(None, f"warmup {warmup} is negative", expected="an integer >= 0")
    return analyze(pair.baseline, pair.candidate, warmup=warmup, disable_all_config=pair.disable_all_config,
                   contract=pair.contract)


def dcci_diff(
    baseline_root: Path,
    candidate_root: Path,
    *,
    warmup: int,
    disable_all_config: dict[str, Any] | None = None,
    session: Path | None = None,
) -> dict[str, Any]:
    """The DCCI diff JSON (docs/dcci-diff.md) of two validated collection roots (recorded by ``session``'s ledger, if given)."""
    if warmup < 0:
        raise InputError(None, f"warmup {warmup} is negative", expected="an integer >= 0")
    pair = load_pair(baseline_root, candidate_root, disable_all_config=disable_all_config, session=session)
    return analyze_pair(pair, warmup=warmup)


def write_derived_tables(pair: CollectionPair, data_dir: Path) -> list[Path]:
    """Write both sides' ``sk_occurrences`` and ``sk_children`` (every SK, every child) as Parquet,
    partitioned ``round=dcci-diff/role=<baseline|candidate>/run=<root folder name>``.
    The events are read a process (rank) at a time, as the diff reads them."""
    # pyarrow (0.1 s to import) only when tables are written
    from sk_analytics.tables import write_table

    written = []
    for role, side in (("baseline", pair.baseline), ("candidate", pair.candidate)):
        events = process_events(side.events, side.by_process)
        occurrences = occurrences_by_process(events)
        children = child_timings_by_process(events, occurrences)
        partition = {"round": "dcci-diff", "role": role, "run": side.root.name}
        written.append(write_table(occurrences, SK_OCCURRENCES, data_dir, partition))
        written.append(write_table(children, SK_CHILDREN, data_dir, partition))
    return written
