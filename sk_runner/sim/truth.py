"""Ground truth of a network (``--ground-truth FILE``): what an analysis should find.

Computed from the noise-free cost model only. Tests use it to check analyses;
analysis code never reads it. SKs are named by structural identity (scope
name, ordered canonical child ops, graph occurrence), never by unstable ids.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from sk_analytics.files.atomic import write_json
from sk_analytics.stage_o.matrix import protocol_candidates
from sk_runner.sim.model import StepModel, compile_model
from sk_runner.sim.network import Graph, Network
from sk_runner.sim.options import resolve

SK_REGRESSION_PCT = 3.0
CHILD_REGRESSION_PCT = 3.0
MIN_DELTA_US = 1.0
NEUTRAL_PCT = 0.5
"""|step change| below this is `neutral` (inside the default run-to-run noise)."""

DISABLE_ALL = {"dcci_disable_on_kernel": [".*"]}

EXTRA_EFFECT_PROBES: tuple[tuple[str, Any], ...] = (
    ("ubuf_lock_ignore_kernel", [".*"]),
    ("opt_extend_option", "fusion_level=1"),
    ("aggressive_opt_strategies", {"task_breaker_bypass": 0, "value_breaker_bypass": 0}),
)
"""Option values the truth reports besides the matrix's candidates (values no Stage O trial uses)."""


def effect_probes() -> list[tuple[str, Any]]:
    """Option values whose effect the truth reports: every candidate of the option registry (the matrix's
    values, in trial order, read at call time) and :data:`EXTRA_EFFECT_PROBES`."""
    return [*((c.option, c.value) for c in protocol_candidates()), *EXTRA_EFFECT_PROBES]


def sk_identities(graph: Graph) -> list[dict[str, Any]]:
    """Structural identity of every SK launch, in graph order (scope, child ops, boundary, occurrence)."""
    seen: dict[tuple[str, tuple[str, ...]], int] = {}
    result = []
    for launch in np.flatnonzero(graph.launch_is_sk):
        first, count = int(graph.launch_first[launch]), int(graph.launch_count[launch])
        ops = tuple(graph.member_op[i] for i in range(first, first + count) if graph.member_is_kernel[i])
        key = (graph.launch_scope[launch], ops)
        occurrence = seen.get(key, 0)
        seen[key] = occurrence + 1
        result.append({"launch": int(launch), "scope_name": key[0], "child_ops": list(ops), "boundary": [ops[0], ops[-1]], "occurrence": occurrence})
    return result


def _pct(new: float, old: float) -> float:
    return (new - old) / old * 100.0


def _classify(delta_pct: float) -> str:
    return "neutral" if abs(delta_pct) < NEUTRAL_PCT else ("regression" if delta_pct > 0 else "gain")


def dcci_truth(network: Network) -> dict[str, Any]:
    """Per-SK and per-child effect of disable-all DCCI, and the narrow joint repair."""
    base = compile_model(network, resolve({}, {}))
    dis = compile_model(network, resolve(DISABLE_ALL, {}))
    graph = base.graph
    sks, children = [], []
    for ident in sk_identities(graph):
        launch = ident.pop("launch")
        o0, da = float(base.launch_us[launch]), float(dis.launch_us[launch])
        delta = _pct(da, o0)
        regressed = delta >= SK_REGRESSION_PCT and da - o0 >= MIN_DELTA_US
        sks.append({**ident, "o0_us": round(o0, 3), "disable_all_us": round(da, 3), "delta_pct": round(delta, 3), "regressed": regressed})
        if not regressed:
            continue
        first, count = int(graph.launch_first[launch]), int(graph.launch_count[launch])
        kernels = [i for i in range(first, first + count) if graph.member_is_kernel[i]]
        for position, i in enumerate(kernels):
            c0, c1 = float(base.child_us[i]), float(dis.child_us[i])
            if c1 - c0 >= MIN_DELTA_US and _pct(c1, c0) >= CHILD_REGRESSION_PCT:
                children.append(
                    {
                        "sk": {k: ident[k] for k in ("scope_name", "child_ops", "occurrence")},
                        "child_index": int(graph.member_child[i]),
                        "kernel_position": position,
                        "canonical_op": graph.member_op[i],
                        "symbol": graph.member_symbol[i],
                        "o0_us": round(c0, 3),
                        "disable_all_us": round(c1, 3),
                    }
                )
    repair_ops = list(dict.fromkeys(c["canonical_op"] for c in children))
    patterns = [f"static_kernel_{op}_.*" for op in repair_ops]
    delta_all = _pct(dis.step_us, base.step_us)
    truth: dict[str, Any] = {
        "o0_step_us": round(base.step_us, 3),
        "disable_all": {"step_us": round(dis.step_us, 3), "delta_pct": round(delta_all, 3), "class": _classify(delta_all)},
        "sks": sks,
        "regressed_sks": [{k: s[k] for k in ("scope_name", "child_ops", "occurrence")} for s in sks if s["regressed"]],
        "regressed_children": children,
        "repair_ops": repair_ops,
        "repair_symbols": sorted({c["symbol"] for c in children}),
    }
    if patterns:
        rep = compile_model(network, resolve({**DISABLE_ALL, "dcci_before_kernel_start": patterns, "dcci_after_kernel_end": patterns}, {}))
        delta = _pct(rep.step_us, base.step_us)
        truth["repair"] = {"patterns": patterns, "step_us": round(rep.step_us, 3), "delta_pct_vs_o0": round(delta, 3), "beats_o0": delta <= -NEUTRAL_PCT}
    else:
        truth["repair"] = None
    return truth


def option_effects(network: Network) -> list[dict[str, Any]]:
    """Expected effect of each probe value on the step time, and how the process ends."""
    base = compile_model(network, resolve({}, {}))
    out = []
    for name, value in effect_probes():
        model: StepModel = compile_model(network, resolve({name: value}, {}))
        delta = _pct(model.step_us, base.step_us)
        out.append(
            {
                "option": name,
                "value": value,
                "delta_pct": round(delta, 3),
                "sign": 0 if abs(delta) < NEUTRAL_PCT else int(np.sign(delta)),
                "outcome": model.outcome.kind,
            }
        )
    return out


def ground_truth(network: Network) -> dict[str, Any]:
    return {
        "network": network.name,
        "source": network.source,
        "build_id": network.build_id,
        "early_start_adapted": network.early_start_adapted,
        "neutral_band_pct": NEUTRAL_PCT,
        "dcci": dcci_truth(network),
        "option_effects": option_effects(network),
    }


def write_ground_truth(path: Path, network: Network) -> None:
    write_json(path, ground_truth(network))
