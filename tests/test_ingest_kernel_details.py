"""kernel_details.csv -> kernels: every header variant, exact start_ns, errors with file and line."""

from __future__ import annotations

import csv
from decimal import Decimal
from pathlib import Path

import polars as pl
import pytest
from real_samples import REAL

from sk_analytics.errors import InputError
from sk_analytics.ingest import kernel_details as kd
from sk_analytics.ingest.canonical import canonical_op
from sk_analytics.ingest.kernel_details import parse_kernel_details
from sk_analytics.schema import KERNELS
from sk_runner.demo.samples import VARIANTS, KernelDetailsVariant, kernel_rows, write_kernel_details

REPO = Path(__file__).resolve().parents[1]
FIXTURES = REPO / "fixtures" / "kernel_details"

# The 6 kernels of the committed fixtures (seed 1), checked by hand against the files.
EXPECTED_START_NS = [
    1736405443881410320,
    1736405443881789831,
    1736405443881890273,
    1736405443882015693,
    1736405443882363434,
    1736405443882533341,
]
EXPECTED_NAMES = [
    "sk_3_layer0_start_RmsNorm_end_MatMulV2",
    "MatMulV3_FP16_ND_high_performance_1",
    "hcom_allReduce__520_0_1",
    "FlashAttentionScore_0x7fe3a1_kernel0",
    "trans_TransData_0",
    "static_kernel_RmsNorm_5f3c0a9e1b2d4c6f8a7e9d0c1b2a3f4e_9_d0",
]


def write(tmp_path: Path, text: str, name: str = "kernel_details.csv") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode("utf-8"))
    return path


def error_of(path: Path) -> InputError:
    with pytest.raises(InputError) as info:
        parse_kernel_details(path)
    assert info.value.path == str(path)
    return info.value


# --------------------------------------------------------------------------- generated fixtures


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_committed_fixture_is_what_the_generator_writes(variant: str, tmp_path: Path) -> None:
    written = write_kernel_details(tmp_path / "k.csv", kernel_rows(6, 1), VARIANTS[variant])
    assert (FIXTURES / f"{variant}.csv").read_bytes() == written.read_bytes()


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_every_variant_gives_the_same_exact_kernels(variant: str) -> None:
    result = parse_kernel_details(FIXTURES / f"{variant}.csv", root=REPO)
    frame = result.frame
    assert result.warnings == []
    assert frame.schema == KERNELS.schema
    assert frame["start_ns"].to_list() == EXPECTED_START_NS
    assert frame["start_text"].to_list() == [f"{ns // 1000}.{ns % 1000:03d}" for ns in EXPECTED_START_NS]
    assert frame["name"].to_list() == EXPECTED_NAMES
    assert frame["row"].to_list() == [1, 2, 3, 4, 5, 6]
    assert frame["duration_us"].to_list() == [245.925, 744.949, 231.367, 368.338, 579.481, 494.679]
    assert frame["wait_us"].to_list() == [10.288, 3.307, 103.87, 90.421, 100.546, 64.577]
    assert frame["block_num"].to_list() == [40, 16, 22, 38, 6, 15]
    assert frame["is_sk"].to_list() == [True, False, False, False, False, False]
    assert frame["canonical_op"].to_list() == [canonical_op(n) for n in EXPECTED_NAMES]
    assert frame["canonical_op"].to_list()[::5] == ["sk_layer0_start_RmsNorm_end_MatMulV2", "RmsNorm"]
    assert frame["source_file"].unique().to_list() == [f"fixtures/kernel_details/{variant}.csv"]
    spec = VARIANTS[variant]
    assert frame["step_id"].to_list() == ([1] * 6 if spec.step_header else [None] * 6)
    assert frame["device_id"].to_list() == ([1] * 6 if spec.device_id else [None] * 6)


def test_level0_has_no_level1_columns_and_na_types() -> None:
    frame = parse_kernel_details(FIXTURES / "level0_minimal.csv").frame
    assert frame["type"].to_list() == ["SuperKernel", None, None, None, None, None]
    assert frame["accelerator_core"].to_list() == ["MIX_AIC", None, None, None, None, None]
    for column in ("model_id", "task_id", "stream_id", "op_state", "mix_block_num", "input_shapes", "output_shapes"):
        assert frame[column].null_count() == 6, column


def test_level1_ids_shapes_and_model_id_not_in_graph() -> None:
    frame = parse_kernel_details(FIXTURES / "level1_full.csv").frame
    assert frame["model_id"].to_list() == [4294967295, 7, 4294967295, 7, 4294967295, 7]
    assert frame["task_id"].to_list() == [11051, 11052, 11053, 11054, 11055, 11056]
    assert frame["stream_id"].to_list() == [5, 2, 4, 5, 2, 3]
    assert frame["mix_block_num"].to_list() == [1, 1, 1, 2, 0, 0]
    assert frame["op_state"].to_list() == [None, "dynamic", "dynamic", None, "dynamic", None]
    assert frame["input_shapes"].to_list() == ["1", "4096,512;8192,512", "1", "4096,512;8192,512", "32,3,224,224", None]
    assert frame["output_shapes"].to_list() == ["32,3,224,224", "", "32,3,224,224", "", "1", None]
    assert frame["input_data_types"].to_list() == ["INT8", "DT_BF16;DT_BF16", "INT8", "DT_BF16;DT_BF16", "FLOAT", None]


# --------------------------------------------------------------------------- hand-written quirks


def test_quoted_start_with_tab_crlf_step_id_and_na(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "\ufeffStep ID,Model ID,Name,Type,Start Time(us),Duration(us),Wait Time(us),Block Num\r\n"
        'N/A,4294967295,Conv2D1,SuperKernel,"1736413971558972.912\t",185.504,N/A,N/A\r\n'
        "\r\n"
        "7,N/A,sk_0_none_start_A_end_B,N/A,0.001,0,0,3\r\n",
    )
    frame = parse_kernel_details(path).frame
    assert frame["row"].to_list() == [1, 3]
    assert frame["step_id"].to_list() == [None, 7]
    assert frame["model_id"].to_list() == [4294967295, None]
    assert frame["start_ns"].to_list() == [1736413971558972912, 1]
    assert frame["start_text"].to_list() == ["1736413971558972.912", "0.001"]
    assert frame["wait_us"].to_list() == [None, 0.0]
    assert frame["block_num"].to_list() == [None, 3]
    assert frame["is_sk"].to_list() == [True, True]  # by Type, then by the sk_ name
    assert frame["type"].to_list() == ["SuperKernel", None]


@pytest.mark.parametrize(
    ("text", "ns"),
    [
        ("12", 12000),
        ("12.", 12000),
        ("12.5", 12500),
        ("12.34", 12340),
        ("12.345000", 12345),
        (" 12.345\t", 12345),
        ("0009.000", 9000),
        ("9223372036854775.807", 2**63 - 1),
    ],
)
def test_start_time_decimal_forms_are_exact(tmp_path: Path, text: str, ns: int) -> None:
    path = write(tmp_path, f'Name,Start Time(us),Duration(us)\nk,"{text}",1\n')
    assert parse_kernel_details(path).frame["start_ns"].to_list() == [ns]


@pytest.mark.parametrize(
    "text", ["12.3456", "-1.000", "+1.000", ".000", "1e3", "abc", "1.2.3", "9223372036854775.808", "12 .5", ".5"]
)
def test_bad_start_time_names_line_and_expectation(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, f'Name,Start Time(us),Duration(us)\nk,1.000,1\nk,"{text}",1\n')
    error = error_of(path)
    assert error.line == 3
    assert "Start Time(us)" in error.message
    assert error.expected is not None and "microseconds" in error.expected


@pytest.mark.parametrize(
    ("header", "cell", "bound"),
    [("Start Time(us)", "9223372036854775.808", "below 9223372036854775.808"),
     ("Block Dim", "9223372036854775808", "int64")],
)
def test_a_number_beyond_int64_is_told_why(tmp_path: Path, header: str, cell: str, bound: str) -> None:
    """A plain non-negative number too large for the int64 column was refused with an
    expectation it meets ("a non-negative decimal number", "an integer"): the bound is named."""
    columns = ["Name", "Start Time(us)", "Duration(us)", "Block Dim"]
    row = {"Name": "k", "Start Time(us)": "2.000", "Duration(us)": "1", "Block Dim": "1"} | {header: cell}
    path = write(tmp_path, ",".join(columns) + "\nk,1.000,1,1\n" + ",".join(row[c] for c in columns) + "\n")
    error = error_of(path)
    assert error.line == 3 and header in error.message
    assert error.expected is not None and bound in error.expected


def test_whitespace_padded_numbers_are_read_by_the_exhaustive_path(tmp_path: Path) -> None:
    path = write(tmp_path, "Step Id,Name,Start Time(us),Duration(us),Block Dim\n 3 ,k,1.000, 2.5\t,\t4\n")
    frame = parse_kernel_details(path).frame
    assert frame.select("step_id", "duration_us", "block_num").row(0) == (3, 2.5, 4)


def test_unknown_metric_columns_and_column_order_do_not_matter(tmp_path: Path) -> None:
    path = write(tmp_path, "aiv_time(us),Duration(us),Name,Extra,Start Time(us)\n1.5,2,k,x,3.000\n")
    frame = parse_kernel_details(path).frame
    assert frame.select("name", "duration_us", "start_ns").row(0) == ("k", 2.0, 3000)


@pytest.mark.parametrize("missing", ["Name", "Start Time(us)", "Duration(us)"])
def test_missing_required_column_is_line_1(tmp_path: Path, missing: str) -> None:
    header = ",".join(c for c in ("Name", "Start Time(us)", "Duration(us)") if c != missing)
    error = error_of(write(tmp_path, header + "\nx,1\n"))
    assert error.line == 1
    assert missing in error.message


@pytest.mark.parametrize("separator", [";", "\t"])
def test_a_header_split_by_another_separator_is_named_so(tmp_path: Path, separator: str) -> None:
    """A ';' or TAB export (re-saved by a spreadsheet) was told it 'lacks column(s) Name, Start Time(us),
    Duration(us)', which its header visibly holds."""
    header = separator.join(["Name", "Start Time(us)", "Duration(us)"])
    error = error_of(write(tmp_path, f"{header}\nk{separator}1,000{separator}2,5\n"))
    assert error.line == 1
    assert f"header is one cell split by {separator!r}, not by commas" in error.message
    assert "lacks" not in error.message


@pytest.mark.parametrize(
    ("header", "named"),
    [
        ("Name,Start Time(us),Duration(us),Duration(us)", "Duration(us) (columns 3 and 4)"),
        ("Name,Start Time(us),Duration(us),duration(us) ", "Duration(us) (columns 3 and 4)"),
        ("Name,Start Time(us),Duration(us),Block Dim,Block Num", "Block Dim (columns 4 and 5)"),
        ("Step Id,Name,Start Time(us),Duration(us),Step ID", "Step Id (columns 1 and 5)"),
    ],
)
def test_a_column_given_twice_is_refused_by_name(tmp_path: Path, header: str, named: str) -> None:
    """Two cells for one kept column (a repeated header, or both spellings of it) are
    ambiguous: the first used to win silently, so a value the file holds was dropped
    without a word. The header is refused on line 1 naming the column and where it is."""
    width = header.count(",") + 1
    row = ",".join(["k", "1.000", "2", "3", "4"][:width]) if header.startswith("Name") else "1,k,1.000,2,1"
    error = error_of(write(tmp_path, f"{header}\n{row}\n"))
    assert error.line == 1
    assert f"header gives column {named}" in error.message
    assert error.expected is not None and "each column once" in error.expected


@pytest.mark.parametrize(
    ("row", "column", "expected"),
    [
        ("k,1.000,N/A,1", "Duration(us)", "a finite decimal number"),
        ("k,1.000,,1", "Duration(us)", "a finite decimal number"),
        ("k,1.000,nan,1", "Duration(us)", "a finite decimal number"),
        ("k,1.000,1,x", "Block Dim", "an integer or N/A"),
        ("k,1.000,1,1.5", "Block Dim", "an integer or N/A"),
        (",1.000,1,1", "Name", "a non-empty kernel name"),
        ("k,,1,1", "Start Time(us)", "microseconds"),
    ],
)
def test_bad_cell_names_file_line_column(tmp_path: Path, row: str, column: str, expected: str) -> None:
    path = write(tmp_path, f"Name,Start Time(us),Duration(us),Block Dim\nk,1.000,1,1\nk,2.000,1,1\n{row}\n")
    error = error_of(path)
    assert (error.line, column in error.message) == (4, True)
    assert error.expected is not None and expected in error.expected
    assert str(error).startswith(f"{path}:4: ")


def test_line_counts_quoted_line_breaks(tmp_path: Path) -> None:
    path = write(tmp_path, 'Name,Start Time(us),Duration(us)\n"a\nb",1.000,1\nk,2.000,x\n')
    assert error_of(path).line == 4


@pytest.mark.parametrize(
    ("body", "line"),
    [
        ("k,1.000,1\nk,2.000,1,extra\n", 3),
        ('k,1.000,1\nk,"2.000,1\n', 3),
        ('k,1.000,1\nk,2 x"y,1\n', 3),
    ],
)
def test_malformed_csv_names_the_line(tmp_path: Path, body: str, line: int) -> None:
    error = error_of(write(tmp_path, "Name,Start Time(us),Duration(us)\n" + body))
    assert error.line == line
    assert "malformed CSV" in error.message


def test_invalid_utf8_names_the_line(tmp_path: Path) -> None:
    path = tmp_path / "kernel_details.csv"
    path.write_bytes(b"Name,Start Time(us),Duration(us)\nk,1.000,1\n\xff\xfe,2.000,1\n")
    error = error_of(path)
    assert (error.line, "UTF-8" in error.message) == (3, True)


def test_empty_file_and_header_only(tmp_path: Path) -> None:
    empty = error_of(write(tmp_path, ""))  # said as what it is, not as a header that lacks Name, Start Time, Duration
    assert empty.line == 1 and empty.message.startswith("empty file (0 bytes)") and "lacks" not in empty.message
    path = write(tmp_path, "Name,Start Time(us),Duration(us)\n", "h.csv")
    result = parse_kernel_details(path)
    assert result.frame.height == 0 and result.frame.schema == KERNELS.schema
    assert result.warnings == [f"{path}: no data rows (header only): the kernels table gets nothing from it"]


def test_truncated_last_row_is_reported(tmp_path: Path) -> None:
    path = write(tmp_path, "Name,Start Time(us),Duration(us),Block Dim\nk,1.000,1,4\nk,2.000,1")
    result = parse_kernel_details(path)
    assert result.rows == 1
    assert result.warnings == [f"{path}:3: the last line has no line break and it has 3 of the header's 4 fields: "
                               "the export was cut, the line is not used as data"]


def test_fast_and_exhaustive_paths_agree(monkeypatch: pytest.MonkeyPatch) -> None:
    rows = kernel_rows(300, 5)
    for name in VARIANTS:
        path = FIXTURES / f"{name}.csv"
        fast = parse_kernel_details(path).frame
        monkeypatch.setattr(kd, "_fast", lambda *args: None)
        slow = parse_kernel_details(path).frame
        monkeypatch.undo()
        assert fast.equals(slow), name
    assert rows.height == 300


def test_large_generated_sample_exact(tmp_path: Path) -> None:
    rows = kernel_rows(5000, 3, start_ns=9_000_000_000_000_000_001)
    path = write_kernel_details(tmp_path / "k.csv", rows, KernelDetailsVariant(crlf=True, quote_start=True))
    frame = parse_kernel_details(path).frame
    assert frame["start_ns"].equals(rows["start_ns"])
    assert frame["is_sk"].sum() == rows["name"].str.starts_with("sk_").sum()


# --------------------------------------------------------------------------- real samples


def _real_files() -> list[Path]:
    return sorted(REAL.glob("*/kernel_details.csv")) if REAL.is_dir() else []


@pytest.mark.skipif(not REAL.is_dir(), reason=f"real samples absent ({REAL} not beside the checkout)")
@pytest.mark.parametrize("path", _real_files(), ids=lambda p: p.parent.name)
def test_real_file_start_times_match_the_text_to_the_ns(path: Path) -> None:
    with path.open(newline="", encoding="utf-8-sig") as fh:
        records = list(csv.DictReader(fh))
    result = parse_kernel_details(path, root=REAL)
    frame = result.frame
    assert frame.height == len(records) > 0
    expected = [int(Decimal(r["Start Time(us)"].strip()) * 1000) for r in records]
    assert frame["start_ns"].to_list() == expected
    assert frame["name"].to_list() == [r["Name"] for r in records]
    assert frame["duration_us"].to_list() == [float(r["Duration(us)"]) for r in records]
    assert frame["source_file"][0] == f"{path.parent.name}/kernel_details.csv"
    assert not frame["is_sk"].any()  # none of the real samples uses SuperKernel


@pytest.mark.skipif(not REAL.is_dir(), reason=f"real samples absent ({REAL} not beside the checkout)")
def test_real_level0_and_level1_details() -> None:
    level0 = parse_kernel_details(REAL / "msinsight-level0-rank0" / "kernel_details.csv").frame
    assert level0.row(0, named=True) | {"source_file": None} == {
        "row": 1, "step_id": 50, "device_id": None, "model_id": None, "task_id": None, "stream_id": None,
        "name": "trans_TransData_0", "type": None, "op_state": None, "accelerator_core": None,
        "start_ns": 1736405443881410320, "start_text": "1736405443881410.320", "duration_us": 50.621,
        "wait_us": 0.0, "block_num": 0, "mix_block_num": None, "input_shapes": None,
        "input_data_types": None, "output_shapes": None, "is_sk": False, "canonical_op": "trans_TransData",
        "source_file": None,
    }  # fmt: skip
    level1 = parse_kernel_details(REAL / "msinsight-level1-rank0" / "kernel_details.csv").frame
    first = level1.row(0, named=True)
    assert (first["model_id"], first["task_id"], first["type"], first["accelerator_core"]) == (4294967295, 11051, "TransData", "AI_VECTOR_CORE")
    assert (first["input_shapes"], first["output_shapes"], first["block_num"]) == ("32,3,224,224", "32,1,224,224,8", 32)
    advisor = parse_kernel_details(REAL / "msprof-analyze-advisor-small" / "kernel_details.csv").frame
    assert advisor["start_ns"][0] == 1736413971558972912
    assert advisor["input_data_types"][0] == "DT_BF16;DT_BF16"
    assert pl.Series(advisor["model_id"]).unique().to_list() == [4294967295]


@pytest.mark.skipif(not REAL.is_dir(), reason=f"real samples absent ({REAL} not beside the checkout)")
def test_ingest_of_the_whole_real_folder(tmp_path: Path) -> None:
    from sk_analytics.ingest import ingest_path

    report = ingest_path(REAL, tmp_path / "data")
    assert sorted((f.path, f.rows) for f in report.files) == [
        ("msinsight-db-level0-rank0/ASCEND_PROFILER_OUTPUT/ascend_pytorch_profiler_0.db", 191),
        ("msinsight-level0-rank0/kernel_details.csv", 191),
        ("msinsight-level1-rank0/kernel_details.csv", 191),
        ("msprof-analyze-advisor-small/kernel_details.csv", 29),
    ]  # step_trace_time.csv / op_statistic.csv / analysis.db are not SK artifacts: ignored
    assert report.warnings == []
    kernels = pl.read_parquet(report.written[0])
    assert kernels.height == 411 + 191 and kernels["start_ns"].null_count() == 0
