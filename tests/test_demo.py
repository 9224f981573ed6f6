"""sk-run demo: a small sample session generated, ingested and summarised."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sk_analytics.cli._base import run_cli
from sk_runner.cli import cli
from sk_runner.demo.cli import RANKS, RUNS, WARMUP


def _worst_rank_means(session: Path) -> dict[str, float]:
    """Independent reference: read the generated logs as text."""
    result = {}
    for run in sorted((session / "experiments/Sbest/O0-INCUMBENT/CLEAN").iterdir()):
        means = []
        for log in sorted(run.glob("log_*.log")):
            values = [float(v) for v in re.findall(r"Inference time \(decode\): ([0-9.]+) ms", log.read_text())]
            means.append(sum(values[WARMUP:]) / len(values[WARMUP:]))
        result[run.name] = max(means)
    return result


def test_demo_generates_ingests_and_summarises(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    session = tmp_path / "demo"
    assert run_cli(cli, "sk-run", ["demo", "--samples", "--session", str(session)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"sample session: {session} ({RUNS * RANKS + 1} artifacts ingested into {session / 'data'})\n")
    for run, mean in _worst_rank_means(session).items():
        assert f"  {run}: {mean:.3f} ms\n" in out
    assert "profile: 600 kernels, " in out and "SuperKernel rows" in out
    parts = sorted(p.relative_to(session / "data").as_posix() for p in (session / "data").rglob("*.parquet"))
    assert parts == [
        "kernels/round=O0-INCUMBENT/role=profile/run=profile/part-0.parquet",
        *[f"timings/round=O0-INCUMBENT/role=baseline/run=run-{k}/part-0.parquet" for k in range(1, RUNS + 1)],
    ]
    assert run_cli(cli, "sk-run", ["demo", "--samples", "--session", str(session)]) == 0  # a demo folder is replaced
    assert capsys.readouterr().out == out


def test_demo_refuses_a_folder_it_did_not_write(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "evidence.txt").write_text("keep me")
    assert run_cli(cli, "sk-run", ["demo", "--samples", "--session", str(tmp_path)]) == 2
    assert "is not a demo session" in capsys.readouterr().err
    assert (tmp_path / "evidence.txt").read_text() == "keep me"


@pytest.mark.parametrize("samples", [["--samples"], []])
def test_a_demo_never_replaces_the_folder_of_a_demo_still_running(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                   samples: list[str]) -> None:
    """A second ``sk-run demo`` (another terminal, the same folder) while the first one's sweep holds its session: it
    is refused and the running session is left whole (it used to be deleted under the running sweep, which then died
    on a missing file)."""
    from filelock import FileLock

    from sk_analytics.stage_o.session_notes import SWEEP_LOCK

    session = tmp_path / "demo-session"
    assert run_cli(cli, "sk-run", ["demo", "--samples", "--session", str(session)]) == 0
    capsys.readouterr()
    with FileLock(str(session / SWEEP_LOCK)).acquire(timeout=0):  # the running demo's sweep
        before = sorted(p.relative_to(session).as_posix() for p in session.rglob("*"))
        assert run_cli(cli, "sk-run", ["demo", *samples, "--session", str(session)]) == 2
    err = capsys.readouterr().err
    assert f"{session}: a demo is running in this folder" in err and err.count("\n") == 1
    assert sorted(p.relative_to(session).as_posix() for p in session.rglob("*")) == before


@pytest.mark.parametrize("full_profile", [False, True])
def test_a_stopped_demos_fresh_command_makes_a_session_of_the_same_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                            full_profile: bool) -> None:
    """``sk-run demo --full-profile`` that stops names a fresh command (``fresh_session_argv``) that makes a session of
    exactly its settings: seed, controls, backend and policy, the full profile window included."""
    from sk_runner.backends.base import Control
    from sk_runner.sweep import cli as sweep_cli
    from sk_runner.sweep.demo import DEMO_CONTROL, demo_session
    from sk_runner.sweep.session import SweepSession, fresh_session_argv

    original = demo_session(tmp_path / "demo-session", seed=7, control=Control(2, 30, DEMO_CONTROL.warmup), full_profile=full_profile)
    argv = fresh_session_argv(original)
    assert ("--full-profile" in argv) is full_profile
    made: list[SweepSession] = []
    monkeypatch.setattr(sweep_cli, "run_and_print", lambda session, *_args: made.append(session) or 0)
    assert argv[0] == "sk-run" and run_cli(cli, "sk-run", argv[1:]) == 0
    [fresh] = made
    assert fresh.root == tmp_path / "demo-session-2"
    assert (fresh.seed, fresh.control, fresh.backend, fresh.policy) == (original.seed, original.control, original.backend, original.policy)


def test_full_profile_goes_with_the_demo(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(cli, "sk-run", ["sweep", "--resume", str(tmp_path), "--full-profile"]) == 2
    assert "--full-profile goes with --demo" in capsys.readouterr().err


def test_a_moved_demo_session_leases_under_its_new_folder(tmp_path: Path) -> None:
    """The demo's own lease lives under its session (``<session>/.device-leases``): a demo session moved to another
    folder and resumed leases there, never re-creating its old folder to hold a lease in it."""
    from sk_analytics.ledger.evidence import LEASE_DIR
    from sk_runner.backends.base import Control
    from sk_runner.sweep.demo import demo_session
    from sk_runner.sweep.leasing import recorded_request, session_request

    demo_session(tmp_path / "first", seed=7, control=Control(2, 30, 8))
    moved = tmp_path / "elsewhere" / "copy"
    moved.parent.mkdir()
    (tmp_path / "first").rename(moved)
    need, unleased, recorded = recorded_request(moved)
    assert recorded and not unleased and need is not None
    assert (need.root, need.device_ids) == (str(moved / LEASE_DIR), (0, 1))
    assert session_request(moved, None, (), 5.0, env={}).need == need


def test_a_demo_marks_its_folder_only_once_its_sweep_holds_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """The marker that lets a later demo replace the folder is written once the sweep holds the session's lock: a second
    demo started before that sees a folder that is not (yet) a demo's and is refused, never replacing it."""
    import sk_runner.sweep.driver as driver
    from sk_runner.demo.cli import MARKER
    from sk_runner.sweep.driver import SweepOutcome

    session = tmp_path / "demo-session"
    seen: list[bool] = []

    def fake_run_sweep(sweep, *, started=None, **_kw):  # the real one calls started() once it holds .sweep.lock
        seen.append((session / MARKER).exists())
        assert run_cli(cli, "sk-run", ["demo", "--samples", "--session", str(session)]) == 2  # a second demo, right now
        assert started is not None
        started()
        seen.append((session / MARKER).exists())
        return SweepOutcome("base", session, 0, session / "handoff.json", session / "EXPERIMENT_REPORT.md", session / "report.html")

    monkeypatch.setattr(driver, "run_sweep", fake_run_sweep)
    assert run_cli(cli, "sk-run", ["demo", "--session", str(session)]) == 0
    assert seen == [False, True]
    assert "is not a demo session" in capsys.readouterr().err
    assert (session / "session.json").is_file()  # the first demo's session is whole


def test_two_demos_without_a_session_folder_in_the_same_second_get_two_folders(tmp_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """`sk-run sweep --demo` without --session makes its folder under the temp dir; two started in the same second
    (two terminals, a script) each get their own, instead of the second stopping on 'already holds a session'."""
    import tempfile
    import time

    from sk_runner.backends.base import Control
    from sk_runner.sweep.demo import demo_session

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(time, "strftime", lambda *_args: "20261207-001859")  # the same second for both
    first = demo_session(None, seed=7, control=Control(2, 30, 8))
    second = demo_session(None, seed=7, control=Control(2, 30, 8))
    assert first.root != second.root and first.root.parent == second.root.parent == tmp_path
    assert first.root.name.startswith("sk-tune-demo-20261207-001859") and (second.root / "session.json").is_file()
