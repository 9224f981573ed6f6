"""``command`` backend: any user command that follows the workload contract.

The command gets the exact config as ``{config}`` / ``SK_RUN_CONFIG``, its run
folder as ``{run_dir}`` / ``SK_RUN_DIR`` and its seed as ``{seed}`` /
``SK_RUN_SEED``; it writes ``log_<rank>.log`` and ``correctness.json`` there
(docs/runner.md, "The workload contract"). Every process of it starts in one
working directory, ``cwd`` (default: the folder sk-run was started from), and
relative paths in the command are read from there.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sk_analytics.errors import EnvironmentBlocker, UsageError
from sk_runner.backends.base import (
    PLACEHOLDER,
    PLACEHOLDERS,
    Control,
    RunRequest,
    WrapperVerdict,
    config_as_given,
    expand_template,
    require_template,
    unknown_placeholders,
)
from sk_runner.backends.wrapper_rules import registry_verdict
from sk_runner.fingerprint import environment_record


class CommandBackend:
    """Runs ``template`` with the placeholders expanded; no shell involved."""

    name = "command"

    def __init__(self, template: list[str], cwd: str | os.PathLike[str] | None = None) -> None:
        self.template = require_template(template, self.name)
        self.cwd = None if cwd is None else Path(cwd).absolute()

    @property
    def workdir(self) -> Path:
        """The working directory of every process (``cwd``, else ours)."""
        return self.cwd or Path.cwd().absolute()

    def executable(self) -> str | None:
        """Where the command's executable is: a path (relative to :attr:`workdir`) or a name on PATH; None when not found."""
        exe = self.template[0]
        if os.sep in exe or (os.altsep and os.altsep in exe):
            path = self.workdir / exe
            return str(path) if path.is_file() and os.access(path, os.X_OK) else None
        return shutil.which(exe)

    def check_command(self) -> None:
        """The command could start: every placeholder is known (else exit 2) and the executable exists (else exit 3)."""
        if self.cwd is not None and not self.cwd.is_dir():
            raise EnvironmentBlocker(
                f"working directory {self.cwd} of the workload is not a folder (any more): a session or round runs its "
                "workload where it was recorded and cannot be pointed at another folder (its source identity names the "
                "files by their real paths, so a symbolic link there is another workload): move the folder back to that "
                "path, or start a fresh session from a task whose workload.cwd names where it is now")
        unknown = unknown_placeholders(self.template)
        if unknown:
            raise UsageError(f"workload command {self.template!r} has unknown placeholder(s) {', '.join(unknown)} "
                             f"(known: {', '.join(PLACEHOLDERS)}; the SK_RUN_* variables carry the same values)")
        if self.executable() is None:
            where = f"in {self.workdir} (or not executable)" if os.sep in self.template[0] else "on PATH"
            raise EnvironmentBlocker(f"workload executable {self.template[0]!r} not found {where}")

    def check_ready(self) -> None:
        self.check_command()

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

    def source_files(self) -> list[Path]:
        """Existing files the command's arguments name (the script, a model config …), read from
        :attr:`workdir`; the executable itself only when no argument names a file (``./run.sh``),
        so ``python infer.py`` names ``infer.py``, not the interpreter."""

        def named(args: list[str]) -> list[Path]:
            found: list[Path] = []
            for arg in args:
                candidate = (self.workdir / arg).resolve() if arg and not PLACEHOLDER.search(arg) else None
                if candidate is not None and candidate.is_file() and candidate not in found:
                    found.append(candidate)
            return found

        return named(self.template[1:]) or named(self.template[:1])

    def source_path(self) -> Path:
        """The first named file with a suffix (the script), else the working directory."""
        return next((path for path in self.source_files() if path.suffix), self.workdir)

    def wrapper_check(self, option: str, value: Any) -> WrapperVerdict:
        return registry_verdict(option, value)

    def workload_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The config as given: a user command reads the options in the registry's names."""
        return config_as_given(config)
