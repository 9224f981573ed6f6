"""The Ray tests' re-run inside a network namespace leaves nothing behind: not when it ends, not when the test
process running it is killed (Ctrl-C or a cancel of ``make test`` used to leave Ray's agents and a campaign driver)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from netns_helpers import netns_problem, pytest_in_private_netns

from sk_runner.process import process_alive

INNER = '''
import os, subprocess, sys, time

def test_leaves_a_hidden_sleeper():
    """A grandchild in a session of its own whose parent exits at once: no process group or parent links it to us."""
    code = ("import os, sys, time; os.setsid(); path = os.environ['SLEEPER_PID']; open(path + '.tmp', 'w').write(str(os.getpid())); "
            "os.replace(path + '.tmp', path); time.sleep(600)")  # whole or absent: the pid is read once this test ends
    subprocess.run([sys.executable, "-c", f"import os, subprocess, sys; subprocess.Popen([sys.executable, '-c', {code!r}])"],
                   check=True)
    deadline = time.monotonic() + 60
    while not os.path.exists(os.environ["SLEEPER_PID"]):
        assert time.monotonic() < deadline, "the sleeper did not start"
        time.sleep(0.05)
    if os.environ.get("INNER_WAITS") == "1":
        time.sleep(600)
'''


@pytest.fixture
def inner(tmp_path: Path) -> Path:
    problem = netns_problem()
    if problem:
        pytest.skip(problem)
    path = tmp_path / "inner" / "test_inner.py"
    path.parent.mkdir()
    path.write_text(INNER, encoding="utf-8")
    return path


def _sleeper(pid_file: Path, timeout_s: float = 60) -> int:
    deadline = time.monotonic() + timeout_s
    while not (pid_file.is_file() and pid_file.read_text()):
        assert time.monotonic() < deadline, "the inner test never started its sleeper"
        time.sleep(0.05)
    return int(pid_file.read_text())


def _gone(pid: int, timeout_s: float = 30) -> bool:
    deadline = time.monotonic() + timeout_s
    while process_alive(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)  # the test failed; leave nothing behind all the same
            return False
        time.sleep(0.05)
    return True


def test_what_the_inner_run_leaves_is_ended_when_it_ends(inner: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLEEPER_PID", str(tmp_path / "sleeper.pid"))
    code, out = pytest_in_private_netns(["--basetemp", str(tmp_path / "base"), str(inner)], "SK_NETNS_TEST", tmp_path, 120)
    assert code == 0 and "1 passed" in out, out[-3000:]
    pid = _sleeper(tmp_path / "sleeper.pid", 0)
    assert _gone(pid, timeout_s=0), f"the inner run's sleeper {pid} outlived it"


def test_a_killed_test_process_takes_the_inner_runs_hidden_descendants_with_it(inner: Path, tmp_path: Path) -> None:
    """SIGKILL of the process that runs the namespace re-run (an xdist worker killed, a CI cancel): the keeper sees
    its socket close and kills the inner pytest and the sleeper it hid."""
    pid_file = tmp_path / "sleeper.pid"
    outer = subprocess.Popen(
        [sys.executable, "-c", "import sys; from pathlib import Path; from netns_helpers import pytest_in_private_netns as run; "
                               "run(['--basetemp', sys.argv[2], sys.argv[1]], 'SK_NETNS_TEST', Path(sys.argv[3]), 600)",
         str(inner), str(tmp_path / "base"), str(tmp_path)],
        env={**os.environ, "SLEEPER_PID": str(pid_file), "INNER_WAITS": "1", "TMPDIR": str(tmp_path),  # its own temp folder too, killed
             "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])})
    try:
        pid = _sleeper(pid_file)
        outer.send_signal(signal.SIGKILL)
    finally:
        outer.kill()
        outer.wait()
    assert _gone(pid), f"the sleeper {pid} outlived the killed test process"


def test_each_inner_run_has_a_temporary_folder_of_its_own_and_it_is_removed(tmp_path: Path) -> None:
    """Ray keeps its session folders (sockets) under ``$TMPDIR/ray``, and each Ray module's clean-up removes the new
    ones: two Ray modules on two xdist workers sharing one TMPDIR removed each other's live clusters' sockets. Each
    inner run now gets its own folder (short enough for Ray's socket paths), removed when it ends."""
    if netns_problem():
        pytest.skip(netns_problem())
    inner = tmp_path / "inner" / "test_tmp.py"
    inner.parent.mkdir()
    seen = tmp_path / "seen"
    inner.write_text(f"import os\ndef test_tmp():\n    open({str(seen)!r}, 'w').write(os.environ['TMPDIR'])\n", encoding="utf-8")
    code, out = pytest_in_private_netns(["--basetemp", str(tmp_path / "base"), str(inner)], "SK_NETNS_TEST", tmp_path, 120)
    assert code == 0, out[-3000:]
    folder = Path(seen.read_text())
    assert folder != Path(os.environ["TMPDIR"]) and folder.name.startswith("ns-") and not folder.exists()
    assert len(str(folder / "ray" / "session_2026-12-04_23-08-29_424242_12100" / "sockets" / "raylet")) < 107
