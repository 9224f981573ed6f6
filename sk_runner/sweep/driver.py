"""The sweep loop: ask the state machine, execute, record, repeat.

The ledger is the loop's only state, so a sweep killed at any point (Ctrl-C,
SIGKILL, machine restart) continues with ``--resume``: the frozen matrix and
the session identity are re-verified, and the action whose outcome was not yet
recorded is asked for again (trials continue with their missing runs).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from sk_analytics.errors import EnvironmentBlocker, UsageError
from sk_analytics.files.atomic import write_json
from sk_analytics.files.flock import flock_holders
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.fingerprint import canonical_json, fingerprint
from sk_analytics.ledger.chain import read_records
from sk_analytics.ledger.evidence import drop_unreferenced_manifests
from sk_analytics.messages import coded, is_coded, render, text
from sk_analytics.stage_o import machine as m
from sk_analytics.stage_o.layout import HANDOFF_FILE, PROBES_DIR
from sk_analytics.stage_o.matrix import check_frozen, load_matrix
from sk_analytics.stage_o.session_notes import SWEEP_LOCK, lock_refusal
from sk_runner.backends.base import Backend
from sk_runner.devices.lease import LazyLease, LeaseFault, LeaseRequest, lease_environ
from sk_runner.devices.occupancy import simulated_devices
from sk_runner.devices.registry import session_registry
from sk_runner.hosts.base import Hosts, ranks_problem
from sk_runner.hosts.topology import recorded_spans
from sk_runner.process import lifetime
from sk_runner.sweep.executor import Executor
from sk_runner.sweep.faults import environment_stop
from sk_runner.sweep.leasing import ensure_recorded
from sk_runner.sweep.matrix_cli import MATRIX_NAME, freeze_session_matrix, init_matrix
from sk_runner.sweep.probes import probe_candidates
from sk_runner.sweep.session import SweepSession
from sk_runner.sweep.verify import verify_incumbent

Say = Callable[[str], None]


@dataclass(frozen=True)
class SweepOutcome:
    """How the sweep ended: ``base`` or ``stopped``, and where the results are."""

    outcome: str
    session: Path
    actions: int
    handoff: Path
    report: Path
    html: Path


def ensure_matrix(session: SweepSession, backend: Backend, say: Say, devices: LazyLease | None = None, hosts: Hosts | None = None,
                  lang: str = "zh") -> None:
    """Build the session's matrix from fresh probes (inside the device lease, taken here if not yet; on a multi-host
    session's hosts, each under its lease) unless it exists already."""
    if (session.root / MATRIX_NAME).is_file():
        return
    say(text("progress.build_matrix", lang))
    probes = probe_candidates(session, backend, say, lease_environ(None if devices is None else devices.held(), os.environ), hosts, lang)
    probes_path = session.root / PROBES_DIR / "probes.json"
    write_json(probes_path, probes)
    init_matrix(session.root, load_json_file(session.seed_config_path), probes, probes_source=str(probes_path),
                seed_source=session.seed_config_path)
    unlisted = sum(p["evidence"].get("task") is not None for p in probes)  # never probed: the task does not list them
    session.append(
        "matrix_built",
        {"probes": f"{PROBES_DIR}/probes.json", "probes_fingerprint": fingerprint(probes),
         "ready": sum(bool(p["ready"]) for p in probes), "probed": len(probes), "not_listed": unlisted,
         "summary": coded("summary.matrix_built", probed=len(probes), not_listed=unlisted, ready=sum(bool(p["ready"]) for p in probes))},
    )


def describe(action: m.Action, lang: str = "zh") -> str:
    """One progress line for an action in ``lang`` (a stop with the failure scene it refers to)."""
    if isinstance(action, m.RunTrial):
        change = ", ".join(f"{c.pointer.rsplit('/', 1)[1]}={canonical_json(c.value)}" for c in action.changes)
        return text("progress.run_trial", lang, round=action.round, entry=action.entry_id or "O0-INCUMBENT",
                    what=coded(f"progress.phase.{action.phase}"), change=coded("progress.change", changes=change) if change else "")
    if isinstance(action, m.Gate):
        return text("progress.gate", lang, round=action.round, baseline=action.baseline_round)
    if isinstance(action, m.CheckStability):
        return text("progress.stability", lang, round=action.round)
    if isinstance(action, m.CollectProfile):
        window = "" if action.iterations is None else coded("progress.window", n=action.iterations)
        return text("progress.collect", lang, side=action.side, role=action.role, config_round=action.config_round,
                    attempt=action.attempt, window=window)
    if isinstance(action, m.DcciDiff):
        return text("progress.dcci_diff", lang)
    if isinstance(action, m.ProbeRepair):
        return text("progress.probe_repair", lang)
    if isinstance(action, m.Settle):
        return text("progress.settle", lang, entry=action.entry_id, status=coded(f"report.status_{action.status}"), reason=action.reason)
    if isinstance(action, m.Stop):
        scene = action.evidence.get("scene") if isinstance(action.evidence, Mapping) else None
        return text("progress.stop", lang, reason=action.reason, scene=coded("progress.scene", scene=scene) if scene else "")
    if isinstance(action, m.FreezeBase):
        return text("progress.freeze_base", lang, round=action.round)
    if isinstance(action, m.WriteHandoff):
        return text("progress.handoff", lang)
    return action.kind


def record_summary(data: Mapping[str, Any], lang: str) -> str | None:
    """The one-line summary a ledger record carries, in ``lang`` (a record written before summaries were codes: its
    Chinese ``summary_zh``); None when it has none."""
    if is_coded(data.get("summary")):
        return render(data["summary"], lang)
    summary = data.get("summary_zh")
    return None if summary is None else str(summary)


def run_sweep(
    session: SweepSession,
    *,
    say: Say = print,
    lang: str = "zh",
    max_actions: int | None = None,
    on_action: Callable[[m.Action], None] | None = None,
    lease: LeaseRequest | None = None,
    hosts: Hosts | None = None,
    started: Callable[[], None] | None = None,
) -> SweepOutcome | None:
    """Run the session until the hand-off is written (or ``max_actions`` ran: None).

    ``started``: called once the sweep holds the session (its lock taken), before any step: a refused sweep
    (another one running, the wrong hosts) never calls it.

    ``lease``: the devices, taken at the first device command and held to the end (every trial, the
    incumbent's and the DCCI pair's collections on the same exclusively held devices). ``hosts``: the hosts
    of a session whose ranks span hosts, held by the caller (each with its own lease) for the whole sweep."""
    problem = ranks_problem(hosts, lease, session.control.ranks)
    if hosts is None and recorded_spans(session.placement) is not None:  # never one host's run of a multi-host session
        problem = (f"{session.root} spans hosts: it continues only on the hosts it recorded "
                   "(sk-run sweep --resume SESSION --ray-address HOST:PORT)")
    if problem is not None:
        raise UsageError(problem)
    lock = FileLock(str(session.root / SWEEP_LOCK))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise UsageError(lock_refusal(session.root)) from None
    original = [o for o in lifetime.writing_elsewhere(session.root) if flock_holders(o.folder / SWEEP_LOCK) != []]  # None: unknown
    if original:  # a cp -a of a session whose sweep still runs (holds its lock): both would append to one signed ledger
        lock.release()
        raise UsageError(f"{session.root}: this folder is a copy of a session that {original[0].describe()} is still writing: "
                         "a sweep here would fork its signed ledger; let that sweep end, then resume the folder it writes")
    if started is not None:
        started()
    step = _Step()
    held = LazyLease(lease, env=os.environ, session=session.root, on_blocked=lambda exc: _lease_blocked(session, step.action, exc))
    simulated = hosts is None and simulated_devices(session.backend.name)
    try:
        lifetime.attach(session.root)
        drop_unreferenced_manifests(session.root, read_records(session.root))  # of an append cut short: vouch for nothing
        ensure_recorded(session, lease, os.environ)  # before any device command: every --resume takes this lease again
        with session_registry(session.root, simulated):  # a simulated session that names no registry: its own host
            return _loop(session, say, lang, max_actions, on_action, step, held, hosts)
    except (OSError, EnvironmentBlocker) as exc:  # a fault of the machine: a blocker, never a decision
        stop = environment_stop(session.root, step.action, exc)
        if stop is None:
            raise
        raise stop from exc
    finally:
        held.release()
        lock.release()


def _say_contradictions(handoff: Path, say: Say, lang: str) -> None:
    """The last console lines of a session whose protocol decisions the statistics contradict (issue 43)."""
    from sk_analytics.stage_o.contradictions import lines

    block = (load_json_file(handoff).get("contradictions") or {}) if handoff.is_file() else {}
    for line in lines(block.get("entries") or [], block.get("redecide_argv"), lang):
        say(line)


def _drop_leftovers(root: Path, say: Say, lang: str) -> None:
    """Temp files of writes an earlier sk-run was killed in (no other sweep runs: the lock is held)."""
    from sk_runner.sweep.leftovers import drop_leftover_temps

    removed = drop_leftover_temps(root)
    if removed:
        say(text("progress.leftovers", lang, n=len(removed), names=", ".join(removed[:3]) + ("…" if len(removed) > 3 else "")))


def _lease_blocked(session: SweepSession, action: m.Action | None, exc: LeaseFault) -> None:
    """The ledger's ``lease_blocked`` record: the step did not run, nothing was decided; ``--resume`` tries again."""
    session.append("lease_blocked", {**exc.record(), "action": None if action is None else action.kind,
                                     "summary": coded("summary.lease_blocked", reason=exc.reason, detail=exc.one_line())})


def eta_seconds(settled_here: int, left: int, elapsed_s: float) -> float | None:
    """Seconds the ``left`` unsettled entries take at this process's pace (``settled_here`` entries in ``elapsed_s``);
    None before this process has settled one, or when none is left: a resumed session's earlier pace is not this one's."""
    if settled_here <= 0 or left <= 0:
        return None
    return elapsed_s / settled_here * left


@dataclass
class _Step:
    """The action being carried out (None before the first and between actions): where a fault is recorded."""

    action: m.Action | None = None


def _loop(
    session: SweepSession, say: Say, lang: str, max_actions: int | None, on_action: Callable[[m.Action], None] | None,
    step: _Step,
    devices: LazyLease | None = None,
    hosts: Hosts | None = None,
) -> SweepOutcome | None:
    _drop_leftovers(session.root, say, lang)  # the lock is held and an earlier sk-run's survivors are gone (run_sweep)
    backend = session.backend.build()
    backend.check_ready()
    ensure_matrix(session, backend, say, devices, hosts, lang)
    executor = Executor(session, backend, say, devices, hosts, lang)
    state = m.fold(read_records(session.root))
    if state.matrix_fingerprint is not None:
        check_frozen(load_matrix(session.root / MATRIX_NAME), session.root / MATRIX_NAME, expected=state.matrix_fingerprint)
    if state.last(None, "stability_result", round=m.O0) is not None and state.base is None:
        verify_incumbent(session.root, state.incumbent, session.policy.incumbent_runs,  # resume: the baseline still holds
                         at_least=session.policy.gate == "family")
    done = 0
    settled_here = 0
    started = time.monotonic()
    while True:
        matrix = load_matrix(session.root / MATRIX_NAME)
        action = m.next_action(matrix, read_records(session.root), session.policy)
        if isinstance(action, m.Finished):
            from sk_runner.sweep.handoff import write_reports

            paths = write_reports(session.root, lang=lang)  # derived: re-rendered in the asked language
            handoff = session.root / HANDOFF_FILE
            say(text("progress.done", lang, seconds=time.monotonic() - started, report=paths["report"], html=paths["html"], handoff=handoff))
            _say_contradictions(handoff, say, lang)
            return SweepOutcome(action.outcome, session.root, done, handoff, paths["report"], paths["html"])
        if max_actions is not None and done >= max_actions:
            return None
        if on_action is not None:
            on_action(action)
        step.action = action
        if isinstance(action, m.FreezeMatrix):
            fp = freeze_session_matrix(session.root)
            say(text("progress.matrix_frozen", lang, n=len(matrix["entries"]), fp=fp[:12]))
        else:
            say(describe(action, lang))
            kind, data = executor.execute(action)
            session.append(kind, data)
            summary = None if kind in ("entry_settled", "session_stopped") else record_summary(data, lang)
            if summary is not None:
                say(f"    → {summary}")
            if kind == "entry_settled":
                settled = sum(r.kind == "entry_settled" for r in read_records(session.root))
                settled_here += 1
                left = eta_seconds(settled_here, len(matrix["entries"]) - settled, time.monotonic() - started)
                if left is not None:
                    say(text("progress.eta", lang, settled=settled, total=len(matrix["entries"]), minutes=max(1.0, left / 60)))
        step.action = None
        done += 1
