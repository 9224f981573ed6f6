"""The sweep's DCCI diagnosis step: run ``dcci_diff`` on the paired collections and keep its evidence."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sk_analytics.dcci.repair import repair_message
from sk_analytics.errors import InputError, IntegrityError
from sk_analytics.files.atomic import write_json, write_text
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.messages import coded, text


@dataclass(frozen=True)
class DcciStep:
    """What the diagnosis proposes: the exact pattern list, or why nothing."""

    ok: bool
    patterns: list[str]
    slower: list[Any] = field(default_factory=list)
    """uids of the significantly slower SKs, each SK once (the slot of the rank that decides it)."""
    reason: Mapping[str, Any] | None = None
    """Why nothing is proposed: a recorded message (:func:`sk_analytics.messages.coded`) or a zh/en pair."""
    diagnosis: str | None = None
    """``complete`` or ``partial`` (under 90 % of the candidate's SK time compared: part of the graph was not)."""
    compared_time_share: float | None = None
    partial_note: Mapping[str, Any] | None = None
    """Under a partial diagnosis: the statement that part of the graph was not compared (a recorded message)."""


def run_dcci_diff(
    baseline_root: Path, candidate_root: Path, out: Path, *, warmup: int, disable_all_config: dict[str, Any], session: Path
) -> DcciStep:
    """Diff the O0 and disable-all collections; write ``dcci-diff.json`` and its report once.

    Both collections must be the ones ``session``'s ledger recorded at finalize
    (rule ledger-pair). A collection pair that fails the contract is not an error of the sweep: the
    protocol says to stop attribution and propose no repair, so it comes back
    as ``ok=False`` with the reason.
    """
    from sk_analytics.dcci.pipeline import dcci_diff
    from sk_analytics.dcci.report import render

    if out.is_file():
        result = load_json_file(out)
    else:
        try:
            result = dcci_diff(baseline_root, candidate_root, warmup=warmup, disable_all_config=disable_all_config, session=session)
        except (InputError, IntegrityError) as exc:
            reason = coded("dcci.refused", detail=exc.one_line())
            write_json(out.with_name("dcci-diff.refused.json"), {"reason": exc.one_line(), "reason_zh": text("dcci.refused", "zh", detail=exc.one_line())})
            return DcciStep(False, [], [], reason)
        write_json(out, result)
        write_text(out.with_suffix(".md"), render(result, "zh"))
    repair, summary = result["repair"], result["summary"]
    return DcciStep(
        True,
        list(repair["list"]) if repair.get("proposed") else [],
        list(summary["deciding_slower_uids"]),  # one per SK across ranks: its deciding rank's slot
        None if repair.get("proposed") else repair_message(repair),
        summary.get("diagnosis"),
        summary.get("compared_time_share"),
        repair.get("partial_note") or (None if not repair.get("partial_note_zh") else
                                       {"zh": repair["partial_note_zh"], "en": repair.get("partial_note_en") or repair["partial_note_zh"]}),
    )
