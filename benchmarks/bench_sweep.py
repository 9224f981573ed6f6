"""Costs of the sweep's own machinery (not of the workload): ledger appends and
verification, and one state-machine decision over a long ledger.

    .venv/bin/python benchmarks/bench_sweep.py [--records 2000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from sk_analytics.ledger import Ledger, verify  # noqa: E402
from sk_analytics.stage_o.machine import Finished, Policy, next_action  # noqa: E402
from test_stage_o_machine import LOSS, Script, frozen, make_matrix  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=500)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        ledger = Ledger(tmp)
        payload = {"round": "O7", "entry_id": "split-mode-1", "phase": "trial", "ok": True, "runs_added": 3,
                   "baseline_run_metrics": [12.31, 12.29, 12.33, 12.30, 12.32], "summary_zh": "示例记录"}
        started = time.perf_counter()
        for i in range(args.records):
            ledger.append("trial_result", {**payload, "i": i})
        append_s = time.perf_counter() - started
        started = time.perf_counter()
        report = verify(tmp)
        verify_s = time.perf_counter() - started
        assert report.ok and report.records == args.records
    print(f"ledger: {args.records} locked+fsynced appends (each checks the anchored tail) {append_s:8.3f} s"
          f"  = {append_s / args.records * 1e3:6.2f} ms/append")
    print(f"ledger: verify {args.records} records                               {verify_s:8.3f} s")

    matrix = make_matrix(["dcci-disable-all", "auto-op-parallel-1", "preload-code-0", "split-mode-1"])
    script = Script(gate={("dcci-disable-all", "trial"): LOSS})
    records = frozen(matrix)
    decisions = 0
    started = time.perf_counter()
    while True:
        action = next_action(matrix, records, Policy())
        decisions += 1
        if isinstance(action, Finished):
            break
        records.append(script(action))
    machine_s = time.perf_counter() - started
    print(f"machine: whole DCCI-repair session, {decisions} decisions over {len(records)} records {machine_s:8.3f} s"
          f"  = {machine_s / decisions * 1e3:6.2f} ms/decision")


if __name__ == "__main__":
    main()
