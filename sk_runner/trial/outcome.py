"""How one finished workload process ended: ok, or its first failure (timeout, crash, wrong output, bad logs)."""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from sk_analytics.errors import InputError
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.fingerprint import sha256_file
from sk_analytics.ingest.base import ParseResult
from sk_analytics.ingest.timings import RANK_LOG, parse_rank_logs, rank_of
from sk_analytics.messages import coded, render
from sk_runner.backends.base import Control
from sk_runner.process import ProcessResult
from sk_runner.process.stderr_tail import stderr_words


@dataclass
class RunOutcome:
    """Classification of one finished process."""

    status: str  # ok | crash | timeout | wrong_output | bad_logs
    message: str
    logs: list[dict[str, Any]] = field(default_factory=list)
    correctness: dict[str, Any] | None = None
    parsed: dict[Path, ParseResult] = field(default_factory=dict)
    """The validated rank logs' timings, handed to the ingest so each log is parsed once."""
    words: dict[str, Any] | None = None
    """``message`` as a recorded message (its English rendering is ``message``), for a failed run (timeout, crash,
    bad logs, wrong output): a Chinese reader gets Chinese words; None for an ok run."""



def classify(result: ProcessResult, run_dir: Path, control: Control, *, need_correctness: bool) -> RunOutcome:
    """ok, or the first failure: timeout, crash, wrong output, bad logs (a timeout or crash
    ends with the workload's last stderr lines, from ``stderr.txt`` of the run folder); a rank
    that logged fewer decode samples than asked is a crash too (:func:`read_rank_logs`)."""
    if not result.ok:
        tail = stderr_words(run_dir / "stderr.txt")
        if result.timed_out:
            words = coded("runner.timeout", seconds=control.timeout_s, tail=tail)
        elif result.signal is not None:
            words = coded("runner.killed", signal=result.signal_name, tail=tail)
        else:
            words = coded("runner.exit_status", code=result.exit_code, tail=tail)
        return worded("timeout" if result.timed_out else "crash", words)
    correctness = None
    corr_path = run_dir / "correctness.json"
    if corr_path.is_file():
        try:
            correctness = load_json_file(corr_path)
        except InputError as exc:
            return worded("bad_logs", coded("logs.correctness_unreadable", detail=exc.one_line()))
        if not isinstance(correctness, dict) or not isinstance(correctness.get("passed"), bool):
            return worded("bad_logs", coded("logs.correctness_no_passed"))
        if correctness["passed"] is not True:
            return worded("wrong_output", coded("logs.correctness_failed"), correctness)
    elif need_correctness:
        return worded("bad_logs", coded("logs.correctness_missing"))
    logs = read_rank_logs(run_dir, control)
    if logs.problem is not None:  # a rank that ended early may have said why on stderr
        status, words = logs.problem
        if status == "crash":
            words = coded("logs.with_tail", problem=words, tail=stderr_words(run_dir / "stderr.txt"))
        return worded(status, words, correctness)
    return RunOutcome("ok", "ok", logs.records, correctness, logs.parsed)


def worded(status: str, words: dict[str, Any], correctness: dict[str, Any] | None = None) -> RunOutcome:
    """A failed run's outcome from its recorded message: ``message`` is the English rendering, ``words`` the message."""
    return RunOutcome(status, render(words, "en"), correctness=correctness, words=words)


@dataclass(frozen=True)
class RankLogs:
    """What the rank logs of a finished run say: the first problem, else each log's record and timings."""

    problem: tuple[str, dict[str, Any]] | None
    """(status, words): ``crash`` (a rank ended early) or ``bad_logs``, and what is wrong as a recorded message
    (``logs.*``, :func:`sk_analytics.messages.coded`); None when every log is as asked."""
    records: list[dict[str, Any]] = field(default_factory=list)
    """Per rank: ``file``, ``sha256``, ``decode_samples``, ``prefill_samples`` (empty on a problem)."""
    parsed: dict[Path, ParseResult] = field(default_factory=dict)
    """The validated logs' timings (the ingest reuses them: each log is parsed once)."""


def read_rank_logs(run_dir: Path, control: Control) -> RankLogs:
    """Check the ``log_<rank>.log`` files of ``run_dir`` against what sk-tune asked for (``control``): no log of a
    rank beyond ``ranks``, each parsable, the decode samples of :func:`sample_count_problem`, none missing.
    The one check of every run that writes rank logs: a trial's clean and correctness runs, a profile collection."""
    extra = sorted((p.name for p in run_dir.glob("log_*.log") if RANK_LOG.match(p.name) and rank_of(p) >= control.ranks),
                   key=lambda name: int(name[4:-4]))
    if extra:  # the analysis would refuse the run folder later, after the session went on: say it now, with a scene
        return RankLogs(("bad_logs", coded("logs.extra", files=", ".join(extra), ranks=control.ranks, last=control.ranks - 1)))
    odd = sorted(p.name for p in run_dir.glob("log_*.log") if RANK_LOG.match(p.name) and p.name != f"log_{rank_of(p)}.log")
    if odd:  # log_01.log: a second log of rank 1 to the analysis, which would refuse the run after it was recorded
        return RankLogs(("bad_logs", coded("logs.odd_name", files=", ".join(odd), last=control.ranks - 1)))
    paths = [run_dir / f"log_{rank}.log" for rank in range(control.ranks)]
    linked = linked_problem(paths)
    if linked is not None:
        return RankLogs(linked)
    missing = next((path for path in paths if not path.is_file()), None)
    present = paths if missing is None else paths[:paths.index(missing)]
    try:  # one vectorized parse, root as ingest_run_dir gives it: the ingest reuses it
        parsed = dict(zip(present, parse_rank_logs(present, root=run_dir), strict=True))
    except InputError as exc:
        return RankLogs(("bad_logs", coded("logs.unparsable", detail=exc.one_line())))
    counts = {path: timings.frame.filter(pl.col("phase") == "decode").height for path, timings in parsed.items()}
    problem = sample_count_problem(counts, control, {path: repeated_steps(timings.frame) for path, timings in parsed.items()})
    if problem is not None:
        return RankLogs(problem)
    if missing is not None:
        return RankLogs(("bad_logs", coded("logs.missing", file=missing.name)))
    records = [{"file": path.name, "sha256": sha256_file(path), "decode_samples": decode,
                "prefill_samples": parsed[path].frame.height - decode} for path, decode in counts.items()]
    return RankLogs(None, records, parsed)


def linked_problem(paths: list[Path]) -> tuple[str, dict[str, Any]] | None:
    """``bad_logs`` for the first rank log that is a link (symbolic, or a hard link with another name): its samples
    are a file's outside the run, which the next run (linked to the same file) overwrites, so every run would read
    the last one's; the evidence, bound later, would be another run's or change after the session. None when none is."""
    for path in paths:
        if path.is_symlink():
            return "bad_logs", coded("logs.symlink", file=path.name, target=os.readlink(path))
        try:
            links = path.stat().st_nlink
        except OSError:  # missing: said by the caller
            continue
        if links > 1:
            return "bad_logs", coded("logs.hardlink", file=path.name, links=links)
    return None


@dataclass(frozen=True)
class Repeats:
    """Decode timing lines of one rank log that repeat the line right above them (same value): ``count`` of them,
    the first one's ``line``, and its ``value`` text. A duplicated step (a workload that logged one step twice)
    shows as such a line; so may, rarely, two steps that took the same time."""

    count: int
    line: int
    value: str


def repeated_steps(frame: pl.DataFrame) -> Repeats | None:
    """The :class:`Repeats` of a rank log's ``timings`` rows (file order), None when no decode line repeats the one above it."""
    decode = frame.filter(pl.col("phase") == "decode")
    repeats = decode.filter((pl.col("line") == pl.col("line").shift(1) + 1) & (pl.col("value_text") == pl.col("value_text").shift(1)))
    if not repeats.height:
        return None
    return Repeats(repeats.height, int(repeats["line"][0]), str(repeats["value_text"][0]))


def sample_count_problem(counts: dict[Path, int], control: Control,
                         repeats: dict[Path, Repeats | None] | None = None) -> tuple[str, dict[str, Any]] | None:
    """(status, words) when the decode samples of the rank logs are not what sk-tune asked for, else None.

    Every rank must log exactly ``control.iterations`` decode samples when the controls set them
    (``SK_RUN_ITERATIONS``), else as many as the other ranks. A rank with fewer ended early, whatever
    the launcher's exit status (a launcher that ends with a plain ``wait`` exits 0 when one rank died):
    ``crash``, naming the rank, its count and the expected one. More than ``SK_RUN_ITERATIONS``, or
    no more than the warm-up, is a workload that does not log as the contract says: ``bad_logs``.

    A duplicated step (``repeats``, :func:`repeated_steps`) is ``bad_logs`` naming the rank, its log and the
    line that repeats the one above it, where the repeated lines are exactly the samples too many: of a log over
    ``SK_RUN_ITERATIONS``, and without ``SK_RUN_ITERATIONS`` of every log with more samples than the fewest
    (taking the most as expected, a duplicate in rank 0 named rank 1 as ended early). A log whose repeats do not
    match its excess (a workload that logs the same value every step), or a run where a log of no excess repeats
    values too (timings of few digits, where two steps often take the same time), keeps the counts' verdict: the
    equal values cannot tell a duplicate from a step.
    ``words`` is a recorded message (``logs.*``), worded in the reader's language.
    """
    if not counts:
        return None
    found = repeats or {}
    if control.iterations is None:
        low = min(counts.values())
        above = [(path, n, found.get(path)) for path, n in counts.items() if n > low]
        explained = [(path, n, r) for path, n, r in above if r is not None and r.count == n - low]
        if above and len(explained) == len(above) and _repeats_are_rare(counts, found, low):
            path, n, repeated = explained[0]
            return "bad_logs", _duplicated(path, n, low, coded("logs.why_others"), repeated)
    expected = control.iterations if control.iterations is not None else max(counts.values())
    why = coded("logs.why_iterations", n=control.iterations) if control.iterations is not None else coded("logs.why_others")
    over = [(path, n) for path, n in counts.items() if n > expected]
    if over:
        path, n = over[0]
        over_repeats = found.get(path)
        if over_repeats is not None and over_repeats.count == n - expected and _repeats_are_rare(counts, found, expected):
            return "bad_logs", _duplicated(path, n, expected, why, over_repeats)
        return "bad_logs", coded("logs.over", file=path.name, n=n, expected=expected, why=why)
    short = [coded("logs.short_rank", rank=rank_of(path), file=path.name, n=n) for path, n in counts.items() if n < expected]
    if short:
        ranks = functools.reduce(lambda rest, first: coded("logs.list", first=first, rest=rest), reversed(short[:-1]), short[-1])
        return "crash", coded("logs.short", ranks=ranks, expected=expected, why=why)
    if expected <= control.warmup:
        path = next(iter(counts))
        return "bad_logs", coded("logs.few", file=path.name, n=expected, warmup=control.warmup)
    return None


def _repeats_are_rare(counts: dict[Path, int], repeats: dict[Path, Repeats | None], expected: int) -> bool:
    """Whether no log of at most ``expected`` samples repeats a value: only then do the repeats of a log over it
    tell a duplicated step from two steps that took the same time."""
    return all(repeats.get(path) is None for path, n in counts.items() if n <= expected)


def _duplicated(path: Path, n: int, expected: int, why: dict[str, Any], repeated: Repeats) -> dict[str, Any]:
    """``logs.duplicated``: the rank log, its line that repeats the one above it, its count and the expected one."""
    return coded("logs.duplicated", rank=rank_of(path), file=path.name, line=repeated.line, previous=repeated.line - 1,
                 value=repeated.value, n=n, expected=expected, why=why)
