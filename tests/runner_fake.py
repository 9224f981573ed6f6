"""A tiny workload that follows the runner contract, for the runner tests.

Behaviour follows the SK options of its config, like a real runtime would:
``early_start=1`` -> wrong output; ``aggressive_opt_strategies.task_breaker_bypass=1``
-> crash (abort); ``value_breaker_bypass=3`` -> hang (with a child process);
``split_mode=2`` -> rank 1 writes no log; ``auto_op_parallel`` outside 0..1 ->
invalid-and-defaulted line in super_kernel.log when the metadata dump is on.
``FAKE_SLEEP`` seconds of sleep before writing logs; ``FAKE_HOLD_RUN=run-<k>`` with ``FAKE_HOLD_FILE=<path>``:
that run waits (after writing its pid.txt) while the file exists, so a kill test kills it mid-run by a handshake;
``FAKE_FAIL_RUN=run-<k>`` makes that clean run exit 3 (printing ``FAKE_FAIL_MESSAGE`` on stderr).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

FAKE = r'''
import json, os, subprocess, sys, time
cfg = json.load(open(os.environ["SK_RUN_CONFIG"]))
opts = cfg.get("super_kernel_optimize_options", {})
run = os.environ["SK_RUN_DIR"]
ranks = int(os.environ["SK_RUN_RANKS"])
seed = int(os.environ["SK_RUN_SEED"])
open(os.path.join(run, "pid.txt.tmp"), "w").write(str(os.getpid()))
os.replace(os.path.join(run, "pid.txt.tmp"), os.path.join(run, "pid.txt"))  # whole or absent: tests read it once it exists
with open(os.path.join(run, "env.json"), "w") as fh:
    json.dump(dict(os.environ), fh)
if os.environ.get("ASCEND_OP_COMPILE_SAVE_KERNEL_META") == "1":
    folder = os.path.join(run, "sk_meta", str(os.getpid()), "model_1_1")
    os.makedirs(folder)
    lines = ["Begin aclskOptimize"]
    for name, value in opts.items():
        if name == "auto_op_parallel" and value not in (0, 1):
            lines.append(f"OptionName: {name}, set value is invalid, value is {value}, valid range is [0, 1], the process will use default value: 0")
        else:
            lines.append(f"OptionName: {name}, set value: {json.dumps(value)}")
    lines.append("End aclskOptimize")
    open(os.path.join(folder, "super_kernel.log"), "w").write("\n".join(lines) + "\n")
    print("probe done")
    sys.exit(0)
agg = opts.get("aggressive_opt_strategies", {})
if agg.get("task_breaker_bypass") == 1:
    print("EZ9999: device error: task breaker bypass", file=sys.stderr, flush=True)
    os.abort()
if agg.get("value_breaker_bypass") == 3:
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    open(os.path.join(run, "child.pid.tmp"), "w").write(str(child.pid))
    os.replace(os.path.join(run, "child.pid.tmp"), os.path.join(run, "child.pid"))  # whole or absent
    print("hanging", flush=True)
    time.sleep(300)
time.sleep(float(os.environ.get("FAKE_SLEEP", "0")))
hold = os.environ.get("FAKE_HOLD_FILE")
if hold and os.environ.get("FAKE_HOLD_RUN") and run.endswith(os.environ["FAKE_HOLD_RUN"]):
    while os.path.exists(hold):  # until the test has done what it waits to do mid-run
        time.sleep(0.05)
if os.environ.get("FAKE_FAIL_RUN") and run.endswith(os.environ["FAKE_FAIL_RUN"]):
    print(os.environ.get("FAKE_FAIL_MESSAGE", "injected failure"), file=sys.stderr)
    sys.exit(3)
base = 10.0 - 0.5 * int(opts.get("auto_op_parallel", 0) == 1)
for r in range(ranks):
    if opts.get("split_mode") == 2 and r == 1:
        continue
    with open(os.path.join(run, f"log_{r}.log"), "w") as fh:
        fh.write("some banner line\n")
        fh.write(f"Inference time (prefill): {base * 5 + r:.3f} ms\n")
        for i in range(12):
            fh.write(f"Inference time (decode): {base + (seed % 7) * 0.001 + i * 0.01 + r * 0.1:.3f} ms\n")
passed = opts.get("early_start") != 1
json.dump({"passed": passed, "max_abs_err": 0.0 if passed else 3.5}, open(os.path.join(run, "correctness.json"), "w"))
print("done", flush=True)
'''

BASE_CONFIG = {
    "static_kernel_compile": True,
    "super_kernel_optimize": True,
    "super_kernel_optimize_options": {"auto_op_parallel": 0, "early_start": 0, "dcci_disable_on_kernel": [".*"]},
}


def write_fake(tmp: Path) -> list[str]:
    """Write the fake workload and its base config; return the workload argv template."""
    script = tmp / "fake_workload.py"
    script.write_text(FAKE)
    (tmp / "base.json").write_text(json.dumps(BASE_CONFIG))
    (tmp / "session").mkdir(exist_ok=True)
    return [sys.executable, str(script)]
