"""The trial engine: one Stage O round as correctness + N clean processes (protocol §5).

Layout of a round (``<session>/experiments/Sbest/<round>/``)::

    trial.json            identity (the resume key), change set, fingerprints
    config.json           the exact execution config every process gets
    config.diff.json      RFC 6902 patch incumbent -> trial (only the declared pointers)
    probe.json            exact-value probe of the changed option(s), ready=true
    CORRECTNESS/          the full inference + correctness run (+ meta.json)
    CLEAN/run-<k>/        log_<rank>.log, stdout.txt, stderr.txt, correctness.json, meta.json
    FAILURE_SCENES/attempt-<n>/   sealed scenes (never overwritten)
    INCOMPLETE/<run>-<ns>/        leftovers of interrupted or failed runs, moved aside
    environment-blockers.jsonl    failures before any command started
    lease-request.json    the lease this round asked for (a rerun without lease options takes it again)

A run is complete only when its ``meta.json`` exists; it is written atomically
and last, after the run's timings and RUNS row were ingested into
``<session>/data/``. Re-running the same trial continues with the missing runs;
``top_up_to`` adds runs to exactly that count, keeping the earlier ones.

Modules: :mod:`sk_runner.trial.spec` (spec, result, layout),
:mod:`sk_runner.trial.state` (preparation and processes of one invocation),
:mod:`sk_runner.trial.outcome` (how one process ended),
:mod:`sk_runner.trial.round` (the steps probe -> correctness -> clean runs).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

from filelock import FileLock, Timeout

from sk_analytics.errors import EnvironmentBlocker, UsageError
from sk_analytics.files.io_seam import as_blocker
from sk_runner.backends.base import at_workdir
from sk_runner.devices.lease import HeldLease, LeaseFault, hold
from sk_runner.devices.occupancy import occupancy_source
from sk_runner.devices.proof import CleanDeviceProof
from sk_runner.devices.recorded import record_round_request
from sk_runner.process import lifetime
from sk_runner.trial.round import Round
from sk_runner.trial.spec import (
    LOCK_NAME,
    META_SCHEMA,
    MIN_TRIAL_RUNS,
    ROUND_NAME,
    TRIAL_SCHEMA,
    Progress,
    ProgressFn,
    TrialResult,
    TrialSpec,
    complete_runs,
    derive_seed,
    round_dir_of,
)
from sk_runner.trial.state import TrialState


def run_trial(spec: TrialSpec, progress: ProgressFn | None = None) -> TrialResult:
    """Run (or resume, or top up) one trial: probe, correctness, clean runs.

    Returns ``status`` ok, or failed with the sealed scene. Raises
    InputError/UsageError for bad input and EnvironmentBlocker (also recorded
    in ``environment-blockers.jsonl``) when nothing could start.
    """
    backend, cwd = at_workdir(spec.backend, spec.cwd)  # one working directory for every process, checks and fingerprints
    spec = replace(spec, session=Path(spec.session).resolve(), base_config=Path(spec.base_config).resolve(), backend=backend, cwd=cwd)
    trial = TrialState(spec, progress)
    trial.validate()
    trial.check_environment()
    derived = trial.derive()
    trial.workload_files()  # inputs first: a missing or looping --source is refused before anything is created
    seed = trial.session_seed()
    if spec.top_up_to is not None and not (trial.dir / "trial.json").is_file():
        raise UsageError(f"--top-up-to: round {spec.round} holds no trial to top up (run it first)")
    trial.dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(trial.dir / LOCK_NAME)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise UsageError(f"round {spec.round} is being run by another sk-run process ({trial.dir / LOCK_NAME} is locked)") from None
    try:
        lifetime.attach(spec.session)
        record_round_request(trial.dir, spec.lease, trial.env)  # before any run: a rerun takes this lease again
        with _devices(trial) as trial.lease:  # every process of the trial, probe included, runs inside the lease
            if spec.hosts is not None:  # each host proves its own leased devices
                trial.proof = spec.hosts.proof(trial.dir, spec.round, spec.backend.name)
            else:
                trial.proof = None if trial.lease is None else CleanDeviceProof(
                    trial.lease, occupancy_source(spec.backend.name, trial.env), trial.dir, spec.round, wait_s=trial.lease.timeout_s,
                    lang=spec.lang)
            steps = Round(trial, derived, seed)
            return steps.probe() or steps.correctness() or steps.clean_runs()
    except (EnvironmentBlocker, OSError) as exc:
        blocker = as_blocker(exc)
        if blocker is None:
            raise
        if blocker.recorded_in is None:  # a read or write the machine failed mid-trial: on record like any blocker (§8)
            trial.blocker("trial", blocker)
        if blocker is exc:
            raise
        raise blocker from exc
    finally:
        lock.release()


@contextmanager
def _devices(trial: TrialState) -> Iterator[HeldLease | None]:
    """The trial's lease (:func:`sk_runner.devices.lease.hold`); not having it is a blocker of stage ``lease``."""
    try:
        with hold(trial.spec.lease, env=trial.env, session=trial.spec.session) as lease:
            yield lease
    except LeaseFault as exc:
        if exc.recorded_in is None:
            raise trial.blocker("lease", exc, {"lease_blocked": exc.record()}) from exc
        raise


__all__ = ["LOCK_NAME", "META_SCHEMA", "MIN_TRIAL_RUNS", "ROUND_NAME", "TRIAL_SCHEMA", "Progress", "ProgressFn", "TrialResult",
           "TrialSpec", "complete_runs", "derive_seed", "round_dir_of", "run_trial"]
