"""Issue 24 item 6 and issue 27: the DCCI collections a session recorded are part of ``ledger verify``'s proof,
and a copied session can be re-diagnosed (``dcci-diff --session`` in archive mode, said so).

One finished sweep with a DCCI diagnosis (moe-decode, dcci-disable-all) per module; each test
works on a ``cp -a`` copy. A second, independent sweep (another folder, another seed) supplies
the foreign collections: validly signed by the same trusted key and verifying on their own."""

from __future__ import annotations

import fnmatch
import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from sweep_helpers import SHORT_PROFILE_POLICY, small_session

from sk_analytics.cli import cli
from sk_analytics.cli._base import run_cli
from sk_analytics.contract.manifest import MANIFEST_NAME, load_manifest
from sk_analytics.contract.scan import MARKER_NAME
from sk_analytics.files.stale_temps import is_leftover
from sk_analytics.handoff.proof import collection_finding
from sk_analytics.ledger.chain import read_records
from sk_analytics.ledger.evidence import fold
from sk_runner.sweep.driver import run_sweep

pytestmark = pytest.mark.slow
DCCI = "experiments/Sbest/DCCI"
DIAG = f"{DCCI}/diag"
BASELINE = f"{DIAG}/baseline_profile/attempt-1"
CANDIDATE = f"{DIAG}/candidate_profile/attempt-1"


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dcci-attacks") / "s"
    run_sweep(small_session(root, ["dcci-disable-all"], network="moe-decode", policy=SHORT_PROFILE_POLICY), say=lambda _: None)
    assert (root / BASELINE / MANIFEST_NAME).is_file() and (root / CANDIDATE / MANIFEST_NAME).is_file()
    return root


@pytest.fixture(scope="module")
def foreign(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another finished session with its own DCCI collections (the source of the foreign ones), created
    through a *relative* path (its collection records and dcci-diff.json hold the path as typed)."""
    parent = tmp_path_factory.mktemp("dcci-foreign")
    here = os.getcwd()
    os.chdir(parent)
    try:
        run_sweep(small_session(Path("other"), ["dcci-disable-all"], network="moe-decode", seed=8, policy=SHORT_PROFILE_POLICY),
                  say=lambda _: None)
    finally:
        os.chdir(here)
    root = parent / "other"
    assert (root / BASELINE / MANIFEST_NAME).is_file()
    return root


@pytest.fixture
def session(finished: Path, tmp_path: Path) -> Path:
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(finished), str(copy)], check=True)
    return copy


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    code = run_cli(cli, "sk-analyze", list(argv))
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_copied_session_verifies_and_is_rediagnosed_in_archive_mode(session: Path, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    assert collection_finding(session, read_records(session)) is None
    code, text = _run(capsys, "ledger", "verify", str(session))
    assert code == 0 and "archive mode" in text, text
    out = tmp_path / "diff.json"
    code, text = _run(capsys, "dcci-diff", "--baseline", str(session / BASELINE), "--candidate", str(session / CANDIDATE),
                      "--json-out", str(out), "--session", str(session))
    assert code in (0, 1) and "archive mode: the collections fail the live rule session-binding" in text, text
    assert out.is_file()
    code, text = _run(capsys, "dcci-diff", "--baseline", str(session / BASELINE), "--candidate", str(session / CANDIDATE),
                      "--json-out", str(out))  # without the session's ledger a copy stays refused
    assert code == 2 and "session-binding" in text


def test_dcci_session_created_relative_verifies_from_any_path_and_cwd(foreign: Path, tmp_path: Path,
                                                                      capsys: pytest.CaptureFixture[str],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    copy = tmp_path / "copy"
    subprocess.run(["cp", "-a", str(foreign), str(copy)], check=True)
    before = {str(p.relative_to(copy)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in sorted(copy.rglob("*"))}
    moved = tmp_path / "archive" / "moved"
    moved.parent.mkdir()
    shutil.move(str(copy), str(moved))
    attempts = [(str(foreign), None), (str(moved), None), ("moved", moved.parent), (".", moved), ("./moved/", moved.parent),
                (str(moved.relative_to("/")), Path("/")), (str(moved.relative_to("/") / "ledger.jsonl"), Path("/"))]
    for given, cwd in attempts:
        if cwd is not None:
            monkeypatch.chdir(cwd)
        code, text = _run(capsys, "ledger", "verify", given)
        assert code == 0 and "file(s) vouched for" in text, (given, cwd, text)
    after = {str(p.relative_to(moved)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in sorted(moved.rglob("*"))}
    assert after == before  # verify writes nothing


def test_swapped_collection_roots_fail_verify(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = session / BASELINE, session / CANDIDATE
    os.rename(a, a.with_name("tmp"))
    os.rename(b, a)
    os.rename(a.with_name("tmp"), b)
    finding = collection_finding(session, read_records(session))
    assert finding is not None and finding.file == BASELINE, finding
    _refused_under(capsys, session, DIAG, "evidence-changed")


def test_swapped_manifests_only_fail_verify(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = session / BASELINE / MANIFEST_NAME, session / CANDIDATE / MANIFEST_NAME
    data_a, data_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(data_b)
    b.write_bytes(data_a)
    finding = collection_finding(session, read_records(session))
    assert finding is not None and finding.file == BASELINE and "recorded at seq" in finding.message, finding
    code, text = _run(capsys, "ledger", "verify", str(session))
    assert code == 2 and f"FAIL file {BASELINE}/{MANIFEST_NAME} [rule evidence-changed]" in text, text


def test_dcci_diff_edited_and_reports_rerendered_fails_verify(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A repair list forged in dcci-diff.json, then the reports re-rendered with sk-tune's own renderer."""
    from sk_runner.sweep.handoff import write_reports

    path = session / DCCI / "dcci-diff.json"
    diff = json.loads(path.read_text(encoding="utf-8"))
    assert len(diff["repair"]["tokens"]) >= 1
    diff["repair"]["tokens"] = ["FORGED"]
    diff["summary"]["classes"]["significantly_slower"] = 0
    path.write_text(json.dumps(diff, ensure_ascii=False), encoding="utf-8")
    write_reports(session)
    file = _refused_under(capsys, session, DCCI, "evidence-changed")
    assert file == f"{DCCI}/dcci-diff.json", file


def test_file_planted_in_a_collection_under_a_name_verify_skips(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A name of sk-tune's own atomic-write temps is machinery to the evidence walk, but inside a collection
    root the contract lists it: refused by the collection rule."""
    planted = ".kernel_details.csv.a1b2c3d4.tmp"
    assert is_leftover(planted)
    (session / BASELINE / planted).write_text("x", encoding="utf-8")
    code, text = _run(capsys, "ledger", "verify", str(session))
    assert code == 2 and f"FAIL file {BASELINE} [rule no-files-after-finalize]" in text and planted in text, text
    assert f"{session / BASELINE}: rule no-files-after-finalize:" in text, text


def test_hard_link_into_a_collection_is_refused_as_by_the_contract(session: Path, tmp_path: Path,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Content unchanged, but another name outside shares the file: dcci-diff --session refuses it, so verify does."""
    victim = next(p for p in sorted((session / BASELINE).rglob("*.csv")) if p.is_file())
    os.link(victim, tmp_path / "outside.csv")
    code, text = _run(capsys, "ledger", "verify", str(session))
    assert code == 2 and f"FAIL file {BASELINE} [rule no-symlinks]" in text and "hard link" in text, text


def test_foreign_ledger_and_head_over_this_sessions_files_fail_verify(session: Path, foreign: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Another session's genuine ledger and head (its chain, signatures and witness entries all hold) over this
    session's files: the evidence manifests its records sign are not here."""
    for name in ("ledger.jsonl", "ledger.jsonl.head"):
        shutil.copy2(foreign / name, session / name)
    code, text = _run(capsys, "ledger", "verify", str(session))
    assert code == 2 and "FAIL file EVIDENCE/" in text and "[rule evidence-manifest]" in text, text
    assert f"{session}/EVIDENCE/" in text and ": rule evidence-manifest: " in text, text


def _transplant(src: Path, dst: Path) -> None:
    """Replace the folder ``dst`` by a ``cp -a`` copy of ``src`` (what an auditor with write access can do)."""
    shutil.rmtree(dst)
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True)


def _refused_under(capsys: pytest.CaptureFixture[str], session: Path, folder: str, rule: str, *extra: str) -> str:
    """``ledger verify`` exits 2 with one FAIL line naming ``rule`` and a file under ``folder``; returns the file."""
    code, text = _run(capsys, "ledger", "verify", str(session), *extra)
    fails = [line for line in text.splitlines() if line.startswith("FAIL ")]
    assert code == 2 and len(fails) == 1, text
    assert fails[0].startswith(f"FAIL file {folder}/"), text
    file, _, rest = fails[0][len("FAIL file "):].partition(" [rule ")
    assert rest.startswith(f"{rule}] "), text
    assert f"{session / file}: rule {rule}:" in text, text  # the one error line names the file and the rule too
    return file


def test_baseline_replaced_by_a_foreign_signed_collection_fails_verify(session: Path, foreign: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    # the foreign collection is genuine: its own session verifies, and it passes the contract on its own
    code, text = _run(capsys, "ledger", "verify", str(foreign))
    assert code == 0, text
    theirs = load_manifest(foreign / BASELINE, archive=True)
    ours = load_manifest(session / BASELINE, archive=True)
    assert theirs["manifest_fingerprint"] != ours["manifest_fingerprint"]
    _transplant(foreign / BASELINE, session / BASELINE)
    assert load_manifest(session / BASELINE, archive=True)["manifest_fingerprint"] == theirs["manifest_fingerprint"]
    records = read_records(session)
    # the collection rule alone (a session without evidence bindings): not the collection the ledger recorded
    finding = collection_finding(session, records)
    assert finding is not None and finding.rule == "ledger-pair" and finding.file == BASELINE, finding
    assert ours["manifest_fingerprint"][:12] in finding.message and theirs["manifest_fingerprint"][:12] in finding.message
    # the collection rule on top of the bindings (what prove() runs after the evidence): still refused
    finding = collection_finding(session, records, fold(session, records)[0])
    assert finding is not None and finding.file == BASELINE, finding
    # ledger verify itself, full and --quick: the first file that differs from its binding
    for extra in ((), ("--quick",)):  # the collection's files are small: --quick re-hashes them too
        file = _refused_under(capsys, session, BASELINE, "evidence-changed", *extra)
        assert file == f"{BASELINE}/{MARKER_NAME}", file  # the marker binds the collection to its own capture session


def test_whole_diagnosis_replaced_by_a_foreign_one_fails_verify(session: Path, foreign: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Both collections and the dcci-diff.json of another session: each self-consistent, none this session's."""
    assert (foreign / DCCI / "dcci-diff.json").is_file()
    _transplant(foreign / DCCI, session / DCCI)
    records = read_records(session)
    finding = collection_finding(session, records)
    assert finding is not None and finding.rule == "ledger-pair" and finding.file == BASELINE, finding
    _refused_under(capsys, session, DCCI, "evidence-changed")


def test_the_complete_profiler_folder_is_bound_evidence(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 35: the simulator's whole torch_npu folder (profiler_info, PROF_* host/device files, op_summary,
    communication files) is inside each collection, the session verifies with it, and an edit to one of its
    small descriptive files is caught like an edit to any other evidence."""
    root = session / CANDIDATE
    files = [p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file()]
    for pattern in ("*_ascend_pt/profiler_info_*.json", "*_ascend_pt/profiler_metadata.json", "*_ascend_pt/PROF_*/host/start_info",
                    "*_ascend_pt/PROF_*/device_*/info.json.*", "*_ascend_pt/PROF_*/device_*/end_info.*",
                    "*_ascend_pt/PROF_*/mindstudio_profiler_output/op_summary_*.csv", "*_ascend_pt/ASCEND_PROFILER_OUTPUT/communication.json"):
        assert any(fnmatch.fnmatch(f, pattern) for f in files), pattern
    code, text = _run(capsys, "ledger", "verify", str(session))
    assert code == 0, text
    start_info = next(root.glob("*_ascend_pt/PROF_*/device_*/start_info.*"))
    start_info.write_text(start_info.read_text(encoding="utf-8").replace('"clockMonotonicRaw":"', '"clockMonotonicRaw":"1', 1), encoding="utf-8")
    code, text = _run(capsys, "ledger", "verify", str(session))
    assert code == 2 and f"FAIL file {DIAG}/" in text, text
