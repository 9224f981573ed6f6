"""``sk-analyze contract``: begin -> producer -> finalize -> validate-set through the CLI."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from contract_support import ALL_FILES, BASE_CONFIG, DCCI_POINTER, WORKLOAD, disable_all

from sk_analytics.cli import cli
from sk_analytics.cli._base import run_cli
from sk_analytics.contract import command_fingerprint
from sk_analytics.fingerprint import fingerprint


def _run(args: list[str]) -> int:
    return run_cli(cli, "sk-analyze", args)


def _collect(tmp_path: Path, role: str, config: dict, pid: int) -> Path:
    root, session = tmp_path / role / "root", tmp_path / role / "session.json"
    assert _run(["contract", "begin", "--role", role, "--root", str(root), "--session-out", str(session)]) == 0
    started = time.time_ns()
    for rel in ALL_FILES:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(role)
    (tmp_path / role / "config.json").write_text(json.dumps(config))
    (tmp_path / role / "control.yaml").write_text("round: DCCI\ntimeout_s: 600\n")
    (tmp_path / role / "workload.json").write_text(json.dumps(WORKLOAD))
    code = _run([
        "contract", "finalize", "--session", str(session), "--source-revision", "abc",
        "--config", str(tmp_path / role / "config.json"), "--control", str(tmp_path / role / "control.yaml"),
        "--workload", str(tmp_path / role / "workload.json"), "--producer-pid", str(pid),
        "--producer-started-ns", str(started), "--producer-ended-ns", str(time.time_ns()),
        "--command-argv", json.dumps(["python", "infer.py"]),
    ])
    assert code == 0
    return root


def test_cli_round_trip(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _collect(tmp_path, "baseline_profile", BASE_CONFIG, 11)
    cand = _collect(tmp_path, "candidate_profile", disable_all(BASE_CONFIG), 12)
    manifest = json.loads((base / "collection-manifest.json").read_text())
    assert manifest["producer"]["command_fingerprint"] == command_fingerprint(["python", "infer.py"])
    assert manifest["control"] == {"round": "DCCI", "timeout_s": 600}
    out = tmp_path / "set.json"
    assert _run(["contract", "validate-set", "--manifest", f"baseline_profile={base}",
                 "--manifest", f"candidate_profile={cand}", "--allow-change", DCCI_POINTER,
                 "--json-out", str(out)]) == 0
    record = json.loads(out.read_text())
    assert record["set_fingerprint"] == fingerprint({k: v for k, v in record.items() if k != "set_fingerprint"})
    assert _run(["contract", "verify", str(cand)]) == 0
    assert "valid candidate_profile" in capsys.readouterr().out


def test_cli_names_the_rule_and_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = _collect(tmp_path, "baseline_profile", BASE_CONFIG, 11)
    cand = _collect(tmp_path, "candidate_profile", disable_all(BASE_CONFIG), 12)
    capsys.readouterr()
    code = _run(["contract", "validate-set", "--manifest", f"baseline_profile={base}",
                 "--manifest", f"candidate_profile={cand}"])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("sk-analyze: error: ") and "rule declared-change-only" in err
    assert err.count("\n") == 1


def test_cli_duplicate_key_in_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, session = tmp_path / "root", tmp_path / "s.json"
    assert _run(["contract", "begin", "--role", "baseline_profile", "--root", str(root), "--session-out", str(session)]) == 0
    cfg = tmp_path / "c.json"
    cfg.write_text('{"super_kernel_optimize": true, "super_kernel_optimize": false}')
    capsys.readouterr()
    code = _run(["contract", "finalize", "--session", str(session), "--source-revision", "abc", "--config", str(cfg),
                 "--control", str(cfg), "--workload", str(cfg), "--producer-pid", "1", "--producer-started-ns", "1",
                 "--producer-ended-ns", "2", "--command-fingerprint", "a" * 64])
    assert code == 2
    assert "rule duplicate-key: key 'super_kernel_optimize'" in capsys.readouterr().err


def test_cli_needs_exactly_one_command_identity(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "c.json"
    cfg.write_text("{}")
    (tmp_path / "s.json").write_text("{}")
    code = _run(["contract", "finalize", "--session", str(tmp_path / "s.json"), "--source-revision", "abc",
                 "--config", str(cfg), "--control", str(cfg), "--workload", str(cfg), "--producer-pid", "1",
                 "--producer-started-ns", "1", "--producer-ended-ns", "2"])
    assert code == 2
    assert "exactly one of --command-fingerprint and --command-argv" in capsys.readouterr().err
