"""Environment faults of a sweep: recorded as protocol §8 blockers, never as decisions.

An ``OSError`` of the machine (disk full, I/O error, read-only file system,
permissions, no file descriptors) raised by ``sk-run`` itself, or a workload
or producer that died of one (:class:`~sk_runner.process.faults.EnvironmentFault`),
stops the sweep before the step's outcome reaches the ledger. The step is
therefore asked for again by ``sk-run sweep --resume``; what it left behind
is incomplete by construction (a run without ``meta.json``, a temp file, an
unsealed scene, a torn ledger tail) and is set aside or ignored by the resume.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

from sk_analytics.errors import EnvironmentBlocker
from sk_analytics.files.io_seam import as_blocker
from sk_analytics.stage_o import machine as m
from sk_analytics.stage_o.layout import EXPERIMENTS
from sk_runner.devices.lease import then_run
from sk_runner.trial.scene import record_blocker

SESSION_ROUND = "SESSION"
"""Blocker folder of steps that belong to no round (matrix, hand-off, reports)."""
DCCI_ROUND = "DCCI"

_DCCI_ACTIONS = (m.CollectProfile, m.DcciDiff, m.ProbeRepair)


def blocker_round(action: m.Action | None) -> str:
    """The round folder whose ``environment-blockers.jsonl`` takes a fault of ``action``."""
    if isinstance(action, _DCCI_ACTIONS):
        return DCCI_ROUND
    name = getattr(action, "round", None)
    return name if isinstance(name, str) and name else SESSION_ROUND


def environment_stop(root: Path, action: m.Action | None, exc: BaseException) -> EnvironmentBlocker | None:
    """The error a sweep stops with for an environment fault (recorded as a blocker), or None for any other error.

    The message names the fault and the step and ends with the resume command.
    """
    blocker = as_blocker(exc)
    if blocker is None:
        return None
    what, code = blocker.one_line(), blocker.errno_name
    step = "session" if action is None else action.kind
    round_name = blocker_round(action)
    recorded = blocker.recorded_in
    if recorded is None:
        extra = {"errno": code, "action": step} if code else {"action": step}
        recorded = record_blocker(root / EXPERIMENTS / round_name, round_name=round_name, stage=step, message=what, extra=extra)
    note = f"recorded in {_inside(recorded, root)}" if recorded is not None else "not recorded: the session folder is not writable"
    where = step if action is None else f"{round_name} {step}"  # outside any action: "session", not "SESSION session"
    stop = EnvironmentBlocker(f"{where}: {what}; nothing was decided ({note}). {_then(exc, root)}")
    stop.recorded_in = recorded
    return stop


def _then(exc: BaseException, root: Path) -> str:
    """What to do next, ending with the session's resume command (:func:`sk_runner.devices.lease.then_run`)."""
    return then_run(exc, f"sk-run sweep --resume {shlex.quote(str(root.absolute()))}")


def _inside(path: Path, root: Path) -> str:
    """``path`` as the session names it: relative to ``root`` when it lies there, whichever of the two is
    relative to the current folder (a relative ``--session`` and a trial's absolute record path), else as is."""
    try:
        return str(Path(os.path.realpath(path)).relative_to(os.path.realpath(root)))
    except ValueError:
        return str(path)
