"""Costs of the sweep's own machinery (not of the workload): ledger appends and
verification, and one state-machine decision over a long ledger.

    .venv/bin/python benchmarks/bench_sweep.py [--records 2000]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from test_stage_o_machine import LOSS, Script, frozen, make_matrix  # noqa: E402

import sk_analytics.ledger.chain as ledger_module  # noqa: E402
from sk_analytics.ledger import signing  # noqa: E402
from sk_analytics.ledger.chain import Ledger, verify  # noqa: E402
from sk_analytics.stage_o.machine import Finished, Policy, next_action  # noqa: E402

PAYLOAD = {"round": "O7", "entry_id": "split-mode-1", "phase": "trial", "ok": True, "runs_added": 3,
           "baseline_run_metrics": [12.31, 12.29, 12.33, 12.30, 12.32], "summary_zh": "示例记录"}


class _NoSigner:
    """Baseline: the append without its signing work (what sk-tune did before issue 13)."""

    fingerprint = "none"

    def sign(self, purpose: str, payload: str) -> dict[str, str]:
        return {"key": "none", "sig": "none"}


@contextmanager
def _unsigned() -> Iterator[None]:
    saved = signing.signer, ledger_module._head_signed
    signing.signer = lambda **_: _NoSigner()  # type: ignore[assignment,misc]
    ledger_module._head_signed = lambda *_: True  # type: ignore[assignment]
    try:
        yield
    finally:
        signing.signer, ledger_module._head_signed = saved


def _appends(folder: Path, count: int, start: int) -> float:
    ledger = Ledger(folder)
    started = time.perf_counter()
    for i in range(start, start + count):
        ledger.append("trial_result", {**PAYLOAD, "i": i})
    return time.perf_counter() - started


def bench_ledger(records: int) -> None:
    """Signed appends against unsigned ones, interleaved in blocks (fsync noise hits both alike)."""
    with tempfile.TemporaryDirectory() as keys, tempfile.TemporaryDirectory() as tmp, tempfile.TemporaryDirectory() as tmp0:
        os.environ[signing.KEY_ENV] = str(Path(keys) / "signing_key")  # never the user's key
        os.environ[signing.TRUSTED_ENV] = str(Path(keys) / "trusted_keys")
        key = signing.signer()
        signed_s = unsigned_s = 0.0
        block = 50
        for start in range(0, records, block):
            n = min(block, records - start)
            signed_s += _appends(Path(tmp), n, start)
            with _unsigned():
                unsigned_s += _appends(Path(tmp0), n, start)
        started = time.perf_counter()
        report = verify(tmp)
        verify_s = time.perf_counter() - started
        assert report.ok and report.records == records
        trusted = signing.trusted_keys()
        started, cpu = time.perf_counter(), time.process_time()
        for i in range(records):  # the signing work one append adds (the head verify only when another process wrote it)
            digest = f"{i:064x}"
            key.sign("ledger-record", digest)
            head = key.sign("ledger-head", digest)
            trusted.verify(head, "ledger-head", digest)
        work_s, work_cpu = time.perf_counter() - started, time.process_time() - cpu
    per = 1e3 / records
    print(f"ledger: {records} locked+fsynced signed appends (each checks the anchored tail) {signed_s:8.3f} s"
          f"  = {signed_s * per:6.2f} ms/append")
    print(f"ledger: {records} unsigned appends, same run (baseline)             {unsigned_s:8.3f} s"
          f"  = {unsigned_s * per:6.2f} ms/append  -> signed/unsigned {signed_s / unsigned_s:5.2f}x")
    print(f"ledger: signing work alone (2 Ed25519 signs + 1 head verify)          {work_s:8.3f} s"
          f"  = {work_s * per:6.3f} ms/append wall, {work_cpu * per:6.3f} ms CPU")
    print(f"ledger: verify {records} signed records                          {verify_s:8.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--records", type=int, default=500)
    args = parser.parse_args()
    bench_ledger(args.records)

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
