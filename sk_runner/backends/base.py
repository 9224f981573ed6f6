"""What every runner backend provides: readiness, the workload argv, identity, wrapper check.

A backend does not run processes itself (that is :mod:`sk_runner.process`);
it says *what* to run for one request and what the environment is, so the
trial engine treats the simulator, a real NPU script and any command alike.
"""

from __future__ import annotations

import copy
import os
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from sk_analytics.errors import UsageError
from sk_runner.limits import size_problem

PLACEHOLDERS = ("{config}", "{run_dir}", "{seed}")


@dataclass(frozen=True)
class Control:
    """Run controls of a trial (part of its fingerprint, identical across rounds)."""

    ranks: int = 8
    iterations: int | None = None
    warmup: int = 8
    timeout_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    def check(self) -> None:
        """Refuse controls that no workload could satisfy, before anything starts."""
        problem = size_problem(self.ranks, self.iterations, self.warmup)
        if problem is not None:
            raise UsageError(problem)
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise UsageError(f"--timeout {self.timeout_s}: expected a positive number of seconds")


@dataclass(frozen=True)
class RunRequest:
    """One process to start: the exact config, its run folder and its seed."""

    config_path: Path
    run_dir: Path
    seed: int
    control: Control
    extra_env: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # The workload may run in another cwd (a profile runs inside its root),
        # so the paths it receives must not depend on ours.
        object.__setattr__(self, "config_path", Path(self.config_path).absolute())
        object.__setattr__(self, "run_dir", Path(self.run_dir).absolute())

    def contract_env(self) -> dict[str, str]:
        """The workload contract's environment variables (docs/runner.md, "The workload contract"):
        config, run folder, seed, ranks and warm-up always, iterations when the controls set them."""
        iterations = {} if self.control.iterations is None else {"SK_RUN_ITERATIONS": str(self.control.iterations)}
        return {
            "SK_RUN_CONFIG": str(self.config_path),
            "SK_RUN_DIR": str(self.run_dir),
            "SK_RUN_SEED": str(self.seed),
            "SK_RUN_RANKS": str(self.control.ranks),
            "SK_RUN_WARMUP": str(self.control.warmup),
            **iterations,
            **dict(self.extra_env),
        }


@dataclass(frozen=True)
class WrapperVerdict:
    """Did the option wrapper accept this exact value, and why not."""

    accepted: bool
    reason: str
    evidence: dict[str, Any] = field(default_factory=dict)
    blocked: bool = False
    """Rejected without asking: the installed release's wrapper is known to refuse it (the reason names the release)."""

    @property
    def verdict(self) -> str:
        """``accepted``, ``rejected`` (the wrapper said no) or ``blocked`` (known to be refused, never tried)."""
        return "accepted" if self.accepted else "blocked" if self.blocked else "rejected"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@runtime_checkable
class Backend(Protocol):
    """A place where workloads run (``sim``, ``npu``, ``command``)."""

    name: str

    def check_ready(self) -> None:
        """Raise :class:`EnvironmentBlocker` when nothing could start here."""

    def argv(self, request: RunRequest) -> list[str]:
        """Exact argv of the workload for ``request``."""

    def probe_argv(self, request: RunRequest) -> list[str]:
        """Argv of the short process of an exact-value probe (compile only where possible)."""

    def identity(self) -> dict[str, Any]:
        """Stable description of the command (template, not per-run paths)."""

    def workload(self, control: Control) -> dict[str, Any]:
        """Workload part of the fingerprint (model, input, batch, ranks, mode, iterations, runtime)."""

    def environment(self) -> dict[str, Any]:
        """Environment part of the fingerprint (backend, device, package versions)."""

    def source_path(self) -> Path:
        """Where the workload's source lives (for its git revision)."""

    def source_files(self) -> list[Path]:
        """Files the workload command names (hashed as its revision where there is no git)."""

    def wrapper_check(self, option: str, value: Any) -> WrapperVerdict:
        """Would the option wrapper accept ``option = value`` exactly?"""

    def workload_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """``config`` as the workload's option wrapper takes it (the npu backend: torch_npu's option names)."""


def at_workdir(backend: Backend, cwd: str | os.PathLike[str] | None) -> tuple[Backend, Path]:
    """``backend`` reading its relative paths (executable, named files) from the working directory every
    process of it runs in, and that folder: ``cwd``, else the backend's own ``cwd``, else ours. A backend
    with its own ``cwd`` (command, npu) is copied with it set, so its checks and fingerprints see what its
    processes see."""
    own = getattr(backend, "cwd", None)
    folder = Path(cwd or own or Path.cwd()).resolve()
    if not hasattr(backend, "cwd") or own == folder:
        return backend, folder
    bound = copy.copy(backend)
    bound.cwd = folder
    return bound, folder


def config_as_given(config: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of ``config``: the workload config of a backend whose workload reads the registry's names."""
    return copy.deepcopy(dict(config))


PLACEHOLDER = re.compile(r"\{[A-Za-z_][A-Za-z0-9_-]*\}")
"""What a placeholder looks like in a workload argument; only :data:`PLACEHOLDERS` are known."""


def unknown_placeholders(template: list[str]) -> list[str]:
    """Placeholders of ``template`` that :func:`expand_template` would leave as they are (a typo such as ``{rundir}``)."""
    return sorted({m for arg in template for m in PLACEHOLDER.findall(arg)} - set(PLACEHOLDERS))


def expand_template(template: list[str], request: RunRequest) -> list[str]:
    """Replace ``{config}``, ``{run_dir}``, ``{seed}`` in every argv element (no shell)."""
    values = {"{config}": str(request.config_path), "{run_dir}": str(request.run_dir), "{seed}": str(request.seed)}
    out = []
    for arg in template:
        for key, value in values.items():
            arg = arg.replace(key, value)
        out.append(arg)
    return out


def require_template(template: list[str] | None, backend: str) -> list[str]:
    """The workload argv after ``--``; it must exist and be a list of strings."""
    if not template:
        raise UsageError(f"--backend {backend} needs the workload command after '--' (with {{config}} and {{run_dir}} placeholders or the SK_RUN_* variables)")
    return list(template)
