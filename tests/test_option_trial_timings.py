"""Rank-log parser and candidate reader (issue 2 timings part, issue 4 inputs)."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from ot_logs import NOT_REGULAR, make_not_regular, write_candidate, write_rank_log

from sk_analytics.errors import InputError
from sk_analytics.ingest.timings import parse_rank_log, read_candidate
from sk_analytics.schema import TIMINGS

VALID = re.compile(r"^(?:[0-9]+\.?[0-9]*|\.[0-9]+)$")


def test_parse_rank_log_keeps_exact_text_line_numbers_and_ignores_other_lines(tmp_path: Path) -> None:
    log = tmp_path / "run-3" / "log_5.log"
    log.parent.mkdir()
    log.write_bytes(
        b"boot\r\n"
        b"Inference time (prefill): 120.50 ms\r\n"
        b"[default0]:Inference time (decode): 10.100 ms \t\n"
        b"Inference time (decode): 9.9 ms\n"
        b"Inference time (decode): 11 ms"
    )
    result = parse_rank_log(log, root=tmp_path)
    frame = result.frame
    assert frame.schema == TIMINGS.schema
    assert frame.to_dicts() == [
        {"run_index": 3, "rank": 5, "phase": "prefill", "sample_index": 0, "value_ms": 120.5, "value_text": "120.50", "line": 2,
         "source_file": "run-3/log_5.log"},
        {"run_index": 3, "rank": 5, "phase": "decode", "sample_index": 0, "value_ms": 10.1, "value_text": "10.100", "line": 3,
         "source_file": "run-3/log_5.log"},
        {"run_index": 3, "rank": 5, "phase": "decode", "sample_index": 1, "value_ms": 9.9, "value_text": "9.9", "line": 4, "source_file": "run-3/log_5.log"},
        {"run_index": 3, "rank": 5, "phase": "decode", "sample_index": 2, "value_ms": 11.0, "value_text": "11", "line": 5, "source_file": "run-3/log_5.log"},
    ]
    assert result.warnings == []


@pytest.mark.parametrize(("body", "line", "message"), [
    (b"Inference time (decode): 1 ms\nInference time (decode): 12.5x ms\n", 2, r"malformed timing line 'Inference time \(decode\): 12.5x ms'"),
    (b"ok\nInference time (decode): n/a ms\n", 2, "malformed timing line"),
    (b"Inference time (decode) 12 ms\n", 1, "malformed timing line"),
    (b"Inference time (total): 12 ms\n", 1, "malformed timing line"),
    (b"Inference time (decode): 1 ms Inference time (decode): 2 mss and Inference time (decode): ? ms\n", 1, "malformed timing line"),
    # issue 38: nothing may follow the unit but spaces, tabs or \r: no second value, no other unit, no second timing
    (b"Inference time (decode): 1 ms\nInference time (decode): 12.5 ms 13.0 ms\n", 2,
     r"malformed timing line 'Inference time \(decode\): 12.5 ms 13.0 ms'; text after the unit: ' 13.0 ms'"),
    (b"Inference time (decode): 12.5 msec\n", 1, r"malformed timing line 'Inference time \(decode\): 12.5 msec'; text after the unit: 'ec'"),
    (b"Inference time (decode): 12.5 ms, Inference time (decode): 13.0 ms\n", 1, "malformed timing line .*; 2 timings on one line"),
    (b"Inference time (decode): 12.5 ms.\n", 1, "text after the unit: '.'"),
    (b"Inference time (prefill): 12.5 ms \xc2\xa0\n", 1, "text after the unit"),  # a no-break space is not a space here
    (b"Inference time (decode): 1 ms\nInference time (decode): 1e3 ms\n", 2, "timing value '1e3' cannot be a decode time"),
    # zero is refused too (below), so the expected value is a positive one, as docs/runner.md says
    (b"Inference time (decode): -0 ms\n", 1, r"'-0' cannot be a decode time \(expected a plain positive decimal number of milliseconds"),
    (b"Inference time (decode): 1 ms\n\xff\xfe Inference time (decode): 2 ms\n", 2, "byte 0xff is not UTF-8 text"),
    (b"Inference time (decode): 1 ms\nInference time (decode): 1\xe9 ms\n", 2, "byte 0xe9 is not UTF-8 text"),
    (b"Inference time (decode): 1 ms\n\n\nabc\x00def\n", 4, "NUL byte: binary content"),
])
def test_every_line_is_a_sample_other_output_or_refused(tmp_path: Path, body: bytes, line: int, message: str) -> None:
    """Issue 29: a timing line that is not one, or a byte that is not text, is never a silently dropped sample."""
    log = tmp_path / "run-1" / "log_0.log"
    log.parent.mkdir()
    log.write_bytes(body)
    with pytest.raises(InputError, match=message) as info:
        parse_rank_log(log)
    assert info.value.line == line and str(info.value).startswith(f"{log}:{line}: ")


def test_binary_file_is_refused_in_its_first_block(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A (sparse) file of NULs or a run of text with no newline is refused after the first block, whatever its size."""
    import sk_analytics.ingest.text_stream as stream

    reads: list[int] = []
    real_read = stream.os.fdopen

    def counting_fdopen(*args, **kwargs):  # type: ignore[no-untyped-def]
        fh = real_read(*args, **kwargs)
        read = fh.read
        fh_read = lambda n=-1: (reads.append(n), read(n))[1]  # noqa: E731
        return _Wrapped(fh, fh_read)

    class _Wrapped:
        def __init__(self, fh, read) -> None:  # type: ignore[no-untyped-def]
            self.fh, self.read = fh, read

        def __enter__(self):  # type: ignore[no-untyped-def]
            return self

        def __exit__(self, *exc) -> None:  # type: ignore[no-untyped-def]
            self.fh.close()

    monkeypatch.setattr(stream.os, "fdopen", counting_fdopen)
    nul = tmp_path / "run-1" / "log_0.log"
    nul.parent.mkdir()
    with open(nul, "wb") as fh:
        fh.truncate(1 << 31)  # 2 GB sparse: reading it whole would take minutes and gigabytes
    with pytest.raises(InputError, match=r"log_0.log:1: rank log: NUL byte"):
        parse_rank_log(nul)
    assert reads == [stream.READ_BYTES]
    reads.clear()
    long_line = tmp_path / "run-2" / "log_0.log"
    long_line.parent.mkdir()
    long_line.write_bytes(b"Inference time (decode): 1 ms\n" + b"x" * (3 * stream.READ_BYTES))
    with pytest.raises(InputError, match=r"log_0.log:2: rank log: line longer than"):
        parse_rank_log(long_line)
    assert len(reads) <= 2


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(lengths=st.lists(st.integers(0, 12), min_size=1, max_size=8), last_newline=st.booleans(),
       read_bytes=st.integers(1, 30))
def test_line_limit_is_exact_wherever_the_blocks_cut(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                     lengths: list[int], last_newline: bool, read_bytes: int) -> None:
    """Issue 38: a line of more than MAX_LINE_BYTES bytes (newline not counted) is refused naming
    its line, one of exactly MAX_LINE_BYTES is read, whatever the block size (smaller than, equal
    to or larger than the limit) and whether the last line ends in a newline."""
    import sk_analytics.ingest.text_stream as stream

    monkeypatch.setattr(stream, "MAX_LINE_BYTES", 8)
    monkeypatch.setattr(stream, "READ_BYTES", read_bytes)
    data = b"\n".join(b"x" * n for n in lengths) + (b"\n" if last_newline else b"")
    log = tmp_path / "log_0.log"
    log.write_bytes(data)
    too_long = [i + 1 for i, n in enumerate(lengths) if n > 8]
    try:
        text = "".join(piece.text for piece in stream.pieces(log, 0, "rank log"))
    except InputError as exc:
        assert too_long and exc.line == too_long[0], (exc, too_long)
        assert "line longer than 8 bytes" in str(exc)
        return
    assert not too_long and text == data.decode()


@pytest.mark.parametrize("kind", NOT_REGULAR)
def test_rank_log_that_is_not_a_regular_file_is_refused(tmp_path: Path, kind: str) -> None:
    folder = write_candidate(tmp_path / "c", [{0: ["1", "2"]}])
    make_not_regular(folder / "run-1" / "log_1.log", kind)  # a FIFO must not block the reader
    with pytest.raises(InputError, match=r"log_1.log: cannot read rank log") as info:
        read_candidate(folder, expected_ranks=2, warmup=1)
    assert info.value.exit_code == 2


def test_parse_rank_log_without_run_folder_and_without_timings(tmp_path: Path) -> None:
    log = tmp_path / "log_0.log"
    log.write_text("nothing here\n")
    result = parse_rank_log(log)
    assert result.rows == 0
    assert result.frame.schema == TIMINGS.schema
    assert "no timing lines" in result.warnings[0]


def test_malformed_number_names_file_and_line(tmp_path: Path) -> None:
    log = write_rank_log(tmp_path / "run-1" / "log_0.log", ["1.5", "1.2.3"], noise=False)
    with pytest.raises(InputError) as info:
        parse_rank_log(log)
    assert info.value.line == 2
    assert "'1.2.3'" in str(info.value) and "log_0.log" in str(info.value)


def test_bad_log_name_is_input_error(tmp_path: Path) -> None:
    log = tmp_path / "rank0.log"
    log.write_text("")
    with pytest.raises(InputError, match="log_<rank>.log"):
        parse_rank_log(log)


def test_read_candidate_has_run_column_and_all_ranks(tmp_path: Path) -> None:
    folder = write_candidate(tmp_path / "c", [{0: ["1", "2", "3"], 1: ["4", "5", "6"]}] * 2, prefill=["50"])
    frame = read_candidate(folder, expected_ranks=2, warmup=2)
    assert frame.height == 2 * 2 * 4
    counts = frame.group_by("run", "phase").len().sort("run", "phase").rows()
    assert counts == [("run-1", "decode", 6), ("run-1", "prefill", 2), ("run-2", "decode", 6), ("run-2", "prefill", 2)]
    assert frame.filter(pl.col("run") == "run-2", pl.col("rank") == 1, pl.col("phase") == "decode")["value_text"].to_list() == ["4", "5", "6"]


def test_runs_sorted_numerically(tmp_path: Path) -> None:
    runs = [{0: ["1", "2"]}] * 10
    frame = read_candidate(write_candidate(tmp_path / "c", runs), expected_ranks=1, warmup=1)
    assert frame["run"].unique(maintain_order=True).to_list()[:3] == ["run-1", "run-2", "run-3"]
    assert frame["run"].unique(maintain_order=True).to_list()[-1] == "run-10"


def test_wrong_rank_count_names_run(tmp_path: Path) -> None:
    folder = write_candidate(tmp_path / "c", [{0: ["1", "2"], 1: ["1", "2"]}, {0: ["1", "2"]}])
    with pytest.raises(InputError, match=r"run-2: found 1 rank logs \(expected 2"):
        read_candidate(folder, expected_ranks=2, warmup=1)


def test_a_run_must_hold_exactly_the_ranks_0_to_expected(tmp_path: Path) -> None:
    """Two logs where two are expected is not enough: ranks 0 and 2 leave rank 1 out (formats.md §1: log_0 … log_<R-1>)."""
    folder = write_candidate(tmp_path / "c", [{0: ["1", "2"], 1: ["1", "2"]}, {0: ["1", "2"], 2: ["1", "2"]}])
    with pytest.raises(InputError, match=r"run-2: no log of rank 1 \(found log_0.log, log_2.log\) \(expected log_0.log … log_1.log, one per"):
        read_candidate(folder, expected_ranks=2, warmup=1)


def test_a_rank_log_name_with_a_leading_zero_is_refused(tmp_path: Path) -> None:
    folder = write_candidate(tmp_path / "c", [{0: ["1", "2"], 1: ["1", "2"]}])
    (folder / "run-1" / "log_0.log").rename(folder / "run-1" / "log_00.log")
    with pytest.raises(InputError, match=r"run-1: no log of rank 0 \(found log_00.log, log_1.log\)"):
        read_candidate(folder, expected_ranks=2, warmup=1)


@pytest.mark.parametrize(("other", "message"), [
    ("run-2-old", r"run-2-old: not a run folder name \(expected run-<k>"),  # a set-aside copy would be counted as a run
    ("run-01", r"run-01: not a run folder name \(expected run-<k>"),  # a second run 1
])
def test_every_run_folder_is_named_run_k(tmp_path: Path, other: str, message: str) -> None:
    folder = write_candidate(tmp_path / "c", [{0: ["1", "2"]}] * 3)
    shutil.copytree(folder / "run-1", folder / other)
    with pytest.raises(InputError, match=message):
        read_candidate(folder, expected_ranks=1, warmup=1)


def test_rank_without_decode_after_warmup(tmp_path: Path) -> None:
    folder = write_candidate(tmp_path / "c", [{0: ["1", "2", "3"], 1: ["1", "2"]}])
    with pytest.raises(InputError, match=r"log_1.log: no decode samples remain after warmup=2 \(2 decode"):
        read_candidate(folder, expected_ranks=2, warmup=2)


def test_empty_and_missing_folder(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InputError, match="no run-\\* folders"):
        read_candidate(tmp_path / "empty")
    with pytest.raises(InputError, match="not a folder"):
        read_candidate(tmp_path / "absent")


def test_unreadable_log_as_directory(tmp_path: Path) -> None:
    """A log path that cannot be read as a file (works even as root)."""
    folder = write_candidate(tmp_path / "c", [{0: ["1", "2"]}])
    (folder / "run-1" / "log_1.log").mkdir()
    with pytest.raises(InputError, match="log_1.log: cannot read rank log"):
        read_candidate(folder, expected_ranks=2, warmup=1)


def test_check_candidate_on_frames(tmp_path: Path) -> None:
    """The checks Parquet sources and API callers get (no files to look at)."""
    from sk_analytics.option_trial.sources import check_candidate

    folder = write_candidate(tmp_path / "c", [{0: ["1", "2", "3"], 1: ["1", "2", "3"]}, {0: ["1", "2", "3"], 1: ["1", "2", "3"]}])
    frame = read_candidate(folder, expected_ranks=2, warmup=2)
    check_candidate(frame, label="c", expected_ranks=2, warmup=2)
    with pytest.raises(InputError, match=r"c/run-1: found 2 ranks \(expected 3\)"):
        check_candidate(frame, label="c", expected_ranks=3, warmup=2)
    with pytest.raises(InputError, match=r"run-1/log_0.log: no decode samples remain after warmup=3 \(3 decode"):
        check_candidate(frame, label="c", expected_ranks=2, warmup=3)
    with pytest.raises(InputError, match="no timing samples"):
        check_candidate(frame.clear(), label="c", expected_ranks=2, warmup=2)
    # two ranks, but 0 and 2: rank 1 is missing (a Parquet selection gets the folder reader's rank check)
    with pytest.raises(InputError, match=r"c/run-2: ranks 0, 2 \(expected ranks 0 … 1, one log each\)"):
        check_candidate(frame.with_columns(pl.when(pl.col("run") == "run-2", pl.col("rank") == 1).then(2).otherwise(pl.col("rank"))
                                           .cast(frame.schema["rank"]).alias("rank")), label="c", expected_ranks=2, warmup=2)
    with pytest.raises(InputError, match="negative"):
        check_candidate(frame, label="c", expected_ranks=2, warmup=-1)


_FRAGMENTS = st.sampled_from(
    [
        "Inference time (decode): ", "Inference time (prefill): ", "Inference time (", " ms", "ms", ".", "1", "25.5",
        "0", "x", " ", "\t", "\r", "decode", "): ", "\xff", "中文", "Inference time (decode): 3.25 ms", "sec", " 13.0 ms",
    ]
)
WHOLE_LINE = re.compile(r"(?:(?!Inference time \().)*Inference time \((decode|prefill)\): ([0-9.]+) ms[ \t\r]*", re.S)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(st.lists(st.lists(_FRAGMENTS, max_size=6).map("".join), max_size=12))
def test_parser_on_random_lines_takes_whole_timing_lines_or_names_the_line(tmp_path: Path, lines: list[str]) -> None:
    """Random mixes of pattern pieces: either one sample per line that mentions
    ``Inference time (`` (a prefix before it, only spaces, tabs or \\r after the
    unit, a value above 0), or an InputError naming this file and the first line that mentions it
    without being such a line."""
    log = tmp_path / "run-1" / "log_0.log"
    log.parent.mkdir(exist_ok=True)
    log.write_bytes("\n".join(lines).encode("utf-8", errors="surrogatepass"))
    marked = [(i + 1, text) for i, text in enumerate(lines) if "Inference time (" in text]
    whole = [(i, WHOLE_LINE.fullmatch(text)) for i, text in marked]
    expected = [(i, m.group(1), m.group(2)) for i, m in whole if m is not None]
    bad = [i for i, m in whole if m is None or not VALID.match(m.group(2)) or float(m.group(2)) == 0]  # 0 ms: no step takes no time
    try:
        frame = parse_rank_log(log).frame
    except InputError as exc:
        assert bad, f"unexpected error {exc}"
        assert exc.line == bad[0] and "log_0.log" in str(exc)
        return
    assert not bad
    assert frame.select("line", "phase", "value_text").rows() == expected
    assert frame["value_ms"].to_list() == [float(v) for _, _, v in expected]


def test_two_logs_of_one_rank(tmp_path: Path) -> None:
    folder = write_candidate(tmp_path / "c", [{0: ["1", "2"], 1: ["1", "2"]}])
    (folder / "run-1" / "log_1.log").rename(folder / "run-1" / "log_00.log")
    with pytest.raises(InputError, match="rank 0 has more than one log"):
        read_candidate(folder, expected_ranks=2, warmup=1)
