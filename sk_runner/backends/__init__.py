"""Runner backends: ``sim`` (the shipped simulated device), ``command`` (any
command following the {config}/{run_dir} contract) and ``npu`` (a torch_npu
inference script on a real Ascend device)."""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence

from sk_analytics.errors import UsageError
from sk_runner.backends.base import Backend

BACKENDS = ("sim", "command", "npu")


def make_backend(name: str, command: Sequence[str] | None = None, *, network: str | None = None,
                 cwd: str | os.PathLike[str] | None = None) -> Backend:
    """Build the named backend; ``command`` is the workload argv template (after ``--``), ``cwd`` the
    working directory of its processes (command, npu). With ``sim`` the words after ``--`` are the
    simulator's own options: a word that is not an option there (``python infer.py``) is a workload
    command given without ``--backend command``, refused (exit 2) rather than passed to the simulator."""
    if name == "sim":
        from sk_runner.backends.sim import SimBackend

        if command and not command[0].startswith("-"):
            raise UsageError(f"{shlex.join(command)!r} after '--' looks like a workload command, but --backend is sim "
                             "(the simulator takes only its own options there, e.g. -- --noise 0): add --backend command "
                             "(or --backend npu) to run it")
        return SimBackend(network=network, extra_args=list(command or []))
    if name == "command":
        from sk_runner.backends.command import CommandBackend

        return CommandBackend(list(command or []), cwd=cwd)
    if name == "npu":
        from sk_runner.backends.npu import NpuBackend

        return NpuBackend(list(command or []), cwd=cwd)
    raise UsageError(f"unknown backend {name!r} (expected one of {', '.join(BACKENDS)})")
