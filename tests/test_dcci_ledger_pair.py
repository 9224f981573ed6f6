"""Rule ledger-pair (issue 13): with a sweep session, dcci-diff analyses only the pair its signed ledger recorded."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from test_dcci_e2e import WARMUP, pair

from sk_analytics.cli import cli
from sk_analytics.cli._base import run_cli
from sk_analytics.contract import ContractIntegrityError
from sk_analytics.contract.scan import MANIFEST_NAME
from sk_analytics.dcci.pipeline import load_pair
from sk_analytics.ledger.chain import Ledger


@pytest.fixture(scope="module")
def collections(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base, cand, _ = pair(tmp_path_factory.mktemp("pair"), "dcci-unrepairable", (7, 8))
    return base, cand


def _fingerprint(root: Path) -> str:
    return str(json.loads((root / MANIFEST_NAME).read_text(encoding="utf-8"))["manifest_fingerprint"])


def _session(tmp_path: Path, recorded: dict[str, tuple[Path, str]]) -> Path:
    """A session folder whose ledger recorded ``role -> (root, manifest_fingerprint)`` as the sweep does at finalize."""
    session = tmp_path / "session"
    session.mkdir()
    ledger = Ledger(session)
    ledger.append("session_started", {})
    for role, (root, fp) in recorded.items():
        ledger.append("profile_result", {"role": role, "ok": True, "root": os.path.relpath(root, session),
                                         "manifest_fingerprint": fp})
    return session


def _cli(capsys: pytest.CaptureFixture[str], base: Path, cand: Path, session: Path, out: Path) -> tuple[int, str]:
    capsys.readouterr()
    code = run_cli(cli, "sk-analyze", ["dcci-diff", "--baseline", str(base), "--candidate", str(cand), "--warmup", str(WARMUP),
                                       "--json-out", str(out), "--session", str(session)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def test_recorded_pair_is_analysed(collections: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base, cand = collections
    session = _session(tmp_path, {"baseline_profile": (base, _fingerprint(base)), "candidate_profile": (cand, _fingerprint(cand))})
    assert load_pair(base, cand, session=session).contract["roles"]["candidate_profile"]["manifest_fingerprint"] == _fingerprint(cand)
    code, text = _cli(capsys, base, cand, session, tmp_path / "out.json")
    assert code in (0, 1) and (tmp_path / "out.json").is_file(), text


def test_pair_whose_manifest_differs_from_the_record_is_refused(
    collections: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The ledger recorded another candidate manifest for this root (a collection swapped in after finalize)."""
    base, cand = collections
    session = _session(tmp_path, {"baseline_profile": (base, _fingerprint(base)), "candidate_profile": (cand, "0" * 64)})
    with pytest.raises(ContractIntegrityError) as err:
        load_pair(base, cand, session=session)
    assert err.value.rule == "ledger-pair" and "not the one the ledger recorded at seq 2" in str(err.value)
    code, text = _cli(capsys, base, cand, session, tmp_path / "out.json")
    assert code == 2 and "rule ledger-pair:" in text and text.count("\n") == 1
    assert not (tmp_path / "out.json").exists()


def test_pair_the_ledger_never_recorded_is_refused(collections: tuple[Path, Path], tmp_path: Path) -> None:
    base, cand = collections
    session = _session(tmp_path, {"baseline_profile": (base, _fingerprint(base))})
    with pytest.raises(ContractIntegrityError, match="rule ledger-pair: the ledger of .* records no completed candidate_profile"):
        load_pair(base, cand, session=session)
