"""Issue 34: memory and time of the demo sweep and of ``dcci-diff`` at 8 against 32 simulated ranks, side by side.

For each rank count (``--ranks 8,32``) one demo sweep runs (``sk-run sweep --demo --ranks N``: the
default network, every rank profiled in both DCCI collections), then ``sk-analyze dcci-diff`` on its
DCCI pair, ``--repeat`` times, the rank counts taking turns: from the raw traces and with
``--session`` (the sweep's ingested ``sk_events``, as the sweep itself diffs). Each is a child process;
its peak is the largest resident set of any process of its tree (``wait4``'s ``ru_maxrss``, the figure
``/usr/bin/time`` prints), beside the largest sum of the tree's resident sets (sampled every 0.1 s) and,
for the sweep, the ledger record that the peak came before (where in the sweep it was).

``--baseline-tree DIR``: an older source tree (``git archive <commit> | tar -x -C DIR``) whose
``dcci-diff`` is measured in the same turns, on the same pairs (``PYTHONPATH=DIR``), and whose JSON and
report must be byte for byte the ones of this tree. Every sweep's ``dcci-diff.json`` must be the one
``dcci-diff`` writes again, and ``sk-analyze ledger verify`` must pass.

Targets (32 against 8 ranks): dcci-diff peak <= 1.5x and wall <= 4.5x; the sweep's peak <= 1.5x
(``--strict``: exit 1 when one is missed). Both sweeps take minutes on two cores (about 5 and 12 at a
load of 7); the CPU ratio printed beside each wall ratio is what the load does not skew.

    .venv/bin/python benchmarks/bench_multirank.py [--ranks 8,32] [--repeat 2] [--keep DIR]
        [--baseline-tree DIR [--baseline-repeat 1]] [--sessions DIR] [--strict]   # --sessions: an earlier --keep's sweeps
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

BIN = Path(sys.executable).parent
DCCI = Path("experiments/Sbest/DCCI")


@dataclass(frozen=True)
class Measured:
    """One child process tree: wall seconds, the largest process's peak RSS, the largest summed RSS and when."""

    wall_s: float
    cpu_s: float
    """User + system CPU seconds of the whole tree (what the load of a shared machine does not inflate)."""
    peak_mb: float
    tree_peak_mb: float
    tree_peak_at_ns: int
    top: str
    """Command line of the process that reached the largest resident set (sampled)."""


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(x) for x in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


def _status_kb(pid: int) -> tuple[int, int, str] | None:
    """VmRSS, VmHWM (KiB) and the command line of ``pid``; None once it is gone."""
    try:
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line)
        cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        return int(fields.get("VmRSS", "0 kB").split()[0]), int(fields.get("VmHWM", "0 kB").split()[0]), cmd
    except (OSError, ValueError):
        return None


def measure(argv: list[str], env: dict[str, str] | None = None) -> Measured:
    """Run ``argv``; exit status must be 0 or 1 (a sweep that stopped, a diff without repair)."""
    start_ns, started = time.time_ns(), time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    peak = {"sum": 0, "at": start_ns, "hwm": 0, "top": ""}
    root = {"cmd": ""}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            stack, total = [proc.pid], 0
            while stack:
                pid = stack.pop()
                stack += _children(pid)
                status = _status_kb(pid)
                if status is None:
                    continue
                total += status[0]
                if pid == proc.pid:
                    root["cmd"] = status[2]
                elif status[2] == root["cmd"]:
                    continue  # a fork of the root before its exec: its VmHWM is the root's
                if status[1] > peak["hwm"]:
                    peak["hwm"], peak["top"] = status[1], status[2]
            if total > peak["sum"]:
                peak["sum"], peak["at"] = total, time.time_ns()
            done.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    stderr = proc.stderr.read() if proc.stderr else b""
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - started
    done.set()
    sampler.join()
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{argv[0]} {argv[1]} failed ({proc.returncode}): {stderr.decode(errors='replace')[-800:]}")
    return Measured(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, peak["sum"] / 1024, int(peak["at"]), str(peak["top"]))


def _load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def _phase(session: Path, at_ns: int) -> str:
    """The ledger record written next after ``at_ns`` (the action the peak belonged to)."""
    for line in (session / "ledger.jsonl").read_text(encoding="utf-8").splitlines():
        record = json.loads(line)
        if record["ts_ns"] >= at_ns:
            return str(record["kind"])
    return "after the last record"


def _pair(session: Path) -> tuple[Path, Path]:
    diag = session / DCCI / "diag"
    return (next((diag / "baseline_profile").glob("attempt-*/")), next((diag / "candidate_profile").glob("attempt-*/")))


def sweep(ranks: int, session: Path) -> Measured:
    return measure([str(BIN / "sk-run"), "sweep", "--demo", "--ranks", str(ranks), "--session", str(session), "--quiet"])


def diff(session: Path, out: Path, *, with_session: bool, env: dict[str, str] | None = None) -> Measured:
    base, cand = _pair(session)
    argv = [str(BIN / "sk-analyze"), "dcci-diff", "--baseline", str(base), "--candidate", str(cand),
            "--json-out", str(out.with_suffix(".json")), "--report-md", str(out.with_suffix(".md"))]
    return measure([*argv, "--session", str(session)] if with_session else argv, env)


def _ratio(line: str, new: float, old: float, target: float) -> bool:
    ok = new / old <= target
    print(f"  [{'ok' if ok else 'MISS'}] {line}: {new / old:.2f}x (target <= {target}x)")
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", default="8,32", help="the two rank counts, the smaller first")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="keep the sweep sessions in this folder")
    parser.add_argument("--sessions", type=Path, help="reuse the sessions of an earlier --keep (no sweep is run)")
    parser.add_argument("--baseline-tree", type=Path, help="an older source tree whose dcci-diff is measured alongside")
    parser.add_argument("--baseline-repeat", type=int, default=1, help="runs of the baseline tree's dcci-diff (its first turns)")
    parser.add_argument("--strict", action="store_true", help="exit 1 when a target is missed (wall ratios follow the load)")
    args = parser.parse_args()
    counts = [int(n) for n in args.ranks.split(",")]
    small, large = counts
    tmp = tempfile.TemporaryDirectory(prefix="bench-multirank-")
    work = Path(tmp.name)
    folder = args.sessions or args.keep or work
    sessions = {n: folder / f"demo-{n}" for n in counts}
    print(f"$ uptime  # load average {_load()}")
    sweeps: dict[int, Measured] = {}
    if args.sessions is None:
        for n in counts:
            sweeps[n] = sweep(n, sessions[n])
            m = sweeps[n]
            print(f"sweep --demo --ranks {n:>2}: wall {m.wall_s:7.1f} s  CPU {m.cpu_s:7.1f} s  peak RSS {m.peak_mb:6.0f} MB "
                  f"(largest process)  tree sum {m.tree_peak_mb:6.0f} MB before '{_phase(sessions[n], m.tree_peak_at_ns)}'  "
                  f"load {_load()}")
            print(f"    largest process: {m.top[:160]}")
    trees: dict[str, dict[str, str] | None] = {"this tree": None}
    if args.baseline_tree is not None:
        trees["baseline tree"] = {**os.environ, "PYTHONPATH": str(args.baseline_tree.resolve())}
    runs: dict[tuple[str, bool, int], list[Measured]] = {}
    for i in range(args.repeat):
        for tree, env in trees.items():
            if env is not None and i >= args.baseline_repeat:
                continue
            for with_session in (False, True):
                for n in counts:
                    out = work / f"diff-{tree.split()[0]}-{with_session}-{n}"
                    runs.setdefault((tree, with_session, n), []).append(diff(sessions[n], out, with_session=with_session, env=env))
    print(f"dcci-diff, {args.repeat} runs each, taking turns (best wall and CPU, largest peak); load {_load()}")
    for (tree, with_session, n), ms in runs.items():
        print(f"  {tree:13s} {'--session' if with_session else 'raw traces':10s} {n:>2} ranks: wall {min(m.wall_s for m in ms):6.1f} s  "
              f"CPU {min(m.cpu_s for m in ms):6.1f} s  peak RSS {max(m.peak_mb for m in ms):6.0f} MB  "
              f"(walls {', '.join(f'{m.wall_s:.1f}' for m in ms)})")
    same = True
    for n in counts:
        recorded = (sessions[n] / DCCI / "dcci-diff.json").read_bytes()
        for (tree, with_session, m), _ in runs.items():
            if m != n:
                continue
            out = work / f"diff-{tree.split()[0]}-{with_session}-{n}"
            same &= out.with_suffix(".json").read_bytes() == recorded
            same &= out.with_suffix(".md").read_bytes() == (work / f"diff-this-False-{n}.md").read_bytes()
        verified = subprocess.run([str(BIN / "sk-analyze"), "ledger", "verify", str(sessions[n])], capture_output=True, check=False)
        print(f"  {n} ranks: ledger verify exit {verified.returncode}")
        same &= verified.returncode == 0
    print(f"  every dcci-diff JSON is the sweep's dcci-diff.json and every report the same, ledger verify passes: {same}")
    ok = same
    for with_session in (False, True):
        ms_small, ms_large = runs[("this tree", with_session, small)], runs[("this tree", with_session, large)]
        mode = "--session" if with_session else "raw traces"
        ok &= _ratio(f"dcci-diff ({mode}) peak {large} / {small} ranks", max(m.peak_mb for m in ms_large),
                     max(m.peak_mb for m in ms_small), 1.5)
        ok &= _ratio(f"dcci-diff ({mode}) wall {large} / {small} ranks", min(m.wall_s for m in ms_large),
                     min(m.wall_s for m in ms_small), 4.5)
        print(f"         (CPU {large} / {small} ranks: {min(m.cpu_s for m in ms_large) / min(m.cpu_s for m in ms_small):.2f}x)")
    if sweeps:
        ok &= _ratio(f"sweep peak {large} / {small} ranks", sweeps[large].peak_mb, sweeps[small].peak_mb, 1.5)
    print(f"$ uptime  # load average {_load()}")
    tmp.cleanup()
    return 1 if args.strict and not ok else 0


if __name__ == "__main__":
    sys.exit(main())
