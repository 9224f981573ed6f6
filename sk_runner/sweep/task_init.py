"""A dispatched Stage O task, written in one step (``sk-run task init``) and the option values it can offer.

:func:`write_task` is the one place that lays out a task folder: the phase
manifest, the SEED config and its canonical fingerprint, the task itself
(paths relative to it), checked at once by the phase entry's own
:func:`~sk_runner.sweep.phase.validate_task`, so ``sk-run sweep --task … --plan-only``
accepts what it wrote. :func:`init_task` first runs the workload once on the
SEED config (an incumbent trial of one clean run: correctness, then the S0 clean
run the task is bound to). :func:`candidate_values` lists every option value the
matrix can try, read from the protocol's candidates and the option registry.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sk_analytics.errors import InputError, UsageError
from sk_analytics.files.atomic import write_json
from sk_analytics.fingerprint import canonical_json, fingerprint
from sk_analytics.stage_o.matrix import protocol_candidates
from sk_analytics.stage_o.option_values import expected_value, name_problem
from sk_analytics.stage_o.options import REGISTRY, is_debug_option
from sk_runner.backends.base import Control
from sk_runner.config import check_config_options
from sk_runner.devices.lease import LeaseLike
from sk_runner.hosts.base import ranks_problem
from sk_runner.sweep.phase import AGENT_ID, PHASE, StageOTask, validate_task
from sk_runner.sweep.task_schema import PHASE_SCHEMA, TASK_SCHEMA

PHASE_MANIFEST = {"schema_version": PHASE_SCHEMA, "phase": PHASE, "agent_id": AGENT_ID, "skill": "superkernel-stage-o",
                  "runtime_tools": ["sweep", "trial", "probe", "profile", "analyze_performance", "dcci_diff", "ledger"]}
"""The phase manifest a generated task ships: every tool a session runs, each one of our commands."""
S0_ROUND = "S0"
"""Round (and session folder) of the one clean run a generated task is bound to."""


def candidate_values() -> list[dict[str, Any]]:
    """Every ``{option, value}`` the option matrix can try (the protocol's candidates), in matrix order."""
    return [{"option": c.option, "value": c.value} for c in protocol_candidates()]


def option_table() -> list[dict[str, Any]]:
    """Every registered option: its names, kind, valid values in words, default, whether it is a debug option, and
    the candidate values the matrix tries (none: it never enters the matrix)."""
    by_option: dict[str, list[Any]] = {}
    for item in candidate_values():
        by_option.setdefault(item["option"], []).append(item["value"])
    return [{"option": spec.name, "wrapper": spec.wrapper, "kind": spec.kind, "low": spec.low, "high": spec.high,
             "expected": expected_value(spec), "default": spec.default, "debug": is_debug_option(spec.name),
             "candidates": by_option.get(spec.name, [])} for spec in REGISTRY]


def accepted_values(chosen: Sequence[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """The task's ``accepted_option_values``: ``chosen`` (each one a candidate of the matrix; an unknown option is
    refused with the closest registered names), else every candidate."""
    candidates = candidate_values()
    if chosen is None:
        return candidates
    known = {(c["option"], canonical_json(c["value"])) for c in candidates}
    given: set[tuple[str, str]] = set()
    for item in chosen:
        if (unknown := name_problem(item["option"])) is not None:  # a typo names the closest options, as in a task
            raise InputError(None, f"--accept {item['option']}={canonical_json(item['value'])}: {unknown}")
        if (item["option"], canonical_json(item["value"])) not in known:
            offered = [canonical_json(c["value"]) for c in candidates if c["option"] == item["option"]]
            raise InputError(None, f"--accept {item['option']}={canonical_json(item['value'])}: not a value the option matrix tries",
                             expected=f"one of {', '.join(offered)}" if offered else "an option with candidates (sk-run options)")
        if (key := (item["option"], canonical_json(item["value"]))) in given:
            raise InputError(None, f"--accept {key[0]}={key[1]}: given twice", expected="each value once")
        given.add(key)
    return list(chosen)


def write_task(folder: Path, seed_config: dict[str, Any], workload: dict[str, Any], *, clean_artifacts: str,
               accepted: Sequence[dict[str, Any]] | None = None, policy: dict[str, Any] | None = None,
               session: str | None = "session") -> StageOTask:
    """Write ``folder/task.json`` with its phase manifest and SEED config beside it (``clean_artifacts``: the S0 run
    folder, relative to ``folder``) and return it validated as ``sk-run sweep --task`` validates it."""
    folder.mkdir(parents=True, exist_ok=True)
    write_json(folder / "phase.json", PHASE_MANIFEST)
    write_json(folder / "seed-config.json", seed_config)
    task: dict[str, Any] = {
        "schema_version": TASK_SCHEMA, "agent_id": AGENT_ID, "phase_manifest": "phase.json",
        "seed": {"name": "Sbest-SEED", "frozen": True, "config": "seed-config.json", "config_fingerprint": fingerprint(seed_config)},
        "accepted_option_values": accepted_values(accepted),
        "clean_artifacts": {"bound_to": "S0", "path": clean_artifacts},
        "workload": workload,
        "policy": policy or {},
    }
    if session is not None:
        task["session"] = session
    write_json(folder / "task.json", task)
    return validate_task(folder / "task.json")


def init_task(folder: Path, seed_config_path: Path, command: Sequence[str], *, control: Control, seed: int = 0,
              cwd: Path | None = None, sources: Sequence[str] | None = None, accepted: Sequence[dict[str, Any]] | None = None,
              policy: dict[str, Any] | None = None, lease: LeaseLike = None) -> StageOTask:
    """Run ``command`` once on the SEED config (correctness and one clean run, in ``folder/S0``) and write the task
    bound to that run; a workload that fails there is the trial's one-line error, and no task is written."""
    from sk_runner.backends import make_backend
    from sk_runner.config import load_config
    from sk_runner.trial.engine import run_trial
    from sk_runner.trial.sources import source_files
    from sk_runner.trial.spec import TrialSpec, round_dir_of, set_aside

    seed_config = load_config(seed_config_path)
    check_config_options(seed_config, seed_config_path)
    accepted_values(accepted)  # a bad --accept is said before the workload runs
    if (problem := ranks_problem(None, lease, control.ranks)) is not None:  # and more ranks than leased NPUs, before S0/
        raise UsageError(problem)
    folder = folder.resolve()
    workdir = (cwd or Path.cwd()).resolve()
    backend = make_backend("command", list(command), cwd=workdir)
    source_files(workdir, sources, backend.source_files(), skip=[folder])  # a bad --source is said before S0/ is made
    s0 = folder / S0_ROUND
    set_aside(folder, s0)  # an earlier attempt's S0 (failed or cut short; the folder holds no task): kept, out of the way
    s0.mkdir(parents=True, exist_ok=True)
    result = run_trial(TrialSpec(session=s0, round=S0_ROUND, base_config=seed_config_path, backend=backend,
                                 incumbent=True, runs=1, control=control, seed=seed, cwd=workdir,
                                 sources=None if sources is None else tuple(sources), lease=lease))
    if result.status != "ok" or not result.runs_completed:
        raise InputError(round_dir_of(s0, S0_ROUND), f"the S0 run of the workload failed: {result.outcome}: {result.message}",
                         expected="a workload that follows the contract of docs/runner.md (fix it, then run sk-run task init "
                                  "again: this S0 then moves to INCOMPLETE/ beside it)")
    workload = {"backend": "command", "command": list(command), "cwd": str(workdir), "ranks": control.ranks,
                "iterations": control.iterations, "warmup": control.warmup, "seed": seed,
                **({} if sources is None else {"sources": list(sources)})}
    clean = (round_dir_of(s0, S0_ROUND) / "CLEAN").relative_to(folder).as_posix()
    return write_task(folder, seed_config, workload, clean_artifacts=clean, accepted=accepted,
                      policy={**({} if control.timeout_s is None else {"timeout_s": control.timeout_s}), **(policy or {})})
