"""``sim`` backend: the simulated SuperKernel device shipped as ``sk_runner.sim``.

Builds ``python -m sk_runner.sim --config … --run-dir … --ranks … --seed …``;
wrapper acceptance comes from the option registry (shape), the runtime check
of a probe from the simulator's own ``super_kernel.log`` option lines.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import sk_runner
from sk_analytics.errors import EnvironmentBlocker
from sk_runner.backends.base import Control, RunRequest, WrapperVerdict, config_as_given
from sk_runner.backends.wrapper_rules import registry_verdict
from sk_runner.fingerprint import environment_record

SIM_MODULE = "sk_runner.sim"


class SimBackend:
    """Runs the simulator in a fresh Python process per request."""

    name = "sim"

    def __init__(self, network: str | None = None, extra_args: list[str] | None = None) -> None:
        # a spec file is passed absolute: a profile runs the simulator inside its capture root
        self.network = str(Path(network).resolve()) if network and Path(network).is_file() else network
        self.extra_args = list(extra_args or [])

    def check_ready(self) -> None:
        """The simulator is importable and ``--network`` names a loadable scenario (else InputError)."""
        if importlib.util.find_spec(SIM_MODULE) is None:
            raise EnvironmentBlocker(f"the simulator ({SIM_MODULE}) is not installed")
        if self.network is not None:
            from sk_runner.sim.network import load_network

            load_network(self.network)

    def argv(self, request: RunRequest) -> list[str]:
        c = request.control
        argv = [sys.executable, "-m", SIM_MODULE, "--config", str(request.config_path), "--run-dir", str(request.run_dir),
                "--ranks", str(c.ranks), "--warmup", str(c.warmup), "--seed", str(request.seed)]
        if c.iterations is not None:
            argv += ["--iterations", str(c.iterations)]
        if self.network:
            argv += ["--network", self.network]
        return argv + self.extra_args

    def probe_argv(self, request: RunRequest) -> list[str]:
        """Compile only: the simulator writes super_kernel.log with the option lines and stops."""
        return [*self.argv(request), "--probe-only"]

    def identity(self) -> dict[str, Any]:
        return {"backend": self.name, "module": SIM_MODULE, "network": self.network, "extra_args": self.extra_args}

    def workload(self, control: Control) -> dict[str, Any]:
        return {
            "model": f"sim:{self.network or 'default'}",
            "input": "synthetic",
            "batch": 1,
            "ranks": control.ranks,
            "mode": "decode",
            "iterations": control.iterations,
            "warmup": control.warmup,
            "runtime": f"{SIM_MODULE} {sk_runner.__version__}",
        }

    def environment(self) -> dict[str, Any]:
        return environment_record(self.name, "simulated")

    def source_path(self) -> Path:
        return Path(sk_runner.__file__).resolve().parent

    def source_files(self) -> list[Path]:
        """None: the simulator is part of the installed package (its version is in the environment record)."""
        return []

    def wrapper_check(self, option: str, value: Any) -> WrapperVerdict:
        return registry_verdict(option, value)

    def workload_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The config as given: the simulator reads the registry's (runtime) names."""
        return config_as_given(config)
