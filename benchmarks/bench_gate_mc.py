"""Monte Carlo of the option-trial gates: false wins and power.

For every noise model of ``tests/gate_noise.py`` (run-level drift 0.5 % and
1 % plus per-sample jitter, and the simulator's own noise), every true
improvement (0 = the option changes nothing, +1 %, +2 %, -1 %) and every run
count (5 baseline vs 3 or 5 candidate runs), ``--trials`` seeded trials are
drawn and judged by the three gates: ``protocol`` (the default, exactly the
protocol), ``strict`` (protocol + 95 % CI above 0) and ``stats`` (the
statistics policy, not the protocol). The protocol gate is the baseline each
row's ratio is measured against, in the same run.

    .venv/bin/python benchmarks/bench_gate_mc.py [--trials 1000] [--seed 18]

Each share is printed with its binomial standard error. Targets of the
statistics policy (issue 18), at 5 vs 5 runs: false wins <= 5 %, >= 80 %
acceptance of a true +2 % win, <= 1 % acceptance of a true -1 % loss.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from gate_noise import GATES, MODELS, acceptance, binomial_sigma  # noqa: E402

EFFECTS = (0.0, 1.0, 2.0, -1.0)
RUN_COUNTS = ((5, 3), (5, 5))


def _what(effect: float) -> str:
    return "false win" if effect == 0 else ("power" if effect > 0 else "accepts loss")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=18)
    args = parser.parse_args()
    started = time.perf_counter()
    print(f"{args.trials} trials a cell; share accepted ± binomial standard error; ratio = stats / protocol")
    print(f"{'noise':<12} {'runs':<6} {'true effect':<12} {'reads as':<13} " + " ".join(f"{g:>14}" for g in GATES) + f" {'ratio':>7}")
    seed = args.seed
    for model in MODELS:
        for nb, nc in RUN_COUNTS:
            for effect in EFFECTS:
                seed += 1
                rates = acceptance(model, seed, args.trials, nb, nc, effect)
                cells = " ".join(f"{rates[g] * 100:7.1f} ± {binomial_sigma(rates[g], args.trials) * 100:3.1f}%" for g in GATES)
                ratio = f"{rates['stats'] / rates['protocol']:7.2f}" if rates["protocol"] else "      -"
                print(f"{model.name:<12} {nb} v {nc:<2} {effect:+11.0f}% {_what(effect):<13} {cells} {ratio}")
    print(f"total {time.perf_counter() - started:.1f} s")


if __name__ == "__main__":
    main()
