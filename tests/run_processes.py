"""The test run's processes: none that the suite started may outlive it.

Every process the run starts inherits the run's marker (``SK_TUNE_TEST_TMPDIR``, see
``tests/tmp_guard.py``) in its environment; one that wiped its environment still runs
in a test's folder (its working directory under the run's temp folder or pytest's base
temp folder). At the end of the session the outermost pytest process (after xdist has
stopped its workers) waits up to :data:`GRACE_S` for such processes to end (a Ray
cluster stopped by the last test takes a few seconds), then kills what is left and
names it: a test that leaves a process running fails the run instead of filling the
machine, run after run.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Collection, Sequence
from pathlib import Path

GRACE_S = 30.0
"""How long the processes of the run get to end by themselves after the last test."""

Leftover = tuple[int, str]
"""A live process of the run: its pid and its command line (cut to 200 characters)."""


def _inside(path: str, roots: Sequence[str]) -> bool:
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def run_processes(mark: str, roots: Sequence[str], spared: Collection[int] = ()) -> list[Leftover]:
    """Live (non-zombie) processes, other than this one and ``spared``, whose environment holds ``mark``
    (``NAME=value``) or whose working directory lies under one of ``roots``."""
    skip = {os.getpid(), *spared}
    wanted = mark.encode()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in skip:
            continue
        try:
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if state in ("Z", "X"):
                continue
            ours = wanted in (entry / "environ").read_bytes().split(b"\0") or _inside(os.readlink(entry / "cwd"), roots)
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        if ours:
            found.append((int(entry.name), command[:200]))
    return found


def own_watchdog() -> int | None:
    """The watchdog of this process's own spawns, if a test ran a workload here (a one-process run): it ends when this
    process exits (sk_runner.process.lifetime), after the check, so it is not a leftover of the tests."""
    lifetime = sys.modules.get("sk_runner.process.lifetime")
    watchdog = None if lifetime is None else lifetime.owner().watchdog
    return None if watchdog is None else watchdog.pid


def own_resource_tracker() -> int | None:
    """multiprocessing's resource tracker of this process, if a test started a ``spawn`` process here (a one-process
    run): like the watchdog it ends when this process exits, after the check."""
    tracker_module = sys.modules.get("multiprocessing.resource_tracker")
    tracker = None if tracker_module is None else getattr(tracker_module, "_resource_tracker", None)
    return None if tracker is None else getattr(tracker, "_pid", None)


def end_leftovers(mark: str, roots: Sequence[str], grace_s: float = GRACE_S) -> list[Leftover]:
    """The run's processes still alive ``grace_s`` after the call, each killed (SIGKILL) and waited for; [] when none."""
    deadline = time.monotonic() + grace_s
    spared = {pid for pid in (own_watchdog(), own_resource_tracker()) if pid is not None}
    left = run_processes(mark, roots, spared)
    while left and time.monotonic() < deadline:
        time.sleep(0.2)
        left = run_processes(mark, roots, spared)
    for pid, _ in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:  # ended meanwhile
            pass
    deadline = time.monotonic() + 5.0
    while left and run_processes(mark, roots, spared) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left
