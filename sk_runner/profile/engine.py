"""``sk-run profile``: one diagnostic profile collection under the artifact contract.

Protocol §6: before the profiling command starts, ``begin`` runs on a *new*
empty profile root; the same runner finalizes it with the producer's pid and
times; a collection whose ``super_kernel.log`` reports a full sk_prof buffer
is child-incomplete and is re-collected into another new root with a shorter
window (fewer iterations), never reusing the old root. Any failed check
leaves the collection *blocked* with its reason; nothing downstream may use it.

Layout (outside the roots nothing is ever overwritten)::

    <session>/experiments/Sbest/<round>/diag/<role>/
        attempt-<n>/                  the capture root (producer output only)
        attempt-<n>.session.json      session record (begin)
        attempt-<n>.config.json       frozen copy of the execution config
        attempt-<n>.stdout.log/.stderr.log
        attempt-<n>.json              what happened to this attempt
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from sk_analytics.contract import (
    BASELINE_PROFILE,
    CANDIDATE_PROFILE,
    ProducerInfo,
    begin,
    command_fingerprint,
    finalize,
    fold_aliases,
    normalize_workload,
)
from sk_analytics.contract.rules import ContractInputError, ContractIntegrityError
from sk_analytics.errors import EnvironmentBlocker, InputError, UsageError
from sk_analytics.files.atomic import write_json
from sk_analytics.fingerprint import fingerprint
from sk_analytics.messages import coded, text
from sk_runner.backends.base import Backend, Control, RunRequest, at_workdir
from sk_runner.config import load_config, scrub_env
from sk_runner.devices.lease import HeldLease, LeaseLike, hold, lease_environ
from sk_runner.fingerprint import source_revision
from sk_runner.hosts.base import Hosts, launch, ranks_problem, run_lease_record
from sk_runner.probe.evidence import WORK_PATH_ENV
from sk_runner.process import ProcessResult, lifetime
from sk_runner.process.attempts import new_attempt_dir
from sk_runner.process.session import require_session
from sk_runner.process.stderr_tail import stderr_words
from sk_runner.profile.defaults import DEFAULT_MAX_ATTEMPTS, DEFAULT_PROFILE_ITERATIONS, DEFAULT_SK_PROF_KB, MAX_SK_PROF_KB
from sk_runner.trial import ROUND_NAME, round_dir_of
from sk_runner.trial.outcome import read_rank_logs

MIN_POST_WARMUP = 3
"""Per-SK alignment needs at least three post-warm-up occurrences (protocol §6)."""

ProgressFn = Callable[[str], None]


EXPORT_TYPES = ("text", "db")
"""torch_npu profiler export: ``text`` (kernel_details.csv, trace_view.json, …) or ``db``
(``ascend_pytorch_profiler_<rank>.db``)."""
EXPORT_ENV = "SK_RUN_PROFILE_EXPORT"


def profile_env(sk_prof_kb: int, export_type: str = "text") -> dict[str, str]:
    """The profiling switches of a diagnostic collection (formats.md §3-§5); the
    export type is passed as ``SK_RUN_PROFILE_EXPORT`` when it is not the default text."""
    if not 1 <= sk_prof_kb <= MAX_SK_PROF_KB:
        raise UsageError(f"--sk-prof-kb {sk_prof_kb}: expected 1..{MAX_SK_PROF_KB} KB per core")
    if export_type not in EXPORT_TYPES:
        raise UsageError(f"--export-type {export_type}: expected {' or '.join(EXPORT_TYPES)}")
    switches = {"ASCEND_PROF_SK_ON": str(sk_prof_kb), "ASCEND_OP_COMPILE_SAVE_KERNEL_META": "1", "SK_RUN_PROFILE": "1"}
    return switches | ({EXPORT_ENV: export_type} if export_type != "text" else {})


def shorter_window(iterations: int, warmup: int) -> int | None:
    """Iterations of the next collection after a full sk_prof buffer: half the
    window, but never below warm-up + 3; None when it cannot get shorter."""
    floor = warmup + MIN_POST_WARMUP
    proposal = max(floor, iterations // 2)
    return proposal if proposal < iterations else None


def revision_text(record: Mapping[str, Any]) -> str:
    """One-string source revision of :func:`sk_runner.fingerprint.source_revision`:
    the workload folder's git tree (its committed content) plus the hash of any
    uncommitted diff there."""
    if record.get("kind") == "git":
        dirty = f"+dirty:{record['dirty_sha256'][:16]}" if record.get("dirty") else ""
        return f"git-tree:{record['tree']}{dirty}"
    if record.get("kind") == "files":  # no git: the files the command names, by content
        return f"files:{fingerprint(record['files'])[:16]}"
    return f"unversioned:{record.get('path', '?')}"


def profile_workload(backend_workload: Mapping[str, Any], user: Mapping[str, Any], control: Control) -> dict[str, Any]:
    """Workload identity of a collection: the backend's description, the user's
    fields on top, and the run controls (iterations, warm-up, ranks) that the
    collection really used. A user value contradicting a control is refused."""
    mine = fold_aliases(dict(user), "--workload")
    merged = {k: v for k, v in fold_aliases(dict(backend_workload)).items() if v is not None}
    merged.update(mine)
    for name, value in (("iterations", control.iterations), ("warmup", control.warmup), ("rank", control.ranks)):
        if name in mine and mine[name] != value:
            raise UsageError(f"--workload says {name}={mine[name]!r} but the collection runs {name}={value!r}")
        merged[name] = value
    return normalize_workload(merged, "--workload")


@dataclass(frozen=True)
class ProfileSpec:
    """What to collect: one role of one round, with the exact config."""

    session: Path
    round: str
    role: str
    config: Path
    backend: Backend
    control: Control = field(default_factory=lambda: Control(iterations=DEFAULT_PROFILE_ITERATIONS))
    workload: Mapping[str, Any] = field(default_factory=dict)
    sk_prof_kb: int = DEFAULT_SK_PROF_KB
    export_type: str = "text"
    """Profiler export type (:data:`EXPORT_TYPES`)."""
    require_sk_prof: bool | None = None
    """None: required for baseline_profile/candidate_profile (DCCI child attribution)."""
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    seed: int = 0
    env: Mapping[str, str] | None = None
    ingest: bool = True
    lease: LeaseLike = None
    """The device lease: held by the caller (a sweep: both sides of a DCCI pair inside one lease), taken for this collection, or None."""
    hosts: Hosts | None = None
    """The hosts of a multi-host collection (every host's group writes into the one capture root; each host's lease held there)."""
    lang: str = "en"
    """The language of the progress lines (the attempt records keep both: ``reason``, ``reason_zh``)."""
    cwd: Path | None = None
    """Working directory of the producer (None: ours), the same as for every process of the workload's trials;
    ``ASCEND_WORK_PATH`` points CANN's cwd-relative output into the capture root instead."""

    @property
    def sk_prof_required(self) -> bool:
        if self.require_sk_prof is not None:
            return self.require_sk_prof
        return self.role in (BASELINE_PROFILE, CANDIDATE_PROFILE)

    @property
    def diag_dir(self) -> Path:
        return round_dir_of(self.session, self.round) / "diag" / self.role


@dataclass(frozen=True)
class AttemptRecord:
    """One collection attempt: its own root, window and outcome."""

    attempt: int
    root: str
    iterations: int
    status: str
    """``complete``, ``child_incomplete`` (sk_prof buffer full) or ``blocked``."""
    reason: str
    reason_zh: str
    session_fingerprint: str | None = None
    manifest_fingerprint: str | None = None
    argv: list[str] = field(default_factory=list)
    producer: dict[str, Any] | None = None
    buffer_full: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class ProfileResult:
    """Outcome of :func:`collect_profile` (``status`` ``complete`` or ``blocked``)."""

    status: str
    role: str
    round: str
    root: str | None
    manifest_fingerprint: str | None
    iterations: int | None
    reason: str
    reason_zh: str
    attempts: tuple[AttemptRecord, ...]
    ingest: dict[str, Any] | None = None
    """Rows per Parquet table and files written by the ingest of the complete collection; None when nothing was
    ingested (``--no-ingest``, a blocked collection): ``{}`` would read as an ingest that found nothing."""

    @property
    def ok(self) -> bool:
        return self.status == "complete"

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["attempts"] = [a.to_json() for a in self.attempts]
        return data


def buffer_full_lines(manifest: Mapping[str, Any], root: Path) -> list[str]:
    """``super_kernel.log`` files of the collection that report a full sk_prof buffer."""
    from sk_analytics.ingest.super_kernel_log import is_child_trace_complete, parse_super_kernel_log

    return [
        rec["path"]
        for rec in manifest["files"].get("super_kernel", [])
        if not is_child_trace_complete(parse_super_kernel_log(root / rec["path"], root=root).frame)
    ]


def _ingest(spec: ProfileSpec, root: Path) -> dict[str, Any]:
    """Ingest the sealed root into ``<session>/data`` as round/role/run = round/role/attempt-<n>."""
    from sk_analytics.ingest import ingest_run_dir
    from sk_analytics.ingest.sources import sealed_hashes

    # the traces were hashed a moment ago at finalize: the source records of sk_events reuse those digests
    report = ingest_run_dir(root, spec.session / "data", spec.round, spec.role, root.name, hashes=sealed_hashes(root))
    return {"rows_by_table": report.rows_by_table(), "written": sorted(p.as_posix() for p in report.written),
            "warnings": report.warnings}


def _both(msg_id: str, **facts: Any) -> tuple[str, str]:
    """(English, Chinese) of a message: an attempt record keeps both (``reason``, ``reason_zh``, docs/contract.md)."""
    return text(msg_id, "en", **facts), text(msg_id, "zh", **facts)


def _producer_failure(result: ProcessResult) -> tuple[str, str] | None:
    if result.timed_out:
        return _both("profile.timed_out", seconds=result.duration_s)
    if result.signal is not None:
        return _both("profile.killed", signal=result.signal_name)
    if result.exit_code != 0:
        return _both("profile.exited", code=result.exit_code)
    return None


class _Collector:
    """Runs the attempts of one :class:`ProfileSpec`."""

    def __init__(self, spec: ProfileSpec, progress: ProgressFn | None, lease: HeldLease | None = None) -> None:
        self.spec = spec
        self.progress = progress or (lambda _m: None)
        self.config = load_config(spec.config)
        self.lease = lease
        self.env = lease_environ(lease, os.environ if spec.env is None else spec.env)
        self.switches = profile_env(spec.sk_prof_kb, spec.export_type)
        self.revision = revision_text(source_revision(spec.backend.source_path(), spec.backend.source_files()))

    def control_record(self) -> dict[str, Any]:
        c = self.spec.control
        return {
            "round": self.spec.round,
            "backend": self.spec.backend.identity(),
            "ranks": c.ranks,
            "warmup": c.warmup,
            "timeout_s": c.timeout_s,
            "seed": self.spec.seed,
            "profile_env": self.switches,
        }

    def attempt(self, iterations: int) -> AttemptRecord:
        spec = self.spec
        control = replace(spec.control, iterations=iterations)
        # an incomplete workload identity fails here, before any root exists
        workload = profile_workload(spec.backend.workload(control), spec.workload, control)
        n, root = new_attempt_dir(spec.diag_dir)
        stem = spec.diag_dir / f"attempt-{n}"
        session_path = stem.with_name(f"attempt-{n}.session.json")
        config_path = stem.with_name(f"attempt-{n}.config.json")
        write_json(config_path, self.config)
        request = RunRequest(
            config_path=config_path, run_dir=root, seed=spec.seed, control=control,
            extra_env={"SK_RUN_ITERATIONS": str(iterations), "SK_RUN_WARMUP": str(control.warmup), **self.switches},
        )
        argv = spec.backend.argv(request)
        session = begin(spec.role, root, session_path)
        base = AttemptRecord(n, str(root), iterations, "running", "", "", session["session_fingerprint"], argv=argv)
        self.progress(text("profile.progress_start", spec.lang, role=spec.role, n=n, iterations=iterations, root=root))
        contract_env = {**request.contract_env(), WORK_PATH_ENV: str(request.run_dir)}
        workdir = (spec.cwd or Path.cwd()).resolve()
        try:  # on hosts: every host's ranks under one manifest (the root is on the session's storage)
            result = launch(spec.hosts, argv, cwd=workdir, local_env={**scrub_env(self.env), **contract_env}, contract_env=contract_env,
                            stdout_path=stem.with_name(f"attempt-{n}.stdout.log"), stderr_path=stem.with_name(f"attempt-{n}.stderr.log"),
                            timeout_s=control.timeout_s)
        except EnvironmentBlocker as exc:
            en, zh = _both("profile.cannot_start", detail=exc.one_line())
            self.record(replace(base, status="blocked", reason=en, reason_zh=zh))
            raise
        base = replace(base, producer=result.to_json())
        failure = _producer_failure(result)
        if failure is not None:
            return replace(base, status="blocked", reason=failure[0], reason_zh=failure[1])
        logs = read_rank_logs(root, control)  # the trial's check: a rank that ended early is a crash, whatever the exit status
        if logs.problem is not None:
            status, detail = logs.problem
            if status == "crash":
                detail = coded("logs.with_tail", problem=detail, tail=stderr_words(stem.with_name(f"attempt-{n}.stderr.log")))
            en, zh = _both("profile.rank_logs", status=status, detail=detail)
            return replace(base, status="blocked", reason=en, reason_zh=zh)
        try:
            manifest = finalize(
                session_path, source_revision=self.revision, config=self.config, control=self.control_record(),
                workload=workload,
                producer=ProducerInfo(result.pid, result.started_ns, result.ended_ns, command_fingerprint(argv)),
                require_sk_prof=spec.sk_prof_required,
            )
        except (ContractInputError, ContractIntegrityError) as exc:
            en, zh = _both("profile.contract", rule=exc.rule, detail=exc.one_line())
            return replace(base, status="blocked", reason=en, reason_zh=zh)
        base = replace(base, manifest_fingerprint=manifest["manifest_fingerprint"])
        try:
            full = buffer_full_lines(manifest, root)
        except InputError as exc:
            en, zh = _both("profile.log_unreadable", detail=exc.one_line())
            return replace(base, status="blocked", reason=en, reason_zh=zh)
        if full:
            en, zh = _both("profile.buffer_full", lines=", ".join(full))
            return replace(base, status="child_incomplete", buffer_full=full, reason=en, reason_zh=zh)
        en, zh = _both("profile.complete")
        return replace(base, status="complete", reason=en, reason_zh=zh)

    def record(self, attempt: AttemptRecord) -> None:
        # attempt numbers are allocated by an exclusive mkdir, so this name is new
        target = self.spec.diag_dir / f"attempt-{attempt.attempt}.json"
        lease = run_lease_record(self.spec.hosts, self.lease)
        write_json(target, {"role": self.spec.role, "round": self.spec.round, **attempt.to_json(), "lease": lease})
        self.progress(text("profile.progress_done", self.spec.lang, role=self.spec.role, n=attempt.attempt,
                           status=coded(f"profile.status_{attempt.status}"),
                           reason=attempt.reason_zh if self.spec.lang == "zh" else attempt.reason))


def collect_profile(spec: ProfileSpec, progress: ProgressFn | None = None) -> ProfileResult:
    """Collect one diagnostic profile for ``spec.role``; re-collect into new
    roots with shorter windows while the sk_prof buffer overflows.

    ``spec.control.iterations`` None means :data:`DEFAULT_PROFILE_ITERATIONS`.
    Both sides of a pair see the same launches, so they overflow alike; when
    they still end with different windows, ``validate_set`` refuses the pair
    and the caller re-collects the longer side with the shorter window.
    Every attempt runs inside ``spec.lease`` (:func:`sk_runner.devices.lease.hold`).
    """
    problem = ranks_problem(spec.hosts, spec.lease, spec.control.ranks)
    if problem is not None:
        raise UsageError(problem)
    with hold(spec.lease, env=os.environ if spec.env is None else spec.env, session=spec.session) as lease:
        return _collect(spec, progress, lease)


def _collect(spec: ProfileSpec, progress: ProgressFn | None, lease: HeldLease | None) -> ProfileResult:
    """The attempts of :func:`collect_profile`, inside its lease."""
    if not ROUND_NAME.match(spec.round):
        raise UsageError(f"--round {spec.round!r}: expected letters, digits, '_', '.', '-'")
    spec.control.check()
    backend, cwd = at_workdir(spec.backend, spec.cwd)  # the producer runs where the workload's trials run
    spec = replace(spec, backend=backend, cwd=cwd)
    first_window = spec.control.iterations if spec.control.iterations is not None else DEFAULT_PROFILE_ITERATIONS
    if first_window < spec.control.warmup + MIN_POST_WARMUP:
        raise UsageError(f"--iterations must be at least warm-up + {MIN_POST_WARMUP} ({spec.control.warmup + MIN_POST_WARMUP})")
    if spec.max_attempts < 1:
        raise UsageError("--max-attempts must be at least 1")
    spec.backend.check_ready()
    require_session(spec.session)
    lifetime.attach(spec.session)
    collector = _Collector(spec, progress, lease)
    attempts: list[AttemptRecord] = []
    iterations: int | None = first_window

    def done(status: str, reason: str, reason_zh: str, ingested: dict[str, Any] | None = None) -> ProfileResult:
        last = attempts[-1]
        return ProfileResult(status, spec.role, spec.round, last.root, last.manifest_fingerprint, last.iterations,
                             reason, reason_zh, tuple(attempts), ingested)

    while iterations is not None and len(attempts) < spec.max_attempts:
        attempt = collector.attempt(iterations)
        attempts.append(attempt)
        collector.record(attempt)
        if attempt.status == "blocked":
            return done("blocked", attempt.reason, attempt.reason_zh)
        if attempt.status == "complete":
            try:
                ingested = _ingest(spec, Path(attempt.root)) if spec.ingest else None
            except InputError as exc:
                return done("blocked", *_both("profile.not_ingested", detail=exc.one_line()))
            return done("complete", attempt.reason, attempt.reason_zh, ingested)
        iterations = shorter_window(iterations, spec.control.warmup)
    last = attempts[-1]
    return done("blocked", *_both("profile.still_full", attempts=len(attempts), iterations=last.iterations))


__all__ = [
    "AttemptRecord",
    "ProfileResult",
    "ProfileSpec",
    "collect_profile",
    "profile_env",
    "profile_workload",
    "shorter_window",
]
