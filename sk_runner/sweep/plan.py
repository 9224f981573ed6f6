"""What a session will run, per mode, before it runs anything (``sk-run sweep --task … --plan-only``).

For each mode of the workload contract (probe, correctness, clean run,
profile) the exact argv with every placeholder resolved, the contract and
mode variables it gets and its working directory, as the trial, probe and
profile engines will build them for the first process of that mode. Printing
it lets a user see ``python infer.py --config /…/O0-INCUMBENT/config.json``
before a multi-minute job starts; building it checks that the command's
executable exists and that it uses only known placeholders.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sk_analytics.stage_o.state import O0
from sk_runner.backends.base import PLACEHOLDERS, Backend, Control, RunRequest
from sk_runner.probe.engine import probe_env
from sk_runner.probe.evidence import WORK_PATH_ENV
from sk_runner.sweep.probes import PROBES_DIR, probe_control
from sk_runner.sweep.session import SweepSession
from sk_runner.trial.spec import derive_seed, round_dir_of

PROBE_FOLDER = "<option>/value-<sha8>/attempt-<n>"
"""Stands for the attempt folder of one probed value (its name is derived from the value)."""


def _mode(backend: Backend, request: RunRequest, extra: dict[str, str], *, probe: bool = False) -> dict[str, Any]:
    argv = backend.probe_argv(request) if probe else backend.argv(request)
    return {"argv": argv, "config": str(request.config_path), "run_dir": str(request.run_dir),
            "env": {**request.contract_env(), **extra}}


def workload_plan(session: SweepSession) -> dict[str, Any]:
    """The resolved workload command of every mode; raises when the command could not start
    (unknown placeholder: exit 2, executable not found: exit 3)."""
    from sk_runner.profile.defaults import DEFAULT_PROFILE_ITERATIONS, DEFAULT_SK_PROF_KB
    from sk_runner.profile.engine import profile_env

    backend = session.backend.build()
    check = getattr(backend, "check_command", None)
    if check is not None:
        check()
    root = session.root.resolve()
    o0 = round_dir_of(root, O0)
    control = session.control
    probe_dir = root / PROBES_DIR / PROBE_FOLDER
    profile_root = root / "experiments" / "Sbest" / "DCCI" / "diag" / "baseline_profile" / "attempt-1"
    iterations = session.policy.profile_iterations or DEFAULT_PROFILE_ITERATIONS
    profile_control = Control(control.ranks, iterations, control.warmup, session.policy.timeout_s)
    switches = profile_env(DEFAULT_SK_PROF_KB)
    modes = {
        "probe": _mode(backend, RunRequest(probe_dir / "config.json", probe_dir / "run", 0, probe_control(session)),
                       probe_env(probe_dir / "run"), probe=True),
        "correctness": _mode(backend, RunRequest(o0 / "config.json", o0 / "CORRECTNESS",
                                                 derive_seed(session.seed, O0, "correctness"), control), {}),
        "clean": _mode(backend, RunRequest(o0 / "config.json", o0 / "CLEAN" / "run-1", derive_seed(session.seed, O0, "run-1"),
                                           control), {}),
        "profile": _mode(backend, RunRequest(profile_root.with_name("attempt-1.config.json"), profile_root, session.seed,
                                             profile_control, extra_env=switches), {WORK_PATH_ENV: str(profile_root)}),
    }
    workdir = session.backend.workdir or Path.cwd()
    executable = getattr(backend, "executable", None)
    return {
        "backend": session.backend.name,
        "cwd": str(workdir.resolve()),
        "executable": executable() if executable is not None else None,
        "placeholders": list(PLACEHOLDERS),
        "modes": modes,
        "note": "paths of the first process of each mode; a probe's folder is named after its option and value",
    }
