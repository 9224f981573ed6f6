"""Monte Carlo of the option-trial gates: false wins, power, run counts.

For every noise model of ``tests/gate_noise.py`` (run-level drift 0.5 % and
1 % plus per-sample jitter, and the simulator's own noise), ``--trials``
seeded trials a cell, three tables:

* ``gates``: every true improvement (0 = the option changes nothing, +1 %,
  +2 %, -1 %) and run count (5 baseline vs 3 or 5 candidate runs), judged by
  ``protocol`` (the default, exactly the protocol), ``strict`` (protocol +
  95 % CI above 0) and ``stats`` (the statistics policy, not the protocol);
  ratio = stats / protocol. Targets (issue 18), at 5 vs 5: false wins <= 5 %,
  >= 80 % power at +2 %, <= 1 % acceptance of a -1 % loss.
* ``runs-needed``: the runs-needed figure printed for 5 vs 3 runs, simulated
  at its printed N per side at the true effect (for null trials: the
  equivalence margin's figure at a true 0.5 %). Target (issue 28): >= 80 %
  delivered power on average, >= 75 % in the worst cell.
* ``sequential``: the sequential policy from 5 vs 3, one candidate run at a
  time up to the cap (5: the sweep's, 8: option-trial's default), beside the
  fixed statistics policy at 5 vs 3 and 5 vs 5 on the same draws, with the
  mean candidate runs it used. Targets (issue 28): false wins <= 5 %, >= 80 %
  power at +2 %.

The last two draw runs from a pool of ``--pool-runs`` runs per model (runs
are independent in every model; a true improvement scales every per-run
figure).

    .venv/bin/python benchmarks/bench_gate_mc.py [--trials 1000] [--seed 18] [--tables gates,runs-needed,sequential]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from gate_noise import GATES, MODELS, acceptance, binomial_sigma, runs_needed_cell, sequential_cell  # noqa: E402

EFFECTS = (0.0, 1.0, 2.0, -1.0)
RUN_COUNTS = ((5, 3), (5, 5))
RUNS_NEEDED_EFFECTS = (0.0, 1.0, 2.0, 5.0)
SEQUENTIAL_EFFECTS = (0.0, 2.0, -1.0)
CAPS = (5, 8)


def _what(effect: float) -> str:
    return "false win" if effect == 0 else ("power" if effect > 0 else "accepts loss")


def gates_table(trials: int, seed: int) -> None:
    print(f"== gates: {trials} trials a cell; share accepted ± binomial standard error; ratio = stats / protocol")
    print(f"{'noise':<12} {'runs':<6} {'true effect':<12} {'reads as':<13} " + " ".join(f"{g:>14}" for g in GATES) + f" {'ratio':>7}")
    for model in MODELS:
        for nb, nc in RUN_COUNTS:
            for effect in EFFECTS:
                seed += 1
                rates = acceptance(model, seed, trials, nb, nc, effect)
                cells = " ".join(f"{rates[g] * 100:7.1f} ± {binomial_sigma(rates[g], trials) * 100:3.1f}%" for g in GATES)
                ratio = f"{rates['stats'] / rates['protocol']:7.2f}" if rates["protocol"] else "      -"
                print(f"{model.name:<12} {nb} v {nc:<2} {effect:+11.0f}% {_what(effect):<13} {cells} {ratio}")


def runs_needed_table(trials: int, seed: int, pool_runs: int, draws: int) -> None:
    print(f"== runs-needed: {trials} trials a cell at 5 v 3; delivered power of the printed N at the true effect "
          f"(null cells: the 0.5 % margin's figure at a true 0.5 %); {draws} draws per N")
    print(f"{'noise':<12} {'true effect':<12} {'printed':>8} {'delivered':>10} {'< 80 %':>7} {'median N':>9} {'oracle N':>9}")
    powers = []
    for model in MODELS:
        for effect in RUNS_NEEDED_EFFECTS:
            seed += 1
            cell = runs_needed_cell(model, seed, trials, effect, pool_runs=pool_runs, draws=draws)
            powers.append(cell["power"])
            label = "0 (margin)" if effect == 0 else f"{effect:+.0f}%"
            print(f"{model.name:<12} {label:<12} {cell['printed'] * 100:7.1f}% {cell['power'] * 100:9.1f}% {cell['below_target'] * 100:6.1f}% "
                  f"{cell['median_runs']:9.0f} {cell['oracle_runs']:9.0f}")
    print(f"mean delivered power {sum(powers) / len(powers) * 100:.1f} %, worst cell {min(powers) * 100:.1f} % (targets 80 % / 75 %)")


def sequential_table(trials: int, seed: int, pool_runs: int) -> None:
    print(f"== sequential: {trials} trials a cell from 5 v 3, one candidate run at a time up to the cap; share accepted ± s.e.")
    print(f"{'noise':<12} {'cap':>3} {'true effect':<12} {'reads as':<13} {'sequential':>15} {'mean runs':>9} {'fixed 5v3':>10} {'fixed 5v5':>10}")
    for model in MODELS:
        for cap in CAPS:
            for effect in SEQUENTIAL_EFFECTS:
                seed += 1
                cell = sequential_cell(model, seed, trials, effect, cap, pool_runs=pool_runs)
                rate = cell["sequential"]
                print(f"{model.name:<12} {cap:>3} {effect:+11.0f}% {_what(effect):<13} {rate * 100:7.1f} ± {binomial_sigma(rate, trials) * 100:3.1f}% "
                      f"{cell['mean_runs']:9.2f} {cell['fixed_3'] * 100:9.1f}% {cell['fixed_5'] * 100:9.1f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=18)
    parser.add_argument("--pool-runs", type=int, default=100_000, help="runs simulated per noise model for the run pools")
    parser.add_argument("--draws", type=int, default=5_000, help="draws per printed N when simulating its delivered power")
    parser.add_argument("--tables", default="gates,runs-needed,sequential")
    args = parser.parse_args()
    tables = set(args.tables.split(","))
    started = time.perf_counter()
    if "gates" in tables:
        gates_table(args.trials, args.seed)
    if "runs-needed" in tables:
        runs_needed_table(args.trials, args.seed + 100, args.pool_runs, args.draws)
    if "sequential" in tables:
        sequential_table(args.trials, args.seed + 200, args.pool_runs)
    print(f"total {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
