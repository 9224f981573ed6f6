"""A sweep session on disk: identity (session.json), frozen SEED config, backend.

``session.json`` is written once when the session is created and its
fingerprint is the first ledger record (``session_started``); a resumed sweep
refuses a session whose identity or SEED config changed since.
"""

from __future__ import annotations

import errno
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sk_analytics.errors import InputError, IntegrityError, UsageError
from sk_analytics.files.atomic import write_json
from sk_analytics.files.strict_json import check_against_schema, load_json_file
from sk_analytics.fingerprint import fingerprint
from sk_analytics.ledger.chain import Ledger, LedgerRecord, drop_stale_temps, read_records, recover_torn_tail
from sk_analytics.ledger.evidence import with_binding
from sk_analytics.ledger.signing import signer
from sk_analytics.ledger.verify import ONE_SIGNER, signer_chain
from sk_analytics.ledger.witness import WITNESS_RULE, witnessed_rollback
from sk_analytics.messages import coded
from sk_analytics.stage_o.machine import Policy
from sk_runner.backends import make_backend
from sk_runner.backends.base import Backend, Control

SESSION_SCHEMA = "sk-tune-sweep-session-v1"
SESSION_FILE = "session.json"
SEED_CONFIG_FILE = "seed-config.json"


@dataclass(frozen=True)
class BackendSpec:
    """Which workload runs the trials: the simulator (with a network) or a command."""

    name: str = "sim"
    network: str | None = None
    noise: float | None = None
    command: tuple[str, ...] = ()
    cwd: str | None = None
    """Working directory of every workload process of the session (absolute; None: the folder sk-run runs in)."""
    sources: tuple[str, ...] | None = None
    """The task's ``workload.sources``: files or folders of the workload (relative to its working directory)
    hashed into every trial identity; None: the default (:mod:`sk_runner.trial.sources`)."""

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"name": self.name, "network": self.network, "noise": self.noise, "command": list(self.command)}
        data = data if self.cwd is None else {**data, "cwd": self.cwd}  # sessions without one keep their identity
        return data if self.sources is None else {**data, "sources": list(self.sources)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> BackendSpec:
        sources = data.get("sources")
        return cls(data["name"], data.get("network"), data.get("noise"), tuple(data.get("command") or ()), data.get("cwd"),
                   None if sources is None else tuple(sources))

    @property
    def workdir(self) -> Path | None:
        return None if self.cwd is None else Path(self.cwd)

    def build(self) -> Backend:
        """The runner backend object (:func:`~sk_runner.backends.make_backend`: npu imports torch_npu lazily);
        the simulator's extra arguments are its ``--noise``."""
        if self.name == "sim":
            return make_backend("sim", ["--noise", repr(self.noise)] if self.noise is not None else [], network=self.network)
        return make_backend(self.name, self.command, cwd=self.cwd)


@dataclass(frozen=True)
class SweepSession:
    """The loaded identity of one Stage O session."""

    root: Path
    seed: int
    backend: BackendSpec
    control: Control
    policy: Policy
    task: dict[str, Any] | None = None
    #: Where a campaign pinned this session (node id, host); absent outside campaigns.
    placement: dict[str, Any] | None = None
    #: Warnings of loading it for the user (a torn ledger tail cut off).
    notices: tuple[str, ...] = ()

    @property
    def seed_config_path(self) -> Path:
        return self.root / SEED_CONFIG_FILE

    @property
    def ledger(self) -> Ledger:
        return Ledger(self.root)

    def append(self, kind: str, data: dict[str, Any]) -> LedgerRecord:
        """Append a record that also binds every evidence file written since the last one
        (:mod:`sk_analytics.ledger.evidence`): hashed once, vouched for by the record's signature."""
        return self.ledger.append(kind, with_binding(self.root, data))

    def identity(self) -> dict[str, Any]:
        return {
            "schema_version": SESSION_SCHEMA,
            "seed": self.seed,
            "seed_config": SEED_CONFIG_FILE,
            "seed_config_fingerprint": fingerprint(load_json_file(self.seed_config_path)),
            "backend": self.backend.to_json(),
            "control": self.control.to_json(),
            "policy": self.policy.to_json(),
            "task": self.task,
        } | ({} if self.placement is None else {"placement": self.placement})


def fresh_session_argv(session: SweepSession) -> list[str]:
    """The exact command of a fresh session of ``session``'s task in a new folder beside it (``<session>-2``, the first
    such name not taken): after a stop the way forward (a stopped session stays stopped, docs/sweep.md). A session
    without a task (the demo) gets ``sk-run sweep --demo`` with its recorded seed, ranks, iterations, network, gate and
    profile window (``--full-profile``).
    Printed by ``sk-run sweep`` and written into ``handoff.json`` (``fresh_session_argv``)."""
    root = session.root.resolve()
    fresh = str(next(root.with_name(f"{root.name}-{n}") for n in range(2, 10_000) if not root.with_name(f"{root.name}-{n}").exists()))
    task = (session.task or {}).get("path")
    if task:
        return ["sk-run", "sweep", "--task", str(task), "--session", fresh]
    control = session.control
    return ["sk-run", "sweep", "--demo", "--session", fresh, "--seed", str(session.seed), "--ranks", str(control.ranks),
            *(["--iterations", str(control.iterations)] if control.iterations is not None else []),
            *(["--network", session.backend.network] if session.backend.network else []),
            *(["--gate", session.policy.gate] if session.policy.gate != "protocol" else []),
            *(["--full-profile"] if session.policy.profile_iterations is None else [])]  # demo_session(full_profile=True)


def session_relative(root: Path, path: Path | str | None) -> str | None:
    """``path`` relative to the session folder (how records name files), or as given when outside it."""
    if path is None:
        return None
    p = Path(path)
    try:
        return p.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return str(p)


def create_session(
    root: Path,
    seed_config: dict[str, Any],
    *,
    seed: int,
    backend: BackendSpec,
    control: Control,
    policy: Policy,
    task: dict[str, Any] | None = None,
    placement: dict[str, Any] | None = None,
    lease: dict[str, Any] | None = None,
) -> SweepSession:
    """Create a new session folder: SEED config, session.json, first ledger record (and ``lease``, the
    ``lease_requested`` record of the lease every resume takes again: :mod:`sk_runner.sweep.leasing`).

    All of it is built in a hidden sibling folder and renamed into place in one
    step, so a crash (or a full disk) during creation leaves no half session:
    the folder is absent (or still empty) and the same command creates it
    again. The sibling of a creator that died is removed by the next creation.
    ``placement`` (a campaign's node affinity) becomes part of the fingerprinted identity;
    ``signing_key`` names the fingerprint of the key that signs the session's ledger."""
    root = Path(root)
    if (root / SESSION_FILE).exists() or (root / "ledger.jsonl").exists():
        raise UsageError(f"{root} already holds a session; resume it with --resume or choose a new --session")
    if root.exists() and any(root.iterdir()):
        raise UsageError(f"{root} is not empty; a new session needs an empty or new folder")
    key = signer(outside=root)  # refuse a key inside the session before anything is written
    root.parent.mkdir(parents=True, exist_ok=True)
    drop_abandoned_creations(root)
    staging = root.with_name(f"{CREATING_PREFIX}{root.name}.{os.getpid()}.{time.time_ns()}")
    staging.mkdir()
    try:
        write_json(staging / SEED_CONFIG_FILE, seed_config)
        staged = SweepSession(staging, seed, backend, control, policy, task, placement)
        identity = {**staged.identity(), "created_ns": time.time_ns(), "signing_key": key.fingerprint}
        write_json(staging / SESSION_FILE, identity)
        staged.append(
            "session_started",
            {"session_fingerprint": fingerprint(identity), "seed_config_fingerprint": identity["seed_config_fingerprint"],
             "policy": identity["policy"], "summary": coded("summary.session_started", fp=identity["seed_config_fingerprint"][:12])},
        )
        if lease is not None:
            staged.append("lease_requested", lease)
        try:
            os.rename(staging, root)  # replaces an empty folder at root; anything else there refuses
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR):
                raise
            raise UsageError(f"{root} was filled by someone else while this session was created; choose a new --session") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return SweepSession(root, seed, backend, control, policy, task, placement)


CREATING_PREFIX = ".creating-"
"""Hidden sibling ``.creating-<name>.<pid>.<ns>`` in which :func:`create_session` builds a session."""


def drop_abandoned_creations(root: Path) -> list[Path]:
    """Remove the creation folders of ``root`` whose creator is no longer alive (a crash during creation)."""
    from sk_runner.process import process_alive

    dropped = []
    for folder in root.parent.glob(f"{CREATING_PREFIX}{root.name}.*"):
        pid = folder.name[len(CREATING_PREFIX) + len(root.name) + 1 :].split(".")[0]
        if pid.isdigit() and not process_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)
            dropped.append(folder)
    return dropped


def load_session(root: Path) -> SweepSession:
    """Load a session and re-verify its identity against the ledger."""
    root = Path(root)
    path = root / SESSION_FILE
    if not path.is_file():
        raise InputError(path, "not a sweep session (session.json missing)", expected="a folder created by sk-run sweep")
    data = load_json_file(path)
    if not isinstance(data, dict) or data.get("schema_version") != SESSION_SCHEMA:
        raise InputError(path, "unknown session format", expected=SESSION_SCHEMA)
    try:
        drop_stale_temps(root)  # head temp files of a writer killed mid-update (issue 29)
        torn = recover_torn_tail(root)  # an append cut short by a crash or a full disk: its bytes are kept aside
    except OSError as exc:  # the disk is still full: a blocker with the resume command, never a traceback
        from sk_runner.sweep.faults import environment_stop

        stop = environment_stop(root, None, exc)
        if stop is None:
            raise
        raise stop from exc
    notices = () if torn is None else (
        f"ledger: cut off the torn final record of an interrupted append ({torn['bytes']} bytes, kept in {torn['file']}); "
        "its step runs again",)
    records = read_records(root)
    if not records or records[0].kind != "session_started":
        raise IntegrityError(f"{root}: ledger does not start with session_started")
    if records[0].data["session_fingerprint"] != fingerprint(data):
        raise IntegrityError(f"{path}: session identity changed since the session started (fingerprint mismatch)")
    started_by = (records[0].sig or {}).get("key")
    if data.get("signing_key") != started_by:
        raise IntegrityError(
            f"{path}: session.json names signing key {data.get('signing_key')} but its first ledger record was signed by {started_by}"
        )
    behind = witnessed_rollback(records)
    if behind is not None:  # resuming it would fork the signed ledger: the copy that went on would then fail verify
        raise IntegrityError(
            f"{root / 'ledger.jsonl'}: rule {WITNESS_RULE}: {behind}; a copy of this session went on past it (this folder was "
            "copied, or restored, before it did): resume the folder that went on, or start a fresh session"
        )
    current, _ = signer_chain(records)
    own = signer(outside=root).fingerprint
    if current is not None and own != current:
        raise IntegrityError(
            f"{root / 'ledger.jsonl'}: rule {ONE_SIGNER}: the session is signed by {current}, this key is {own}; "
            f"its holder must first run `sk-analyze ledger hand-over {root} {own}`"
        )
    frozen_values_runnable(data, path)
    session = SweepSession(
        root,
        int(data["seed"]),
        BackendSpec.from_json(data["backend"]),
        Control(**data["control"]),
        Policy.from_json(data["policy"]),
        data.get("task"),
        data.get("placement"),
        notices,
    )
    seed_fp = fingerprint(load_json_file(session.seed_config_path))
    if seed_fp != data["seed_config_fingerprint"]:
        raise IntegrityError(f"{session.seed_config_path}: frozen SEED config changed since the session started")
    return session


def frozen_values_runnable(identity: dict[str, Any], path: Path) -> None:
    """Refuse, with exit 2 and the way forward, a session that froze a policy or run size no sweep can run (a
    ``timeout_s`` of 1e308 taken before tasks were bounded): every ``--resume`` would fail the same way, so the
    only fix is a new session from a corrected task."""
    from sk_runner.limits import size_problem
    from sk_runner.sweep.task_schema import POLICY_PROPERTIES

    control = identity.get("control") or {}
    record: int | str | None = "/control"
    try:
        check_against_schema({"properties": {"policy": {"type": "object", "properties": POLICY_PROPERTIES}}}, identity, path, "session")
        problem = size_problem(control.get("ranks", 1), control.get("iterations"), control.get("warmup", 0))
    except InputError as exc:
        problem, record = exc.message, exc.location.record if exc.location else None
    except TypeError:  # a value of the wrong type in the frozen controls
        problem = f"frozen controls {control} are not numbers"
    if problem is not None:
        raise InputError(path, f"{problem}: the session froze a value no sweep can run, so --resume cannot continue it", record=record,
                         expected="a new session from a corrected task: sk-run sweep --task TASK --session NEW_FOLDER")
