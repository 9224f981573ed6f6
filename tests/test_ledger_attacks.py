"""Issue 24: the attacks an auditor with write access (and no key) would try, each on a ``cp -a`` copy.

One finished, signed small-network sweep (stream-fusion-0 rejected, aggressive-task1-value0
failed with a sealed scene) is run once per module, created through a *relative* path
(the case whose reports used to embed the path as typed). Each test copies it with
``cp -a``, applies one attack and expects ``ledger verify`` to exit 2 naming the rule
and the file; the untouched copy verifies from any path and working directory.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import polars as pl
import pytest
from sweep_helpers import settled_statuses, small_session

from sk_analytics.cli import cli
from sk_analytics.cli._base import run_cli
from sk_analytics.fingerprint import canonical_json
from sk_analytics.ledger.chain import HEAD_PURPOSE, RECORD_PURPOSE, head_body, head_path, read_records
from sk_analytics.ledger.signing import KEY_ENV, TRUSTED_ENV, signer
from sk_analytics.ledger.witness import WITNESS_ENV
from sk_analytics.stage_o.session_notes import is_sk_run
from sk_runner.sweep.driver import run_sweep
from sk_runner.sweep.handoff import write_reports

pytestmark = pytest.mark.slow
O0 = "experiments/Sbest/O0-INCUMBENT"
GATED = "experiments/Sbest/O2"
SCENE = "experiments/Sbest/O1/FAILURE_SCENES/attempt-1"


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    parent = tmp_path_factory.mktemp("attacks")
    here = os.getcwd()
    os.chdir(parent)
    try:  # created as "s": the path as typed is relative
        outcome = run_sweep(small_session(Path("s"), ["aggressive-task1-value0", "stream-fusion-0"]), say=lambda _: None)
    finally:
        os.chdir(here)
    assert outcome is not None and outcome.outcome == "base"
    assert settled_statuses(parent / "s") == {"aggressive-task1-value0": "failed", "stream-fusion-0": "rejected"}
    assert (parent / "s" / SCENE / "scene.json").is_file()
    return parent / "s"


@pytest.fixture
def session(finished: Path, tmp_path: Path) -> Path:
    """A ``cp -a`` copy of the finished session in another folder (as an archive holds it)."""
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(finished), str(copy)], check=True)
    return copy


@pytest.fixture
def own_witness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private witness for tests that append to a copy (so the shared witness keeps the original's heads)."""
    path = tmp_path / "witness.jsonl"
    path.touch()
    monkeypatch.setenv(WITNESS_ENV, str(path))
    yield path


def _verify(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = run_cli(cli, "sk-analyze", ["ledger", "verify", *argv])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _refused(capsys: pytest.CaptureFixture[str], root: Path, rule: str, file: str, detail: str = "",
             args: tuple[str, ...] = ()) -> str:
    code, text = _verify(capsys, str(root), *args)
    assert code == 2, text
    assert detail in text, text
    assert f"FAIL file {file} [rule {rule}]" in text, text
    assert f"{root / file}: rule {rule}:" in text, text
    return text


def _tree(root: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(root)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in sorted(root.rglob("*"))}


# --------------------------------------------------------------------------- no false alarms


def test_untouched_copy_verifies_from_any_path_and_cwd(session: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    before = _tree(session)
    code, text = _verify(capsys, str(session))
    assert code == 0 and "chain intact" in text and "file(s) vouched for" in text, text
    assert "archive mode: created at" in text  # the copy lies elsewhere: said, never a failure
    assert "note: unleased: " in text and "not a tampering finding" in text  # ran without a device lease: said, exit 0
    monkeypatch.chdir(session)
    assert _verify(capsys, ".")[0] == 0
    monkeypatch.chdir(tmp_path)
    assert _verify(capsys, "copy")[0] == 0 and _verify(capsys, "./copy/")[0] == 0
    moved = tmp_path / "elsewhere" / "renamed"
    moved.parent.mkdir()
    shutil.move(str(session), str(moved))
    monkeypatch.chdir(moved.parent)
    assert _verify(capsys, "renamed")[0] == 0 and _verify(capsys, str(moved))[0] == 0
    monkeypatch.chdir("/")  # from the root folder, by a path relative to it and by the session's own ledger file
    assert moved.is_absolute()
    assert _verify(capsys, str(moved.relative_to("/")))[0] == 0
    code, text = _verify(capsys, str(moved.relative_to("/") / "ledger.jsonl"))
    assert code == 0 and "file(s) vouched for" in text, text  # the ledger file of a session proves its folder too
    assert _tree(moved) == before  # verify writes nothing


def test_original_verifies_by_absolute_path_though_created_by_a_relative_one(finished: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, text = _verify(capsys, str(finished.resolve()))
    assert code == 0, text
    report = (finished / "EXPERIMENT_REPORT.md").read_text(encoding="utf-8")
    assert "`sk-analyze ledger verify .`" in report and str(finished) not in report


def test_reports_rerendered_in_english_still_agree(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_reports(session, lang="en")
    assert _verify(capsys, str(session))[0] == 0


# --------------------------------------------------------------------------- every evidence byte


def test_raw_rank_log_edited_same_length(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = session / O0 / "CLEAN/run-1/log_0.log"
    text = log.read_text(encoding="utf-8")
    digit = next(i for i, c in enumerate(text) if c.isdigit() and text[i - 1] == ".")
    edited = text[:digit] + ("1" if text[digit] != "1" else "2") + text[digit + 1:]
    log.write_text(edited, encoding="utf-8")
    assert log.stat().st_size == len(text.encode())
    _refused(capsys, session, "evidence-changed", f"{O0}/CLEAN/run-1/log_0.log", "content changed")


def test_parquet_value_halved(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    part = session / "data/timings/round=O0-INCUMBENT/role=baseline/run=run-1/part-0.parquet"
    frame = pl.read_parquet(part)
    frame.with_columns(pl.when(pl.col("phase") == "decode").then(pl.col("value_ms") / 2).otherwise(pl.col("value_ms"))
                       .alias("value_ms")).write_parquet(part)
    _refused(capsys, session, "evidence-changed", str(part.relative_to(session)))


def test_summary_edited_and_reports_rerendered(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = session / GATED / "option-trial-summary.json"
    summary = json.loads(path.read_text(encoding="utf-8"))
    summary["baseline"]["worst_rank_mean_ms"] *= 2
    path.write_text(json.dumps(summary), encoding="utf-8")
    write_reports(session)  # with sk-tune's own renderer
    _refused(capsys, session, "evidence-changed", f"{GATED}/option-trial-summary.json")


def test_fabricated_environment_blocker(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = session / GATED / "environment-blockers.jsonl"
    path.write_text(json.dumps({"stage": "trial", "message": "NPU lost"}) + "\n", encoding="utf-8")
    write_reports(session)
    _refused(capsys, session, "evidence-unvouched", f"{GATED}/environment-blockers.jsonl", "no ledger record vouches")


def test_extra_file_in_base(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (session / "BASE/notes.json").write_text("{}", encoding="utf-8")
    _refused(capsys, session, "evidence-unvouched", "BASE/notes.json")


@pytest.mark.parametrize("name", ["notes.lock", "sbest-base.json.lock"])
def test_extra_file_in_base_named_like_a_lock(session: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Only the lock names sk-tune creates are machinery: any other ``*.lock`` is a planted file."""
    (session / "BASE" / name).write_text("{}", encoding="utf-8")
    _refused(capsys, session, "evidence-unvouched", f"BASE/{name}")


@pytest.mark.parametrize("name", [".notes.tmp", ".sbest-base.json.tmp", ".sbest-base.json.ABCDEFGH.tmp"])
def test_extra_file_in_base_named_like_a_temp(session: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Only sk-tune's own temp names (``.<target>.<8 of [a-z0-9_]>.tmp``) are machinery: a dot-file ending in ``.tmp``
    of any other shape is a planted file."""
    (session / "BASE" / name).write_text("{}", encoding="utf-8")
    _refused(capsys, session, "evidence-unvouched", f"BASE/{name}")


def test_config_base_points_to_edited(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = json.loads((session / "BASE/sbest-base.json").read_text(encoding="utf-8"))
    config = session / base["config_path"]
    data = json.loads(config.read_text(encoding="utf-8"))
    data["forged"] = True
    config.write_text(json.dumps(data), encoding="utf-8")
    _refused(capsys, session, "evidence-changed", base["config_path"])


def test_scene_json_deleted(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (session / SCENE / "scene.json").unlink()
    _refused(capsys, session, "evidence-missing", f"{SCENE}/scene.json", "missing; expected blake3")


def test_every_failure_scene_deleted(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for scenes in session.glob("experiments/Sbest/*/FAILURE_SCENES"):
        shutil.rmtree(scenes)
    code, text = _verify(capsys, str(session))
    assert code == 2 and f"FAIL file {SCENE}/" in text and "[rule evidence-missing]" in text, text
    assert f"{session / SCENE}/" in text and ": rule evidence-missing: " in text and "more file finding" in text, text


def test_evidence_manifest_edited(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = sorted((session / "EVIDENCE").iterdir())[2]
    data = json.loads(manifest.read_text(encoding="utf-8"))
    data["files"].popitem()
    manifest.write_text(json.dumps(data), encoding="utf-8")
    _refused(capsys, session, "evidence-manifest", f"EVIDENCE/{manifest.name}", "differs from the BLAKE3 digest")


@pytest.mark.parametrize("name", ["bind-1.json", "bind-9999999999999999999.json", "notes.json", "old/bind-1.json"])
def test_file_in_evidence_that_no_record_names(session: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 36: a copy of a genuine manifest under a new name (older or newer than every real one, or in a
    subfolder) or any other file in EVIDENCE/ vouches for nothing: evidence-unvouched like any planted file."""
    original = sorted((session / "EVIDENCE").iterdir())[2]
    copy = session / "EVIDENCE" / name
    copy.parent.mkdir(exist_ok=True)
    shutil.copy2(original, copy)
    _refused(capsys, session, "evidence-unvouched", f"EVIDENCE/{name}", "no ledger record names it")


def test_evidence_manifest_deleted(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = sorted((session / "EVIDENCE").iterdir())[2]
    manifest.unlink()
    _refused(capsys, session, "evidence-manifest", f"EVIDENCE/{manifest.name}", "missing")


def test_two_clean_runs_swapped(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Each run intact, only their names exchanged (the run analogue of swapping two collection roots)."""
    clean = session / O0 / "CLEAN"
    os.rename(clean / "run-1", clean / "tmp")
    os.rename(clean / "run-2", clean / "run-1")
    os.rename(clean / "tmp", clean / "run-2")
    code, text = _verify(capsys, str(session))
    assert code == 2 and f"FAIL file {O0}/CLEAN/run-" in text and "[rule evidence-changed]" in text, text
    assert f"{session / O0}/CLEAN/run-" in text and ": rule evidence-changed: " in text, text


def test_session_ledger_file_given_proves_the_evidence(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`ledger verify S/ledger.jsonl` used to check the chain only: a tampered session passed that way."""
    (session / "BASE/notes.json").write_text("{}", encoding="utf-8")
    code, text = _verify(capsys, str(session / "ledger.jsonl"))
    assert code == 2 and "FAIL file BASE/notes.json [rule evidence-unvouched]" in text, text
    assert f"{session / 'BASE/notes.json'}: rule evidence-unvouched:" in text, text


def test_empty_vouched_file_replaced_by_a_fifo(session: Path) -> None:
    """An empty FIFO has an empty file's size; it is named, never opened (a reader would block on it)."""
    rel = f"{O0}/CLEAN/run-1/stderr.txt"
    target = session / rel
    assert target.is_file() and target.stat().st_size == 0
    target.unlink()
    os.mkfifo(target)
    before = _tree(session)
    for extra in ((), ("--quick",)):  # in a child with a deadline: a regression hangs on the FIFO
        done = subprocess.run([sys.executable, "-c", "from sk_analytics.cli import main; main()", "ledger", "verify",
                               *extra, str(session)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 2, done
        assert f"FAIL file {rel} [rule evidence-changed] a FIFO, expected the regular file bound" in done.stdout, done  # the file named once
        assert done.stderr.count("\n") == 1 and f"{target}: rule evidence-changed:" in done.stderr, done
    assert _tree(session) == before


@pytest.mark.parametrize("name", ["EXPERIMENT_REPORT.md", "report.html"])
def test_report_with_bytes_that_are_not_utf8(session: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A report is re-rendered, not hashed: undecodable bytes in it were an internal error (exit 70)."""
    with (session / name).open("ab") as out:
        out.write(b"\xff\xfe forged")
    _refused(capsys, session, "ledger-agreement", name, "is not the report rendered from the ledger")


def test_huge_sparse_report_is_not_read(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import resource

    from sk_analytics.handoff.crosscheck import REPORT_LIMIT

    with (session / "report.html").open("r+b") as out:
        out.truncate(1 << 30)  # 1 GiB of holes: read, it would cost gigabytes of memory
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    _refused(capsys, session, "ledger-agreement", "report.html", f"more than any report sk-tune renders ({REPORT_LIMIT})")
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak < (REPORT_LIMIT >> 10)  # KiB: the file was not read


@pytest.mark.parametrize("kind", ["fifo", "link-to-itself"])
def test_report_that_is_not_a_regular_file(session: Path, kind: str, capsys: pytest.CaptureFixture[str]) -> None:
    report = session / "report.html"
    report.unlink()
    if kind == "fifo":
        os.mkfifo(report)  # never opened: is_file() is false for a FIFO
    else:
        report.symlink_to(report.name)
    _refused(capsys, session, "ledger-agreement", "report.html", "report.html is missing")


# --------------------------------------------------------------------------- identity


def test_session_json_deleted(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (session / "session.json").unlink()
    _refused(capsys, session, "identity", "session.json", "session.json is missing")


def test_emptied_ledger_without_session_or_head(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (session / "ledger.jsonl").write_bytes(b"")
    (session / "session.json").unlink()
    head_path(session / "ledger.jsonl").unlink()
    text = _refused(capsys, session, "identity", "ledger.jsonl", "no records")
    assert "0 record(s)" not in text


def test_emptied_ledger_with_session_and_head_kept(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (session / "ledger.jsonl").write_bytes(b"")
    code, text = _verify(capsys, str(session))
    assert code == 2 and "FAIL head [rule head]" in text and "no records" in text, text
    assert f"{session / 'ledger.jsonl'}: ledger verification failed" in text and "0 record(s)" not in text, text


def test_head_deleted(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    head_path(session / "ledger.jsonl").unlink()
    code, text = _verify(capsys, str(session))
    assert code == 2 and "[rule head]" in text and "missing" in text, text
    assert f"{session / 'ledger.jsonl'}: ledger verification failed" in text and "ledger.jsonl.head" in text, text


# --------------------------------------------------------------------------- signers and rollback


def _second_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """An insider's key, listed in the team's trusted-keys file; signing switches to it."""
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "insider" / "signing_key"))
    monkeypatch.setenv(TRUSTED_ENV, os.environ[TRUSTED_ENV])  # same trusted file: the new key is appended to it
    return signer().fingerprint


def test_tail_resigned_by_a_second_trusted_key(session: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    ledger = session / "ledger.jsonl"
    insider = _second_key(tmp_path, monkeypatch)
    key = signer()
    lines = ledger.read_text(encoding="utf-8").splitlines(keepends=True)
    out = []
    for number, line in enumerate(lines):
        rec = json.loads(line)
        if number >= 6:
            rec["sig"] = key.sign(RECORD_PURPOSE, rec["hash"])
        out.append(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
    ledger.write_text("".join(out), encoding="utf-8")
    last = json.loads(out[-1])
    anchor = head_body(last["seq"], last["hash"], ledger.stat().st_size)
    head_path(ledger).write_text(json.dumps({**anchor, "sig": key.sign(HEAD_PURPOSE, canonical_json(anchor))}), encoding="utf-8")
    code, text = _verify(capsys, str(session))
    assert code == 2 and "FAIL line 7 [rule one-signer]" in text and insider in text, text
    assert f"{ledger}:7: ledger verification failed" in text and "rule one-signer:" in text, text


def test_hand_over_lets_a_second_signer_continue(session: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch, own_witness: Path) -> None:
    from sk_analytics.ledger.chain import Ledger

    scratch = tmp_path / "plain"
    scratch.mkdir()
    ledger = Ledger(scratch)
    ledger.append("event", {"i": 0})
    trusted = os.environ[TRUSTED_ENV]
    old_key = os.environ[KEY_ENV]
    insider = _second_key(tmp_path, monkeypatch)
    monkeypatch.setenv(KEY_ENV, old_key)
    assert run_cli(cli, "sk-analyze", ["ledger", "hand-over", str(scratch), insider]) == 0
    monkeypatch.setenv(KEY_ENV, str(tmp_path / "insider" / "signing_key"))
    monkeypatch.setenv(TRUSTED_ENV, trusted)
    ledger.append("event", {"i": 1})
    code, text = _verify(capsys, str(ledger.path))
    assert code == 0 and text.count("record(s) signed by") == 2, text
    assert run_cli(cli, "sk-analyze", ["ledger", "hand-over", str(scratch), "SHA256:x"]) == 0  # the new signer may hand on
    monkeypatch.setenv(KEY_ENV, old_key)  # the first signer may not sign again without a hand-over back
    ledger.append("event", {"i": 2})
    code, text = _verify(capsys, str(ledger.path))
    assert code == 2 and "[rule one-signer]" in text


def test_rollback_to_an_older_genuinely_signed_head(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ledger = session / "ledger.jsonl"
    lines = ledger.read_text(encoding="utf-8").splitlines(keepends=True)[:5]
    ledger.write_text("".join(lines), encoding="utf-8")
    last = json.loads(lines[-1])
    anchor = head_body(last["seq"], last["hash"], ledger.stat().st_size)  # the backup of a genuine older head
    head_path(ledger).write_text(json.dumps({**anchor, "sig": signer().sign(HEAD_PURPOSE, canonical_json(anchor))}),
                                 encoding="utf-8")
    text = _refused(capsys, session, "witness", "ledger.jsonl", "rollback")
    assert "ends at seq 4" in text
    empty = session.parent / "fresh-witness.jsonl"
    empty.write_text("", encoding="utf-8")
    code, text = _verify(capsys, str(session), "--witness", str(empty))  # without the witness only the outputs disagree
    assert code == 2 and "[rule witness]" not in text


def test_handoff_head_cannot_serve_a_rollback(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    handoff = json.loads((session / "handoff.json").read_text(encoding="utf-8"))
    head = handoff["ledger"]["head"]
    assert set(head) == {"seq", "hash"}  # no signature to replay
    ledger = session / "ledger.jsonl"
    lines = ledger.read_text(encoding="utf-8").splitlines(keepends=True)[: head["seq"] + 1]
    ledger.write_text("".join(lines), encoding="utf-8")
    head_path(ledger).write_text(json.dumps({**head_body(head["seq"], head["hash"], ledger.stat().st_size)}), encoding="utf-8")
    code, text = _verify(capsys, str(session))
    assert code == 2 and "[rule signed]" in text, text
    assert f"{ledger}: ledger verification failed" in text and "rule signed:" in text, text


# --------------------------------------------------------------------------- interrupted hand-off (issue 29)


def test_crash_between_handoff_and_its_record_says_interrupted(session: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               own_witness: Path) -> None:
    ledger = session / "ledger.jsonl"
    lines = ledger.read_text(encoding="utf-8").splitlines(keepends=True)
    assert json.loads(lines[-1])["kind"] == "handoff_written"
    ledger.write_text("".join(lines[:-1]), encoding="utf-8")  # what the crash leaves: files written, record not
    last = json.loads(lines[-2])
    anchor = head_body(last["seq"], last["hash"], ledger.stat().st_size)
    head_path(ledger).write_text(json.dumps({**anchor, "sig": signer().sign(HEAD_PURPOSE, canonical_json(anchor))}),
                                 encoding="utf-8")
    (session / f".{head_path(ledger).name}.123.tmp").write_text("{", encoding="utf-8")  # a killed head writer's temp file
    text = _refused(capsys, session, "interrupted", "handoff.json", "sk-run sweep --resume", args=("--witness", str(own_witness)))
    assert "tamper" not in text
    cut = json.loads(lines[-1])["data"]["bound"]["manifest"]  # the cut record's manifest: named by no record now
    assert (session / cut).is_file()
    from sk_runner.sweep.session import load_session

    outcome = run_sweep(load_session(session), say=lambda _: None)
    assert outcome is not None and outcome.outcome == "base"
    assert not list(session.glob(".ledger.jsonl.head.*.tmp"))  # removed by the next sk-run
    assert not (session / cut).exists()  # dropped by the resume: it vouched for nothing
    assert read_records(session)[-1].kind == "handoff_written"
    code, text = _verify(capsys, str(session), "--witness", str(own_witness))
    assert code == 0, text


HOLD = "import fcntl, os, sys\nfd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)\nfcntl.flock(fd, fcntl.LOCK_EX)\n" \
       "print('held', flush=True)\nsys.stdin.read()\n"
"""A process that holds a file's ``flock`` (as ``sk-run sweep`` holds ``.sweep.lock``), says ``held``, and lets go when
its stdin closes."""


def _mid_append(session: Path) -> None:
    """``session`` as a sweep leaves it between writing its hand-off and recording it, with its next append under way."""
    ledger = session / "ledger.jsonl"
    lines = ledger.read_text(encoding="utf-8").splitlines(keepends=True)
    ledger.write_text("".join(lines[:-1]), encoding="utf-8")  # the hand-off written, its record not yet
    last = json.loads(lines[-2])
    anchor = head_body(last["seq"], last["hash"], ledger.stat().st_size)
    head_path(ledger).write_text(json.dumps({**anchor, "sig": signer().sign(HEAD_PURPOSE, canonical_json(anchor))}),
                                 encoding="utf-8")
    (session / ".ledger.jsonl.head.append.tmp").write_text("{", encoding="utf-8")  # its next append, under way


@contextmanager
def _holding(argv: list[str]) -> Iterator[subprocess.Popen[str]]:
    """The process ``argv`` (running :data:`HOLD`) while it holds the lock: waited for by its ``held`` line, never a sleep."""
    holder = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        yield holder
    finally:
        assert holder.stdin is not None
        holder.stdin.close()
        holder.wait(timeout=30)


def test_a_session_a_sweep_is_writing_verifies_what_is_bound_and_says_so(session: Path, capsys: pytest.CaptureFixture[str],
                                                                       own_witness: Path, tmp_path: Path) -> None:
    """``ledger verify`` while a sweep runs on the session (an sk-run process holds ``.sweep.lock``): the files it wrote
    since its last record are not bound yet, which is no finding and no interruption (exit 0, a note saying a sweep is
    running); it said FAIL [rule interrupted] and told the user to resume, which the running sweep's lock refuses."""
    _mid_append(session)
    script = tmp_path / "bin" / "sk-run"  # a holder whose command line is sk-run's: the program the sweep runs as
    script.parent.mkdir()
    script.write_text(HOLD, encoding="utf-8")
    with _holding([sys.executable, str(script), str(session / ".sweep.lock")]):
        code, text = _verify(capsys, str(session), "--witness", str(own_witness))
    assert code == 0, text
    assert "FAIL" not in text and "--resume" not in text and "not sk-run" not in text, text
    assert "a sweep is running on this session" in text and "not bound yet" in text, text
    assert "machinery to clean" not in text, text  # the running sweep's own write, not a leftover
    # the lock released with nothing recorded after it: the same files are an interrupted step again
    _refused(capsys, session, "interrupted", "handoff.json", "sk-run sweep --resume", args=("--witness", str(own_witness)))


def test_a_lock_holder_that_is_not_sk_run_is_named_and_is_no_running_sweep(session: Path, capsys: pytest.CaptureFixture[str],
                                                                           own_witness: Path) -> None:
    """Any process holding ``.sweep.lock`` made verify take the session's unbound files for a running sweep's work in
    progress (exit 0). A holder whose command line is not sk-run's is named, and the files are what they are: an
    interrupted step (exit 2), with the reason a resume is refused for now."""
    _mid_append(session)
    with _holding([sys.executable, "-c", HOLD, str(session / ".sweep.lock")]) as holder:
        text = _refused(capsys, session, "interrupted", "handoff.json", "sk-run sweep --resume", args=("--witness", str(own_witness)))
        assert f".sweep.lock is held by pid {holder.pid} ({sys.executable} -c import fcntl" in text, text
        assert "which is not sk-run: no sweep is taken to be writing this session" in text, text
        assert "a sweep is running on this session" not in text, text
        code, text = _verify(capsys, str(session), "--witness", str(own_witness), "--json")
    assert code == 2 and any(f"pid {holder.pid} (" in note for note in json.loads(text.split("\nsk-analyze")[0])["notes"]), text


@pytest.mark.parametrize(("argv", "sk_run"), [
    (["/venv/bin/sk-run", "sweep", "--resume", "s"], True),
    (["/usr/bin/python3", "/venv/bin/sk-run", "campaign", "run"], True),
    (["python3", "-X", "dev", "-u", "/venv/bin/sk-run", "sweep"], True),
    (["python3", "-m", "sk_runner.cli", "sweep"], True),
    (["python3", "-m", "sk_runner"], True),
    (["python3", "-c", "import sk_runner", "sk-run"], False),
    (["python3", "/tmp/hold.py", "/s/.sweep.lock"], False),
    (["flock", "/s/.sweep.lock", "sk-run"], False),
    (["vim", "/s/.sweep.lock"], False),
    (["python3", "-m", "sk_runner_fake"], False),
    ([], False),
])
def test_what_counts_as_an_sk_run_command_line(argv: list[str], sk_run: bool) -> None:
    assert is_sk_run(argv) is sk_run


# --------------------------------------------------------------------------- bad input


def _one_error(text: str, names: Path | str) -> str:
    """The single error line of a refused verify (a FAIL report line before it is allowed); names ``names``."""
    assert "Traceback" not in text, text
    lines = text.strip().splitlines()
    errors = [line for line in lines if line.startswith("sk-analyze")]
    assert len(errors) == 1 and len(lines) - len(errors) <= 1 and all(line.startswith("FAIL ") for line in lines if line not in errors), text
    assert str(names) in errors[0], text
    return errors[0]


def test_bad_inputs_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    code, text = _verify(capsys, str(loop))
    assert code == 2, text
    _one_error(text, "loop")
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "gone")
    code, text = _verify(capsys, str(dangling))
    assert code == 2, text
    _one_error(text, "dangling")
    a_file = tmp_path / "not-a-session"
    a_file.write_text("hello\n", encoding="utf-8")
    code, text = _verify(capsys, str(a_file))  # a file given as the session: read as a ledger, refused at its line 1
    assert code == 2, text
    _one_error(text, f"{a_file}:1")
    empty = tmp_path / "empty-folder"
    empty.mkdir()
    code, text = _verify(capsys, str(empty))
    assert code == 2 and "ledger file not found" in _one_error(text, empty / "ledger.jsonl"), text
    assert list(empty.iterdir()) == []  # nothing written, not even a lock


@pytest.mark.parametrize("damage", ["ledger-is-a-folder", "head-is-a-loop", "session-json-is-a-folder", "scene-folder-is-a-loop",
                                    "ledger-and-head-deleted"])
def test_damaged_session_is_one_line_and_verify_writes_nothing(session: Path, damage: str,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    ledger = session / "ledger.jsonl"
    if damage == "ledger-is-a-folder":
        ledger.unlink()
        ledger.mkdir()
        named = ledger
    elif damage == "head-is-a-loop":
        head = head_path(ledger)
        head.unlink()
        head.symlink_to(head.name)
        named = ledger
    elif damage == "session-json-is-a-folder":
        (session / "session.json").unlink()
        (session / "session.json").mkdir()
        named = "session.json is not a regular file"
    elif damage == "scene-folder-is-a-loop":  # a vouched folder replaced by a link to itself: never followed
        shutil.rmtree(session / SCENE)
        (session / SCENE).symlink_to("attempt-1")
        named = session / SCENE
    else:
        ledger.unlink()
        head_path(ledger).unlink()
        named = ledger
    before = _tree(session)
    code, text = _verify(capsys, str(session))
    assert code == 2, text
    _one_error(text, named)
    assert _tree(session) == before


@pytest.mark.parametrize("fifo", ["ledger", "head", "witness", "trusted-keys"])
def test_fifo_in_place_of_a_file_verify_reads_is_refused_not_waited_on(session: Path, tmp_path: Path, fifo: str) -> None:
    """A FIFO as the ledger, its head, the witness or the trusted-keys file: one line, exit 2 (it used to hang)."""
    ledger = session / "ledger.jsonl"
    env = dict(os.environ)
    argv = ["ledger", "verify", str(session)]
    target = {"ledger": ledger, "head": head_path(ledger), "witness": tmp_path / "witness.jsonl",
              "trusted-keys": tmp_path / "trusted_keys"}[fifo]
    target.unlink(missing_ok=True)
    os.mkfifo(target)
    if fifo == "witness":
        argv += ["--witness", str(target)]
    if fifo == "trusted-keys":
        env[TRUSTED_ENV] = str(target)
    before = _tree(session)
    done = subprocess.run([sys.executable, "-c", "from sk_analytics.cli import main; main()", *argv],
                          capture_output=True, text=True, timeout=120, env=env)
    assert done.returncode == 2, done
    _one_error(done.stdout + done.stderr, target.name)
    assert "not a regular file" in done.stderr, done
    assert _tree(session) == before


def test_unreadable_evidence_file_is_bad_input(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """chmod 000 on a vouched rank log: EACCES is an input the user can fix (docs/faults.md), exit 2, one line."""
    if os.geteuid() == 0:
        pytest.skip("root reads a chmod-000 file regardless; the EACCES case is covered by the injected fault below")
    log = session / O0 / "CLEAN/run-1/log_0.log"
    log.chmod(0)
    try:
        before = _tree(session)
        code, text = _verify(capsys, str(session))
        assert code == 2 and "Permission denied" in _one_error(text, log), text
        assert _tree(session) == before
    finally:
        log.chmod(0o644)


def test_permission_denied_read_is_bad_input(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The chmod-000 case as the read seam sees it (runs as root too): exit 2, never 3, one line naming the file."""
    import errno

    from sk_analytics.files.io_seam import Fault, inject

    before = _tree(session)
    with inject(Fault(errno.EACCES, site="read", nth=40)):
        code, text = _verify(capsys, str(session))
    assert code == 2 and "Permission denied" in _one_error(text, session), text
    assert _tree(session) == before


def test_unreadable_evidence_is_an_environment_fault(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import errno

    from sk_analytics.files.io_seam import Fault, inject

    with inject(Fault(errno.EIO, site="read", nth=40)):
        code, text = _verify(capsys, str(session))
    assert code == 3 and "Input/output error" in text and text.count("\n") <= 2 and "Traceback" not in text, text
