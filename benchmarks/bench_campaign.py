"""Campaign scheduling on a real 2-node Ray cluster (loopback only, in a private network namespace).

Baselines, measured in the same run: one short simulator session run bare
(``sk-run sweep --task``), and two such bare sessions started at once (what
the 2 cores give two sessions in parallel, with no scheduler at all). Then
the same task as a one-session campaign on the cluster (campaign wall - bare
wall), and N sessions on k nodes (target <= 1.3 x (N/k) x one session).

The campaign's cost is split with the ledgers' timestamps into the fixed
start-up of a driver (process start and imports up to ``campaign_started``;
joining Ray and the shared-storage probe, whose first task on a node starts
a Ray worker, up to ``storage_checked``; shutdown and exit after
``campaign_stopped``) and the **per-session overhead** (target <= 2 s): from
``session_assigned`` (or, for a job Ray queued because its node was busy, from
the end of the node's previous session) to ``session_ended`` minus the sweep
process's own duration, i.e. placement, the worker, the session's creation on
the node, the sweep's process start and the result's way back to the driver. Each node
declares ``NPU: 8`` and every session asks for it, so a node runs one session
at a time. On 2 shared cores, k sessions in parallel share the CPUs: the
N-on-k figure is bounded by the cores, not by the scheduler.

    .venv/bin/python benchmarks/bench_campaign.py [--sessions 4]     (as root; re-runs itself under unshare -n)
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from campaign_helpers import write_spec, write_task

NODE = {"num_cpus": 1, "resources": {"NPU": 8}, "object_store_memory": 78 * 1024 * 1024}
SK_RUN = [sys.executable, "-c", "from sk_runner.cli import main; main()"]


def timed(argv: list[str]) -> float:
    t0 = time.perf_counter()
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - t0
    if result.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(argv[3:])} failed ({result.returncode}):\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return elapsed


def timed_together(argvs: list[list[str]]) -> float:
    """Wall time of several commands started at once (the cores' own limit, without any scheduler)."""
    t0 = time.perf_counter()
    procs = [subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for argv in argvs]
    stderr = [p.communicate()[1] for p in procs]
    elapsed = time.perf_counter() - t0
    failed = [(p.returncode, err) for p, err in zip(procs, stderr, strict=True) if p.returncode not in (0, 1)]
    if failed:
        raise SystemExit(f"bare sweeps in parallel failed ({failed[0][0]}): {failed[0][1][-2000:]}")
    return elapsed


def phases(root: Path, t0: float, t_end: float) -> dict[str, Any]:
    """Fixed start-up and per-session overhead of one campaign run, from its ledgers (seconds)."""
    from sk_analytics.ledger.chain import read_records

    records = read_records(root)
    at = {r.kind: r.ts_ns / 1e9 for r in reversed(records)}  # first record of each kind
    assigned = {r.data["session"]: r.ts_ns / 1e9 for r in records if r.kind == "session_assigned"}
    ended = sorted((r.ts_ns / 1e9, r.data["session"], r.data["node"]["node_name"], r.data.get("duration_s") or 0.0)
                   for r in records if r.kind == "session_ended" and r.data.get("node"))
    free_since: dict[str, float] = {}  # node -> when its previous session ended (Ray queues a job until its node is free)
    sessions = []
    for end, session, node, sweep_s in ended:
        start = max(assigned[session], free_since.get(node, 0.0))
        sessions.append({"session": session, "node": node, "overhead_s": end - start - sweep_s, "sweep_s": sweep_s,
                         "queued_s": start - assigned[session]})
        free_since[node] = end
    return {"driver_start_s": at["campaign_started"] - t0, "ray_and_storage_s": at["storage_checked"] - at["campaign_started"],
            "exit_s": t_end - at["campaign_stopped"], "sessions": sessions}


def campaign_run(spec: Path, root: Path, address: str) -> tuple[float, dict[str, Any]]:
    t0 = time.time()
    wall = timed([*SK_RUN, "campaign", "run", str(spec), "--root", str(root), "--address", address, "--quiet"])
    return wall, phases(root, t0, t0 + wall)


def inside(sessions: int) -> None:
    from ray.cluster_utils import Cluster

    from sk_analytics.ledger.chain import read_records

    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        task = write_task(base / "bare", seed=3)
        bare_s = timed([*SK_RUN, "sweep", "--task", str(task), "--session", str(base / "bare-session"), "--quiet"])
        pair_s = timed_together([[*SK_RUN, "sweep", "--task", str(task), "--session", str(base / f"pair-{i}"), "--quiet"] for i in range(2)])
        one = write_spec(base / "one", 1, resources={"NPU": 8})
        many = write_spec(base / "many", sessions, resources={"NPU": 8})
        t_cluster = time.perf_counter()
        cluster = Cluster(initialize_head=True, head_node_args={**NODE, "node_name": "server-a", "include_dashboard": False})
        try:
            cluster.add_node(**NODE, node_name="server-b")
            cluster.wait_for_nodes()
            cluster_s = time.perf_counter() - t_cluster
            one_s, one_phases = campaign_run(one, base / "one" / "root", cluster.address)
            many_s, many_phases = campaign_run(many, base / "many" / "root", cluster.address)
        finally:
            cluster.shutdown()
        ended = [r.data for r in read_records(base / "many" / "root") if r.kind == "session_ended"]
        nodes = {r.data["placement"]["node_name"] for r in read_records(base / "many" / "root") if r.kind == "session_placed"}
        sweep_s = [d["duration_s"] for d in ended]
    k = len(nodes)
    print(json.dumps({"bare_s": bare_s, "pair_s": pair_s, "one_s": one_s, "many_s": many_s, "sessions": sessions, "nodes": k, "sweeps_s": sweep_s,
                      "cluster_s": cluster_s, "one": one_phases, "many": many_phases, "load": os.getloadavg()[0]}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sessions", type=int, default=4)
    args = parser.parse_args()
    if os.environ.get("SK_CAMPAIGN_NETNS") == "1":
        inside(args.sessions)
        return
    load0 = os.getloadavg()[0]
    cmd = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", sys.executable, __file__, "--sessions", str(args.sessions)]
    out = subprocess.run(cmd, env={**os.environ, "SK_CAMPAIGN_NETNS": "1"}, capture_output=True, text=True, check=False)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    if out.returncode != 0 or not lines:
        raise SystemExit(f"benchmark failed ({out.returncode}): {out.stdout[-2000:]}{out.stderr[-3000:]}")
    r = json.loads(lines[-1])
    n, k = r["sessions"], r["nodes"]
    print(f"2-node Ray cluster on loopback (NPU: 8 per node, 1 session per node at a time); load average {load0:.2f} -> {r['load']:.2f}")
    print(f"Ray cluster start (2 nodes; Ray's own, before any campaign): {r['cluster_s']:7.1f} s")
    print(f"one session bare (sk-run sweep --task)          : {r['bare_s']:7.1f} s")
    print(f"same task as a 1-session campaign on the cluster : {r['one_s']:7.1f} s   campaign - bare {r['one_s'] - r['bare_s']:+6.1f} s"
          f" (its sweep inside: {r['one']['sessions'][0]['sweep_s']:.1f} s)")
    print(f"{n} sessions on {k} nodes                         : {r['many_s']:7.1f} s   = {r['many_s'] / (n / k * r['bare_s']):5.2f} x (N/k) x one session"
          " (target <= 1.3)")
    print(f"  same, against 2 bare sessions at once ({r['pair_s']:.1f} s, no Ray: what 2 cores give 2 sessions):"
          f" {r['many_s'] / (n / k * r['pair_s']):5.2f} x (N/k) x that")
    print(f"  each session's sweep inside the campaign      : {', '.join(f'{s:.1f}' for s in r['sweeps_s'])} s")
    per_node: dict[str, float] = {}
    for s in r["many"]["sessions"]:
        per_node[s["node"]] = per_node.get(s["node"], 0.0) + s["sweep_s"]
    busiest = max(per_node.values())
    print(f"  busiest node's sweeps back to back            : {busiest:7.1f} s   campaign / that = {r['many_s'] / busiest:5.2f}"
          " (the scheduler's share; the rest of the N/k ratio is sweeps slowed by sharing the cores)")
    for label, key in (("1-session campaign", "one"), (f"{n}-session campaign", "many")):
        p = r[key]
        print(f"{label}: fixed start-up {p['driver_start_s']:.1f} s driver start (process, imports, spec) + {p['ray_and_storage_s']:.1f} s"
              f" joining Ray and probing storage on every node (Ray workers start) + {p['exit_s']:.1f} s shutdown and exit")
        per = [s["overhead_s"] for s in p["sessions"]]
        print(f"  per-session overhead (assigned or node free -> ended, minus the sweep's own time; target <= 2 s): "
              f"{', '.join(f'{x:.2f}' for x in per)} s (max {max(per):.2f} s)")


if __name__ == "__main__":
    main()
