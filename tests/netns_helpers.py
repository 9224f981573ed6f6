"""Re-running a test module inside a private network namespace, under a keeper, so that nothing it starts escapes.

The Ray tests run their clusters inside ``unshare -n`` (only ``lo`` up: no Ray traffic can leave loopback). The
inner pytest starts Ray's daemons, campaign drivers and sweeps, some in sessions of their own. It runs under
sk-run's keeper (a child subreaper, ``sk_runner/process/keeper.py``): when it ends, whatever of its subtree is left
is ended too; when the outer test process is interrupted or killed (Ctrl-C of ``make test``, a CI cancel, a
SIGKILLed xdist worker) the keeper sees its socket close and kills the whole subtree at once.

Each re-run has a temporary folder of its own (``TMPDIR``), where Ray keeps its session folders (sockets, logs): two
Ray modules running side by side on two xdist workers never see, or remove, each other's clusters' folders.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from sk_runner.process import keeper

GRACE_S = 5.0
"""How long what the inner run left behind gets between SIGTERM and SIGKILL once it has ended."""


def netns_problem() -> str | None:
    """Why a private network namespace cannot be made here (None: it can)."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "unshare/ip not available: cannot make a private network namespace for Ray"
    if not keeper.available():
        return "child subreapers or /proc children lists are not available: the inner run could leave processes behind"
    probe = subprocess.run(["unshare", "-n", "sh", "-c", "ip link set lo up"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return f"private network namespaces not permitted here ({probe.stderr.strip()[:120]}): Ray must not bind outside loopback"
    return None


def pytest_in_private_netns(args: Sequence[str], flag: str, tmp: Path, timeout_s: float) -> tuple[int, str]:
    """Run ``python -m pytest ARGS`` inside a private network namespace with ``flag=1`` in its environment, under a
    keeper; returns its exit status and its output (stdout, then stderr). Nothing it started outlives it, or this
    process: an interrupt or a timeout here kills its whole subtree."""
    argv = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", sys.executable, "-m", "pytest", "-p", "no:logging",
            "-p", "no:cacheprovider", *args]
    out, err = tmp / "inner.out", tmp / "inner.err"
    own_tmp = Path(tempfile.mkdtemp(prefix="ns-"))  # short: Ray's socket paths under $TMPDIR/ray must stay under 107 bytes
    env = {k: v for k, v in os.environ.items() if k != "RAY_TMPDIR"}
    try:
        with out.open("wb") as stdout, err.open("wb") as stderr:
            kept = keeper.start(argv, Path.cwd(), {**env, "TMPDIR": str(own_tmp), flag: "1"}, stdout, stderr, GRACE_S)
        ended = False
        try:
            code = kept.wait(timeout=timeout_s)
            ended = True
        except subprocess.TimeoutExpired:
            code = None
        finally:
            kept.close(kill=not ended)  # after an exit: TERM what is left, then KILL; else (interrupt, timeout): KILL all now
        left = sorted(p.name for p in own_tmp.iterdir() if p.name != "ray")  # Ray's session folders are Ray's; all else is a leak
    finally:
        shutil.rmtree(own_tmp, ignore_errors=True)
    text = out.read_text(errors="replace") + err.read_text(errors="replace")
    if code is None:
        raise AssertionError(f"the run inside the namespace did not end in {timeout_s:.0f} s (killed):\n{text[-6000:]}")
    if left:
        raise AssertionError(f"the run inside the namespace left {left} in its temporary folder:\n{text[-3000:]}")
    return code, text
