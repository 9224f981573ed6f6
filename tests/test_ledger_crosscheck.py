"""``ledger verify SESSION`` cross-checks the output files against the signed ledger (issue 13).

One real sweep (stream-fusion-0 rejected) is run once; each test edits a copy
the way a person without the key would, and the first disagreeing file is named."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from sweep_helpers import settled_statuses, small_session

from sk_analytics.cli import cli
from sk_analytics.cli._base import run_cli
from sk_analytics.fingerprint import fingerprint
from sk_analytics.handoff.crosscheck import first_disagreement
from sk_analytics.ledger.chain import GENESIS, head_body, head_path
from sk_runner.sweep.driver import run_sweep
from sk_runner.sweep.handoff import write_reports

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("crosscheck") / "s"
    outcome = run_sweep(small_session(root, ["stream-fusion-0"]), say=lambda _: None)
    assert outcome is not None and outcome.outcome == "base"
    assert settled_statuses(root) == {"stream-fusion-0": "rejected"}
    return root


@pytest.fixture
def session(finished: Path, tmp_path: Path) -> Path:
    """A copy of the finished session in another folder (as an archive would hold it)."""
    copy = tmp_path / "copy"
    shutil.copytree(finished, copy, symlinks=True)
    return copy


def _verify(root: Path, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = run_cli(cli, "sk-analyze", ["ledger", "verify", str(root)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _edit_json(path: Path, edit: Callable[[dict[str, Any]], None], seal: str | None = None) -> None:
    """Edit a JSON file; ``seal`` names its self-fingerprint field, recomputed like a forger would."""
    data = json.loads(path.read_text(encoding="utf-8"))
    edit(data)
    if seal:
        data[seal] = fingerprint({k: v for k, v in data.items() if k != seal})
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def _refused(root: Path, capsys: pytest.CaptureFixture[str], file: str, detail: str, rule: str = "evidence-changed") -> None:
    """``ledger verify`` names ``file`` (since issue 24 the evidence binding sees a changed vouched
    file first); the cross-check behind it still names the file and how it disagrees."""
    code, text = _verify(root, capsys)
    assert code == 2, text
    assert f"FAIL file {file} [rule {rule}]" in text, text
    assert f"{root / file}: rule {rule}:" in text
    found = first_disagreement(root)
    assert found is not None and found.file == file and detail in found.message, found


def _flip(entries: list[dict[str, Any]]) -> None:
    for entry in entries:
        if entry["id"] == "stream-fusion-0":
            entry["status"] = "accepted"


def test_untouched_copy_agrees_in_either_report_language(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, text = _verify(session, capsys)
    assert code == 0 and "signed by" in text, text
    write_reports(session, lang="en")  # a resume may re-render the reports in English
    assert _verify(session, capsys)[0] == 0


def test_forged_handoff_is_named(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _edit_json(session / "handoff.json", lambda h: _flip(h["entries"]), seal="handoff_fingerprint")
    _refused(session, capsys, "handoff.json", "differs from the hand-off recorded at seq")


def test_forged_base_is_named(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _edit_json(session / "BASE/sbest-base.json", lambda b: b.update(options={"stream_fusion": 0}), seal="base_fingerprint")
    _refused(session, capsys, "BASE/sbest-base.json", "is not the BASE frozen at seq")


def test_forged_settled_matrix_names_the_entry(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _edit_json(session / "matrix.settled.json", lambda m: _flip(m["entries"]))
    _refused(session, capsys, "matrix.settled.json", "entry stream-fusion-0 is accepted in matrix.settled.json, the ledger settled it rejected")


@pytest.mark.parametrize("name", ["EXPERIMENT_REPORT.md", "report.html"])
def test_edited_report_is_named(session: Path, capsys: pytest.CaptureFixture[str], name: str) -> None:
    path = session / name
    path.write_text(path.read_text(encoding="utf-8").replace("stream-fusion-0", "stream-fusion-O", 1), encoding="utf-8")
    _refused(session, capsys, name, "is not the report rendered from the ledger", rule="ledger-agreement")


def test_missing_handoff_is_named(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (session / "handoff.json").unlink()
    _refused(session, capsys, "handoff.json", "handoff.json is missing", rule="evidence-missing")


def test_edited_session_identity_is_named(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _edit_json(session / "session.json", lambda s: s.update(seed=8))
    _refused(session, capsys, "session.json", "not the identity the first ledger record fingerprinted")


def test_rechained_session_ledger_fails_on_the_first_forged_record(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 13, point 3: stream-fusion-0 flipped to accepted, every hash and the head recomputed."""
    ledger = session / "ledger.jsonl"
    prev, lines, first = GENESIS, [], None
    for number, line in enumerate(ledger.read_text(encoding="utf-8").splitlines(), start=1):
        rec = json.loads(line)
        if rec["kind"] == "entry_settled" and rec["data"].get("entry_id") == "stream-fusion-0":
            rec["data"]["status"] = "accepted"
            first = first or number
        rec["prev"] = prev
        rec["hash"] = prev = fingerprint({k: v for k, v in rec.items() if k not in ("hash", "sig")})
        lines.append(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
    ledger.write_text("".join(lines), encoding="utf-8")
    old = json.loads(head_path(ledger).read_text(encoding="utf-8"))
    head_path(ledger).write_text(json.dumps({**head_body(len(lines) - 1, prev, ledger.stat().st_size), "sig": old["sig"]}))
    code, text = _verify(session, capsys)
    assert first is not None and code == 2
    assert f"FAIL line {first} [rule signature-valid]" in text and f"ledger.jsonl:{first}: ledger verification failed" in text


def _renders(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Count the reports ``ledger verify``'s cross-check re-renders (crosscheck imported the name)."""
    from sk_analytics.handoff import crosscheck

    calls: list[str] = []
    real = crosscheck.report_texts

    def counting(view: Any, lang: str = "zh") -> dict[str, str]:
        calls.append(lang)
        return real(view, lang)

    monkeypatch.setattr(crosscheck, "report_texts", counting)
    return calls


def test_the_handoff_record_binds_what_a_re_rendering_gives_in_both_languages(session: Path) -> None:
    from sk_analytics.handoff.outputs import REPORT_LANGS, REPORTS_KEY, report_digests, report_texts, text_digest
    from sk_analytics.ledger.chain import read_records
    from sk_analytics.session_view import load_view

    records = read_records(session)
    handoff = [r for r in records if r.kind == "handoff_written"][-1]
    assert handoff.seq == records[-1].seq
    view = load_view(session)
    assert handoff.data[REPORTS_KEY] == report_digests({lang: report_texts(view, lang) for lang in REPORT_LANGS})
    assert {n: text_digest((session / n).read_bytes()) for n in ("EXPERIMENT_REPORT.md", "report.html")} == handoff.data[REPORTS_KEY]["zh"]


def test_bound_reports_are_compared_by_digest_without_rendering(session: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write_reports(session, lang="en")  # a legitimate re-render in the other language is bound too
    calls = _renders(monkeypatch)
    assert first_disagreement(session) is None and calls == []


def test_reports_without_a_binding_are_re_rendered(session: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A session written before the reports were bound (no such key in its record) is proven by the renderer."""
    from sk_analytics.handoff import crosscheck

    monkeypatch.setattr(crosscheck, "REPORTS_KEY", "reports-of-a-later-sk-tune")
    calls = _renders(monkeypatch)
    assert first_disagreement(session) is None and calls == ["zh"]
    path = session / "report.html"
    path.write_text(path.read_text(encoding="utf-8").replace("stream-fusion-0", "stream-fusion-O", 1), encoding="utf-8")
    found = first_disagreement(session)
    assert found is not None and found.file == "report.html" and calls == ["zh", "zh", "en"]


def test_a_binding_proves_the_reports_only_from_the_last_record(session: Path) -> None:
    import dataclasses

    from sk_analytics.handoff.crosscheck import _bound_reports_match
    from sk_analytics.ledger.chain import read_records

    records = read_records(session)
    handoff = records[-1]
    assert handoff.kind == "handoff_written" and _bound_reports_match(session, handoff, records)
    later = dataclasses.replace(handoff, seq=handoff.seq + 1)
    assert not _bound_reports_match(session, handoff, [*records, later])
    (session / "EXPERIMENT_REPORT.md").write_text("forged\n", encoding="utf-8")
    assert not _bound_reports_match(session, handoff, records)


def test_verify_of_a_bound_session_imports_no_renderer_or_table_library(session: Path) -> None:
    """The start-up cost issue 24 measured: scipy (renderer), polars, jsonschema and YAML stay unimported."""
    import subprocess
    import sys

    code = ("import sys\nfrom sk_analytics.cli import cli\nfrom sk_analytics.cli._base import run_cli\n"
            f"rc = run_cli(cli, 'sk-analyze', ['ledger', 'verify', {str(session)!r}])\n"
            "heavy = sorted(m for m in ('sk_analytics.report.render', 'scipy', 'polars', 'numpy', 'jsonschema', 'yaml', "
            "'cryptography.hazmat.primitives.serialization.ssh') if m in sys.modules)\n"
            "print('RC', rc, 'HEAVY', heavy)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert "RC 0 HEAVY []" in done.stdout, done.stdout + done.stderr
