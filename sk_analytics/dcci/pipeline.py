"""``dcci_diff``: the end-to-end DCCI diff of two contract-bound diagnostic collections.

Refuses any pair whose manifest set does not validate (formats.md §6): the two
profiles must be proven to come from their own collection sessions and to
differ only at the declared DCCI pointer. Then both roots are parsed and
:func:`sk_analytics.dcci.analysis.analyze` decides.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from sk_analytics.contract import BASELINE_PROFILE, CANDIDATE_PROFILE, MANIFEST_NAME, validate_set
from sk_analytics.dcci.analysis import analyze
from sk_analytics.dcci.load import load_side
from sk_analytics.errors import InputError
from sk_analytics.fingerprint import fingerprint
from sk_analytics.strict_json import load_json_file

DCCI_POINTER: Final = "/super_kernel_optimize_options/dcci_disable_on_kernel"
"""The one declared difference between the O0 and the disable-all diagnostic profiles."""


def _identity(contract: dict[str, Any], role: str) -> dict[str, Any]:
    return {"role": role, **contract["roles"][role]}


def dcci_diff(
    baseline_root: Path,
    candidate_root: Path,
    *,
    warmup: int,
    disable_all_config: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The DCCI diff JSON (docs/dcci-diff.md) of two validated collection roots.

    ``disable_all_config`` defaults to the candidate manifest's exact config;
    when given it must be that config (the repair diff is proven against it).
    """
    if warmup < 0:
        raise InputError(None, f"warmup {warmup} is negative", expected="an integer >= 0")
    contract = validate_set(
        {BASELINE_PROFILE: baseline_root, CANDIDATE_PROFILE: candidate_root},
        allowed_changes=(DCCI_POINTER,),
        require_sk_prof=True,
    )
    expected = contract["roles"][CANDIDATE_PROFILE]["config_fingerprint"]
    if disable_all_config is None:
        # the manifest was just re-verified by validate_set; read its config without hashing the files again
        disable_all_config = load_json_file(Path(candidate_root) / MANIFEST_NAME)["config"]
    if fingerprint(disable_all_config) != expected:
        raise InputError(candidate_root, "the disable-all config is not the candidate profile's config",
                         expected=f"config_fingerprint {expected}")
    baseline = load_side(Path(baseline_root), _identity(contract, BASELINE_PROFILE))
    candidate = load_side(Path(candidate_root), _identity(contract, CANDIDATE_PROFILE))
    return analyze(baseline, candidate, warmup=warmup, disable_all_config=disable_all_config, contract=contract)
