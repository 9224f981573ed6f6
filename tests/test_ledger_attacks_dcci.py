"""Issue 24 item 6 and issue 27: the DCCI collections a session recorded are part of ``ledger verify``'s proof,
and a copied session can be re-diagnosed (``dcci-diff --session`` in archive mode, said so).

One finished sweep with a DCCI diagnosis (moe-decode, dcci-disable-all) per module; each test
works on a ``cp -a`` copy."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from sk_analytics.cli import cli
from sk_analytics.cli._base import run_cli
from sk_analytics.contract.manifest import MANIFEST_NAME
from sk_analytics.ledger import read_records
from sk_analytics.stage_o.proof import collection_finding
from sk_runner.sweep.driver import run_sweep
from sweep_helpers import small_session

pytestmark = pytest.mark.slow
DIAG = "experiments/Sbest/DCCI/diag"
BASELINE = f"{DIAG}/baseline_profile/attempt-1"
CANDIDATE = f"{DIAG}/candidate_profile/attempt-1"


@pytest.fixture(scope="module")
def finished(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("dcci-attacks") / "s"
    run_sweep(small_session(root, ["dcci-disable-all"], network="moe-decode"), say=lambda _: None)
    assert (root / BASELINE / MANIFEST_NAME).is_file() and (root / CANDIDATE / MANIFEST_NAME).is_file()
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


def test_swapped_collection_roots_fail_verify(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = session / BASELINE, session / CANDIDATE
    os.rename(a, a.with_name("tmp"))
    os.rename(b, a)
    os.rename(a.with_name("tmp"), b)
    finding = collection_finding(session, read_records(session))
    assert finding is not None and finding.file == BASELINE, finding
    code, text = _run(capsys, "ledger", "verify", str(session))
    assert code == 2 and f"FAIL file {DIAG}/" in text and "[rule evidence-changed]" in text, text


def test_swapped_manifests_only_fail_verify(session: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, b = session / BASELINE / MANIFEST_NAME, session / CANDIDATE / MANIFEST_NAME
    data_a, data_b = a.read_bytes(), b.read_bytes()
    a.write_bytes(data_b)
    b.write_bytes(data_a)
    finding = collection_finding(session, read_records(session))
    assert finding is not None and finding.file == BASELINE and "recorded at seq" in finding.message, finding
    code, text = _run(capsys, "ledger", "verify", str(session))
    assert code == 2 and f"FAIL file {BASELINE}/{MANIFEST_NAME} [rule evidence-changed]" in text, text
