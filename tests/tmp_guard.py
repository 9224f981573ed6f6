"""The test run's own temporary folder, and its processes: nothing the suite starts may be left behind.

The outermost pytest process (the xdist controller, or the only process) creates a
fresh folder in the system temp folder, points ``TMPDIR`` (and :mod:`tempfile`) at it
before any test or worker starts, and at the end of the session fails the run
naming what is left there, then removes it. xdist workers, sweeps, CLIs, Ray and
every other child inherit ``TMPDIR`` (Ray keeps its session folders under
``$TMPDIR/ray``), so a ``mkdtemp`` nobody removes is caught wherever it runs. A
nested pytest run (a test that starts pytest) inherits the marker and neither makes
a folder of its own nor checks: the outer run does. The same marker finds the processes
the run started that are still alive at its end (``tests/run_processes.py``): they fail
the run too, and are killed.

The folder is short (``skt-XXXXXXXX`` in the system temp folder), not inside pytest's
base temp folder: Ray puts Unix sockets under ``$TMPDIR/ray/session_…/sockets/``,
and a socket path is limited to 107 bytes.

Loaded by ``tests/conftest.py``; ``python -m pytest -p tmp_guard`` with ``tests`` on
``PYTHONPATH`` loads it for a run outside this folder (how its own test runs it).
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest
from run_processes import GRACE_S, end_leftovers

MARK_ENV = "SK_TUNE_TEST_TMPDIR"
"""Set to the guarded folder for the whole run; a process that finds it set is inside the run."""

GRACE_ENV = "SK_TUNE_TEST_PROCESS_GRACE_S"
"""Seconds the run's processes get to end after the last test (default ``run_processes.GRACE_S``); its own test shortens it."""

_owned: Path | None = None


@pytest.hookimpl(trylast=True)
def pytest_configure(config: pytest.Config) -> None:
    """Outermost process only: make the run's temp folder and point TMPDIR at it (workers inherit it)."""
    global _owned
    if os.environ.get(MARK_ENV) or hasattr(config, "workerinput"):
        return
    factory = getattr(config, "_tmp_path_factory", None)
    if factory is not None:
        factory.getbasetemp()  # pytest's own base folder stays in the system temp folder, where it rotates
    folder = Path(tempfile.mkdtemp(prefix="skt-"))
    os.environ["TMPDIR"] = os.environ[MARK_ENV] = str(folder)
    tempfile.tempdir = str(folder)
    _owned = folder


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session) -> None:
    """Fail the run when a process it started is still alive (killed: ``tests/run_processes.py``) or anything is left
    in the run's temp folder (removed either way)."""
    global _owned
    folder, _owned = _owned, None
    if folder is None:
        return
    factory = getattr(session.config, "_tmp_path_factory", None)
    roots = [str(folder), *([str(factory.getbasetemp())] if factory is not None else [])]
    grace_s = float(os.environ.get(GRACE_ENV, GRACE_S))
    running = end_leftovers(f"{MARK_ENV}={folder}", roots, grace_s)
    if running:
        listed = "; ".join(f"pid {pid}: {command}" for pid, command in running[:5]) + (f"; and {len(running) - 5} more" if len(running) > 5 else "")
        _fail(session, f"the tests left {len(running)} process(es) running {grace_s:g} s after the last test (now killed): {listed} "
                       "(end every process a test starts, also when the test fails)")
    left = sorted(folder.iterdir()) if folder.is_dir() else []
    shutil.rmtree(folder, ignore_errors=True)
    if not left:
        return
    names = ", ".join(p.name for p in left[:10]) + (f" and {len(left) - 10} more" if len(left) > 10 else "")
    _fail(session, f"the tests left {len(left)} item(s) in their temporary folder {folder}: {names} "
                   "(create temp folders with tmp_path/tmp_path_factory, or a context manager that removes them)")


def _fail(session: pytest.Session, message: str) -> None:
    """Say ``message`` as an error at the end of the run and make the run fail."""
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None:
        reporter.write_line(f"ERROR: {message}", red=True, bold=True)
    else:  # pragma: no cover - terminal reporter disabled
        print(f"ERROR: {message}")
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
