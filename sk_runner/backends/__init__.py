"""Runner backends: ``sim`` (the shipped simulated device), ``command`` (any
command following the {config}/{run_dir} contract) and ``npu`` (a torch_npu
inference script on a real Ascend device)."""

from __future__ import annotations

from collections.abc import Sequence

from sk_analytics.errors import UsageError
from sk_runner.backends.base import Backend

BACKENDS = ("sim", "command", "npu")


def make_backend(name: str, command: Sequence[str] | None = None, *, network: str | None = None) -> Backend:
    """Build the named backend; ``command`` is the workload argv template (after ``--``)."""
    if name == "sim":
        from sk_runner.backends.sim import SimBackend

        return SimBackend(network=network, extra_args=list(command or []))
    if name == "command":
        from sk_runner.backends.command import CommandBackend

        return CommandBackend(list(command or []))
    if name == "npu":
        from sk_runner.backends.npu import NpuBackend

        return NpuBackend(list(command or []))
    raise UsageError(f"unknown backend {name!r} (expected one of {', '.join(BACKENDS)})")
