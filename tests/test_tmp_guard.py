"""Issue 36: the suite leaves nothing in the temporary folder it is given (tests/tmp_guard.py)."""

from __future__ import annotations

import getpass
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tmp_guard import MARK_ENV

TESTS = Path(__file__).resolve().parent


def _pytest(args: list[str], tmpdir: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A fresh pytest run (not nested in this run's guard) whose TMPDIR is ``tmpdir``."""
    env = {k: v for k, v in os.environ.items() if k not in (MARK_ENV, "PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")}
    env |= {"TMPDIR": str(tmpdir), "PYTHONPATH": os.pathsep.join(filter(None, [str(TESTS), env.get("PYTHONPATH")]))}
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
