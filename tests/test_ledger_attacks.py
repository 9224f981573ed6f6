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
from collections.abc import Iterator
from pathlib import Path

import polars as pl
import pytest

from sk_analytics.cli import cli
from sk_analytics.cli._base import run_cli
from sk_analytics.fingerprint import canonical_json
from sk_analytics.ledger import HEAD_PURPOSE, RECORD_PURPOSE, head_body, head_path, read_records
from sk_analytics.signing import KEY_ENV, TRUSTED_ENV, signer
from sk_analytics.witness import WITNESS_ENV
from sk_runner.sweep.driver import run_sweep
from sk_runner.sweep.handoff import write_reports
from sweep_helpers import settled_statuses, small_session

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
    monkeypatch.chdir(session)
    assert _verify(capsys, ".")[0] == 0
    monkeypatch.chdir(tmp_path)
    assert _verify(capsys, "copy")[0] == 0 and _verify(capsys, "./copy/")[0] == 0
    moved = tmp_path / "elsewhere" / "renamed"
    moved.parent.mkdir()
    shutil.move(str(session), str(moved))
    monkeypatch.chdir(moved.parent)
    assert _verify(capsys, "renamed")[0] == 0 and _verify(capsys, str(moved))[0] == 0
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
    assert "more file finding" in text


def test_evidence_manifest_edited(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    manifest = sorted((session / "EVIDENCE").iterdir())[2]
    data = json.loads(manifest.read_text(encoding="utf-8"))
    data["files"].popitem()
    manifest.write_text(json.dumps(data), encoding="utf-8")
    _refused(capsys, session, "evidence-manifest", f"EVIDENCE/{manifest.name}", "differs from the BLAKE3 digest")


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


def test_head_deleted(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    head_path(session / "ledger.jsonl").unlink()
    code, text = _verify(capsys, str(session))
    assert code == 2 and "[rule head]" in text and "missing" in text, text


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


def test_hand_over_lets_a_second_signer_continue(session: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch, own_witness: Path) -> None:
    from sk_analytics.ledger import Ledger

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
    from sk_runner.sweep.session import load_session

    outcome = run_sweep(load_session(session), say=lambda _: None)
    assert outcome is not None and outcome.outcome == "base"
    assert not list(session.glob(".ledger.jsonl.head.*.tmp"))  # removed by the next sk-run
    assert read_records(session)[-1].kind == "handoff_written"
    code, text = _verify(capsys, str(session), "--witness", str(own_witness))
    assert code == 0, text


# --------------------------------------------------------------------------- bad input


def test_bad_inputs_are_one_line(tmp_path: Path, session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    loop = tmp_path / "loop"
    loop.symlink_to(loop)
    code, text = _verify(capsys, str(loop))
    assert code == 2 and "Traceback" not in text
    a_file = tmp_path / "not-a-session"
    a_file.write_text("hello\n", encoding="utf-8")
    code, text = _verify(capsys, str(a_file))
    assert code == 2 and "Traceback" not in text and len(text.strip().splitlines()) <= 2, text


def test_unreadable_evidence_is_an_environment_fault(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import errno

    from sk_analytics.io_seam import Fault, inject

    with inject(Fault(errno.EIO, site="read", nth=40)):
        code, text = _verify(capsys, str(session))
    assert code == 3 and "Input/output error" in text and text.count("\n") <= 2 and "Traceback" not in text, text
