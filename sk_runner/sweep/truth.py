"""The simulator's ground truth of a sweep's gated trials, for the report only.

A session that ran on the simulator can be checked against what the
simulator knows: the noise-free step time of each round's exact config
(:func:`sk_runner.sim.model.compile_model`, as :mod:`sk_runner.sim.truth`
computes an option's effect). The truth is read only to render the report's
"protocol vs statistics policy vs ground truth" section
(:func:`sk_runner.sweep.handoff.write_reports`); no decision of the sweep
ever reads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from sk_analytics.errors import InputError
from sk_analytics.files.strict_json import load_config_file, load_json_file
from sk_runner.sim.model import compile_model
from sk_runner.sim.network import Network, load_network
from sk_runner.sim.options import find_options, resolve
from sk_runner.sim.truth import NEUTRAL_PCT


def truth_class(improvement_pct: float) -> str:
    """``gain`` / ``loss`` beyond the simulator's neutral band, else ``neutral``."""
    if abs(improvement_pct) < NEUTRAL_PCT:
        return "neutral"
    return "gain" if improvement_pct > 0 else "loss"


def _step_us(network: Network, config: Path) -> float:
    raw = load_config_file(config)
    optimize, debug = find_options(raw if isinstance(raw, dict) else {}, config)
    return float(compile_model(network, resolve(optimize, debug)).step_us)


def trial_truths(root: Path, records: Iterable[tuple[str, Mapping[str, Any]]]) -> dict[str, dict[str, Any]] | None:
    """``{round: {improvement_pct, class, neutral_band_pct}}`` of every gated
    round against its baseline round, or None when the session did not run
    on the simulator (or its network spec or a round's config is gone)."""
    backend = (load_json_file(root / "session.json") or {}).get("backend") or {}
    if backend.get("name") != "sim" or backend.get("command"):
        return None
    records = list(records)
    configs = {d["round"]: root / d["config_path"] for k, d in records if k == "trial_result" and d.get("config_path")}
    gates = [d for k, d in records if k == "gate_result"]
    if not all(g["round"] in configs and g["baseline_round"] in configs for g in gates):
        return None
    try:
        return _truths(load_network(backend.get("network")), configs, gates)
    except (InputError, OSError):  # the network spec or a config is gone: the report is written without the comparison
        return None


def _truths(network: Network, configs: Mapping[str, Path], gates: list[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    steps: dict[str, float] = {}

    def step(round_name: str) -> float:
        if round_name not in steps:
            steps[round_name] = _step_us(network, configs[round_name])
        return steps[round_name]

    truths: dict[str, dict[str, Any]] = {}
    for gate in gates:
        base, cand = step(gate["baseline_round"]), step(gate["round"])
        improvement = (base - cand) / base * 100
        truths[gate["round"]] = {"improvement_pct": round(improvement, 3), "class": truth_class(improvement), "neutral_band_pct": NEUTRAL_PCT}
    return truths
