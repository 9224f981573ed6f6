"""A trial round's recorded lease request (``<round>/lease-request.json``): what a rerun without lease options takes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_devices_lease import _trial_args

from sk_analytics.cli._base import run_cli
from sk_analytics.errors import InputError
from sk_runner.cli import cli
from sk_runner.devices.lease import LeaseRequest
from sk_runner.devices.markers import Need
from sk_runner.devices.recorded import ROUND_REQUEST, request_record, round_request
from sk_runner.trial import round_dir_of


def test_the_recorded_request_is_the_lease_a_rerun_takes(tmp_path: Path) -> None:
    assert round_request(tmp_path) == (None, False)  # neither a request nor a run: nothing recorded
    need = Need(str(tmp_path / "locks"), (0, 1))
    (tmp_path / ROUND_REQUEST).write_text(json.dumps(request_record(LeaseRequest(need), "options")), encoding="utf-8")
    assert round_request(tmp_path) == (need, False)
    (tmp_path / ROUND_REQUEST).write_text(json.dumps(request_record(LeaseRequest(None, unleased=True), "unleased")), encoding="utf-8")
    assert round_request(tmp_path) == (None, True)


@pytest.mark.parametrize("text, said", [
    ('{"root": "/locks", "device_ids": ["0"]}', "device_ids"),
    ('{"root": "/locks", "device_ids": [true]}', "device_ids"),
    ('{"root": "/locks", "device_ids": null}', "root without devices"),
    ('{"root": "/locks", "device_ids": [0], "unleased": true}', "--unleased at once"),
    ('{"root": 7, "device_ids": [0]}', "root 7"),
    ('{"root": "/locks", "device_ids": [0], "root": "/other"}', "duplicate"),
    ('[0, 1]', "not a JSON object"),
    ('{"root": "/lo', ""),
])
def test_a_request_that_is_no_request_is_refused_naming_its_file(tmp_path: Path, text: str, said: str) -> None:
    """Read loosely, a damaged request was skipped (the rerun then took the lease its runs held, or none) or ended
    in a traceback (``int("x")``); it is bad input, with the file named."""
    (tmp_path / ROUND_REQUEST).write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=f"{ROUND_REQUEST}.*{said}"):
        round_request(tmp_path)


def test_sk_run_trial_refuses_a_damaged_request_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = _trial_args(tmp_path, "O0")
    folder = round_dir_of(tmp_path / "session", "O0")
    folder.mkdir(parents=True)
    (folder / ROUND_REQUEST).write_text('{"root": "/locks", "device_ids": ["x"]}', encoding="utf-8")
    assert run_cli(cli, "sk-run", args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and ROUND_REQUEST in err[0] and "device_ids ['x']" in err[0]
