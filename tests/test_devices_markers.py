"""The lease protocol's pure rules (protocol §9): device ids, the three markers, acquire-or-inherit, the lease options."""

from __future__ import annotations

from pathlib import Path

import pytest

from sk_analytics.errors import UsageError
from sk_runner.devices.markers import (
    HELD,
    IDS,
    ROOT,
    VISIBLE,
    Need,
    child_variables,
    decide,
    fits,
    format_ids,
    marker_need,
    parse_device_ids,
)
from sk_runner.devices.options import lease_request, rerun_options

NEED = Need("/locks", (0, 1))
EXACT = {HELD: "1", IDS: "0,1", ROOT: "/locks"}


@pytest.mark.parametrize(("specs", "ids"), [
    (["3"], (3,)), (["0-7"], tuple(range(8))), (["5", "1"], (1, 5)), (["0,2,4-5"], (0, 2, 4, 5)), (["1", "1-2"], (1, 2)),
    ([" 2 - 3 "], (2, 3)), ([], ()),
])
def test_device_ids_are_ascending_and_unique(specs: list[str], ids: tuple[int, ...]) -> None:
    assert parse_device_ids(specs) == ids
    assert format_ids(reversed(ids)) == ",".join(map(str, ids))


@pytest.mark.parametrize("spec", ["x", "-1", "3-1", "1-", "0-99999", "1.5", ""])
def test_bad_device_ids_name_the_value(spec: str) -> None:
    with pytest.raises(ValueError, match=rf"--device-id {spec!r}: expected"):
        parse_device_ids([spec])


def test_child_variables_are_the_three_markers_and_the_device_mask() -> None:
    assert child_variables("/locks", (2, 5)) == {HELD: "1", IDS: "2,5", ROOT: "/locks", VISIBLE: "2,5"}


def test_no_markers_acquire_or_none() -> None:
    assert decide({}, NEED).action == "acquire"
    assert decide({"PATH": "/bin"}, None).action == "none"


def test_exact_markers_inherit() -> None:
    decision = decide(EXACT, NEED)
    assert decision.action == "inherit" and decision.need == NEED


@pytest.mark.parametrize(("env", "needle"), [
    ({HELD: "1"}, "partial lease markers"),
    ({HELD: "1", IDS: "0,1"}, f"missing {ROOT}"),
    ({IDS: "0,1", ROOT: "/locks"}, f"missing {HELD}"),
    ({**EXACT, ROOT: "/other"}, f"{ROOT} differ"),
    ({**EXACT, IDS: "0,1,2"}, f"{IDS} differ"),
    ({**EXACT, IDS: "1,0"}, f"{IDS} differ"),  # not ascending: not the protocol's form, never equal
    ({**EXACT, HELD: "yes"}, f"{HELD} differ"),
    ({**EXACT, ROOT: ""}, f"{ROOT} differ"),
])
def test_partial_or_foreign_markers_refuse(env: dict[str, str], needle: str) -> None:
    decision = decide(env, NEED)
    assert decision.action == "refuse" and needle in decision.reason
    assert "\n" not in decision.reason


def test_complete_but_malformed_markers_without_a_need_refuse() -> None:
    env = {HELD: "1", IDS: "b", ROOT: "relative"}
    assert marker_need(env) is None
    assert decide(env, None).action == "refuse" and "malformed" in decide(env, None).reason


def test_marker_need_reads_only_a_complete_well_formed_set() -> None:
    assert marker_need(EXACT) == NEED
    assert marker_need({**EXACT, IDS: "1,0"}) is None and marker_need({HELD: "1"}) is None


def test_ranks_must_fit_on_the_leased_devices() -> None:
    assert fits((0, 1), 2) is None and fits((0, 1, 2), 2) is None
    assert fits((4,), 2) == "--ranks 2 needs 2 leased devices (rank i runs on the i-th), the lease holds 1 (4)"


def test_lease_options_resolve_options_then_markers_then_the_default(tmp_path: Path) -> None:
    root = tmp_path / "locks"
    request = lease_request(root, ("0-1",), 5.0, env={})
    assert request.need == Need(str(root), (0, 1)) and request.timeout_s == 5.0
    assert rerun_options(request) == ["--lease-root", str(root), "--device-id", "0", "--device-id", "1", "--lease-timeout", "5"]
    assert lease_request(None, (), 600.0, env=EXACT).need == NEED  # a parent's complete markers: inherit them
    default = Need("/demo", (0,))
    assert lease_request(None, (), 600.0, env={}, default=default).need == default
    assert lease_request(None, (), 600.0, env=EXACT, default=default).need == NEED  # the parent's lease wins
    assert lease_request(None, (), 600.0, env={}).need is None and rerun_options(lease_request(None, (), 1, env={})) == []


@pytest.mark.parametrize(("root", "ids", "needle"), [
    (None, ("0",), "--device-id needs --lease-root DIR"),
    (Path("/locks"), (), "--lease-root needs the devices"),
    (Path("/locks"), ("zero",), "--device-id 'zero': expected"),
])
def test_incomplete_lease_options_are_usage_errors(root: Path | None, ids: tuple[str, ...], needle: str) -> None:
    with pytest.raises(UsageError, match=needle) as info:
        lease_request(root, ids, 600.0, env={})
    assert info.value.exit_code == 2
