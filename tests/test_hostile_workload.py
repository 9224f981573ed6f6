"""Issue 44, part B: a workload's output and code taken exactly, or refused by name.

3. Every rank log holds the decode samples sk-tune asked for: a launcher that ends with a plain
   ``wait`` exits 0 when one rank died early; that run is a ``crash`` naming the rank, its count and
   the expected one. A 0 ms or negative sample is refused naming file and line.
4. Timing lines are matched one way: a near miss of the documented format (case, spacing, unit) is
   refused with file:line and the expected format, never skipped.
5. The workload's code is fingerprinted: a file the command never names (the per-rank script a
   launcher starts), edited before a resume, blocks the trial naming it.
9. A session stopped by a workload fault names the exact command of a fresh session, and that
   command, run after the fix, reaches Sbest-BASE.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from test_workload_contract import doc_workload, write_task
from zh_words import stray_english

from sk_analytics.cli import cli as analyze_cli
from sk_analytics.cli._base import run_cli
from sk_analytics.errors import InputError, UsageError
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.ingest.timings import parse_rank_log
from sk_analytics.messages import render
from sk_analytics.stage_o.steps import failure_message
from sk_runner.backends.base import Control
from sk_runner.cli import cli
from sk_runner.process import ProcessResult
from sk_runner.sweep.phase import validate_task
from sk_runner.trial.outcome import Repeats, classify, repeated_steps, sample_count_problem
from sk_runner.trial.sources import MAX_SOURCE_FILES, source_files, source_hashes

BASE = {"static_kernel_compile": True, "super_kernel_optimize": True, "super_kernel_optimize_options": {"auto_op_parallel": 0}}
EXPECTED_FORMAT = "one 'Inference time (decode|prefill): <plain positive decimal> ms' per line (this case and spacing)"

DECODE_RANK = '''
import json, os, sys
rank, run = int(sys.argv[1]), os.environ["SK_RUN_DIR"]
die_at = int(os.environ.get("DIE_AT", "-1"))
twice_at = int(os.environ.get("TWICE_AT", "-1"))  # rank 0 logs this step twice
with open(os.path.join(run, f"log_{rank}.log"), "w") as log:
    for step in range(int(os.environ.get("SK_RUN_ITERATIONS", "64"))):
        if rank == 1 and step == die_at:
            print(f"rank 1: device lost at decode step {step}", file=sys.stderr)
            sys.exit(1)
        value = os.environ.get("VALUE") or (f"{10 + step / 1000:.3f}" if "TWICE_AT" in os.environ else "10.000")
        log.write(f"Inference time (decode): {value} ms\\n" * (2 if rank == 0 and step == twice_at else 1))
if rank == 0:
    json.dump({"passed": True}, open(os.path.join(run, "correctness.json"), "w"))
'''


def _launcher(folder: Path) -> list[str]:
    """``sh run.sh``: one ``decode_rank.py`` per rank in the background, then a plain ``wait`` (exit 0 whatever they do)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "decode_rank.py").write_text(DECODE_RANK, encoding="utf-8")
    (folder / "run.sh").write_text(
        "#!/bin/sh\nr=0\nwhile [ $r -lt \"$SK_RUN_RANKS\" ]; do\n"
        f"  {shlex.quote(sys.executable)} decode_rank.py $r &\n  r=$((r + 1))\ndone\nwait\n", encoding="utf-8")
    (folder / "base.json").write_text(json.dumps(BASE), encoding="utf-8")
    (folder / "session").mkdir(exist_ok=True)
    return ["sh", "run.sh"]


def _trial(folder: Path, *extra: str, iterations: int | None = 64) -> list[str]:
    """``sk-run trial`` of the incumbent on two ranks; ``iterations=None``: no ``--iterations`` (SK_RUN_ITERATIONS unset)."""
    steps = [] if iterations is None else ["--iterations", str(iterations)]
    return ["trial", "--session", str(folder / "session"), "--round", "O0-INCUMBENT", "--base-config", str(folder / "base.json"),
            "--incumbent", "--backend", "command", "--ranks", "2", *steps, "--warmup", "4",
            "--cwd", str(folder), "--json", *extra, "--", *_launcher(folder)]


def _result(capsys: pytest.CaptureFixture[str]) -> dict[str, object]:
    out = capsys.readouterr().out
    return json.loads(out[out.index("{"):])


# -- 3. every rank log against what sk-tune asked for ---------------------------------------------------------------

def test_a_rank_that_died_early_under_a_launcher_that_exits_0_is_a_crash(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("DIE_AT", "20")
    assert run_cli(cli, "sk-run", _trial(tmp_path)) == 1
    result = _result(capsys)
    assert result["outcome"] == "crash" and result["status"] == "failed"
    message = str(result["message"])
    assert "rank 1 (log_1.log: 20 decode samples), expected 64 (SK_RUN_ITERATIONS=64)" in message, message
    assert "rank 1: device lost at decode step 20" in message  # its stderr, as for any crash
    scene = Path(str(result["scene_dir"]))
    failure = load_json_file(scene / "scene.json")["observable_failure"]
    assert failure["outcome"] == "crash" and failure["exit_code"] == 0  # the launcher said 0
    assert not (tmp_path / "session" / "experiments" / "Sbest" / "O0-INCUMBENT" / "CLEAN").exists()  # nothing measured


@pytest.mark.parametrize("lang", ["zh", "en"])
def test_sk_run_trial_speaks_its_lang(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                                      lang: str) -> None:
    """``sk-run trial --lang``: its progress lines, its result lines (the failure's reason included) and its failure scene
    are in that language; Chinese mixes in no English word, English no Chinese."""
    monkeypatch.setenv("DIE_AT", "20")
    argv = [a for a in _trial(tmp_path) if a != "--json"]
    assert run_cli(cli, "sk-run", [*argv[:1], "--lang", lang, *argv[1:]]) == 1
    said = capsys.readouterr()
    out = said.out.replace(str(tmp_path), "")  # the folders are named as they are
    head = {"zh": "O0-INCUMBENT：失败（crash）——进程崩溃或设备错误（提前结束：rank 1（log_1.log：20 个 decode 样本）",
            "en": "O0-INCUMBENT: failed (crash) — process crash or device error (ended early: rank 1 (log_1.log: 20 decode samples)"}[lang]
    assert out.startswith(head), out
    assert said.err.startswith({"zh": "[O0-INCUMBENT] 完整推理 + 正确性校验 · 已用 ", "en": "[O0-INCUMBENT] full inference + correctness · elapsed "}[lang])
    [scene_md] = [p.read_text(encoding="utf-8") for p in (tmp_path / "session").rglob("scene.md")]
    if lang == "zh":
        assert stray_english(out.replace("rank 1: device lost at decode step 20", "")) == [], out
        assert stray_english(said.err) == [] and "失败现场" in out and "现场" in scene_md
    else:
        assert not re.search("[\u4e00-\u9fff]", out + said.err + scene_md)


@pytest.mark.parametrize("iterations", [None, 64])
def test_a_duplicated_step_names_the_rank_whose_log_holds_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                             capsys: pytest.CaptureFixture[str], iterations: int | None) -> None:
    """Rank 0 logs step 10 twice (65 decode lines, rank 1 64): without SK_RUN_ITERATIONS the most samples were taken
    as expected and rank 1 was named as ended early (crash). The log that holds the duplicate is named, with its line."""
    monkeypatch.setenv("TWICE_AT", "10")
    assert run_cli(cli, "sk-run", _trial(tmp_path, iterations=iterations)) == 1
    result = _result(capsys)
    why = "as many as the other ranks" if iterations is None else "SK_RUN_ITERATIONS=64"
    assert result["outcome"] == "bad_logs", result
    assert (f"rank 0 logged a step twice: log_0.log:12 repeats line 11 ('Inference time (decode): 10.010 ms'); "
            f"log_0.log has 65 decode samples, expected 64 ({why})") in str(result["message"]), result["message"]
    assert "rank 1" not in str(result["message"]) and "ended early" not in str(result["message"])


@pytest.mark.parametrize(("counts", "repeats", "iterations", "status", "needle"), [
    ([65, 64], [(1, 12), None], None, "bad_logs", "rank 0 logged a step twice: log_0.log:12 repeats line 11"),
    ([64, 65], [None, (1, 40)], None, "bad_logs", "rank 1 logged a step twice: log_1.log:40 repeats line 39"),
    ([64, 64, 66], [None, None, (2, 3)], None, "bad_logs", "rank 2 logged a step twice: log_2.log:3 repeats line 2"),
    ([65, 64], [(1, 12), None], 64, "bad_logs", "rank 0 logged a step twice: log_0.log:12 repeats line 11"),
    # repeats that are not the samples too many: equal values, not a proven duplicate; the counts decide as before
    ([64, 20], [(63, 2), (19, 2)], None, "crash", "ended early: rank 1 (log_1.log: 20 decode samples), expected 64"),
    ([66, 64], [(1, 12), None], None, "crash", "ended early: rank 1 (log_1.log: 64 decode samples), expected 66"),
    ([66, 64], [(1, 12), None], 64, "bad_logs", "log_0.log has 66 decode samples, expected exactly 64"),
    # a log of no excess repeats a value too: equal values are this workload's (timings of few digits), no proof
    ([65, 64], [(1, 12), (1, 30)], None, "crash", "ended early: rank 1 (log_1.log: 64 decode samples), expected 65"),
    ([65, 64], [(1, 12), (1, 30)], 64, "bad_logs", "log_0.log has 65 decode samples, expected exactly 64"),
])
def test_duplicated_step_counts(counts: list[int], repeats: list[tuple[int, int] | None], iterations: int | None,
                                status: str, needle: str) -> None:
    logs = {Path(f"log_{rank}.log"): n for rank, n in enumerate(counts)}
    found = {path: None if r is None else Repeats(r[0], r[1], "10.010") for path, r in zip(logs, repeats, strict=True)}
    problem = sample_count_problem(logs, Control(ranks=len(counts), iterations=iterations, warmup=4), found)
    assert problem is not None and problem[0] == status and needle in render(problem[1], "en"), problem
    said = render(problem[1], "zh")
    assert stray_english(said) == [], said


def test_repeated_steps_reads_adjacent_decode_lines_of_equal_value(tmp_path: Path) -> None:
    log = tmp_path / "run-1" / "log_0.log"
    log.parent.mkdir()
    log.write_text("Inference time (prefill): 9.000 ms\nInference time (decode): 9.000 ms\n"  # prefill then decode: not a repeat
                   "Inference time (decode): 10.001 ms\nstep done\nInference time (decode): 10.001 ms\n"  # not adjacent
                   "Inference time (decode): 10.002 ms\nInference time (decode): 10.002 ms\n"  # line 7 repeats line 6
                   "Inference time (decode): 10.020 ms\nInference time (decode): 10.02 ms\n", encoding="utf-8")  # other text
    assert repeated_steps(parse_rank_log(log).frame) == Repeats(1, 7, "10.002")
    log.write_text("Inference time (decode): 10.001 ms\nInference time (decode): 10.002 ms\n", encoding="utf-8")
    assert repeated_steps(parse_rank_log(log).frame) is None


@pytest.mark.parametrize(("counts", "iterations", "status", "needle", "zh"), [
    ([64, 20], 64, "crash", "rank 1 (log_1.log: 20 decode samples), expected 64 (SK_RUN_ITERATIONS=64)",
     "提前结束：rank 1（log_1.log：20 个 decode 样本），应为 64 个（SK_RUN_ITERATIONS=64）"),
    ([20, 20], 64, "crash", "rank 0 (log_0.log: 20 decode samples), rank 1 (log_1.log: 20 decode samples), expected 64",
     "rank 0（log_0.log：20 个 decode 样本），rank 1（log_1.log：20 个 decode 样本），应为 64 个"),
    ([30, 12], None, "crash", "rank 1 (log_1.log: 12 decode samples), expected 30 (as many as the other ranks)",
     "应为 30 个（与其他 rank 一样多）"),
    ([65, 64], 64, "bad_logs", "log_0.log has 65 decode samples, expected exactly 64 (SK_RUN_ITERATIONS=64)",
     "log_0.log 有 65 个 decode 样本，应恰为 64 个（SK_RUN_ITERATIONS=64）"),
    ([4, 4], None, "bad_logs", "log_0.log has 4 decode samples, not more than warm-up 4", "log_0.log 只有 4 个 decode 样本，不多于预热的 4 个"),
])
def test_decode_sample_counts(counts: list[int], iterations: int | None, status: str, needle: str, zh: str) -> None:
    """The problem is a recorded message: English as it always was, Chinese for a Chinese reader (no English words)."""
    logs = {Path(f"log_{rank}.log"): n for rank, n in enumerate(counts)}
    problem = sample_count_problem(logs, Control(ranks=2, iterations=iterations, warmup=4))
    assert problem is not None and problem[0] == status and needle in render(problem[1], "en"), problem
    said = render(problem[1], "zh")
    assert zh in said and stray_english(said) == [], said
    assert sample_count_problem({path: iterations or 30 for path in logs}, Control(ranks=2, iterations=iterations, warmup=4)) is None


@pytest.mark.parametrize(("value", "needle"), [
    ("0.000", "timing value '0.000' ms is zero"),
    ("0", "timing value '0' ms is zero"),
    ("-3.5", "timing value '-3.5' cannot be a decode time"),
])
def test_a_zero_or_negative_sample_is_refused_by_file_and_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                               capsys: pytest.CaptureFixture[str], value: str, needle: str) -> None:
    monkeypatch.setenv("VALUE", value)
    assert run_cli(cli, "sk-run", _trial(tmp_path, iterations=8)) == 1
    result = _result(capsys)
    assert result["outcome"] == "bad_logs"
    assert f"log_0.log:1: {needle}" in str(result["message"]), result["message"]


def test_rank_logs_beyond_the_requested_ranks_are_bad_logs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _trial(tmp_path, iterations=8)  # writes the launcher, which then starts 4 ranks
    (tmp_path / "run.sh").write_text((tmp_path / "run.sh").read_text(encoding="utf-8").replace('"$SK_RUN_RANKS"', "4"), encoding="utf-8")
    assert run_cli(cli, "sk-run", args) == 1
    result = _result(capsys)
    assert result["outcome"] == "bad_logs" and "log_2.log, log_3.log beyond SK_RUN_RANKS=2" in str(result["message"])


def test_a_rank_log_named_with_leading_zeros_is_bad_logs_not_a_session_stuck_at_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``log_01.log`` beside ``log_1.log`` is a second log of rank 1 to the analysis, which refuses the run folder
    (exit 2) after the trial was recorded, on every ``--resume``: the trial must refuse it at once, with a scene."""
    args = _trial(tmp_path, iterations=8)
    launcher = tmp_path / "run.sh"
    launcher.write_text(launcher.read_text(encoding="utf-8") + 'cp "$SK_RUN_DIR/log_1.log" "$SK_RUN_DIR/log_01.log"\n',
                        encoding="utf-8")
    assert run_cli(cli, "sk-run", args) == 1
    result = _result(capsys)
    assert result["outcome"] == "bad_logs", result
    assert "log_01.log: not named log_<rank>.log" in str(result["message"]), result["message"]
    assert not (tmp_path / "session" / "experiments" / "Sbest" / "O0-INCUMBENT" / "CLEAN").exists()  # nothing measured


@pytest.mark.parametrize(("link", "needle"), [
    ("ln -sf", "log_1.log is a symbolic link to {target}"),
    ("ln -f", "log_1.log is a hard link (2 names)"),
])
def test_a_rank_log_linked_to_a_file_outside_the_run_is_bad_logs(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                   link: str, needle: str) -> None:
    """A launcher that writes rank 1 to one file outside the run and links it into every run folder: each run's
    ``log_1.log`` then shows the last run's samples, so a 3 % gain read as 0.0 % and the sweep froze the wrong BASE
    with exit 0. A rank log must be a file of its own run: a link is refused at once, with a scene."""
    args = _trial(tmp_path, iterations=8)
    target = tmp_path / "shared" / "log_1.log"
    target.parent.mkdir()
    launcher = tmp_path / "run.sh"
    launcher.write_text(launcher.read_text(encoding="utf-8")
                        + f'mv "$SK_RUN_DIR/log_1.log" {target}\n{link} {target} "$SK_RUN_DIR/log_1.log"\n', encoding="utf-8")
    assert run_cli(cli, "sk-run", args) == 1
    result = _result(capsys)
    assert result["outcome"] == "bad_logs", result
    assert needle.format(target=target) in str(result["message"]), result["message"]
    assert "every run writes its own rank logs below SK_RUN_DIR" in str(result["message"]), result["message"]


# -- 4. timing lines matched one way ----------------------------------------------------------------------------------

@pytest.mark.parametrize(("line", "why"), [
    ("inference time (decode): 999.0 ms", "a near miss of the timing format (case or spacing)"),
    ("INFERENCE TIME (decode): 12.5 ms", "a near miss of the timing format (case or spacing)"),
    ("Inference time(decode): 24.1 ms", "a near miss of the timing format (case or spacing)"),
    ("Inference  time (decode): 24.1 ms", "a near miss of the timing format (case or spacing)"),
    ("[default1]:Inference Time (decode): 24.1 ms", "a near miss of the timing format (case or spacing)"),
    ("Inference time (decode): 24.1 us", "unit 'us': the format's unit is 'ms'"),
    ("inference time (prefill): 120 s", "unit 's': the format's unit is 'ms'"),
    ("Inference time (decode): 24.1ms", "a near miss of the timing format (case or spacing)"),
    ("Inference time (Decode): 24.1 ms", "a near miss of the timing format (case or spacing)"),
    ("Inference time (decode) : 24.1 ms", "a near miss of the timing format (case or spacing)"),
])
def test_a_near_miss_is_refused_with_file_line_and_the_expected_format(tmp_path: Path, line: str, why: str) -> None:
    log = tmp_path / "run-1" / "log_0.log"
    log.parent.mkdir()
    log.write_text(f"Inference time (decode): 10.0 ms\n[INFO] other output\n{line}\nInference time (decode): 10.0 ms\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        parse_rank_log(log)
    text = str(info.value)
    assert text.startswith(f"{log}:3: ") and why in text and EXPECTED_FORMAT in text, text


def test_a_near_miss_through_the_analysis_cli_is_one_line_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for k in range(1, 6):
        log = tmp_path / "c" / f"run-{k}" / "log_0.log"
        log.parent.mkdir(parents=True)
        lines = [f"Inference time (decode): {10 + i * 0.01:.3f} ms" for i in range(12)]
        if k == 4:
            lines[7] = "Inference time(decode): 24.1 ms"
        log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert run_cli(analyze_cli, "sk-analyze", ["stability", str(tmp_path / "c"), "--expected-ranks", "1", "--warmup", "2"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"{tmp_path / 'c' / 'run-4' / 'log_0.log'}:8: " in err and "near miss" in err and EXPECTED_FORMAT in err


# -- 5. the workload's code fingerprinted ---------------------------------------------------------------------------

def test_an_edited_script_the_command_never_names_blocks_the_resume_naming_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run_cli(cli, "sk-run", _trial(tmp_path, iterations=8)) == 0
    record = load_json_file(tmp_path / "session" / "experiments" / "Sbest" / "O0-INCUMBENT" / "trial.json")
    sources = record["fingerprints"]["source_revision"]["sources"]
    assert set(sources) == {str(tmp_path / "decode_rank.py"), str(tmp_path / "run.sh")}  # not the session folder, not base.json
    capsys.readouterr()
    resume = _trial(tmp_path, "--top-up-to", "4", iterations=8)  # (re)writes the workload as before ...
    script = tmp_path / "decode_rank.py"
    script.write_text(script.read_text(encoding="utf-8") + "# tuned\n", encoding="utf-8")  # ... then it is edited
    assert run_cli(cli, "sk-run", resume) == 3
    err = capsys.readouterr().err
    assert f"source_revision.sources (changed since: {tmp_path / 'decode_rank.py'})" in err and "run.sh" not in err.split("changed since")[1], err


def test_named_sources_replace_the_default(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "weights.cfg").write_text("a = 1\n", encoding="utf-8")
    assert run_cli(cli, "sk-run", _trial(tmp_path, "--source", "model", "--source", "run.sh", iterations=8)) == 0
    record = load_json_file(tmp_path / "session" / "experiments" / "Sbest" / "O0-INCUMBENT" / "trial.json")
    assert set(record["fingerprints"]["source_revision"]["sources"]) == {str(tmp_path / "model" / "weights.cfg"), str(tmp_path / "run.sh")}
    capsys.readouterr()
    resume = _trial(tmp_path, "--source", "model", "--source", "run.sh", "--top-up-to", "4", iterations=8)
    (tmp_path / "model" / "weights.cfg").write_text("a = 2\n", encoding="utf-8")
    assert run_cli(cli, "sk-run", resume) == 3
    assert f"changed since: {tmp_path / 'model' / 'weights.cfg'}" in capsys.readouterr().err
    assert run_cli(cli, "sk-run", _trial(tmp_path, "--source", "nothing.py", iterations=8)) == 2
    assert "workload source 'nothing.py'" in capsys.readouterr().err


@pytest.mark.parametrize(("exit_code", "sig", "timed_out", "en", "zh"), [
    (3, None, False, "exit status 3; last stderr: RuntimeError: EZ9999 device lost", "退出码 3；stderr 末行：RuntimeError: EZ9999 device lost"),
    (None, 9, False, "killed by SIGKILL; last stderr: RuntimeError: EZ9999 device lost", "被信号 SIGKILL 终止；stderr 末行：RuntimeError"),
    (None, 15, True, "no exit within 6.0 s: process group terminated; stderr empty", "6.0 秒内未退出：进程组已被终止；stderr 为空"),
])
def test_a_crash_or_timeout_is_worded_in_the_readers_language(tmp_path: Path, exit_code: int | None, sig: int | None, timed_out: bool,
                                                               en: str, zh: str) -> None:
    """The runner's words of a process that crashed or timed out are a message: the English record keeps them as they
    were, a Chinese console and report say them in Chinese (the workload's own stderr lines stay as written)."""
    if not timed_out:
        (tmp_path / "stderr.txt").write_text("RuntimeError: EZ9999 device lost\n", encoding="utf-8")
    result = ProcessResult(4242, exit_code, sig, timed_out, 0, 1, 0.1)
    outcome = classify(result, tmp_path, Control(ranks=1, iterations=10, warmup=2, timeout_s=6.0), need_correctness=False)
    assert outcome.message == en and outcome.words is not None and render(outcome.words, "en") == en
    said = render(failure_message({"stage": outcome.status, "message": outcome.message, "words": outcome.words}), "zh")
    assert zh in said and stray_english(said.replace("RuntimeError: EZ9999 device lost", "")) == []
    assert render(failure_message({"stage": outcome.status, "message": outcome.message}), "zh").endswith(f"（{en}）")  # older records


def test_a_rank_log_problem_is_worded_in_the_readers_language(tmp_path: Path) -> None:
    """A rank that ended early (the launcher exited 0) and a missing log: the Chinese reason says it in Chinese, the
    English record keeps its words; a record that holds only the plain text (older sessions) still renders."""
    (tmp_path / "log_0.log").write_text("Inference time (decode): 10.0 ms\n" * 12, encoding="utf-8")
    (tmp_path / "log_1.log").write_text("Inference time (decode): 10.0 ms\n" * 7, encoding="utf-8")
    (tmp_path / "stderr.txt").write_text("rank 1 lost its device\n", encoding="utf-8")
    done = ProcessResult(4242, 0, None, False, 0, 1, 0.1)
    outcome = classify(done, tmp_path, Control(ranks=2, iterations=12, warmup=2), need_correctness=False)
    en = ("ended early: rank 1 (log_1.log: 7 decode samples), expected 12 (SK_RUN_ITERATIONS=12); a rank that stops early "
          "is a failed run; last stderr: rank 1 lost its device")
    assert (outcome.status, outcome.message) == ("crash", en) and outcome.words is not None
    said = render(failure_message({"stage": outcome.status, "message": outcome.message, "words": outcome.words}), "zh")
    assert "提前结束：rank 1（log_1.log：7 个 decode 样本），应为 12 个" in said and "stderr 末行：rank 1 lost its device" in said
    assert stray_english(said.replace("rank 1 lost its device", "")) == [], said
    assert render(failure_message({"stage": "crash", "message": en}), "zh").endswith(f"（{en}）")  # an older record: its text
    (tmp_path / "log_1.log").unlink()
    missing = classify(done, tmp_path, Control(ranks=2, iterations=12, warmup=2), need_correctness=True)
    assert (missing.status, missing.message) == ("bad_logs", "correctness.json missing") and missing.words is not None
    assert render(missing.words, "zh") == "缺少 correctness.json"


def test_default_sources_in_and_out_of_git(tmp_path: Path) -> None:
    work = tmp_path / "work"
    (work / "pkg").mkdir(parents=True)
    (work / "session").mkdir()
    for name in ("infer.py", "pkg/layer.py", "launch.sh", "notes.txt", "session/stray.py", ".hidden/x.py"):
        (work / name).parent.mkdir(parents=True, exist_ok=True)
        (work / name).write_text("x\n", encoding="utf-8")
    (work / "venv").mkdir()
    (work / "venv" / "pyvenv.cfg").write_text("", encoding="utf-8")
    (work / "venv" / "lib.py").write_text("", encoding="utf-8")

    def listed() -> set[str]:
        return {Path(p).relative_to(work).as_posix() for p in source_hashes(source_files(work, None, [work / "notes.txt"], skip=[work / "session"]))}

    assert listed() == {"infer.py", "pkg/layer.py", "launch.sh", "notes.txt"}  # the named notes.txt, code files, no session/venv
    git = ["git", "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run([*git, "init", "-q", str(work)], check=True)
    (work / ".gitignore").write_text("pkg/\n", encoding="utf-8")
    subprocess.run([*git, "-C", str(work), "add", "infer.py", ".gitignore"], check=True)
    assert listed() == {"infer.py", "launch.sh", "notes.txt"}  # tracked and untracked-not-ignored code; ignored pkg/ out
    with pytest.raises(UsageError, match="neither a file nor a folder: .*sk-run trial --source, sk-run task init --source"):
        source_files(work, ["missing"], [])


def test_too_many_default_sources_are_refused_with_the_fix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sk_runner.trial.sources.MAX_SOURCE_FILES", 3)
    for i in range(4):
        (tmp_path / f"m{i}.py").write_text("", encoding="utf-8")
    with pytest.raises(UsageError, match=r"4 files, more than 3 hashed for every round: name the files or folders the workload runs"):
        source_files(tmp_path, None, [])
    assert MAX_SOURCE_FILES >= 1000


def test_task_workload_sources_are_checked_and_recorded(tmp_path: Path) -> None:
    (tmp_path / "infer.py").write_text(doc_workload(), encoding="utf-8")
    task = write_task(tmp_path, [sys.executable, "infer.py"], cwd=".", sources=["infer.py"])
    assert validate_task(task).backend.sources == ("infer.py",)
    assert validate_task(task).backend.to_json()["sources"] == ["infer.py"]

    def with_sources(value: object) -> Path:
        data = json.loads(task.read_text(encoding="utf-8"))
        data["workload"]["sources"] = value
        task.write_text(json.dumps(data), encoding="utf-8")
        return task

    with pytest.raises(InputError, match=r"record /workload/sources/0\): workload/sources/0 'gone.py' does not exist"):
        validate_task(with_sources(["gone.py"]))
    for wrong in ("infer.py", [], [""], [1]):
        with pytest.raises(InputError, match=r"/workload/sources"):
            validate_task(with_sources(wrong))


# -- 9. a stopped session has a way forward ---------------------------------------------------------------------------

FAULTS = {
    "missing correctness.json": ('(run_dir / "correctness.json").write_text(json.dumps({"passed": True}))', "pass",
                                 "correctness.json missing"),
    "a bad timing line": ('log.write(f"Inference time (decode):', 'log.write(f"inference time (decode):', "log_0.log:2: "),
    "4 rank logs for 2 ranks": ("for rank in range(ranks):", "for rank in range(ranks * 2):", "log_2.log, log_3.log beyond SK_RUN_RANKS=2"),
}


@pytest.mark.slow
@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_session_stopped_by_a_workload_fault_names_the_fresh_session_that_runs_after_the_fix(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], fault: str) -> None:
    old, new, cause = FAULTS[fault]
    good = doc_workload()
    assert old in good
    script = tmp_path / "infer.py"
    script.write_text(good.replace(old, new), encoding="utf-8")
    task = write_task(tmp_path, [sys.executable, str(script)])
    root = tmp_path / "session"
    assert run_cli(cli, "sk-run", ["sweep", "--task", str(task), "--quiet"]) == 1
    first = capsys.readouterr()
    scene = next(root.glob("experiments/Sbest/O0-INCUMBENT/FAILURE_SCENES/attempt-*"))
    assert cause in load_json_file(scene / "scene.json")["observable_failure"]["message"]
    fresh = f"sk-run sweep --task {task.resolve()} --session {root.resolve()}-2"
    assert f"start a fresh session: {fresh}" in first.err
    assert load_json_file(root / "handoff.json")["fresh_session_argv"] == shlex.split(fresh)  # and the hand-off carries it
    assert run_cli(cli, "sk-run", ["sweep", "--resume", str(root), "--quiet"]) == 1  # the stop stays, and says the way again
    assert f"start a fresh session: {fresh}" in capsys.readouterr().err

    script.write_text(good, encoding="utf-8")  # the fix
    argv = shlex.split(fresh)
    assert run_cli(cli, "sk-run", [*argv[1:], "--quiet"]) == 0
    fixed = load_json_file(Path(f"{root}-2") / "experiments" / "Sbest" / "O0-INCUMBENT" / "trial.json")
    broken = load_json_file(root / "experiments" / "Sbest" / "O0-INCUMBENT" / "trial.json")
    key = str(script.resolve())
    assert fixed["fingerprints"]["source_revision"]["files"][key] != broken["fingerprints"]["source_revision"]["files"][key]


def test_prefill_may_repeat_in_a_log_and_each_sample_is_kept(tmp_path: Path) -> None:
    """formats.md §1 sets no count for prefill lines (its stats are pooled, no warm-up dropped): a log that times
    several prefills (one per prompt) keeps each, in order; a bad repeated value is still refused by file and line."""
    log = tmp_path / "run-1" / "log_0.log"
    log.parent.mkdir()
    log.write_text("Inference time (prefill): 120.50 ms\nInference time (decode): 10.0 ms\nInference time (prefill): 119.25 ms\n",
                   encoding="utf-8")
    prefill = parse_rank_log(log).frame.filter(phase="prefill")
    assert prefill.select("sample_index", "value_text", "line").rows() == [(0, "120.50", 1), (1, "119.25", 3)]
    log.write_text("Inference time (prefill): 120.50 ms\nInference time (decode): 10.0 ms\nInference time (prefill): 0.000 ms\n",
                   encoding="utf-8")
    with pytest.raises(InputError) as info:
        parse_rank_log(log)
    assert str(info.value).startswith(f"{log}:3: "), str(info.value)
