"""Issue 36: SIGINT and SIGTERM end sk-run and sk-analyze with 130 / 143 whatever window they land in
(sk_analytics.interrupts), never exit 70 ("internal error ... a bug in sk-tune")."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from sk_analytics import interrupts
from sk_analytics.cli._base import run_cli, run_main

REPO = Path(__file__).resolve().parents[1]
KERNEL_DETAILS = REPO / "fixtures" / "kernel_details" / "level0_minimal.csv"


@pytest.fixture
def handlers() -> Iterator[None]:
    """The CLIs' SIGINT/SIGTERM handler in this process for one test; the previous handlers and mask afterwards."""
    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, set())
    interrupts.install()
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        interrupts.clear()


def _group(body: object) -> click.Group:
    @click.group()
    def grp() -> None:
        pass

    @grp.command()
    def go() -> int:
        return body()  # type: ignore[operator]

    return grp


def _wrapped_like_set_name(sig: signal.Signals) -> int:
    """Python 3.11's form of an interrupt raised in ``__set_name__`` during class creation (3.12 adds a note instead)."""
    try:
        signal.raise_signal(sig)
    except KeyboardInterrupt as exc:
        raise RuntimeError("Error calling __set_name__ on 'Field' instance 'trials' in 'RoundInfo'") from exc
    raise AssertionError("the handler did not raise")


@pytest.mark.parametrize(("sig", "code", "word"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_an_interrupt_wrapped_in_another_exception_is_still_one(handlers: None, sig: signal.Signals, code: int, word: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(_group(lambda: _wrapped_like_set_name(sig)), "sk-run", ["go"]) == code
    assert capsys.readouterr().err == f"sk-run: {word}\n"


def test_an_error_after_a_swallowed_interrupt_is_the_interrupt(handlers: None, capsys: pytest.CaptureFixture[str]) -> None:
    """A C extension or a broad ``except`` that turns the interrupt into its own error: the recorded signal decides."""
    def swallowing() -> int:
        try:
            signal.raise_signal(signal.SIGTERM)
        except BaseException:  # noqa: BLE001 - what a careless caller does
            pass
        raise ValueError("computation cancelled")

    assert run_cli(_group(swallowing), "sk-analyze", ["go"]) == 143
    assert capsys.readouterr().err == "sk-analyze: terminated\n"


@pytest.mark.parametrize(("sig", "code", "word"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_a_plain_keyboard_interrupt_raised_for_a_recorded_signal_is_that_signal(
        handlers: None, sig: signal.Signals, code: int, word: str, capsys: pytest.CaptureFixture[str]) -> None:
    """What Ray's ``ray.wait``/``ray.get`` do: run the handler inside C, swallow its interrupt, raise a plain
    ``KeyboardInterrupt`` of their own; SIGTERM stays 143 (it was 130, "interrupted")."""
    def ray_like() -> int:
        try:
            signal.raise_signal(sig)
        except KeyboardInterrupt:
            pass
        raise KeyboardInterrupt()

    assert run_cli(_group(ray_like), "sk-run", ["go"]) == code
    assert capsys.readouterr().err.lstrip("\n") == f"sk-run: {word}\n"  # click ends the ^C line first


def test_a_bug_without_a_signal_is_still_exit_70(handlers: None, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    interrupts.note(signal.SIGINT)  # a signal of an earlier command in this process does not count
    def bug() -> int:
        raise RuntimeError("Error calling __set_name__ on 'Field' instance 'x' in 'Y'")

    assert run_cli(_group(bug), "sk-run", ["go"]) == 70
    assert "internal error (RuntimeError" in capsys.readouterr().err


def test_a_signal_in_a_finally_block_or_after_the_command_returned(handlers: None, capsys: pytest.CaptureFixture[str]) -> None:
    def in_finally() -> int:
        try:
            return 0
        finally:
            signal.raise_signal(signal.SIGTERM)

    assert run_main(_group(in_finally), "sk-run", ["go"]) == 143
    assert capsys.readouterr().err.strip() == "sk-run: terminated"


# A command whose lazily imported module gets the signal while its classes are created
# (a dataclasses.Field.__set_name__ hook), in a child process as a user would run it.
CHILD = r"""
import dataclasses, signal, sys
sig, package = signal.Signals[sys.argv[1]], sys.argv[2]
set_name = dataclasses.Field.__set_name__
def hook(self, owner, name, fired=[]):
    if owner.__module__.startswith(package) and not fired:
        fired.append(name)
        signal.raise_signal(sig)
    return set_name(self, owner, name)
dataclasses.Field.__set_name__ = hook
from {entry} import main
sys.argv[1:3] = []
main()
"""


@pytest.mark.parametrize(("sig", "code", "word"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_sk_analyze_signalled_during_class_creation_of_a_lazy_import(sig: signal.Signals, code: int, word: str,
                                                                     tmp_path: Path) -> None:
    (tmp_path / "prof").mkdir()
    (tmp_path / "prof" / "kernel_details.csv").write_bytes(KERNEL_DETAILS.read_bytes())
    argv = [sig.name, "sk_analytics.ingest.", "ingest", str(tmp_path / "prof"), "--out", str(tmp_path / "out")]
    done = subprocess.run([sys.executable, "-c", CHILD.format(entry="sk_analytics.cli"), *argv], cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == code, done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"sk-analyze: {word}" and "internal error" not in done.stderr, done.stderr
    again = subprocess.run([sys.executable, "-c", "from sk_analytics.cli import main; main()", *argv[2:]], cwd=REPO,
                           capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0, again.stderr  # the same command afterwards: nothing was left half-done


@pytest.mark.parametrize(("sig", "code", "word"), [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated")])
def test_sk_run_signalled_during_class_creation_of_a_lazy_import(sig: signal.Signals, code: int, word: str) -> None:
    """``sk-run trial`` imports its modules lazily (here: the first dataclass with a field() of any sk_runner module);
    the sweep's own case (at the hand-off) is in tests/test_sweep_resume.py::test_signal_and_resume_reaches_same_result."""
    done = subprocess.run([sys.executable, "-c", CHILD.format(entry="sk_runner.cli"), sig.name, "sk_runner.", "trial", "--help"],
                          cwd=REPO, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == code, done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"sk-run: {word}" and "internal error" not in done.stderr, done.stderr
