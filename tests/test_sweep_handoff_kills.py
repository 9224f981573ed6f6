"""Issue 38: a SIGKILL at each write of the hand-off, then a resume, leaves no temp file behind;
``ledger verify`` says "ok" with a note to a session that has not written its hand-off yet.

One small session is run up to its hand-off once per module; each kill point works on a
``cp -a`` copy of it, with its own witness file (the copies' ledgers diverge on purpose).
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sweep_helpers import small_session

from sk_analytics.cli import cli
from sk_analytics.cli._base import run_cli
from sk_analytics.files.atomic import temp_beside
from sk_analytics.files.io_seam import READ, inject
from sk_analytics.files.stale_temps import is_leftover
from sk_analytics.ledger.chain import read_records
from sk_analytics.ledger.witness import WITNESS_ENV
from sk_analytics.stage_o import machine as m
from sk_runner.sweep.driver import run_sweep
from sk_runner.sweep.session import load_session

pytestmark = pytest.mark.slow


class _Paused(Exception):
    """Raised by the action hook right before the hand-off is written."""


def _stop_at_handoff(action: m.Action) -> None:
    if isinstance(action, m.WriteHandoff):
        raise _Paused


@pytest.fixture(scope="module")
def paused(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session with every decision recorded and its hand-off not written yet (O0 only: an empty matrix)."""
    root = tmp_path_factory.mktemp("handoff-kills") / "s"
    with pytest.raises(_Paused):
        run_sweep(small_session(root, []), say=lambda _: None, on_action=_stop_at_handoff)
    assert read_records(root)[-1].kind == "base_frozen"
    return root


@pytest.fixture(scope="module")
def handoff_writes(paused: Path, tmp_path_factory: pytest.TempPathFactory) -> list[tuple[str, str]]:
    """Every write (site, session-relative file) of the resume that writes the hand-off, in order."""
    copy = tmp_path_factory.mktemp("count") / "s"
    shutil.copytree(paused, copy, symlinks=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(WITNESS_ENV, str(copy.parent / "witness.jsonl"))
        with inject(None) as plan:
            outcome = run_sweep(load_session(copy), say=lambda _: None)
    assert outcome is not None and outcome.outcome == "base"
    return [(site, Path(path).relative_to(copy).as_posix()) for site, path in plan.writes if site != READ]


def _copy(paused: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    copy = tmp_path / "s"
    tmp_path.mkdir(exist_ok=True)
    subprocess.run(["cp", "-a", str(paused), str(copy)], check=True)
    monkeypatch.setenv(WITNESS_ENV, str(tmp_path / "witness.jsonl"))  # inherited by the killed child too
    return copy


def _verify(capsys: pytest.CaptureFixture[str], root: Path) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = run_cli(cli, "sk-analyze", ["ledger", "verify", str(root)])
    captured = capsys.readouterr()
    return code, (captured.out + captured.err).splitlines()


def _temps(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob(".*.tmp"))


_KILL_AT_WRITE = """
import os, signal, sys
from pathlib import Path
from sk_analytics.files import io_seam
from sk_runner.sweep.driver import run_sweep
from sk_runner.sweep.session import load_session

class KillAt(io_seam.FaultPlan):
    def hit(self, site, path):
        if site == io_seam.READ:
            return None
        self.writes.append((site, path))
        if len(self.writes) == {n}:
            Path({said!r}).write_text(site + " " + os.path.relpath(path, {root!r}))  # which write is killed
            os.kill(os.getpid(), signal.SIGKILL)  # after the temp file was filled, before its rename
        return None

io_seam._ACTIVE = KillAt(None)
run_sweep(load_session(Path({root!r})), say=lambda _: None)
"""


def test_the_handoff_writes_are_the_ones_the_kills_aim_at(handoff_writes: list[tuple[str, str]]) -> None:
    """The hand-off's atomic writes (files, reports, settled matrix, evidence manifest), its record and head."""
    names = [Path(rel).name for _, rel in handoff_writes]
    assert {"matrix.settled.json", "handoff.json", "EXPERIMENT_REPORT.md", "report.html", "ledger.jsonl", "ledger.jsonl.head"} <= set(names)
    assert any(name.startswith("bind-") for name in names)


def test_a_kill_at_each_handoff_write_then_a_resume_leaves_no_temp_file(paused: Path, handoff_writes: list[tuple[str, str]],
                                                                        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    left_by_kills = 0
    for n in range(1, len(handoff_writes) + 1):
        with monkeypatch.context() as mp:
            root = _copy(paused, tmp_path / f"kill-{n}", mp)
            said = tmp_path / f"kill-{n}" / "killed-at.txt"
            code = _KILL_AT_WRITE.format(n=n, root=str(root), said=str(said))
            done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
            assert done.returncode == -signal.SIGKILL, (n, done.stderr[-2000:])
            site, name = said.read_text().split(" ", 1)
            temps = _temps(root)
            left_by_kills += bool(temps)
            if site == "atomic":  # the killed write's temp is beside its target (a manifest's or registry's name varies)
                assert any(is_leftover(Path(t).name) and Path(t).parent == Path(name).parent for t in temps), (n, name, temps)
            finished = any(r.kind == "handoff_written" for r in read_records(root))
            code, lines = _verify(capsys, root)
            if code == 0:  # no hand-off file landed without its record: ok, with what is left to do
                if finished:  # killed while re-rendering the reports after the hand-off record
                    assert lines[-1].startswith("ok: "), lines
                else:
                    assert lines[-1].startswith("note: unfinished session: no hand-off yet") and "sk-run sweep --resume" in lines[-1], lines
                    assert lines[-2].startswith("ok: "), lines
                assert bool(temps) == any(line.startswith("note: machinery to clean: ") for line in lines), lines
            else:  # a hand-off file landed without its record: the existing rule says so
                assert code == 2 and any("[rule interrupted]" in line for line in lines), lines
            outcome = run_sweep(load_session(root), say=lambda _: None)
            assert outcome is not None and outcome.outcome == "base"
            assert _temps(root) == [], (n, name)
            code, lines = _verify(capsys, root)
            assert code == 0 and lines[-1].startswith("ok: "), (n, name, lines)
            assert not any("unfinished" in line or "machinery to clean" in line for line in lines), lines
    assert left_by_kills >= 6  # the issue saw temps left at 6 of 7 kill points: the test reaches them


def test_verify_of_a_session_killed_before_its_handoff_says_ok_and_how_to_resume(paused: Path, tmp_path: Path,
                                                                                monkeypatch: pytest.MonkeyPatch,
                                                                                capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy(paused, tmp_path, monkeypatch)
    last = read_records(root)[-1]
    code, lines = _verify(capsys, root)
    assert code == 0, lines
    assert lines[-2].startswith("ok: ")
    assert lines[-1] == (f"note: unfinished session: no hand-off yet (last record seq {last.seq}: {last.kind}); "
                         f"continue it with `sk-run sweep --resume {root}`")
    temp = temp_beside(root / "handoff.json")  # what a kill leaves: machinery, named, never evidence or tampering
    code, lines = _verify(capsys, root)
    assert code == 0, lines
    assert f"note: machinery to clean: 1 temp file(s) of interrupted writes ({temp.name}); not evidence, nothing was tampered " \
           f"with; the next `sk-run sweep --resume {root}` removes them" in lines
    capsys.readouterr()
    assert run_cli(cli, "sk-analyze", ["ledger", "verify", "--json", str(root)]) == 0
    assert '"unfinished": "unfinished session: no hand-off yet' in capsys.readouterr().out


def test_a_resume_keeps_the_temp_files_of_a_round_another_process_is_running(paused: Path, tmp_path: Path,
                                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Only temps no live writer can own are removed: a round whose lock another process holds keeps its own."""
    from filelock import FileLock

    from sk_runner.sweep.leftovers import drop_leftover_temps
    from sk_runner.trial import LOCK_NAME

    root = _copy(paused, tmp_path, monkeypatch)
    round_dir = root / "experiments" / "Sbest" / "O0-INCUMBENT"
    busy = temp_beside(round_dir / "trial.json")
    stale = temp_beside(root / "report.html")
    holder = subprocess.Popen([sys.executable, "-c", "import sys, filelock; l = filelock.FileLock(sys.argv[1]); l.acquire(); "
                               "print('held', flush=True); sys.stdin.read()", str(round_dir / LOCK_NAME)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline() == "held\n"
        assert drop_leftover_temps(root) == [stale.relative_to(root).as_posix()]
        assert busy.exists() and not stale.exists()
    finally:
        holder.communicate("", timeout=60)
    released = FileLock(str(round_dir / LOCK_NAME))
    released.acquire(timeout=0)  # its holder is gone: free
    released.release()
    assert drop_leftover_temps(root) == [busy.relative_to(root).as_posix()]
