"""How one finished workload process ended: ok, or its first failure (timeout, crash, wrong output, bad logs)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import polars as pl

from sk_analytics.errors import InputError
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.fingerprint import sha256_file
from sk_analytics.ingest.base import ParseResult
from sk_analytics.ingest.timings import parse_rank_logs
from sk_runner.backends.base import Control
from sk_runner.process import ProcessResult
from sk_runner.process.stderr_tail import stderr_note


@dataclass
class RunOutcome:
    """Classification of one finished process."""

    status: str  # ok | crash | timeout | wrong_output | bad_logs
    message: str
    logs: list[dict[str, Any]] = field(default_factory=list)
    correctness: dict[str, Any] | None = None
    parsed: dict[Path, ParseResult] = field(default_factory=dict)
    """The validated rank logs' timings, handed to the ingest so each log is parsed once."""



def classify(result: ProcessResult, run_dir: Path, control: Control, *, need_correctness: bool) -> RunOutcome:
    """ok, or the first failure: timeout, crash, wrong output, bad logs (a timeout or crash
    ends with the workload's last stderr lines, from ``stderr.txt`` of the run folder)."""
    if not result.ok:
        tail = stderr_note(run_dir / "stderr.txt")
        if result.timed_out:
            return RunOutcome("timeout", f"no exit within {control.timeout_s} s: process group terminated{tail}")
        return RunOutcome("crash", f"killed by {result.signal_name}{tail}" if result.signal is not None else f"exit status {result.exit_code}{tail}")
    correctness = None
    corr_path = run_dir / "correctness.json"
    if corr_path.is_file():
        try:
            correctness = load_json_file(corr_path)
        except InputError as exc:
            return RunOutcome("bad_logs", f"correctness.json unreadable: {exc.one_line()}")
        if not isinstance(correctness, dict) or not isinstance(correctness.get("passed"), bool):
            return RunOutcome("bad_logs", "correctness.json has no boolean 'passed'")
        if correctness["passed"] is not True:
            return RunOutcome("wrong_output", "correctness.json reports passed=false", correctness=correctness)
    elif need_correctness:
        return RunOutcome("bad_logs", "correctness.json missing")
    paths = [run_dir / f"log_{rank}.log" for rank in range(control.ranks)]
    missing = next((path for path in paths if not path.is_file()), None)
    present = paths if missing is None else paths[:paths.index(missing)]
    try:  # one vectorized parse, root as ingest_run_dir gives it: the ingest reuses it
        parsed = dict(zip(present, parse_rank_logs(present, root=run_dir), strict=True))
    except InputError as exc:
        return RunOutcome("bad_logs", f"rank log unparsable: {exc.one_line()}", correctness=correctness)
    logs = []
    for path, timings in parsed.items():
        decode = timings.frame.filter(pl.col("phase") == "decode").height
        if decode <= control.warmup:
            return RunOutcome("bad_logs", f"{path.name} has {decode} decode samples, not more than warm-up {control.warmup}",
                              correctness=correctness)
        logs.append({"file": path.name, "sha256": sha256_file(path), "decode_samples": decode,
                     "prefill_samples": timings.frame.height - decode})
    if missing is not None:
        return RunOutcome("bad_logs", f"rank log {missing.name} missing", correctness=correctness)
    return RunOutcome("ok", "ok", logs, correctness, parsed)
