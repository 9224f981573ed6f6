"""The notebook API: a session's questions answered as Polars frames.

The same functions feed the Stage O report, so a notebook and the report
never disagree::

    from sk_analytics import explore as ex
    import sk_analytics as ska

    view = ex.load_session("demo-session")                 # ledger + evidence files
    metrics = ex.run_metrics(ska.open_session("demo-session")["timings"])
    ex.gate_checks(view)                                   # 7 checks per gated round, with margins
    ex.dcci_sks(view.dcci_diff)                            # per-SK ΔP50/ΔP90 and class

Stage O (:mod:`sk_analytics.explore.stage_o`): :func:`load_session`,
:func:`rank_means`, :func:`run_metrics`, :func:`slowest_ranks`,
:func:`rounds`, :func:`gate_checks`, :func:`o0_runs`, :func:`accepted_path`.
One source of every round metric (:mod:`sk_analytics.explore.runsets`): :func:`round_metrics`
(each round over its ``gate`` runs and over ``all_clean`` runs, labelled), :func:`gate_sides`,
:func:`gate_decisions`, :func:`simulator_truth`. Every frame with ``round`` has ``round_index``
(:func:`round_index`: O0 → 0, O10 → 10) to sort by.
DCCI (:mod:`sk_analytics.explore.dcci`): :func:`load_dcci_diff`,
:func:`dcci_sks`, :func:`dcci_structures`, :func:`dcci_alignment`,
:func:`dcci_unmapped`, :func:`dcci_children`, :func:`dcci_repair`.
Documented in docs/notebooks.md.
"""

from __future__ import annotations

from sk_analytics.explore.dcci import (
    dcci_alignment,
    dcci_children,
    dcci_repair,
    dcci_sks,
    dcci_structures,
    dcci_unmapped,
    load_dcci_diff,
)
from sk_analytics.explore.frames import MissingColumnWarning, round_index
from sk_analytics.explore.runsets import gate_decisions, gate_sides, round_metrics, simulator_truth
from sk_analytics.explore.stage_o import (
    METRIC_CHECKS,
    accepted_path,
    gate_checks,
    load_session,
    o0_runs,
    rank_means,
    round_outcome,
    rounds,
    run_metrics,
    slowest_ranks,
)

__all__ = [
    "METRIC_CHECKS", "MissingColumnWarning", "accepted_path", "dcci_alignment", "dcci_children", "dcci_repair",
    "dcci_sks", "dcci_structures", "dcci_unmapped", "gate_checks", "gate_decisions", "gate_sides", "load_dcci_diff",
    "load_session", "o0_runs", "rank_means", "round_index", "round_metrics", "round_outcome", "rounds", "run_metrics",
    "simulator_truth", "slowest_ranks",
]
