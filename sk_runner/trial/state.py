"""One invocation of a trial: validate, derive the config, prepare (or verify) the round, run its processes."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from sk_analytics.errors import EnvironmentBlocker, InputError, UsageError
from sk_analytics.files.atomic import write_json
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.fingerprint import fingerprint, sha256_file
from sk_analytics.ingest.collect import ingest_run_dir
from sk_analytics.messages import text as message
from sk_analytics.schema import RUNS, TIMINGS
from sk_analytics.stage_o.identity import changed_files, identity_differences
from sk_analytics.stage_o.option_values import name_problem
from sk_analytics.tables import remove_table_file, write_table
from sk_runner.backends.base import RunRequest
from sk_runner.config import (
    DerivedConfig,
    check_config_options,
    derive_config,
    load_config,
    options_pointer_of,
    refuse_debug_options,
    refuse_dirty_env,
    scrub_env,
)
from sk_runner.devices.lease import HeldLease, lease_environ, with_devices
from sk_runner.fingerprint import TrialFingerprints, env_hash, source_revision
from sk_runner.hosts.base import ProofLike, launch, ranks_problem, run_lease_record
from sk_runner.process import ProcessResult
from sk_runner.process.faults import EnvironmentFault
from sk_runner.process.session import require_session
from sk_runner.trial.outcome import RunOutcome, classify
from sk_runner.trial.scene import record_blocker
from sk_runner.trial.sources import source_files, source_hashes
from sk_runner.trial.spec import (
    META_SCHEMA,
    MIN_TRIAL_RUNS,
    ROUND_NAME,
    TRIAL_SCHEMA,
    Progress,
    ProgressFn,
    TrialSpec,
    round_dir_of,
    set_aside,
)

T = TypeVar("T")


def rerun_differences(old: Any, new: Mapping[str, Any]) -> str:
    """What differs between a round's recorded identity and a rerun's, down to the field of a record
    (``backend.command_template`` rather than ``backend``: only the command changed), with both values when short."""
    old = old if isinstance(old, Mapping) else {}
    parts = []
    for key in sorted(set(new) | set(old)):
        was, now = old.get(key), new.get(key)
        if was == now:
            continue
        if isinstance(was, Mapping) and isinstance(now, Mapping):
            parts += [f"{key}.{sub}{_values(was.get(sub), now.get(sub))}" for sub in sorted(set(was) | set(now)) if was.get(sub) != now.get(sub)]
        else:
            parts.append(f"{key}{_values(was, now)}")
    return ", ".join(parts)


def _values(was: Any, now: Any, limit: int = 600) -> str:
    text = f": recorded {json.dumps(was, ensure_ascii=False)}, now {json.dumps(now, ensure_ascii=False)}"
    return text if len(text) <= limit else ""


class TrialState:
    """State of one invocation of :func:`sk_runner.trial.run_trial`: preparation of the round, its processes."""

    def __init__(self, spec: TrialSpec, progress: ProgressFn | None) -> None:
        self.spec = spec
        self.progress = progress or (lambda event: None)
        self.dir = round_dir_of(spec.session, spec.round)
        self.env = dict(os.environ if spec.env is None else spec.env)
        self.t0 = time.monotonic()
        self.durations: list[float] = []
        self.lease: HeldLease | None = None
        """The lease held while the trial runs (set by :func:`~sk_runner.trial.engine.run_trial`)."""
        self.proof: ProofLike | None = None  # this host's CleanDeviceProof, or every host's HostsProof
        """Before/after checks of the leased devices around each clean run (None: unleased)."""
        self._workload_files: list[Path] | None = None

    # -- preparation ---------------------------------------------------------------
    def validate(self) -> None:
        spec = self.spec
        if not ROUND_NAME.match(spec.round):
            raise UsageError(f"--round {spec.round!r}: expected a folder name like O1 or O0-INCUMBENT")
        if spec.incumbent and spec.changes:
            raise UsageError("--incumbent copies the base config: it takes no --set")
        if not spec.incumbent and not spec.changes:
            raise UsageError("a trial needs one --set /json/pointer=JSON_VALUE (or --incumbent for an unchanged copy)")
        if spec.runs < 1 or (spec.top_up_to is not None and spec.top_up_to < 1):
            raise UsageError("--runs and --top-up-to must be at least 1")
        if not spec.incumbent and spec.target_runs < MIN_TRIAL_RUNS:
            raise UsageError(f"a trial needs at least {MIN_TRIAL_RUNS} clean runs (protocol §5.2), got {spec.target_runs}")
        require_session(spec.session)
        if spec.cwd is not None and not Path(spec.cwd).is_dir():
            raise InputError(spec.cwd, "working directory not found", expected="an existing folder for --cwd")
        spec.control.check()
        problem = ranks_problem(spec.hosts, spec.lease, spec.control.ranks)
        if problem is not None:
            raise UsageError(problem)

    def blocker(self, stage: str, exc: EnvironmentBlocker, extra: Mapping[str, Any] | None = None) -> EnvironmentBlocker:
        extra = {**({"errno": exc.errno_name} if exc.errno_name else {}), **dict(extra or {})} or None
        exc.recorded_in = record_blocker(self.dir, round_name=self.spec.round, stage=stage, message=exc.one_line(), extra=extra)
        return exc

    def check_environment(self) -> None:
        try:
            refuse_dirty_env(self.env)
            self.spec.backend.check_ready()
        except EnvironmentBlocker as exc:
            raise self.blocker("environment", exc) from exc

    def require_same_identity(self, recorded_in: Path, recorded: Mapping[str, Any], current: Mapping[str, Any]) -> None:
        differences = identity_differences(recorded, current)
        if differences:
            edited = changed_files(recorded, current)  # no git: name the workload files that changed
            what = ", ".join(differences) + (f" (changed since: {', '.join(edited)})" if edited else "")
            raise self.blocker("identity", EnvironmentBlocker(
                f"{recorded_in}: this process would run with another {what} than recorded there; "
                "only the declared option may change (protocol §5.1): restore the recorded source/workload/environment"))

    def session_seed(self) -> int:
        """``spec.seed``, else ``seed`` of ``<session>/session.json``, else 0."""
        if self.spec.seed is not None:
            return self.spec.seed
        path = self.spec.session / "session.json"
        record = load_json_file(path) if path.is_file() else None
        seed = record.get("seed") if isinstance(record, dict) else None
        return seed if isinstance(seed, int) and not isinstance(seed, bool) else 0

    def derive(self) -> DerivedConfig:
        spec = self.spec
        base = load_config(spec.base_config)
        refuse_debug_options(base, spec.base_config)
        check_config_options(base, spec.base_config)
        derived = derive_config(base, spec.changes, joint_dcci=spec.joint_dcci, source=spec.base_config)
        refuse_debug_options(derived.config, f"--set {', '.join(derived.allowed_pointers)}")
        for change in spec.changes:
            option = options_pointer_of(change)
            if option is None:
                raise UsageError(f"--set {change.pointer}: Stage O trials change an SK option (a pointer inside super_kernel_optimize_options)")
            problem = name_problem(option[1])  # the value itself is the probe's to judge: the exact value, as the runtime sees it
            if problem is not None:
                raise UsageError(f"--set {change.pointer}: {problem}")
        return derived

    def identity(self, derived: DerivedConfig, seed: int) -> dict[str, Any]:
        spec = self.spec
        return {
            "round": spec.round,
            "role": spec.role_name,
            "base_config_sha256": sha256_file(spec.base_config),
            "changes": [{"pointer": c.pointer, "value": c.value} for c in spec.changes],
            "joint_dcci": spec.joint_dcci,
            "trial_config_sha256": fingerprint(derived.config),
            "backend": spec.backend.identity(),
            "control": spec.control.to_json(),
            "session_seed": seed,
        }

    def workload_files(self) -> list[Path] | None:
        """The files of the workload (:mod:`sk_runner.trial.sources`), the session folder left out, listed once:
        :func:`~sk_runner.trial.engine.run_trial` asks before it makes the round's folder, so a source that is
        missing, a link loop or past the caps is refused with nothing created. None for the simulator without
        named sources (it is part of sk-tune: its version is in the environment)."""
        spec = self.spec
        if spec.sources is None and spec.backend.name == "sim":
            return None
        if self._workload_files is None:
            self._workload_files = source_files(self.workload_cwd, spec.sources, spec.backend.source_files(), skip=[spec.session])
        return self._workload_files

    def workload_sources(self) -> dict[str, str] | None:
        """SHA-256 of every file of the workload (:meth:`workload_files`); None where it names none."""
        files = self.workload_files()
        return None if files is None else source_hashes(files)

    def prepare_round(self, derived: DerivedConfig, seed: int) -> tuple[dict[str, Any], Path]:
        """Write (first time) or verify (resume) trial.json, config.json, config.diff.json.

        Before any process starts, the recorded identity (source, workload,
        controls, environment) must equal the round's own record on resume and
        the ``same_identity_as`` round's record for a new round (protocol §5.1:
        only the declared option may change); otherwise an environment blocker.
        """
        spec = self.spec
        identity = self.identity(derived, seed)
        trial_path = self.dir / "trial.json"
        config_path = self.dir / "config.json"
        fingerprints = TrialFingerprints(
            source_revision=source_revision(spec.backend.source_path(), spec.backend.source_files(), self.workload_sources()),
            config=derived.config,
            control=spec.control.to_json(),
            workload=spec.backend.workload(spec.control),
            environment=with_devices(spec.backend.environment(), self.lease) if spec.hosts is None
            else {**spec.backend.environment(), **spec.hosts.environment()},
        ).to_json()
        if trial_path.is_file():
            existing = load_json_file(trial_path)
            old = existing.get("identity") if isinstance(existing, dict) else None
            if old != identity:
                raise InputError(trial_path, f"round {spec.round} already holds a different trial (differs in {rerun_differences(old, identity)})",
                                 expected="the same base config, --set, backend, controls and seed to resume, or a new --round")
            if not config_path.is_file() or fingerprint(load_json_file(config_path)) != identity["trial_config_sha256"]:
                raise InputError(config_path, "trial config changed since the trial started", expected="the config written by sk-run trial")
            self.require_same_identity(trial_path, existing.get("fingerprints") or {}, fingerprints)
            return existing, config_path
        if spec.same_identity_as is not None:
            reference = spec.same_identity_as / "trial.json"
            self.require_same_identity(reference, load_json_file(reference).get("fingerprints") or {}, fingerprints)
        self.dir.mkdir(parents=True, exist_ok=True)
        write_json(config_path, derived.config)
        write_json(self.dir / "config.diff.json", derived.patch)
        record = {
            "schema_version": TRIAL_SCHEMA,
            "identity": identity,
            "base_config": str(spec.base_config.resolve()),
            "config_path": str(config_path.resolve()),
            "change_set": {
                "allowed_json_pointers": derived.allowed_pointers,
                "originals": list(derived.originals),
                "only_change_zh": (message("change_set.trial_only", "zh", pointers=", ".join(derived.allowed_pointers))
                                   if derived.allowed_pointers else message("change_set.trial_same", "zh")),
            },
            "fingerprints": fingerprints,
            "created_ns": time.time_ns(),
        }
        write_json(trial_path, record)  # last: a round with trial.json is fully prepared
        return record, config_path

    # -- processes -----------------------------------------------------------------
    @property
    def workload_cwd(self) -> Path:
        """Where every workload process of this trial starts (``--cwd``, else ours)."""
        return (self.spec.cwd or Path.cwd()).resolve()

    def child_env(self, contract_env: Mapping[str, str]) -> dict[str, str]:
        """The caller's environment without unclean switches, plus the lease's markers and device mask, plus the contract variables."""
        return {**lease_environ(self.lease, scrub_env(self.env)), **contract_env}

    def move_aside(self, folder: Path) -> Path | None:
        """An incomplete run folder (no meta.json) is kept, out of the way; where it went (None: there was none)."""
        return set_aside(self.dir, folder)


    def classify(self, result: ProcessResult, run_dir: Path, *, need_correctness: bool) -> RunOutcome:
        """ok, or the first failure (:func:`sk_runner.trial.outcome.classify`)."""
        return classify(result, run_dir, self.spec.control, need_correctness=need_correctness)

    def lease_record(self) -> dict[str, Any]:
        """The lease the trial's processes run under: this host's, or every host's of a multi-host trial; with
        ``proof``, the source of its clean-device proof (npu-smi, sim-registry: a simulated host, hosts: each
        host's own), and ``unleased`` where the user opted out of a lease (``--unleased``)."""
        record = run_lease_record(self.spec.hosts, self.lease)
        if record.get("mode") is not None and self.proof is not None:
            record["proof"] = getattr(getattr(self.proof, "source", None), "name", "hosts")
        if getattr(self.spec.lease, "unleased", False):
            record["unleased"] = True
        return record

    def execute(self, stage: str, run_dir: Path, config_path: Path, seed: int) -> tuple[RunRequest, list[str], ProcessResult]:
        request = RunRequest(config_path.resolve(), run_dir.resolve(), seed, self.spec.control)
        argv = self.spec.backend.argv(request)
        try:  # one group per host, started together, or one process here
            result = launch(self.spec.hosts, argv, cwd=self.workload_cwd, local_env=self.child_env(request.contract_env()),
                            contract_env=request.contract_env(), stdout_path=run_dir / "stdout.txt", stderr_path=run_dir / "stderr.txt",
                            timeout_s=self.spec.control.timeout_s)
        except EnvironmentBlocker as exc:
            moved_to = self.move_aside(run_dir)
            if isinstance(exc, EnvironmentFault) and moved_to is not None:
                exc.moved(run_dir, moved_to)  # the message names the stderr where the user finds it
            raise self.blocker(stage, exc) from exc
        return request, argv, result

    def execute_clean(self, run_dir: Path, run_name: str, config_path: Path, seed: int
                      ) -> tuple[RunRequest, list[str], ProcessResult, dict[str, Any] | None]:
        """One clean run proven to have had the leased devices to itself (the proof is None without a lease):
        a run that saw a foreign process is moved aside and made again (:mod:`sk_runner.devices.proof`)."""
        while True:
            proof = self.proof
            before = None if proof is None else self.device_check(partial(proof.before, run_name))
            request, argv, result = self.execute("clean", run_dir, config_path, seed)
            if proof is None or before is None:
                return request, argv, result, None
            after = self.device_check(proof.after)
            if after.clean:
                return request, argv, result, proof.record(before, after)
            moved = self.move_aside(run_dir)
            self.device_check(partial(proof.discard, run_name, before, after, moved))
            run_dir.mkdir(parents=True)

    def device_check(self, check: Callable[[], T]) -> T:
        """``check()``; a blocker it raises (a device that stays used, npu-smi missing) is recorded for this round."""
        try:
            return check()
        except EnvironmentBlocker as exc:
            raise self.blocker("clean", exc) from exc

    def meta(self, stage: str, run_name: str, request: RunRequest, argv: list[str], result: ProcessResult,
             outcome: RunOutcome, config_sha: str, trial_fp: str, device_proof: Mapping[str, Any] | None = None) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "schema_version": META_SCHEMA,
            "round": self.spec.round,
            "role": self.spec.role_name,
            "stage": stage,
            "run": run_name,
            "command": argv,
            "cwd": str(self.workload_cwd),
            "contract_env": request.contract_env(),
            "env_hash": _env_hash(self.child_env(request.contract_env()), result),
            "config_path": str(request.config_path),
            "config_sha256": config_sha,
            "seed": request.seed,
            "status": outcome.status,
            "process": result.to_json(),
            "rank_logs": outcome.logs,
            "correctness": outcome.correctness,
            "trial_fingerprint": trial_fp,
            "lease": self.lease_record(),
        }
        if device_proof is not None:
            meta["device_proof"] = dict(device_proof)
        meta["fingerprint"] = fingerprint(meta)
        return meta

    def ingest(self, run_dir: Path, run_name: str, run_index: int, meta: Mapping[str, Any], outcome: RunOutcome) -> None:
        """Timings (through the product's run-folder ingest, reusing the rank logs
        :meth:`classify` parsed) and the RUNS row into ``<session>/data``.

        A failed run gets no timings file: one left by an interrupted earlier attempt
        of the same run is removed (a file of no rows would claim timings it does not have;
        its RUNS row says why there are none).
        """
        data = self.spec.session / "data"
        part = {"round": self.spec.round, "role": self.spec.role_name, "run": run_name}
        if outcome.status == "ok":
            ingest_run_dir(run_dir, data, self.spec.round, self.spec.role_name, run_name, parsed=outcome.parsed)
        else:
            remove_table_file(TIMINGS, data, part)
        write_table(self.runs_row(run_index, meta), RUNS, data, part)

    @staticmethod
    def runs_row(run_index: int, meta: Mapping[str, Any]) -> pl.DataFrame:
        proc = meta["process"]
        return pl.DataFrame({
            "run_index": [run_index], "status": [meta["status"]], "exit_code": [proc["exit_code"]],
            "signal": [proc["signal"]], "timed_out": [proc["timed_out"]], "started_ns": [proc["started_ns"]],
            "ended_ns": [proc["ended_ns"]], "duration_s": [proc["duration_s"]], "config_sha256": [meta["config_sha256"]],
            "env_hash": [meta["env_hash"]], "fingerprint": [meta["fingerprint"]], "command": [json.dumps(meta["command"], ensure_ascii=False)],
        }, schema_overrides={"exit_code": pl.Int32, "signal": pl.Int32})

    def tell(self, stage: str, k: int, n: int, message: str) -> None:
        eta = None
        if self.durations and n >= k and stage != "done":
            eta = sum(self.durations) / len(self.durations) * (n - k + 1)
        self.progress(Progress(stage, k, n, time.monotonic() - self.t0, eta, message))


def _env_hash(child_env: Mapping[str, str], result: ProcessResult) -> str:
    """The run's environment hash: of this host's child environment, or of every host's for a multi-host run."""
    groups = getattr(result, "groups", ())
    return fingerprint([g.get("env_hash") for g in groups]) if groups else env_hash(child_env)
