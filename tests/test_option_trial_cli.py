"""``sk-analyze option-trial`` / ``stability`` end to end: exit codes, one-line
errors, every summary key of formats.md §1, languages, Parquet sources."""

from __future__ import annotations

import errno
import json
from pathlib import Path

import polars as pl
import pytest
from ot_logs import uniform_runs, write_candidate

from sk_analytics.cli import main
from sk_analytics.files.io_seam import Fault, inject
from sk_analytics.ingest.timings import read_candidate
from sk_analytics.schema import TIMINGS
from sk_analytics.tables import write_table

BASE = ["100", "102.5", "97.5", "100", "100"]


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as info:
        main(list(args))
    out = capsys.readouterr()
    return int(info.value.code), out.out, out.err


@pytest.fixture
def folders(tmp_path: Path) -> tuple[Path, Path, Path]:
    base = write_candidate(tmp_path / "base", uniform_runs(BASE))
    win = write_candidate(tmp_path / "win", uniform_runs(["99", "98", "99.5"]))
    tie = write_candidate(tmp_path / "tie", uniform_runs(["99", "101", "100"]))
    return base, win, tie


def trial_args(base: Path, *cands: str) -> list[str]:
    args = ["option-trial", "--baseline", str(base), "--option-trial", "--warmup", "2", "--expected-ranks", "2"]
    for cand in cands:
        args += ["--candidate", cand]
    return args


def test_accepted_exit_0_json_has_every_legacy_key(capsys, folders, tmp_path: Path) -> None:
    base, win, _ = folders
    out_file = tmp_path / "out" / "summary.json"
    code, out, err = run_cli(capsys, *trial_args(base, f"O1={win}"), "--json-out", str(out_file))
    assert code == 0 and err == ""
    assert "协议门禁" in out and "接受" in out
    data = json.loads(out_file.read_text())
    assert set(data["baseline"]) >= {"path", "run_count", "runs", "decode", "run_worst_rank_means_ms", "median_run_worst_rank_mean_ms", "worst_rank_mean_ms"}
    assert set(data["baseline"]["decode"]) == {"count", "mean_ms", "p50_ms", "p90_ms", "stddev_ms", "min_ms", "max_ms"}
    assert set(data["baseline_stability"]) >= {"stable", "checks", "required_run_count", "max_spread_pct", "run_worst_rank_means_ms", "spread_ms",
                                               "mean_ms", "spread_pct"}
    assert set(data["baseline_stability"]["checks"]) == {"required_run_count", "max_spread_pct"}
    cand = data["candidates"]["O1"]
    assert "improvement_pct" in cand
    ev = cand["option_trial_evaluation"]
    assert set(ev) >= {"accepted", "checks", "mean_improvement_rule", "min_improvement_pct", "mean_improvement_pct", "median_run_improvement_pct",
                       "p90_regression_pct", "stddev_regression_pct"}
    assert list(ev["checks"]) == ["baseline_stable", "baseline_min_runs", "candidate_min_runs", "mean_improvement", "median_run_direction",
                                  "p90_no_material_regression", "stddev_no_material_regression"]
    sel = data["selection"]
    assert sel["stage"] == "winner_option_trial" and sel["recommended"] == "O1"
    assert sel["option_trial_accepted"] is True and sel["retained_incumbent"] == "O1" and sel["ranked_candidates"] == ["O1"]
    assert cand["statistics"]["verdict"] in {"win", "loss", "neutral", "inconclusive"}


def test_rejected_exit_1_english(capsys, folders) -> None:
    base, _, tie = folders
    code, out, _ = run_cli(capsys, *trial_args(base, f"O1={tie}"), "--lang", "en")
    assert code == 1
    assert "rejected" in out and "recommended: baseline" in out
    # the checks in English words, listed with commas (names of several words); the JSON keeps the keys
    [checks] = [line for line in out.splitlines() if line.startswith("[O1] checks: ")]
    assert checks.startswith("[O1] checks: baseline stable=✓, baseline exactly 5 runs=✓, candidate at least 3 runs=✓, "
                             "mean strictly better=✗, median run better="), checks
    assert "_" not in checks, checks


def test_a_check_the_catalogs_do_not_name_is_shown_as_recorded(folders) -> None:
    """A summary from another version with a check this one has no words for: its key, not a KeyError."""
    from sk_analytics.ingest.timings import read_candidate
    from sk_analytics.option_trial import evaluate_option_trial
    from sk_analytics.option_trial.report import render_option_trial

    base, _, tie = folders
    result = evaluate_option_trial(read_candidate(base, expected_ranks=2, warmup=2),
                                   {"O1": read_candidate(tie, expected_ranks=2, warmup=2)}, warmup=2, expected_ranks=2)
    result["candidates"]["O1"]["option_trial_evaluation"]["checks"]["p99_steady"] = True
    assert "median run better=✓" not in render_option_trial(result, "zh")
    assert "、p99_steady=✓" in render_option_trial(result, "zh") and ", p99_steady=✓" in render_option_trial(result, "en")


def test_two_candidates_fastest_accepted_recommended(capsys, folders) -> None:
    base, win, tie = folders
    code, out, _ = run_cli(capsys, *trial_args(base, f"A={tie}", f"B={win}"), "--lang", "en")
    assert code == 0 and "recommended: B" in out


def test_strict_gate_exit_1(capsys, folders) -> None:
    base, win, _ = folders
    code, out, _ = run_cli(capsys, *trial_args(base, f"O1={win}"), "--gate", "strict", "--lang", "en")
    assert code == 1 and "gate mode: strict (protocol gate + 95 % CI of the improvement above 0 (stricter than the protocol))  decision: rejected" in out


def test_stability_exit_codes(capsys, folders, tmp_path: Path) -> None:
    base, win, _ = folders
    assert run_cli(capsys, "stability", str(base), "--warmup", "2", "--expected-ranks", "2")[0] == 0
    unstable = write_candidate(tmp_path / "unstable", uniform_runs(["100", "110", "100", "100", "100"]))
    code, out, _ = run_cli(capsys, "stability", str(unstable), "--warmup", "2", "--expected-ranks", "2", "--lang", "en", "--json-out", str(tmp_path / "s.json"))
    assert code == 1 and "baseline stable: no" in out
    data = json.loads((tmp_path / "s.json").read_text())
    assert data["baseline_stability"]["checks"] == {"required_run_count": True, "max_spread_pct": False}
    assert run_cli(capsys, "stability", str(win), "--warmup", "2", "--expected-ranks", "2")[0] == 2  # 3 runs: no verdict


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda t: write_candidate(t / "c", [{0: ["1", "2", "3"]}]), "run-1: found 1 rank logs (expected 2"),
        (lambda t: write_candidate(t / "c", [{0: ["1", "2", "3"], 1: ["1", "2"]}]), "log_1.log: no decode samples remain after warmup=2"),
        # a log without any timing line is named as ingest names it, not as a rank short of decode samples
        (lambda t: write_candidate(t / "c", [{0: ["1", "2", "3"], 1: []}]),
         "c/run-1/log_1.log: no timing line: the log holds no sample of its rank; nothing was written (expected at least one "
         "'Inference time (decode|prefill): <value> ms' line"),
        (lambda t: (t / "c").mkdir() or t / "c", "no run-* folders found"),
        (lambda t: write_candidate(t / "c", [{0: ["1", "2", "3"], 1: ["1", "2", "3..4"]}]), "log_1.log:6: timing value '3..4' is not a decimal number"),
    ],
)
def test_bad_candidate_is_one_line_exit_2(capsys, folders, tmp_path: Path, make, message: str) -> None:
    base, _, _ = folders
    bad = make(tmp_path)
    code, out, err = run_cli(capsys, *trial_args(base, f"O1={bad}"))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith("sk-analyze: error: ") and message in err


@pytest.mark.parametrize(("value", "message"), [
    ("9" * 400, "run-5/log_0.log:6: timing value of 400 characters cannot be a decode time (expected at most 32 characters)"),
    ("inf", "run-5/log_0.log:6: timing value 'inf' cannot be a decode time"),
    ("NaN", "run-5/log_0.log:6: timing value 'NaN' cannot be a decode time"),
    ("1.5e3", "run-5/log_0.log:6: timing value '1.5e3' cannot be a decode time"),
    ("-12.5", "run-5/log_0.log:6: timing value '-12.5' cannot be a decode time"),
])
def test_impossible_timing_value_is_an_error_not_a_skipped_sample(capsys, folders, tmp_path: Path, value: str, message: str) -> None:
    """Overflowing, infinite, exponent and negative values name file and line (exit 2), for every command reading them."""
    base, _, _ = folders
    bad = write_candidate(tmp_path / "c", uniform_runs(["100"] * 4 + [value]))
    for args in (trial_args(base, f"O1={bad}"), ["stability", str(bad), "--warmup", "2", "--expected-ranks", "2"]):
        out_file = tmp_path / "out.json"
        code, out, err = run_cli(capsys, *args, "--json-out", str(out_file))
        assert (code, out) == (2, "") and err.count("\n") == 1 and message in err and "Traceback" not in err
        assert not out_file.exists()


@pytest.mark.parametrize("runs", [4, 6])
def test_stability_of_other_than_five_runs_says_it_needs_five(capsys, tmp_path: Path, runs: int) -> None:
    folder = write_candidate(tmp_path / "c", uniform_runs(["100"] * runs))
    code, out, err = run_cli(capsys, "stability", str(folder), "--warmup", "2", "--expected-ranks", "2", "--json-out", str(tmp_path / "s.json"))
    assert (code, out) == (2, "") and err.count("\n") == 1
    assert f"has {runs} run(s): the stability check needs 5 runs (expected exactly 5 clean runs" in err and "not stable" not in err
    assert not (tmp_path / "s.json").exists()


def test_unreadable_log_exit_2(capsys, folders, tmp_path: Path) -> None:
    base, _, _ = folders
    bad = write_candidate(tmp_path / "c", [{0: ["1", "2", "3"]}])
    (bad / "run-1" / "log_1.log").mkdir()
    code, _, err = run_cli(capsys, *trial_args(base, f"O1={bad}"))
    assert code == 2 and "log_1.log: cannot read rank log" in err and err.count("\n") == 1


@pytest.mark.parametrize(("code", "exit_code", "reason"), [
    (errno.EIO, 3, "Input/output error (injected) (EIO), a fault of the machine, not of the input"),
    (errno.EMFILE, 3, "Too many open files (injected) (EMFILE)"),
    (errno.ENOENT, 2, "file not found"),
])
def test_rank_log_read_fault_exit_code(capsys, folders, code: int, exit_code: int, reason: str) -> None:
    """A rank log the machine cannot read is an environment blocker (exit 3), not bad input; a missing one stays exit 2."""
    base, win, _ = folders
    args = trial_args(base, f"O1={win}")
    with inject(None) as plan:
        assert run_cli(capsys, *args)[0] == 0
    nth, log = next((n, path) for n, path in enumerate(plan.reads, start=1) if path.startswith(str(win)) and path.endswith(".log"))
    with inject(Fault(code, "read", nth)) as plan:
        got, out, err = run_cli(capsys, *args)
    assert plan.fired >= 1 and got == exit_code and out == ""
    assert err.count("\n") == 1 and f"{log}: cannot read rank log: {reason}" in err and "Traceback" not in err


@pytest.mark.parametrize("value", ["O1", "=x", "O1=", " = "])
def test_malformed_name_path_exit_2(capsys, folders, value: str) -> None:
    base, _, _ = folders
    code, _, err = run_cli(capsys, *trial_args(base, value))
    assert code == 2 and "expected NAME=PATH" in err and err.count("\n") == 1


def test_duplicate_candidate_names_exit_2(capsys, folders) -> None:
    base, win, tie = folders
    code, _, err = run_cli(capsys, *trial_args(base, f"O1={win}", f"O1={tie}"))
    assert code == 2 and "duplicate names: O1" in err


def test_candidate_named_like_the_incumbent_exit_2(capsys, folders) -> None:
    """``recommended: baseline`` means "incumbent retained"; a winning candidate of that name would read the same."""
    base, win, _ = folders
    code, out, err = run_cli(capsys, *trial_args(base, f"baseline={win}"))
    assert code == 2 and out == "" and err.count("\n") == 1
    assert "may not be named 'baseline'" in err


def _to_parquet(folder: Path, data_dir: Path, round_: str, role: str) -> None:
    frame = read_candidate(folder, expected_ranks=2, warmup=2)
    for run in frame["run"].unique().to_list():
        write_table(frame.filter(pl.col("run") == run), TIMINGS, data_dir, {"round": round_, "role": role, "run": run})


def test_parquet_sources_give_the_same_numbers(capsys, folders, tmp_path: Path) -> None:
    base, win, _ = folders
    session = tmp_path / "session"
    _to_parquet(base, session / "data", "O0-INCUMBENT", "baseline")
    _to_parquet(win, session / "data", "O1", "trial")
    run_cli(capsys, *trial_args(base, f"O1={win}"), "--json-out", str(tmp_path / "raw.json"))
    code, _, err = run_cli(
        capsys,
        *trial_args(Path(f"parquet:{session}#round=O0-INCUMBENT,role=baseline"), f"O1=parquet:{session / 'data'}#round=O1"),
        "--json-out", str(tmp_path / "pq.json"),
    )
    assert code == 0, err
    raw, pq = (json.loads((tmp_path / n).read_text()) for n in ("raw.json", "pq.json"))
    for key in ("run_worst_rank_means_ms", "run_worst_rank_means_exact_ms", "decode", "worst_rank_mean_ms"):
        assert raw["baseline"][key] == pq["baseline"][key]
        assert raw["candidates"]["O1"][key] == pq["candidates"]["O1"][key]
    assert raw["baseline_stability"] == pq["baseline_stability"]
    assert raw["candidates"]["O1"]["option_trial_evaluation"] == pq["candidates"]["O1"]["option_trial_evaluation"]


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("parquet:{s}", "expected parquet:DATA_DIR#round=R"),
        ("parquet:{s}#phase=x", "bad Parquet selection 'phase=x'"),
        ("parquet:{s}#role=baseline", "needs round=R"),
        ("parquet:{s}#round=O9", "the selection holds no timing samples"),
        ("parquet:{s}/nowhere#round=O1", "no timings table here"),
    ],
)
def test_bad_parquet_source_exit_2(capsys, folders, tmp_path: Path, spec: str, message: str) -> None:
    base, _, _ = folders
    session = tmp_path / "session"
    _to_parquet(base, session / "data", "O0-INCUMBENT", "baseline")
    code, _, err = run_cli(capsys, *trial_args(base, "O1=" + spec.format(s=session)))
    assert code == 2 and message in err and err.count("\n") == 1
