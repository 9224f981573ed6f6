"""Issue 36: the suite leaves nothing in the temporary folder it is given and no process running (tests/tmp_guard.py)."""

from __future__ import annotations

import getpass
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tmp_guard import GRACE_ENV, MARK_ENV

from sk_runner.process import process_alive

TESTS = Path(__file__).resolve().parent


def _pytest(args: list[str], tmpdir: Path, cwd: Path, **extra: str) -> subprocess.CompletedProcess[str]:
    """A fresh pytest run (not nested in this run's guard) whose TMPDIR is ``tmpdir``."""
    env = {k: v for k, v in os.environ.items() if k not in (MARK_ENV, "PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    env |= {"TMPDIR": str(tmpdir), "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")])), **extra}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=900, check=False)


def _only_pytests_own(tmpdir: Path) -> bool:
    return sorted(p.name for p in tmpdir.iterdir()) == [f"pytest-of-{getpass.getuser()}"]


def test_the_kernel_details_tests_leave_the_temp_folder_empty(tmp_path: Path) -> None:
    """They used ``mkdtemp`` per hypothesis example: 1,147 folders left in /tmp per run."""
    empty = tmp_path / "tmp"
    empty.mkdir()
    files = [str(TESTS / "test_ingest_kernel_details_props.py"), str(TESTS / "test_ingest_kernel_details_widths.py")]
    done = _pytest(["-q", *files], empty, TESTS.parent)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert _only_pytests_own(empty), sorted(p.name for p in empty.iterdir())


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_a_test_that_leaves_a_temp_folder_fails_the_run(tmp_path: Path, workers: list[str]) -> None:
    """Also from an xdist worker and from a child process: all of them inherit the run's TMPDIR."""
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (suite / "test_leaks.py").write_text(
        "import subprocess, sys, tempfile\n"
        "def test_clean(tmp_path):\n"
        "    with tempfile.TemporaryDirectory():\n"
        "        (tmp_path / 'x').write_text('x')\n"
        "def test_leaks_a_folder():\n"
        "    tempfile.mkdtemp(prefix='left-here-')\n"
        "def test_child_leaks_a_file():\n"
        "    subprocess.run([sys.executable, '-c', 'import tempfile; tempfile.mkstemp(prefix=\"child-left-\")'], check=True)\n",
        encoding="utf-8")
    empty = tmp_path / "tmp"
    empty.mkdir()
    done = _pytest(["-p", "tmp_guard", *workers, "test_leaks.py"], empty, suite)
    out = done.stdout + done.stderr
    assert done.returncode == 1 and "3 passed" in out, out[-3000:]
    assert "the tests left 2 item(s) in their temporary folder" in out and "left-here-" in out and "child-left-" in out, out[-3000:]
    assert _only_pytests_own(empty), sorted(p.name for p in empty.iterdir())  # removed even so

    (suite / "test_leaks.py").write_text("import tempfile\ndef test_clean():\n    with tempfile.TemporaryDirectory():\n        pass\n",
                                         encoding="utf-8")
    done = _pytest(["-p", "tmp_guard", *workers, "test_leaks.py"], empty, suite)
    assert done.returncode == 0 and "left" not in done.stdout, done.stdout[-3000:]
    assert _only_pytests_own(empty)


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["one-process", "xdist"])
def test_a_process_a_test_leaves_running_fails_the_run_and_is_killed(tmp_path: Path, workers: list[str]) -> None:
    """One left its session (``setsid``), one also wiped its environment (found by its working directory, a test's
    folder); both are named and killed. One still alive when the session finishes, that ends by itself within the grace,
    is not a leftover."""
    suite, pids = tmp_path / "suite", tmp_path / "pids"
    suite.mkdir()
    pids.mkdir()
    (suite / "pytest.ini").write_text("[pytest]\n", encoding="utf-8")
    (suite / "test_procs.py").write_text(
        "import pathlib, subprocess, sys\n"
        f"PIDS = pathlib.Path({str(pids)!r})\n"
        "SLEEP = 'import sys, time; time.sleep(float(sys.argv[1]))'\n"
        "def test_detached():\n"
        "    p = subprocess.Popen([sys.executable, '-c', SLEEP, '300', 'left-running-1'], start_new_session=True)\n"
        "    (PIDS / 'detached').write_text(str(p.pid))\n"
        "def test_wiped(tmp_path):\n"
        "    p = subprocess.Popen([sys.executable, '-c', SLEEP, '300', 'left-running-2'], env={}, cwd=tmp_path, start_new_session=True)\n"
        "    (PIDS / 'wiped').write_text(str(p.pid))\n"
        "UNTIL = 'import os, sys, time\\nwhile not os.path.exists(sys.argv[1]): time.sleep(0.02)'\n"
        "def test_ends_after_the_last_test():\n"
        "    subprocess.Popen([sys.executable, '-c', UNTIL, str(PIDS / 'finished'), 'ends-by-itself'], start_new_session=True)\n",
        encoding="utf-8")
    # alive when the guard starts looking (it ends on a file written as the session finishes, before the guard's hook)
    (suite / "conftest.py").write_text(
        "import pathlib\n"
        "def pytest_sessionfinish(session):\n"
        "    if not hasattr(session.config, 'workerinput'):\n"
        f"        pathlib.Path({str(pids / 'finished')!r}).touch()\n", encoding="utf-8")
    empty = tmp_path / "tmp"
    empty.mkdir()
    done = _pytest(["-p", "tmp_guard", *workers, "test_procs.py"], empty, suite, **{GRACE_ENV: "12"})
    out = done.stdout + done.stderr
    left = {name: int((pids / name).read_text()) for name in ("detached", "wiped")}
    try:
        assert done.returncode == 1 and "3 passed" in out, out[-3000:]
        assert "the tests left 2 process(es) running 12 s after the last test (now killed)" in out, out[-3000:]
        assert "left-running-1" in out and "left-running-2" in out and "ends-by-itself" not in out, out[-3000:]
        assert not any(process_alive(pid) for pid in left.values())
        assert _only_pytests_own(empty)
    finally:
        for pid in left.values():
            try:
                os.kill(pid, 9)
            except OSError:
                pass
