"""The test run's own temporary folder: nothing the suite starts may leave anything in it.

The outermost pytest process (the xdist controller, or the only process) creates a
fresh folder in the system temp folder, points ``TMPDIR`` (and :mod:`tempfile`) at it
before any test or worker starts, and at the end of the session fails the run
naming what is left there, then removes it. xdist workers, sweeps, CLIs, Ray and
every other child inherit ``TMPDIR`` (Ray keeps its session folders under
``$TMPDIR/ray``), so a ``mkdtemp`` nobody removes is caught wherever it runs. A
nested pytest run (a test that starts pytest) inherits the marker and neither makes
a folder of its own nor checks: the outer run does.

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

MARK_ENV = "SK_TUNE_TEST_TMPDIR"
"""Set to the guarded folder for the whole run; a process that finds it set is inside the run."""

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
    """Fail the run when anything is left in the run's temp folder; remove it either way."""
    global _owned
    folder, _owned = _owned, None
    if folder is None:
        return
    left = sorted(folder.iterdir()) if folder.is_dir() else []
    shutil.rmtree(folder, ignore_errors=True)
    if not left:
        return
    names = ", ".join(p.name for p in left[:10]) + (f" and {len(left) - 10} more" if len(left) > 10 else "")
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    message = (f"the tests left {len(left)} item(s) in their temporary folder {folder}: {names} "
               "(create temp folders with tmp_path/tmp_path_factory, or a context manager that removes them)")
    if reporter is not None:
        reporter.write_line(f"ERROR: {message}", red=True, bold=True)
    else:  # pragma: no cover - terminal reporter disabled
        print(f"ERROR: {message}")
    if session.exitstatus == pytest.ExitCode.OK:
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
