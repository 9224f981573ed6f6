"""The report's "Devices and leases" section: the lease the session's clean runs held, the runs it could not prove.

Presentation only, from :func:`sk_analytics.stage_o.leases.summarize` over the
ledger records: the lease mode, root and device ids, how many trial records ran
leased, the rounds that did not, the runs discarded for a foreign process on
the devices and the steps a lease blocked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from sk_analytics.ledger.evidence import LEASE_DIR
from sk_analytics.markdown import table
from sk_analytics.report.text import TEXT, word
from sk_analytics.session_view import SessionView
from sk_analytics.stage_o.leases import SIM_REGISTRY, summarize


def display_root(root: str, t: Mapping[str, str]) -> str:
    """A lease root as the report shows it: a session's own lease folder (the demo's) without the session's path,
    which a report never holds; any other root as recorded."""
    parts = root.rstrip("/").rsplit("/", 1)
    return f"`{t['session_root']}/{LEASE_DIR}`" if parts[-1] == LEASE_DIR else f"`{root}`"


def _foreign(entry: Mapping[str, Any]) -> str:
    procs = entry.get("processes") or []
    return "; ".join(f"pid {p.get('pid')} ({p.get('command') or '?'}) NPU {p.get('device')}" for p in procs) or "—"


def devices_section(view: SessionView, lang: str) -> list[str]:
    """The section's Markdown lines (none for a session without trials)."""
    t = TEXT[lang]
    summary = summarize(view.records)
    if summary.trials == 0 and not summary.blocked:
        return []
    lines = [f"## {t['devices']}", ""]
    if summary.leased:
        modes = ", ".join(word(t, "lease_mode", m) for m in summary.modes)
        roots = ", ".join(display_root(r, t) for r in summary.roots)
        ids = " | ".join(",".join(str(i) for i in group) for group in summary.device_ids)
        lines.append(f"- {t['lease_line'].format(modes=modes, roots=roots, ids=ids, sep=t['sep'])}")
        key = ("lease_runs" if summary.proven_free  # "proven free" only where npu-smi proved it
               else "lease_runs_sim" if summary.proof_sources == (SIM_REGISTRY,) else "lease_runs_other")
        lines.append(f"- {t[key].format(n=summary.trials, m=summary.leased, sources=', '.join(summary.proof_sources))}")
    if summary.requested is not None and summary.requested.get("unleased"):
        lines.append(f"- {t['lease_unleased_opt_out']}")
    if summary.unleased_rounds:
        lines.append(f"- {t['lease_none'].format(rounds=', '.join(summary.unleased_rounds))}")
    if summary.discarded_runs:
        rows = [[str(d.get("round")), str(d.get("run")), str(d.get("attempt", "")), _foreign(d)] for d in summary.discarded_runs]
        lines += ["", t["lease_discarded"], "", *table(t["lease_discarded_cols"].split("|"), rows)]
    for blocked in summary.blocked:
        lines.append(f"- {t['lease_blocked']} {blocked.get('message', '')}")
    return [*lines, ""]
