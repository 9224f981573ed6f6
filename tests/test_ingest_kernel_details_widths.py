"""Every kernel_details.csv row has the header's field count: a cell deleted or
added anywhere is exit 2 naming the file, the line and both counts (issue 14 §2),
on the fast path too."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from real_samples import REAL, needs_real

from sk_analytics.cli import cli
from sk_analytics.cli._base import run_cli
from sk_analytics.errors import InputError
from sk_analytics.ingest import csv_fields, kernel_details as kd
from sk_analytics.ingest.base import ParseResult
from sk_analytics.ingest.kernel_details import parse_kernel_details

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "kernel_details"
SEEDS = {p.name: p.read_bytes() for p in sorted(FIXTURES.glob("*.csv"))}
if REAL.is_dir():
    SEEDS |= {f"real:{p.parent.name}": p.read_bytes() for p in sorted(REAL.glob("*/kernel_details.csv"))}


def raw_cells(line: bytes) -> list[bytes]:
    """Cells of one CSV line as written (quotes kept), split at commas outside quotes."""
    cells, current, quoted = [], bytearray(), False
    for byte in line:
        if byte == ord('"'):
            quoted = not quoted
        if byte == ord(",") and not quoted:
            cells.append(bytes(current))
            current = bytearray()
        else:
            current.append(byte)
    cells.append(bytes(current))
    return cells


def split_lines(data: bytes) -> tuple[list[bytes], bytes]:
    """Physical lines without their line break, and the break used (CRLF or LF)."""
    eol = b"\r\n" if b"\r\n" in data else b"\n"
    return data.split(eol), eol


def parse_bytes(data: bytes, name: str = "kernel_details.csv") -> tuple[object, Path]:
    """Parse ``data`` from a temp file that is removed again (hypothesis examples cannot take ``tmp_path``)."""
    with tempfile.TemporaryDirectory(prefix="kd-width-") as folder:
        path = Path(folder) / name
        path.write_bytes(data)
        try:
            return parse_kernel_details(path), path
        except InputError as error:
            return error, path


def edit_row(data: bytes, row: int, position: int, added: bytes | None) -> tuple[bytes, int, int]:
    """Delete (``added`` None) or add a cell at ``position`` of data row ``row``:
    the edited bytes, the edited line number and the header width."""
    lines, eol = split_lines(data)
    width = len(raw_cells(lines[0]))
    data_lines = [i for i, line in enumerate(lines) if i and line.strip()]
    index = data_lines[row % len(data_lines)]
    cells = raw_cells(lines[index])
    at = position % (len(cells) + (1 if added is not None else 0))
    cells = cells[:at] + [added] + cells[at:] if added is not None else cells[:at] + cells[at + 1 :]
    lines[index] = b",".join(cells)
    return eol.join(lines), index + 1, width


cell_text = st.one_of(st.just(b""), st.just(b"N/A"), st.just(b"0"), st.from_regex(rb"\A[A-Za-z0-9_.]{1,8}\Z"), st.just(b'"""1,2"""'))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.sampled_from(sorted(SEEDS)), row=st.integers(0, 10_000), position=st.integers(0, 100), added=st.none() | cell_text)
def test_any_deleted_or_added_cell_is_caught(seed: str, row: int, position: int, added: bytes | None) -> None:
    data, line, width = edit_row(SEEDS[seed], row, position, added)
    outcome, path = parse_bytes(data)
    found = width + (1 if added is not None else -1)
    if added is None and line == data.count(b"\n") + 1 and not data.endswith(b"\n"):
        # a short last row without a line break is what a cut file looks like (the advisor sample
        # ends without one, complete): never data, dropped with a warning naming the line
        assert isinstance(outcome, ParseResult), outcome
        assert f"{path}:{line}: the last line has no line break and it has {found} of the header's {width} fields" in outcome.warnings[0]
        return
    assert isinstance(outcome, InputError), f"{seed} line {line}: edited row accepted"
    assert outcome.path == str(path) and outcome.line == line
    assert f"row has {found} fields, the header has {width}" in outcome.one_line()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.sampled_from(sorted(SEEDS)), row=st.integers(0, 10_000), position=st.integers(0, 100), added=st.none() | cell_text,
       block=st.integers(64, 2048))
def test_parser_block_boundaries_do_not_hide_a_row(seed: str, row: int, position: int, added: bytes | None, block: int) -> None:
    """With the fast reader's blocks cut small, rows straddle blocks: still caught, on the right line,
    and the unedited file still parses to the same frame."""
    data, line, width = edit_row(SEEDS[seed], row, position, added)
    original = kd.ARROW_BLOCK_BYTES
    kd.ARROW_BLOCK_BYTES = block
    try:
        outcome, _ = parse_bytes(data)
        clean, _ = parse_bytes(SEEDS[seed])
    finally:
        kd.ARROW_BLOCK_BYTES = original
    if added is None and line == data.count(b"\n") + 1 and not data.endswith(b"\n"):
        assert isinstance(outcome, ParseResult) and f":{line}: the last line has no line break" in outcome.warnings[0]
    else:
        assert isinstance(outcome, InputError) and outcome.line == line
        assert f"row has {width + (1 if added is not None else -1)} fields" in outcome.one_line()
    reference, _ = parse_bytes(SEEDS[seed])
    assert isinstance(clean, ParseResult) and isinstance(reference, ParseResult)
    assert clean.frame.drop("source_file").equals(reference.frame.drop("source_file"))


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize("seed", sorted(SEEDS))
def test_unedited_files_pass_the_check(seed: str, tmp_path: Path) -> None:
    width = len(raw_cells(split_lines(SEEDS[seed])[0][0]))
    path = _write(tmp_path / "kernel_details.csv", SEEDS[seed])
    assert csv_fields.first_width_mismatch(path, width) is None
    assert kd._fast(path, *_fast_args(path)) is not None  # the fast path vouches for every shipped sample


def _fast_args(path: Path) -> tuple[dict[str, int], list[kd.Field], int]:
    header, _ = kd._probe(path)
    positions = kd._locate_columns(path, header)
    return positions, [f for f in kd.FIELDS if f.column in positions], len(header)


@needs_real
def test_real_level0_without_one_type_cell_is_exit_2_not_a_shifted_start(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The issue's example: before, row 4 got start_ns = 27961 (its duration), exit 0."""
    data, line, width = edit_row((REAL / "msinsight-level0-rank0" / "kernel_details.csv").read_bytes(), 3, 2, None)
    assert line == 5 and width == 8
    path = tmp_path / "kernel_details.csv"
    path.write_bytes(data)
    assert run_cli(cli, "sk-analyze", ["ingest", str(path), "--out", str(tmp_path / "out")]) == 2
    assert f"{path}:5: malformed CSV (row has 7 fields, the header has 8)" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@needs_real
def test_real_level1_short_row_names_the_counts_not_a_misleading_cell(tmp_path: Path) -> None:
    """A Level1 row missing a cell before Mix Block Dim used to read as `bad Mix Block Dim value 'NO'`."""
    data, line, width = edit_row((REAL / "msinsight-level1-rank0" / "kernel_details.csv").read_bytes(), 20, 11, None)
    outcome, _ = parse_bytes(data)
    assert isinstance(outcome, InputError) and outcome.line == line
    assert "row has 45 fields, the header has 46" in outcome.one_line() and "Mix Block Dim" not in outcome.one_line()


@needs_real
def test_real_files_as_shipped_are_accepted() -> None:
    """The shipped real samples have no ragged row (every record checked with the csv module);
    the advisor sample ends without a line break but its last row is whole: no warning."""
    for path in sorted(REAL.glob("*/kernel_details.csv")):
        result = parse_kernel_details(path)
        assert result.rows > 0 and result.warnings == [], path
    assert not (REAL / "msprof-analyze-advisor-small" / "kernel_details.csv").read_bytes().endswith(b"\n")


def test_quoted_line_break_takes_the_exact_path_and_still_counts(tmp_path: Path) -> None:
    ok = b'Name,Start Time(us),Duration(us)\n"two\nlines",1.000,2\nk,2.000,3\n'
    assert parse_kernel_details(_write(tmp_path / "a.csv", ok)).rows == 2
    bad = ok + b"k,3.000\n"
    error = parse_bytes(bad)[0]
    assert isinstance(error, InputError) and error.line == 5 and "row has 2 fields, the header has 3" in error.one_line()


def test_cut_last_row_stays_a_warning_but_a_long_last_row_is_an_error(tmp_path: Path) -> None:
    cut = parse_kernel_details(_write(tmp_path / "cut.csv", b"Name,Start Time(us),Duration(us),Block Dim\nk,1.000,1,4\nk,2.000,1"))
    assert cut.rows == 1 and "the export was cut, the line is not used as data" in cut.warnings[0]
    error = parse_bytes(b"Name,Start Time(us),Duration(us)\nk,1.000,1\nk,2.000,1,9")[0]
    assert isinstance(error, InputError) and error.line == 3 and "row has 4 fields, the header has 3" in error.one_line()


def test_blank_lines_are_not_rows(tmp_path: Path) -> None:
    data = b"Name,Start Time(us),Duration(us)\r\n\r\nk,1.000,1\r\n\r\n"
    assert parse_kernel_details(_write(tmp_path / "b.csv", data)).rows == 1


def test_lines_are_counted_by_line_feeds_only(tmp_path: Path) -> None:
    """A carriage return inside a quoted cell is not a line: errors name the line-feed line
    (hypothesis found the old count running past the end of the file)."""
    data = b'Name,Start Time(us),Duration(us),Input Shapes\nk,1.000,1,"\r8"\nk,2.000,1,x\n,3.000,1,x\n'
    error = parse_bytes(data)[0]
    assert isinstance(error, InputError) and error.line == 4 and "empty required cell in column Name" in error.one_line()
