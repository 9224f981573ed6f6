"""Real kernel_details.csv exports damaged as a crash or a bad writer leaves them: a cut last line is
never data (dropped, with a warning naming file, line and why), a negative or non-finite duration is
exit 2 naming file and line, a header-only file is a warning naming the file."""

from __future__ import annotations

from pathlib import Path

import pytest
from real_samples import REAL, needs_real

from sk_analytics.cli import cli
from sk_analytics.cli._base import run_cli
from sk_analytics.errors import InputError
from sk_analytics.ingest import ingest_path, kernel_details as kd
from sk_analytics.ingest.kernel_details import parse_kernel_details

pytestmark = needs_real
LEVEL0 = REAL / "msinsight-level0-rank0" / "kernel_details.csv"
ADVISOR = REAL / "msprof-analyze-advisor-small" / "kernel_details.csv"


def variant(tmp_path: Path, source: Path, data: bytes) -> Path:
    path = tmp_path / source.parent.name / "kernel_details.csv"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def both_paths(path: Path) -> tuple[kd.ParseResult, kd.ParseResult]:
    fast = parse_kernel_details(path)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kd, "_fast", lambda *args: None)
        slow = parse_kernel_details(path)
    return fast, slow


def cut_warning(path: Path, line: int, reason: str) -> str:
    return f"{path}:{line}: the last line has no line break and {reason}: the export was cut, the line is not used as data"


@pytest.mark.parametrize(
    ("cut", "reason"),
    [
        # the last row is "50,aclnnForeachAddListV2_…,N/A,N/A,1736405443997036.830\t,624.673,96.002,0\r\n"
        (lambda data: data[: data.rindex(b"624.673") + 5], "it has 6 of the header's 8 fields"),  # inside Duration: 624.6
        (lambda data: data[: data.rindex(b",96.002")], "it has 6 of the header's 8 fields"),  # between two cells
        (lambda data: data[: data.rindex(b"0\r\n")], "its last cell is a column that is read and may be cut"),  # Block Dim empty
    ],
    ids=["inside-a-number", "between-cells", "last-read-cell"],
)
def test_cut_last_line_of_a_real_export_is_dropped_with_a_warning(tmp_path: Path, cut: object, reason: str) -> None:
    whole = parse_kernel_details(LEVEL0).frame
    path = variant(tmp_path, LEVEL0, cut(LEVEL0.read_bytes()))  # type: ignore[operator]
    for result in both_paths(path):
        assert result.warnings == [cut_warning(path, 192, reason)]
        assert result.frame.drop("source_file").equals(whole.head(190).drop("source_file"))  # the 190 complete rows, exactly
        assert 624.6 not in result.frame["duration_us"].to_list()


def test_cut_inside_a_quoted_start_time_is_dropped(tmp_path: Path) -> None:
    """The advisor export quotes its start times ("…\t"); a cut inside the quotes leaves an open quote."""
    data = ADVISOR.read_bytes()
    last = data.rindex(b"\n") + 1
    quote = data.index(b'"', last)
    path = variant(tmp_path, ADVISOR, data[: quote + 8])
    for result in both_paths(path):
        assert result.rows == 28 and len(result.warnings) == 1
        assert result.warnings == [cut_warning(path, 30, "it is not a complete CSV record (unexpected end of data)")]


def test_complete_last_row_without_line_break_is_kept() -> None:
    """The real advisor sample ends without a line break, its last cell (cube_utilization) is not read."""
    assert not ADVISOR.read_bytes().endswith(b"\n")
    result = parse_kernel_details(ADVISOR)
    assert (result.rows, result.warnings) == (29, [])


@pytest.mark.parametrize("value", [b"-1.0", b"-0.001", b"nan", b"inf", b"-inf"])
def test_negative_or_non_finite_duration_is_exit_2_naming_file_and_line(tmp_path: Path, value: bytes,
                                                                        capsys: pytest.CaptureFixture[str]) -> None:
    data = LEVEL0.read_bytes()
    at = data.index(b",50.621,")  # the first row's duration
    path = variant(tmp_path, LEVEL0, data[:at + 1] + value + data[at + 7:])
    with pytest.raises(InputError) as caught:
        parse_kernel_details(path)
    assert (caught.value.path, caught.value.line) == (str(path), 2)
    assert f"bad Duration(us) value {value.decode()!r}" in caught.value.message
    assert run_cli(cli, "sk-analyze", ["ingest", str(path.parent), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"{path}:2: bad Duration(us) value" in err and ">= 0" in err and "Traceback" not in err


def test_a_negative_wait_time_is_still_read() -> None:
    """Only durations must be >= 0 (a wait time is a difference of starts: the real ones are >= 0)."""
    assert parse_kernel_details(LEVEL0).frame["wait_us"].min() == 0.0


def test_header_only_export_is_refused_by_ingest_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The parser says it (a warning), ``ingest`` refuses it: a kernels table of no row is a hollow output (exit 2, nothing written)."""
    header = LEVEL0.read_bytes().split(b"\n", 1)[0] + b"\n"
    path = variant(tmp_path, LEVEL0, header)
    assert parse_kernel_details(path).warnings == [f"{path}: no data rows (header only): the kernels table gets nothing from it"]
    out = tmp_path / "data"
    with pytest.raises(InputError) as refused:
        ingest_path(path.parent, out)
    assert refused.value.path == str(path) and refused.value.message.startswith("no data rows (header only)")
    assert run_cli(cli, "sk-analyze", ["ingest", str(path.parent), "--out", str(out)]) == 2
    assert capsys.readouterr().err == (f"sk-analyze: error: {path}: no data rows (header only): the profiler exported no kernel; "
                                       "nothing was written (expected one row per kernel launch under the header, formats.md §2)\n")
    assert not out.exists()
    cut_to_nothing = variant(tmp_path / "b", LEVEL0, header + LEVEL0.read_bytes().split(b"\n")[1][:40])
    assert parse_kernel_details(cut_to_nothing).warnings == [
        cut_warning(cut_to_nothing, 2, "it has 5 of the header's 8 fields"),
        f"{cut_to_nothing}: no data rows (header only): the kernels table gets nothing from it"]
    with pytest.raises(InputError, match="no data rows"):
        ingest_path(cut_to_nothing.parent, out)
    assert not out.exists()
