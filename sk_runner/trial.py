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

A run is complete only when its ``meta.json`` exists; it is written atomically
and last, after the run's timings and RUNS row were ingested into
``<session>/data/``. Re-running the same trial continues with the missing runs;
``top_up_to`` adds runs to exactly that count, keeping the earlier ones.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import polars as pl
from filelock import FileLock, Timeout

from sk_analytics.atomic import write_json
from sk_analytics.errors import EnvironmentBlocker, InputError, UsageError
from sk_analytics.stage_o.identity import identity_differences
from sk_analytics.fingerprint import fingerprint, sha256_file
from sk_analytics.ingest.base import ParseResult
from sk_analytics.ingest.collect import ingest_run_dir
from sk_analytics.ingest.timings import parse_rank_logs
from sk_analytics.schema import RUNS, TIMINGS
from sk_analytics.strict_json import load_json_file
from sk_analytics.tables import write_table
from sk_runner.backends.base import Backend, Control, RunRequest
from sk_runner.config import (
    DerivedConfig,
    PointerChange,
    derive_config,
    load_config,
    options_pointer_of,
    refuse_debug_options,
    refuse_dirty_env,
    resolve,
    scrub_env,
)
from sk_runner.fingerprint import TrialFingerprints, env_hash, source_revision
from sk_runner import lifetime
from sk_runner.probe import runtime_check
from sk_runner.process import ProcessResult, run_process
from sk_runner.scene import SceneRecord, record_blocker, seal_scene

TRIAL_SCHEMA = "sk-tune-trial-v1"
META_SCHEMA = "sk-tune-run-meta-v1"
ROUND_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
MIN_TRIAL_RUNS = 3
LOCK_NAME = ".sk-run.lock"
"""One sk-run at a time per round (an OS file lock: released even on SIGKILL)."""


def round_dir_of(session: Path, round_name: str) -> Path:
    """``<session>/experiments/Sbest/<round>``."""
    return Path(session) / "experiments" / "Sbest" / round_name


def derive_seed(session_seed: int, round_name: str, run: str) -> int:
    """Deterministic per-run seed (a resumed trial reproduces its seeds)."""
    return int(fingerprint({"seed": session_seed, "round": round_name, "run": run})[:8], 16)


@dataclass(frozen=True)
class TrialSpec:
    """What to run. ``changes=()`` with ``incumbent=True`` copies the base config (O0)."""

    session: Path
    round: str
    base_config: Path
    backend: Backend
    changes: tuple[PointerChange, ...] = ()
    joint_dcci: bool = False
    incumbent: bool = False
    runs: int = MIN_TRIAL_RUNS
    top_up_to: int | None = None
    control: Control = field(default_factory=Control)
    role: str | None = None
    seed: int | None = None
    cwd: Path | None = None
    env: Mapping[str, str] | None = None
    rerun_command: tuple[str, ...] = ()
    same_identity_as: Path | None = None
    """Round folder whose recorded source/workload/controls/environment this trial must share."""

    @property
    def target_runs(self) -> int:
        return self.top_up_to if self.top_up_to is not None else self.runs

    @property
    def role_name(self) -> str:
        return self.role or ("baseline" if self.incumbent else "trial")


@dataclass(frozen=True)
class Progress:
    """One progress event: ``stage`` (probe/correctness/clean), run k of n, timing."""

    stage: str
    k: int
    n: int
    elapsed_s: float
    eta_s: float | None
    message: str


@dataclass
class TrialResult:
    """Outcome of :func:`run_trial` (``status`` ok or failed; blockers raise)."""

    round: str
    round_dir: Path
    status: str
    outcome: str
    message: str
    runs_completed: list[int]
    runs_target: int
    new_runs: list[int]
    correctness: str
    config_path: Path
    config_sha256: str
    trial_fingerprint: str
    scene_dir: Path | None = None

    @property
    def exit_code(self) -> int:
        return 0 if self.status == "ok" else 1

    def to_json(self) -> dict[str, Any]:
        return {
            "round": self.round,
            "round_dir": str(self.round_dir),
            "status": self.status,
            "outcome": self.outcome,
            "message": self.message,
            "runs_completed": self.runs_completed,
            "runs_target": self.runs_target,
            "new_runs": self.new_runs,
            "correctness": self.correctness,
            "config_path": str(self.config_path),
            "config_sha256": self.config_sha256,
            "trial_fingerprint": self.trial_fingerprint,
            "clean_dir": str(self.round_dir / "CLEAN"),
            "scene_dir": None if self.scene_dir is None else str(self.scene_dir),
        }


@dataclass
class RunOutcome:
    """Classification of one finished process."""

    status: str  # ok | crash | timeout | wrong_output | bad_logs
    message: str
    logs: list[dict[str, Any]] = field(default_factory=list)
    correctness: dict[str, Any] | None = None
    parsed: dict[Path, ParseResult] = field(default_factory=dict)
    """The validated rank logs' timings, handed to the ingest so each log is parsed once."""


ProgressFn = Callable[[Progress], None]


class _Trial:
    """State of one invocation of :func:`run_trial`."""

    def __init__(self, spec: TrialSpec, progress: ProgressFn | None) -> None:
        self.spec = spec
        self.progress = progress or (lambda event: None)
        self.dir = round_dir_of(spec.session, spec.round)
        self.env = dict(os.environ if spec.env is None else spec.env)
        self.t0 = time.monotonic()
        self.durations: list[float] = []

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
        if not spec.session.is_dir():
            raise InputError(spec.session, "session folder not found", expected="an existing session directory")
        if spec.cwd is not None and not Path(spec.cwd).is_dir():
            raise InputError(spec.cwd, "working directory not found", expected="an existing folder for --cwd")
        spec.control.check()

    def blocker(self, stage: str, exc: EnvironmentBlocker) -> EnvironmentBlocker:
        record_blocker(self.dir, round_name=self.spec.round, stage=stage, message=exc.one_line())
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
            raise self.blocker("identity", EnvironmentBlocker(
                f"{recorded_in}: this process would run with another {', '.join(differences)} than recorded there; "
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
        derived = derive_config(base, spec.changes, joint_dcci=spec.joint_dcci, source=spec.base_config)
        refuse_debug_options(derived.config, f"--set {', '.join(derived.allowed_pointers)}")
        for change in spec.changes:
            if options_pointer_of(change) is None:
                raise UsageError(f"--set {change.pointer}: Stage O trials change an SK option (a pointer inside super_kernel_optimize_options)")
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
            source_revision=source_revision(spec.backend.source_path()),
            config=derived.config,
            control=spec.control.to_json(),
            workload=spec.backend.workload(spec.control),
            environment=spec.backend.environment(),
        ).to_json()
        if trial_path.is_file():
            existing = load_json_file(trial_path)
            old = existing.get("identity") if isinstance(existing, dict) else None
            if old != identity:
                differ = sorted(k for k in identity if not isinstance(old, dict) or old.get(k) != identity[k])
                raise InputError(trial_path, f"round {spec.round} already holds a different trial (differs in {', '.join(differ)})",
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
                "only_change_zh": (f"仅改变 {', '.join(derived.allowed_pointers)}，其余（范围、源码、负载、精度、TP、缓存、预热、设备、运行控制）不变"
                                   if derived.allowed_pointers else "与 incumbent 完全相同的配置副本（无新选项）"),
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
        """The caller's environment without unclean switches, plus the contract variables."""
        return {**scrub_env(self.env), **contract_env}

    def move_aside(self, folder: Path) -> None:
        """An incomplete run folder (no meta.json) is kept, out of the way."""
        if folder.exists():
            dest = self.dir / "INCOMPLETE" / f"{folder.name}-{time.time_ns()}"
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(folder), str(dest))

    def classify(self, result: ProcessResult, run_dir: Path, *, need_correctness: bool) -> RunOutcome:
        """ok, or the first failure: timeout, crash, wrong output, bad logs."""
        if result.timed_out:
            return RunOutcome("timeout", f"no exit within {self.spec.control.timeout_s} s: process group terminated")
        if result.signal is not None:
            return RunOutcome("crash", f"killed by {result.signal_name}")
        if result.exit_code != 0:
            return RunOutcome("crash", f"exit status {result.exit_code}")
        correctness = None
        corr_path = run_dir / "correctness.json"
        if corr_path.is_file():
            try:
                correctness = load_json_file(corr_path)
            except InputError as exc:
                return RunOutcome("bad_logs", f"correctness.json unreadable: {exc.one_line()}")
            if not isinstance(correctness, dict) or not isinstance(correctness.get("passed"), bool):
                return RunOutcome("bad_logs", "correctness.json has no boolean 'passed'")
            if correctness["passed"] is not True:
                return RunOutcome("wrong_output", "correctness.json reports passed=false", correctness=correctness)
        elif need_correctness:
            return RunOutcome("bad_logs", "correctness.json missing")
        paths = [run_dir / f"log_{rank}.log" for rank in range(self.spec.control.ranks)]
        missing = next((path for path in paths if not path.is_file()), None)
        present = paths if missing is None else paths[:paths.index(missing)]
        try:  # one vectorized parse, root as ingest_run_dir gives it: the ingest reuses it
            parsed = dict(zip(present, parse_rank_logs(present, root=run_dir)))
        except InputError as exc:
            return RunOutcome("bad_logs", f"rank log unparsable: {exc.one_line()}", correctness=correctness)
        logs = []
        for path, timings in parsed.items():
            decode = timings.frame.filter(pl.col("phase") == "decode").height
            if decode <= self.spec.control.warmup:
                return RunOutcome("bad_logs", f"{path.name} has {decode} decode samples, not more than warm-up {self.spec.control.warmup}",
                                  correctness=correctness)
            logs.append({"file": path.name, "sha256": sha256_file(path), "decode_samples": decode,
                         "prefill_samples": timings.frame.height - decode})
        if missing is not None:
            return RunOutcome("bad_logs", f"rank log {missing.name} missing", correctness=correctness)
        return RunOutcome("ok", "ok", logs, correctness, parsed)

    def execute(self, stage: str, run_dir: Path, config_path: Path, seed: int) -> tuple[RunRequest, list[str], ProcessResult]:
        request = RunRequest(config_path.resolve(), run_dir.resolve(), seed, self.spec.control)
        argv = self.spec.backend.argv(request)
        try:
            result = run_process(argv, cwd=self.workload_cwd, env=self.child_env(request.contract_env()), stdout_path=run_dir / "stdout.txt",
                                 stderr_path=run_dir / "stderr.txt", timeout_s=self.spec.control.timeout_s)
        except EnvironmentBlocker as exc:
            self.move_aside(run_dir)
            raise self.blocker(stage, exc) from exc
        return request, argv, result

    def meta(self, stage: str, run_name: str, request: RunRequest, argv: list[str], result: ProcessResult,
             outcome: RunOutcome, config_sha: str, trial_fp: str) -> dict[str, Any]:
        meta: dict[str, Any] = {
            "schema_version": META_SCHEMA,
            "round": self.spec.round,
            "role": self.spec.role_name,
            "stage": stage,
            "run": run_name,
            "command": argv,
            "cwd": str(self.workload_cwd),
            "contract_env": request.contract_env(),
            "env_hash": env_hash(self.child_env(request.contract_env())),
            "config_path": str(request.config_path),
            "config_sha256": config_sha,
            "seed": request.seed,
            "status": outcome.status,
            "process": result.to_json(),
            "rank_logs": outcome.logs,
            "correctness": outcome.correctness,
            "trial_fingerprint": trial_fp,
        }
        meta["fingerprint"] = fingerprint(meta)
        return meta

    def ingest(self, run_dir: Path, run_name: str, run_index: int, meta: Mapping[str, Any], outcome: RunOutcome) -> None:
        """Timings (through the product's run-folder ingest, reusing the rank logs
        :meth:`classify` parsed) and the RUNS row into ``<session>/data``.

        A failed run gets an empty timings partition, replacing any left by an
        interrupted earlier attempt of the same run.
        """
        data = self.spec.session / "data"
        part = {"round": self.spec.round, "role": self.spec.role_name, "run": run_name}
        if outcome.status == "ok":
            ingest_run_dir(run_dir, data, self.spec.round, self.spec.role_name, run_name, parsed=outcome.parsed)
        else:
            write_table(pl.DataFrame(schema=TIMINGS.schema), TIMINGS, data, part)
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


def complete_runs(round_dir: Path) -> list[int]:
    """Indices k of ``CLEAN/run-<k>`` folders holding a meta.json."""
    clean = round_dir / "CLEAN"
    if not clean.is_dir():
        return []
    out = [int(p.name[4:]) for p in clean.glob("run-*") if p.name[4:].isdigit() and (p / "meta.json").is_file()]
    return sorted(out)


class _Round:
    """One prepared trial round: the steps probe -> correctness -> clean runs."""

    def __init__(self, trial: _Trial, derived: DerivedConfig, seed: int) -> None:
        """Prepare (or verify, on resume) the round; call while holding its lock."""
        spec = trial.spec
        self.trial, self.spec = trial, spec
        self.derived, self.seed = derived, seed
        self.record, self.config_path = trial.prepare_round(derived, seed)
        self.config_sha = sha256_file(self.config_path)
        self.trial_fp: str = self.record["fingerprints"]["trial_fingerprint"]
        self.target = spec.target_runs
        done = complete_runs(trial.dir)
        if spec.top_up_to is not None and len(done) > spec.top_up_to:
            raise UsageError(f"round {spec.round} already has {len(done)} clean runs, more than --top-up-to {spec.top_up_to}")
        self.new: list[int] = []

    def result(self, status: str, outcome: str, message: str, correctness: str, scene: Path | None = None) -> TrialResult:
        return TrialResult(self.spec.round, self.trial.dir, status, outcome, message, complete_runs(self.trial.dir), self.target,
                           self.new, correctness, self.config_path, self.config_sha, self.trial_fp, scene)

    def gate_progress(self, correctness: str, last: str) -> dict[str, Any]:
        probe = "ready" if self.spec.incumbent or (self.trial.dir / "probe.json").is_file() else "not_ready"
        return {"correctness": correctness, "clean_runs_completed": complete_runs(self.trial.dir),
                "clean_runs_target": self.target, "probe": probe, "last_gate_passed": last}

    def seal(self, stage: str, run_name: str, outcome: str, message: str, argv: list[str], contract_env: Mapping[str, str],
             proc: ProcessResult | None, raw: Path, config: Path, correctness: str, last: str) -> Path:
        """Seal the failure scene of a started command (before any rollback)."""
        spec = self.spec
        rec = SceneRecord(
            session=spec.session, round=spec.round, stage=stage, run=run_name, outcome=outcome, message=message,
            argv=argv, cwd=self.trial.workload_cwd, contract_env=contract_env,
            env_hash=env_hash(self.trial.child_env(contract_env)), config_path=config,
            config_sha256=sha256_file(config), config_diff=self.derived.patch, timeout_s=spec.control.timeout_s,
            backend=spec.backend.name, process=proc, raw_dir=raw, stdout_path=raw / "stdout.txt", stderr_path=raw / "stderr.txt",
            fingerprints=self.record["fingerprints"], gate_progress=self.gate_progress(correctness, last),
            incumbent_config=spec.base_config.resolve(), incumbent_sha256=sha256_file(spec.base_config),
            rerun_command=list(spec.rerun_command),
        )
        return seal_scene(self.trial.dir, rec)

    def probe(self) -> TrialResult | None:
        """Exact-value probe of the changed option(s); None when ready."""
        spec, trial = self.spec, self.trial
        if spec.incumbent or (trial.dir / "probe.json").is_file():
            return None
        options = {}
        for change in spec.changes:
            where = options_pointer_of(change)
            assert where is not None  # derive() refused pointers outside an option map
            options[where[1]] = resolve(self.derived.config, where[0])
        verdicts = {name: spec.backend.wrapper_check(name, value) for name, value in options.items()}
        rejected = [v.reason for v in verdicts.values() if not v.accepted]
        if rejected:  # nothing started: an environment blocker, not a scene
            raise trial.blocker("probe", EnvironmentBlocker(f"wrapper rejects the exact value: {'; '.join(rejected)}"))
        trial.tell("probe", 1, 1, "exact-value probe")
        check = runtime_check(options, spec.backend, out_dir=trial.dir / "PROBE", config=self.derived.config, env=trial.env,
                              seed=derive_seed(self.seed, spec.round, "probe"), control=spec.control)
        if check.status != "accepted":
            proc = check.process
            outcome = {"invalid_default": "invalid_value", "no_evidence": "bad_logs"}.get(
                check.status, "timeout" if proc is not None and proc.timed_out else "crash")
            scene = self.seal("probe", "PROBE", outcome, check.reason, check.argv, check.contract_env, proc,
                              check.attempt_dir, check.config_path, "not_run", "none")
            return self.result("failed", outcome, check.reason, "not_run", scene)
        write_json(trial.dir / "probe.json", {"ready": True, "options": options,
                                              "wrapper": {k: v.to_json() for k, v in verdicts.items()}, "runtime": check.to_json()})
        return None

    def correctness(self) -> TrialResult | None:
        """Full inference + correctness (once); None when passed."""
        trial = self.trial
        corr_dir = trial.dir / "CORRECTNESS"
        if (corr_dir / "meta.json").is_file():
            return None
        trial.move_aside(corr_dir)
        corr_dir.mkdir(parents=True)
        trial.tell("correctness", 1, 1, "full inference + correctness")
        seed = derive_seed(self.seed, self.spec.round, "correctness")
        request, argv, proc = trial.execute("correctness", corr_dir, self.config_path, seed)
        outcome = trial.classify(proc, corr_dir, need_correctness=True)
        if outcome.status != "ok":
            scene = self.seal("correctness", "CORRECTNESS", outcome.status, outcome.message, argv, request.contract_env(),
                              proc, corr_dir, self.config_path, "failed", "none" if self.spec.incumbent else "probe")
            trial.move_aside(corr_dir)
            return self.result("failed", outcome.status, outcome.message, "failed", scene)
        meta = trial.meta("correctness", "CORRECTNESS", request, argv, proc, outcome, self.config_sha, self.trial_fp)
        write_json(corr_dir / "meta.json", meta)
        return None

    def clean_runs(self) -> TrialResult:
        """Clean runs 1..target, one fresh process each; complete ones are kept."""
        trial, target = self.trial, self.target
        done = complete_runs(trial.dir)
        for k in (k for k in range(1, target + 1) if k not in done):
            run_name = f"run-{k}"
            run_dir = trial.dir / "CLEAN" / run_name
            trial.move_aside(run_dir)
            run_dir.mkdir(parents=True)
            trial.tell("clean", k, target, f"clean run {k} of {target}")
            started = time.monotonic()
            request, argv, proc = trial.execute("clean", run_dir, self.config_path, derive_seed(self.seed, self.spec.round, run_name))
            outcome = trial.classify(proc, run_dir, need_correctness=False)
            meta = trial.meta("clean", run_name, request, argv, proc, outcome, self.config_sha, self.trial_fp)
            if outcome.status != "ok":
                trial.ingest(run_dir, run_name, k, meta, outcome)
                scene = self.seal("clean", run_name, outcome.status, outcome.message, argv, request.contract_env(), proc,
                                  run_dir, self.config_path, "passed", "correctness")
                trial.move_aside(run_dir)
                return self.result("failed", outcome.status, f"{run_name}: {outcome.message}", "passed", scene)
            trial.ingest(run_dir, run_name, k, meta, outcome)
            write_json(run_dir / "meta.json", meta)  # last: the run is complete
            trial.durations.append(time.monotonic() - started)
            self.new.append(k)
        trial.tell("done", target, target, f"{target} clean runs complete")
        return self.result("ok", "ok", f"{len(complete_runs(trial.dir))} clean runs complete", "passed")


def run_trial(spec: TrialSpec, progress: ProgressFn | None = None) -> TrialResult:
    """Run (or resume, or top up) one trial: probe, correctness, clean runs.

    Returns ``status`` ok, or failed with the sealed scene. Raises
    InputError/UsageError for bad input and EnvironmentBlocker (also recorded
    in ``environment-blockers.jsonl``) when nothing could start.
    """
    spec = replace(spec, session=Path(spec.session).resolve(), base_config=Path(spec.base_config).resolve())
    trial = _Trial(spec, progress)
    trial.validate()
    trial.check_environment()
    derived = trial.derive()
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
        lifetime.attach(spec.session)  # survivors of an earlier sk-run on this session die before anything starts
        steps = _Round(trial, derived, seed)
        return steps.probe() or steps.correctness() or steps.clean_runs()
    finally:
        lock.release()


__all__ = ["Progress", "TrialResult", "TrialSpec", "complete_runs", "derive_seed", "round_dir_of", "run_trial"]
