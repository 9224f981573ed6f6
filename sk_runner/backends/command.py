"""``command`` backend: any user command that follows the workload contract.

The command gets the exact config as ``{config}`` / ``SK_RUN_CONFIG``, its run
folder as ``{run_dir}`` / ``SK_RUN_DIR`` and its seed as ``{seed}`` /
``SK_RUN_SEED``; it writes ``log_<rank>.log`` and ``correctness.json`` there.
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sk_analytics.errors import EnvironmentBlocker
from sk_runner.backends.base import (
    Control,
    RunRequest,
    WrapperVerdict,
    config_as_given,
    expand_template,
    require_template,
)
from sk_runner.backends.wrapper_rules import registry_verdict
from sk_runner.fingerprint import environment_record


class CommandBackend:
    """Runs ``template`` with the placeholders expanded; no shell involved."""

    name = "command"

    def __init__(self, template: list[str]) -> None:
        self.template = require_template(template, self.name)

    def check_ready(self) -> None:
        exe = self.template[0]
        if shutil.which(exe) is None and not Path(exe).is_file():
            raise EnvironmentBlocker(f"workload executable {exe!r} not found on PATH")

    def argv(self, request: RunRequest) -> list[str]:
        return expand_template(self.template, request)

    def probe_argv(self, request: RunRequest) -> list[str]:
        return self.argv(request)

    def identity(self) -> dict[str, Any]:
        return {"backend": self.name, "command_template": list(self.template)}

    def workload(self, control: Control) -> dict[str, Any]:
        return {
            "model": None,
            "input": None,
            "batch": None,
            "ranks": control.ranks,
            "mode": "inference",
            "iterations": control.iterations,
            "warmup": control.warmup,
            "runtime": {"command_template": list(self.template)},
        }

    def environment(self) -> dict[str, Any]:
        return environment_record(self.name, "unknown")

    def source_path(self) -> Path:
        """The first argument that is an existing file (the script), else the cwd."""
        for arg in self.template:
            candidate = Path(arg)
            if candidate.suffix and candidate.is_file():
                return candidate.resolve()
        return Path.cwd()

    def wrapper_check(self, option: str, value: Any) -> WrapperVerdict:
        return registry_verdict(option, value)

    def workload_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The config as given: a user command reads the options in the registry's names."""
        return config_as_given(config)
