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

from sk_analytics.messages import coded, render
from sk_analytics.stage_o.layout import PROBES_DIR
from sk_analytics.stage_o.state import O0
from sk_runner.backends.base import PLACEHOLDERS, Backend, Control, RunRequest
from sk_runner.probe.engine import probe_env
from sk_runner.probe.evidence import WORK_PATH_ENV
from sk_runner.sweep.probes import probe_control
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


def matrix_plan(session: SweepSession) -> list[str]:
    """The option matrix the session will freeze, one line per entry (then the excluded values): its frozen
    ``matrix.json`` once built, else the matrix of the protocol candidates as the probes would find them if every
    listed value were accepted. Each line says what becomes of the entry: a value the task does not list, or one
    the policy does not allow (risk, authorisation, operator adaptation), is blocked before any process starts;
    an excluded value says why, in English like the plan."""
    from sk_analytics.files.strict_json import load_json_file
    from sk_analytics.fingerprint import canonical_json
    from sk_analytics.stage_o.blockers import pre_run_blocker
    from sk_analytics.stage_o.matrix import excluded_reason, load_matrix, protocol_candidates
    from sk_analytics.stage_o.state import SessionState
    from sk_runner.sweep.matrix_cli import MATRIX_NAME, checked_matrix
    from sk_runner.sweep.probes import listed_values, not_listed_record

    frozen = session.root / MATRIX_NAME
    if frozen.is_file():
        matrix, planned = load_matrix(frozen), "probed"
    else:
        listed = listed_values(session)
        probes = [{"option": c.option, "value": c.value, "ready": True, "evidence": {"plan": "listed: probed first"}}
                  if listed is None or (c.option, canonical_json(c.value)) in listed else not_listed_record(c.option, c.value)
                  for c in protocol_candidates()]
        matrix = checked_matrix(load_json_file(session.seed_config_path), probes, seed_source=session.seed_config_path)
        planned = "not yet probed"
    lines = []
    for entry in matrix["entries"]:
        blocker = pre_run_blocker(entry, SessionState(), session.policy)
        if blocker is None:
            then = "probe the exact value, then try it" if planned == "not yet probed" else "try it"
        else:  # a probe's cause (not listed, refused …: {kind, code, params}), else the policy's reason, in English like the plan
            cause = blocker[1].get("cause")
            said = coded(cause["code"], **cause.get("params", {})) if isinstance(cause, dict) and "code" in cause else blocker[0]
            then = f"blocked: {render(said, 'en')}"
        lines.append(f"{entry['id']}: {entry['option']}={canonical_json(entry['value'])} (risk {entry['risk']}) -> {then}")
    lines += [f"excluded: {x['option']}" + (f"={canonical_json(x['value'])}" if "value" in x else "") + f" ({excluded_reason(x, 'en')})"
              for x in matrix["excluded"]]
    return lines
