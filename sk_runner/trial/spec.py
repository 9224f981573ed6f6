"""What a trial is: its spec, progress events, result, and where a round lives (see :mod:`sk_runner.trial`)."""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sk_analytics.errors import EXIT_NEGATIVE, EXIT_OK
from sk_analytics.files.io_seam import move
from sk_analytics.fingerprint import fingerprint
from sk_runner.backends.base import Backend, Control
from sk_runner.config import PointerChange
from sk_runner.devices.lease import LeaseLike
from sk_runner.hosts.base import Hosts

if TYPE_CHECKING:
    from sk_runner.config import PointerChange

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
    lease: LeaseLike = None
    """The device lease: held by the caller (a sweep), a request taken for this trial, or None (unleased)."""
    hosts: Hosts | None = None
    """The hosts a multi-host trial spans (held by the caller, each with its own lease); None: this host."""
    sources: tuple[str, ...] | None = None
    """Files or folders (relative to the working directory) that make up the workload, hashed into the
    trial identity; None: the default of :func:`sk_runner.trial.sources.source_files`."""
    settle_sealed_run: bool = False
    """A sealed failure scene (same trial fingerprint) of the probe, the correctness run or a clean run still to make is
    this trial's result, never retried: an earlier invocation failed there and was killed before its caller recorded
    the failure. Every trial of a sweep sets it, whose resume must record what the uninterrupted sweep records. False:
    the step is made again (``sk-run trial`` run again by hand is the scene's own follow-up, a retry; docs/runner.md).
    A scene killed while being sealed (no ``scene.json``) is no scene: its step is made again. Not part of the trial's
    identity."""
    lang: str | None = None
    """The language of the failure scenes' sentences (a sweep's ``--lang``); None: :func:`sk_analytics.messages.resolve_lang`
    (``SK_LANG``, else the locale). Not part of the trial's identity."""

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
    lease: dict[str, Any] = field(default_factory=dict)
    """The lease the trial ran under (mode, root, device_ids; mode None: unleased)."""
    foreign: list[dict[str, Any]] = field(default_factory=list)
    """Clean runs discarded because a foreign process used the leased devices (``foreign_process_on_device``)."""
    words: dict[str, Any] | None = None
    """A failure's ``message`` as a recorded message (English rendering = ``message``) where the runner has one."""

    @property
    def exit_code(self) -> int:
        return EXIT_OK if self.status == "ok" else EXIT_NEGATIVE

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
            "lease": self.lease,
            "foreign_processes": self.foreign,
        }


ProgressFn = Callable[[Progress], None]


def complete_runs(round_dir: Path) -> list[int]:
    """Indices k of ``CLEAN/run-<k>`` folders holding a meta.json."""
    clean = round_dir / "CLEAN"
    if not clean.is_dir():
        return []
    out = [int(p.name[4:]) for p in clean.glob("run-*") if p.name[4:].isdigit() and (p / "meta.json").is_file()]
    return sorted(out)


def set_aside(round_dir: Path, folder: Path) -> Path | None:
    """An incomplete run folder (no meta.json) kept, out of the way, as ``<round>/INCOMPLETE/<name>-<ns>``
    (never deleted); where it went (None: there was none)."""
    if not folder.exists():
        return None
    dest = round_dir / "INCOMPLETE" / f"{folder.name}-{time.time_ns()}"
    dest.parent.mkdir(parents=True, exist_ok=True)
    move(folder, dest)
    return dest


def newest_set_aside(round_dir: Path, name: str) -> Path | None:
    """Where :func:`set_aside` last put the folder ``name`` (``<round>/INCOMPLETE/<name>-<ns>``); None when it never
    did. A folder of another shape there (``run-1-old``, named by hand) is not one of its moves."""
    stamped = [(int(stamp), p) for p in (round_dir / "INCOMPLETE").glob(f"{name}-*")
               if (stamp := p.name[len(name) + 1:]).isdigit()]
    return max(stamped)[1] if stamped else None


def set_aside_incomplete_runs(round_dir: Path) -> list[Path]:
    """Every ``CLEAN/run-<k>`` without meta.json (a run a SIGKILL or a power loss cut short) set aside, so a
    reader of the round's runs (the sweep's gate and stability check) reads its complete runs only, as a
    resumed trial does; where they went."""
    half = sorted(p for p in (round_dir / "CLEAN").glob("run-*") if p.is_dir() and not (p / "meta.json").is_file())
    return [dest for dest in (set_aside(round_dir, p) for p in half) if dest is not None]
