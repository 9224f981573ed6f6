"""dcci-diff end to end on an 8-rank profile pair as torch_npu lays it out: one ``*_ascend_pt/``
folder and one ``sk_meta/<pid>/`` per rank process, one sk_prof file per device.

The held-out check of the one-device test (the simulator's ground truth, never read by the
analysis) must hold on eight: every rank is aligned and classified on its own, the deciding
rank's slot of each SK carries the class, and only its children feed the repair.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_dcci_e2e import WARMUP, check_against_truth, pair

from sk_analytics.dcci.pipeline import dcci_diff
from sk_runner.sim.variants import draw_variant

RANKS = 8


@pytest.mark.slow
def test_eight_ranks_find_exactly_the_regressed_sks_children_and_symbols(tmp_path: Path) -> None:
    seeds = (6, 12)  # the baseline's build writes the legacy sk_event_dev_device_<id>.json; both log [CONT:n] lines
    assert draw_variant(6).legacy_sk_prof and not draw_variant(12).legacy_sk_prof
    assert draw_variant(6).long_member_share > 0 and draw_variant(12).long_member_share > 0
    base, cand, truth = pair(tmp_path, "moe-decode", seeds, ranks=RANKS)
    for root, legacy in ((base, True), (cand, False)):
        assert len(list(root.glob("*_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv"))) == RANKS
        traces = sorted(root.glob("sk_meta/*/sk_*_device_*.json"))
        name = "sk_event_dev_device" if legacy else "sk_prof_device"
        assert sorted(p.name for p in traces) == sorted(f"{name}_{d}.json" for d in range(RANKS))
        assert len({p.parent.name for p in traces}) == RANKS  # one process per rank
        assert any("[CONT:1] " in p.read_text() for p in root.glob("sk_meta/*/model_*/sk_fused_nodes.log"))

    result = dcci_diff(base, cand, warmup=WARMUP)
    assert result["ranks"]["ranks"] == list(range(RANKS))
    pairs = result["alignment"]["graph_pairs"]
    assert sorted(p["rank"] for p in pairs) == list(range(RANKS)) and not any(p["ambiguous_pairing"] for p in pairs)
    assert all(s["align_status"] == "aligned" for s in result["sks"])
    check_against_truth(result, truth)
    for sk in result["ranks"]["sks"]:
        per_rank = sk["per_rank"]
        assert sorted(r["rank"] for r in per_rank) == list(range(RANKS))
        worst = max(per_rank, key=lambda r: (r["candidate_p50_us"], -r["rank"]))
        assert sk["deciding_rank"] == worst["rank"]
    decomposed = {c["uid"] for c in result["children"]}
    deciding = {s["uid"] for s in result["sks"] if s["deciding"]}
    assert decomposed and decomposed <= deciding
