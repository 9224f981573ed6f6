"""Property tests of the kernel_details parser: corrupted, truncated and random input
gives either a correct parse or an InputError naming the file and the line."""

from __future__ import annotations

import re
import tempfile
from decimal import Decimal
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings, strategies as st

from sk_analytics.errors import InputError
from sk_analytics.ingest import kernel_details as kd
from sk_analytics.ingest.kernel_details import parse_kernel_details
from sk_analytics.schema import KERNELS

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "kernel_details"
SEEDS = {p.name: p.read_bytes() for p in sorted(FIXTURES.glob("*.csv"))}
PROPS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _parse_bytes(data: bytes) -> tuple[object, Path]:
    """Parse ``data`` from a temp file: the ParseResult or the InputError raised (the file is removed
    again: a hypothesis example cannot take ``tmp_path``, and ``mkdtemp`` left 1,147 folders a run)."""
    with tempfile.TemporaryDirectory(prefix="kd-prop-") as folder:
        path = Path(folder) / "kernel_details.csv"
        path.write_bytes(data)
        try:
            return parse_kernel_details(path), path
        except InputError as error:
            return error, path


def _assert_parse_or_located_error(data: bytes) -> None:
    outcome, path = _parse_bytes(data)
    if isinstance(outcome, InputError):
        assert outcome.path == str(path)
        assert isinstance(outcome.line, int) and 1 <= outcome.line <= data.count(b"\n") + 1
        assert "\n" not in outcome.one_line()
    else:
        assert outcome.frame.schema == KERNELS.schema  # type: ignore[attr-defined]
        assert outcome.frame["start_ns"].null_count() == 0  # type: ignore[attr-defined]


mutation = st.one_of(
    st.tuples(st.just("truncate"), st.integers(0, 5000), st.just(b"")),
    st.tuples(st.just("delete"), st.integers(0, 5000), st.binary(max_size=0)),
    st.tuples(st.just("insert"), st.integers(0, 5000), st.binary(min_size=1, max_size=6)),
    st.tuples(st.just("insert"), st.integers(0, 5000), st.sampled_from([b",", b'"', b"\n", b"\r", b"\t", b"N/A", b".", b"-", b"\xff", b"\x00"])),
    st.tuples(st.just("replace"), st.integers(0, 5000), st.binary(min_size=1, max_size=1)),
)


def _mutate(data: bytes, steps: list[tuple[str, int, bytes]]) -> bytes:
    for kind, at, payload in steps:
        at = at % (len(data) + 1)
        if kind == "truncate":
            data = data[:at]
        elif kind == "delete":
            data = data[:at] + data[at + 1 + len(payload) :]
        elif kind == "insert":
            data = data[:at] + payload + data[at:]
        else:
            data = data[:at] + payload + data[at + 1 :]
    return data


@PROPS
@given(seed=st.sampled_from(sorted(SEEDS)), steps=st.lists(mutation, min_size=1, max_size=4))
@example(seed="level1_mindspore_step_id.csv", steps=[("truncate", 1292, b""), ("insert", 921, b"\r")])  # CR in a quoted cell
@example(seed="level0_device_block_num.csv", steps=[("truncate", 98, b""), ("insert", 97, b"\r")])  # CR in an unquoted cell
@example(seed="level1_block_num_crlf.csv", steps=[("replace", 1930, b"\x00")])  # CR and NUL in a last row without line break
def test_corrupted_file_parses_or_names_file_and_line(seed: str, steps: list[tuple[str, int, bytes]]) -> None:
    _assert_parse_or_located_error(_mutate(SEEDS[seed], steps))


@PROPS
@given(st.binary(max_size=400))
def test_random_bytes_after_a_header_parse_or_name_the_line(body: bytes) -> None:
    _assert_parse_or_located_error(b"Name,Type,Start Time(us),Duration(us),Block Dim\n" + body)


def _exact_ns(text: str) -> int | None:
    """Independent reference: ns of a µs decimal text, or None when it is not one."""
    trimmed = text.strip()
    if not re.fullmatch(r"[0-9]+(\.[0-9]*)?", trimmed):
        return None
    value = Decimal(trimmed.rstrip(".") or "0") * 1000
    if value != value.to_integral_value() or value >= 2**63:
        return None
    return int(value)


start_text = st.one_of(
    st.text(alphabet="0123456789.+- \te", max_size=24),
    st.builds(lambda i, f: f"{i}.{f}", st.integers(0, 10**17), st.text(alphabet="0123456789", max_size=6)),
)


@PROPS
@given(text=start_text)
def test_start_time_is_exact_or_rejected_at_its_line(text: str) -> None:
    data = f'Name,Start Time(us),Duration(us)\nk,0.000,1\nk,"{text}",2.5\n'.encode()
    outcome, _ = _parse_bytes(data)
    expected = _exact_ns(text)
    if expected is None:
        assert isinstance(outcome, InputError) and outcome.line == 3
    else:
        assert not isinstance(outcome, InputError), outcome
        assert outcome.frame["start_ns"].to_list() == [0, expected]  # type: ignore[attr-defined]


cell = st.one_of(st.sampled_from(["N/A", "", " 7", "7 ", "12", "-3", "+4", "1.5", "x", "4294967295", "1e2", "nan", "inf"]),
                 st.text(alphabet="0123456789. -", max_size=6))


text_cell = st.sampled_from(["", '""', "N/A", '"N/A"', " N/A", '"""1,2"""', '"""""', "AI_CORE", "x y"])


@PROPS
@given(cells=st.lists(st.tuples(cell, cell, cell, text_cell, text_cell), min_size=1, max_size=5))
@example(cells=[("N/A", " 7", "N/A", "", ""), ("N/A", "0", "N/A", "", ""), ("N/A", " 7", "N/A", "", '"""""')])  # unterminated quote
@example(cells=[("N/A", " 7", "N/A", "", ""), ("N/A", " 7", "N/A", '"""""', '"""1,2"""'), ("N/A", " 7", "N/A", "", '"""""')])  # across lines
def test_fast_path_agrees_with_exhaustive_path(cells: list[tuple[str, str, str, str, str]]) -> None:
    lines = ["Step Id,Name,Start Time(us),Duration(us),Wait Time(us),Block Dim,Type,Input Shapes"]
    lines += [f'"{a}",k,"1.000","{b}","{c}","{a}",{t},{s}' for a, b, c, t, s in cells]
    data = ("\n".join(lines) + "\n").encode()
    fast, _ = _parse_bytes(data)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kd, "_fast", lambda *args: None)
        slow, _ = _parse_bytes(data)
    if isinstance(slow, InputError):
        assert isinstance(fast, InputError) and (fast.line, fast.message) == (slow.line, slow.message)
    else:
        assert not isinstance(fast, InputError), fast
        assert fast.frame.drop("source_file").equals(slow.frame.drop("source_file"))  # type: ignore[attr-defined]
