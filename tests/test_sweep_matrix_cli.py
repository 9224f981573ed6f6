"""``sk-run matrix init``: the SEED must hold the options object every trial changes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_stage_o_matrix import SEED, _all_ready

from sk_analytics.cli._base import run_cli
from sk_analytics.stage_o.matrix import protocol_candidates
from sk_runner.cli import cli


@pytest.mark.parametrize(("seed", "root", "needle"), [
    ({"super_kernel_optimize": True}, None, "no options object at /super_kernel_optimize_options"),
    (SEED, "/model_config/custom_params/super_kernel_optimize_options", "no options object at /model_config/custom_params/"),
    (SEED, "super_kernel_optimize_options", "--options-root 'super_kernel_optimize_options' is not an RFC 6901 pointer"),
])
def test_init_refuses_a_seed_without_the_options_object(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                         seed: dict, root: str | None, needle: str) -> None:
    (tmp_path / "seed.json").write_text(json.dumps(seed))
    (tmp_path / "probes.json").write_text(json.dumps(_all_ready()))
    args = ["matrix", "init", "--session", str(tmp_path / "s"), "--config", str(tmp_path / "seed.json"),
            "--probes", str(tmp_path / "probes.json"), *(["--options-root", root] if root else [])]
    assert run_cli(cli, "sk-run", args) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1
    assert not (tmp_path / "s" / "matrix.json").exists()
    if root is None:
        assert err.startswith(f"sk-run: error: {tmp_path / 'seed.json'}")  # names the SEED file


def test_init_with_an_explicit_root_that_exists(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "seed.json").write_text(json.dumps(SEED))
    (tmp_path / "probes.json").write_text(json.dumps(_all_ready()))
    args = ["matrix", "init", "--session", str(tmp_path / "s"), "--config", str(tmp_path / "seed.json"),
            "--probes", str(tmp_path / "probes.json"), "--options-root", "/super_kernel_optimize_options"]
    assert run_cli(cli, "sk-run", args) == 0
    n = len(protocol_candidates())
    assert f"{n} entries ({n} probe-ready)" in capsys.readouterr().out
