"""sk_prof_device_<id>.json / sk_event_dev_device_<id>.json -> sk_events (formats.md §3)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from sk_samples import SkProfVariant, sk_prof_events, write_sk_prof

import sk_analytics.ingest.sk_prof as sk_prof
from sk_analytics.errors import InputError
from sk_analytics.ingest.sk_prof import parse_sk_prof
from sk_analytics.schema import SK_EVENTS

COLUMNS = ["lane", "core", "ts_ns", "dur_ns", "model_id", "sk_id", "node_id", "block_idx", "block_num",
           "is_span", "name", "func_name"]
VARIANTS = [
    SkProfVariant(),
    SkProfVariant(one_line=True),
    SkProfVariant(object_form=True),
    SkProfVariant(object_form=True, one_line=True),
    SkProfVariant(legacy=True),
    SkProfVariant(terminator=False),
]


def _expected(events: pl.DataFrame, variant: SkProfVariant) -> pl.DataFrame:
    expected = events.select(COLUMNS)
    if variant.legacy:  # modelRI is the integer rtsModelId only
        expected = expected.with_columns(pl.col("model_id").str.replace("_.*", ""))
    return expected


@pytest.mark.parametrize("variant", VARIANTS, ids=repr)
def test_every_variant_parses_to_the_logical_events(tmp_path: Path, variant: SkProfVariant) -> None:
    events = sk_prof_events(40, seed=3)
    path = write_sk_prof(tmp_path / "sk_meta" / "77" / variant.file_name(5), events, variant)
    result = parse_sk_prof(path, root=tmp_path)
    assert result.warnings == []
    assert result.frame.schema == SK_EVENTS.schema
    assert result.frame.select(COLUMNS).equals(_expected(events, variant))
    assert result.frame.get_column("record").to_list() == list(range(40))
    assert result.frame.get_column("device_id").unique().to_list() == [5]
    assert result.frame.get_column("source_file").unique().to_list() == [f"sk_meta/77/{variant.file_name(5)}"]


@pytest.mark.parametrize("variant", VARIANTS, ids=repr)
def test_chunk_borders_do_not_change_the_result(tmp_path: Path, variant: SkProfVariant, monkeypatch: pytest.MonkeyPatch) -> None:
    events = sk_prof_events(30, seed=4)
    path = write_sk_prof(tmp_path / variant.file_name(0), events, variant)
    whole = parse_sk_prof(path).frame
    monkeypatch.setattr(sk_prof, "CHUNK_BYTES", 97)
    monkeypatch.setattr(sk_prof, "HEAD_BYTES", 40)
    assert parse_sk_prof(path).frame.equals(whole)


def _write(tmp_path: Path, text: str, name: str = "sk_prof_device_0.json") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


CHILD = '{"ph":"X","name":"[2/48]Add_1","pid":"AIV","tid":30,"ts":12.345678,"dur":0.000499,"args":{"modelId":"3_1","skId":4,"nodeId":7}}'
SPAN = '{ "name" : "[0/48] sk_4_none_start_Add_1_end_Add_1", "ph":"X", "pid":"AIC", "tid":"2", "ts":7, "dur":1.0005, "args":{"skId":4, "modelId":"3_1"} }'


def test_hand_written_records_and_exact_ns(tmp_path: Path) -> None:
    path = _write(tmp_path, f"[\n{CHILD},\n\n{SPAN},\n{{}}\n]")
    frame = parse_sk_prof(path).frame
    assert frame.select("record", "lane", "core", "ts_ns", "dur_ns", "model_id", "sk_id", "node_id",
                        "block_idx", "block_num", "is_span", "func_name", "canonical_op").rows() == [
        # 12.345678 us = 12345.678 ns -> 12346; 0.000499 us = 0.499 ns -> 0
        (0, "AIV", 30, 12346, 0, "3_1", 4, 7, 2, 48, False, "Add_1", "Add"),
        # 7 us -> 7000 ns; 1.0005 us = 1000.5 ns -> 1001 (half up); key order and spaces free
        (1, "AIC", 2, 7000, 1001, "3_1", 4, None, 0, 48, True, "sk_4_none_start_Add_1_end_Add_1", None),
    ]


@pytest.mark.parametrize("text", ["[{}]", "[{}]\n", "[]", '{"traceEvents": [{}]}', "[\n{}\n]"])
def test_empty_traces(tmp_path: Path, text: str) -> None:
    result = parse_sk_prof(_write(tmp_path, text))
    assert result.rows == 0
    assert result.warnings == []


def test_empty_file_is_a_truncated_trace(tmp_path: Path) -> None:
    result = parse_sk_prof(_write(tmp_path, ""))
    assert result.rows == 0
    assert result.warnings == [f"{tmp_path / 'sk_prof_device_0.json'}: truncated before the first record (no trace events)"]


def test_truncated_inside_a_record_keeps_the_complete_ones(tmp_path: Path) -> None:
    events = sk_prof_events(12, seed=1)
    full = write_sk_prof(tmp_path / "full" / "sk_prof_device_1.json", events).read_text()
    lines = full.split("\n")
    cut = "\n".join(lines[:8]) + "\n" + lines[8][:37]  # line 9 holds record 7
    path = _write(tmp_path, cut, "sk_prof_device_1.json")
    result = parse_sk_prof(path)
    assert result.frame.select(COLUMNS).equals(events.head(7).select(COLUMNS))
    assert result.warnings == [f"{path}: truncated in record 7 (line 9); kept the 7 complete records before it"]


@pytest.mark.parametrize(("text", "line"), [(f"[\n{CHILD},\n{{}}]\ntrailing", 4), (f'{{"traceEvents": [{CHILD}, {{}}]}} x', 1)])
def test_text_after_the_end_marker_is_refused_not_called_truncation(tmp_path: Path, text: str, line: int) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(InputError, match="text after the end of the trace array") as info:
        parse_sk_prof(path)
    assert info.value.line == line


def test_truncated_after_a_complete_record(tmp_path: Path) -> None:
    events = sk_prof_events(5, seed=1)
    full = write_sk_prof(tmp_path / "full" / "sk_prof_device_1.json", events).read_text()
    path = _write(tmp_path, full[: full.index("\n", full.index('"[', 600)) + 1], "sk_prof_device_1.json")
    result = parse_sk_prof(path)
    assert result.rows == 4
    assert result.warnings == [f"{path}: truncated after record 3 (array not closed); kept every record"]


BAD = [
    (CHILD.replace('"ph":"X"', '"ph":"B"'), 'ph is not "X"'),
    (CHILD.replace('"skId":4,', ""), 'no integer args "skId"'),
    (CHILD.replace('"modelId":"3_1",', ""), 'no args "modelId" (or legacy "modelRI")'),
    (CHILD.replace('"AIV"', '"GPU"'), 'pid is not "AIC" or "AIV"'),
    (CHILD.replace("[2/48]", ""), "name lacks the [blockIdx/blockNum] prefix"),
    (CHILD.replace('"ts":12.345678', '"ts":1234567890123456.5'), 'no "ts" number of at most 15 integer digits'),
    (CHILD.replace('"dur":0.000499', '"dur":-1'), 'no "dur" number of at most 15 integer digits'),
    (CHILD.replace('"tid":30', '"tid":"x"'), 'no integer "tid"'),
    (CHILD + " x", "not one JSON object of scalar members and an args object"),
    # a number the generic tier read only the leading digits of (1e3 µs was a 1 µs event, skId 4.5 was 4)
    (CHILD.replace('"dur":0.000499', '"dur":1e3'), 'no "dur" number of at most 15 integer digits'),
    (CHILD.replace('"ts":12.345678', '"ts":12.3e2'), 'no "ts" number of at most 15 integer digits'),
    (CHILD.replace('"skId":4,', '"skId":4.5,'), 'no integer args "skId"'),
    (CHILD.replace('"tid":30', '"tid":30e1'), 'no integer "tid"'),
    # a key given twice: the tier read the first and dropped the other value without a word
    (CHILD.replace('"dur":0.000499', '"dur":1.0,"dur":0.000499'), 'key "dur" given more than once'),
    (CHILD.replace('"skId":4,', '"skId":4,"skId":5,'), 'key "skId" given more than once'),
]


@pytest.mark.parametrize(("record", "problem"), BAD)
def test_bad_record_names_file_line_and_record(tmp_path: Path, record: str, problem: str) -> None:
    path = _write(tmp_path, f"[\n{CHILD},\n{record},\n{{}}\n]\n")
    with pytest.raises(InputError) as info:
        parse_sk_prof(path)
    assert info.value.location is not None
    assert (info.value.location.line, info.value.location.record) == (3, 1)
    assert f"{path}:3 (record 1): bad trace event: {problem}" in str(info.value)


def test_junk_between_records_is_reported_with_the_record_it_follows(tmp_path: Path) -> None:
    path = _write(tmp_path, f"[\n{CHILD},\n[1, 2],\n{{}}\n]\n")
    with pytest.raises(InputError, match=r"sk_prof_device_0.json:2 \(record 0\): bad trace event: not one JSON object"):
        parse_sk_prof(path)


def test_bad_names_head_and_encoding(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="sk_prof_device_<id>.json or sk_event_dev_device_<id>.json"):
        parse_sk_prof(_write(tmp_path, "[{}]", "trace.json"))
    with pytest.raises(InputError, match=r":1: does not start a trace event array"):
        parse_sk_prof(_write(tmp_path, '"hello"'))
    path = tmp_path / "sk_prof_device_2.json"
    path.write_bytes(b'[\n{"name":"[0/1]\xff"}]')
    with pytest.raises(InputError, match="not UTF-8"):
        parse_sk_prof(path)
    with pytest.raises(InputError, match="cannot read"):
        parse_sk_prof(tmp_path / "missing" / "sk_prof_device_2.json")


_VALID = "[\n" + ",\n".join([CHILD, SPAN, CHILD.replace('"nodeId":7', '"nodeId":8'), "{}"]) + "\n]\n"


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    cut=st.integers(0, len(_VALID)),
    edits=st.lists(st.tuples(st.integers(0, len(_VALID)), st.text(max_size=3)), max_size=3),
)
def test_corrupted_input_parses_or_raises_input_error(tmp_path: Path, cut: int, edits: list[tuple[int, str]]) -> None:
    text = _VALID
    for position, insert in edits:
        text = text[:position] + insert + text[position + 1 :]
    path = _write(tmp_path, text[:cut])
    try:
        result = parse_sk_prof(path)
    except InputError as exc:
        assert str(path) in str(exc)
        return
    assert result.frame.schema == SK_EVENTS.schema
    assert result.rows <= 3
    if not edits:  # pure truncation keeps exactly the complete records
        ends = (2 + len(CHILD), 4 + len(CHILD) + len(SPAN), 6 + 2 * len(CHILD) + len(SPAN))  # "[\n" and ",\n"
        complete = sum(1 for end in ends if end <= cut)
        assert result.rows == complete


FIXTURES = Path(__file__).parents[1] / "fixtures" / "sk"
SK3 = "sk_3_layer0_start_static_kernel_RmsNorm_5f3c0a9e1b2d4c6f8a7e9d0c1b2a3f4e_9_d0_end_MatMulV2_ND_FP16_1"


def test_fixture_trace_hand_checked() -> None:
    result = parse_sk_prof(FIXTURES / "sk_meta" / "4242" / "sk_prof_device_0.json", root=FIXTURES)
    assert result.warnings == []
    assert result.frame.select("record", "device_id", "lane", "core", "ts_ns", "dur_ns", "model_id", "sk_id", "node_id",
                               "block_idx", "block_num", "is_span", "func_name", "canonical_op", "source_file").rows() == [
        (0, 0, "AIV", 27, 1001001, 12250, "3_1", 3, None, 0, 2, True, SK3, None, "sk_meta/4242/sk_prof_device_0.json"),
        (1, 0, "AIV", 27, 1001100, 4000, "3_1", 3, 0, 0, 2, False,
         "static_kernel_RmsNorm_5f3c0a9e1b2d4c6f8a7e9d0c1b2a3f4e_9_d0", "RmsNorm", "sk_meta/4242/sk_prof_device_0.json"),
        (2, 0, "AIC", 3, 1006000, 7123, "3_1", 3, 2, 1, 2, False, "MatMulV2_ND_FP16_1", "MatMulV2",
         "sk_meta/4242/sk_prof_device_0.json"),
    ]


def test_fixture_legacy_one_line_trace() -> None:
    frame = parse_sk_prof(FIXTURES / "legacy" / "sk_event_dev_device_1.json").frame
    assert frame.select("device_id", "ts_ns", "dur_ns", "model_id", "sk_id", "node_id", "block_idx", "block_num",
                        "is_span", "canonical_op").rows() == [
        (1, 5500, 1000, "7", 9, 0, 3, 8, False, "Add"),
        (1, 5000, 3000, "7", 9, None, 3, 8, True, None),
    ]


def test_fixture_killed_trace() -> None:
    path = FIXTURES / "killed" / "sk_prof_device_2.json"
    result = parse_sk_prof(path)
    assert result.frame.select("ts_ns", "dur_ns", "canonical_op").rows() == [(10000, 1000, "Add"), (11000, 2000, "Mul")]
    assert result.warnings == [f"{path}: truncated in record 2 (line 4); kept the 2 complete records before it"]


def test_pretty_printed_crlf_and_bom_traces(tmp_path: Path) -> None:
    events = sk_prof_events(7, seed=2, funcs=["Add_1", "Mul_2"])
    compact = write_sk_prof(tmp_path / "c" / "sk_prof_device_0.json", events).read_text()
    records = [json.loads(line.rstrip(",")) for line in compact.splitlines()[1:-1]]
    pretty = _write(tmp_path, "\ufeff" + json.dumps(records, indent=2).replace("\n", "\r\n"))
    assert parse_sk_prof(pretty).frame.select(COLUMNS).equals(events.select(COLUMNS))
    records[3]["ph"] = "E"
    text = json.dumps(records, indent=2)
    bad = _write(tmp_path, text)
    with pytest.raises(InputError, match='ph is not "X"') as info:
        parse_sk_prof(bad)
    assert info.value.location is not None
    record_starts = [n for n, line in enumerate(text.splitlines(), start=1) if line == "  {"]
    assert (info.value.line, info.value.location.record) == (record_starts[3], 3)


def test_cut_at_a_batch_boundary_keeps_every_record_and_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file cut exactly after a record whose batch was already full: the last batch is empty, and every record was kept."""
    monkeypatch.setattr(sk_prof, "CHUNK_BYTES", 1000)
    monkeypatch.setattr(sk_prof, "HEAD_BYTES", 64)
    events = sk_prof_events(30, seed=1)
    full = write_sk_prof(tmp_path / "full" / "sk_prof_device_1.json", events).read_text()
    path = _write(tmp_path, "\n".join(full.split("\n")[:20]) + "\n", "sk_prof_device_1.json")
    result = parse_sk_prof(path)
    assert result.rows == 19
    assert result.warnings == [f"{path}: truncated after record 18 (array not closed); kept every record"]


# ---- issue 47: the runtime-layout pass (CSV fields) gives exactly the regex tiers' rows -------------------------

RUNTIME_LINES = [
    '{"ph":"X","name":"[0/2] sk_1_a","pid":"AIC","tid":0,"ts":1000.123456,"dur":5.5,"args":{"modelId":"3_1","skId":7}},',
    '{"ph":"X","name":"[0/2]Add_1","pid":"AIV","tid":41,"ts":1000.2,"dur":1,"args":{"modelId":"3_1","skId":7,"nodeId":0}},',
    '{"name":"[1/2]Add_1","ph":"X","pid":"AIV","tid":42,"ts":1000.2345,"dur":0.0005,"args":{"modelRI":3,"skId":7,"nodeId":0}}',
    '{"ph":"X","name":"[1/2] sk_1_a","pid":"AIC","tid":1,"ts":0999.999999,"dur":12,"args":{"modelRI":03,"skId":007}},',
    '{"ph":"X","name":"[1/2]Mul\\\\x;y","pid":"AIC","tid":1,"ts":99999999999999.9995,"dur":2.4994,"args":{"modelId":"","skId":7,"nodeId":99}},,',
    '',
    '{}',
    '{"ph":"X","name":"[3/4]MatMul_2","pid":"AIC","tid":3,"ts":5.000001,"dur":0.000499,"args":{"modelId":"3_1","skId":8,"nodeId":1}},',
]
"""Records the runtime-layout pass takes (both key orders, modelId/modelRI, 0 to 6 fraction digits,
half-up rounding at the 4th, leading zeros, trailing commas, a blank line, ``{}``)."""

REGEX_ONLY_LINES = [
    '{"ph":"X","name":"[0/2]a,b","pid":"AIC","tid":0,"ts":1,"dur":1,"args":{"modelId":"3_1","skId":7}},',
    '{"ph": "X","name":"[0/2]a","pid":"AIC","tid":0,"ts":1,"dur":1,"args":{"modelId":"3_1","skId":7}},',
    '{"ph":"X","name":"[0/2]a","pid":"AIC","tid":0,"ts":1,"dur":1,"args":{"modelId":"3_1","skId":7}} ,',
    '{"ph":"X","name":"[0/2]a","pid":"AIC","tid":0,"ts":1.0004999999,"dur":1,"args":{"modelId":"3_1","skId":7}},',
    '{"ph":"X","name":"[0/2]a","pid":"AIC","tid":"0","ts":1,"dur":1,"args":{"modelId":"3_1","skId":7}},',
    '{"ph":"X","name":"[0/2]a","pid":"AIC","tid":0,"ts":1,"dur":1,"args":{"modelId":"3_1","skId":7}},"nodeId":1}}',
    '{ }',
]
"""Records the pass leaves to the regex tiers (a comma in a name, spaces, 10 fraction digits, a quoted tid)."""


def _both_tiers(path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[object, object]:
    """(parse with the runtime-layout pass, parse with the regex tiers only): result or the InputError text."""
    def parse() -> object:
        try:
            result = parse_sk_prof(path)
        except InputError as exc:
            return str(exc)
        return result.frame, result.warnings

    fast = parse()
    with monkeypatch.context() as patch:
        patch.setattr(sk_prof, "_runtime_layout", lambda *args, **kwargs: None)
        slow = parse()
    return fast, slow


def _same(a: object, b: object) -> None:
    if isinstance(a, tuple) and isinstance(b, tuple):
        assert a[0].equals(b[0]) and a[1] == b[1]
    else:
        assert a == b


@pytest.mark.parametrize("chunk", [1 << 20, 211])
def test_the_runtime_layout_pass_gives_the_regex_tiers_rows(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int) -> None:
    path = tmp_path / "sk_prof_device_0.json"
    path.write_text("[\n" + "\n".join(RUNTIME_LINES * 3) + "\n{}\n]\n", encoding="utf-8")
    monkeypatch.setattr(sk_prof, "CHUNK_BYTES", chunk)
    taken: list[bool] = []
    layout = sk_prof._runtime_layout
    monkeypatch.setattr(sk_prof, "_runtime_layout", lambda *a, **k: taken.append(layout(*a, **k) is not None) or layout(*a, **k))
    fast, slow = _both_tiers(path, monkeypatch)
    assert taken and all(taken)  # every chunk went through the pass
    _same(fast, slow)
    frame = fast[0]  # type: ignore[index]
    assert frame.height == 18 and frame.get_column("ts_ns").to_list()[:5] == [1_000_123, 1_000_200, 1_000_235, 1_000_000, 100_000_000_000_000_000]
    assert frame.get_column("dur_ns").to_list()[:5] == [5_500, 1_000, 1, 12_000, 2_499]
    assert frame.get_column("model_id").to_list()[:5] == ["3_1", "3_1", "3", "03", ""]


@pytest.mark.parametrize("odd", range(len(REGEX_ONLY_LINES)))
def test_records_outside_the_runtime_layout_go_to_the_regex_tiers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, odd: int) -> None:
    path = tmp_path / "sk_prof_device_0.json"
    lines = [*RUNTIME_LINES[:2], REGEX_ONLY_LINES[odd], *RUNTIME_LINES[2:]]
    path.write_text("[\n" + "\n".join(lines) + "\n{}\n]\n", encoding="utf-8")
    assert sk_prof._runtime_layout([("\n".join(lines) + "\n").encode()], 0, names=True) is None
    fast, slow = _both_tiers(path, monkeypatch)
    _same(fast, slow)


@pytest.mark.parametrize("bad", [
    '{"ph":"X","name":"[0/2]a","pid":"AIC","tid":0,"ts":1234567890123456,"dur":1,"args":{"modelId":"3_1","skId":7}},',
    '{"ph":"X","name":"[0/2]a","pid":"AIC","tid":0,"ts":1,"dur":1,"args":{"modelId":"3_1","skId":99999999999999999999}},',
    '{"ph":"X","name":"0/2]a","pid":"AIC","tid":0,"ts":1,"dur":1,"args":{"modelId":"3_1","skId":7}},',
    '{"ph":"X","name":"[0/2]a},{b","pid":"AIC","tid":0,"ts":1,"dur":1,"args":{"modelId":"3_1","skId":7}},',
    '{"ph":"B","name":"[0/2]a","pid":"AIC","tid":0,"ts":1,"dur":1,"args":{"modelId":"3_1","skId":7}},',
    '{"ph":"X","name":"[0/2]a","pid":"AIX","tid":0,"ts":1,"dur":1,"args":{"modelId":"3_1","skId":7}},',
    '{"ph":"X","name":"[0/2]a","pid":"AIC","tid":-1,"ts":1,"dur":1,"args":{"modelId":"3_1","skId":7}},',
    '{"ph":"X","name":"[0/2]a","pid":"AIC","tid":0,"ts":1,"dur":1,"args":{"modelId":"3_1","skId":7,"nodeId":+2}},',
    '{"ph":"X","name":"[0/2]a","pid":"AIC","tid":0,"ts":-1,"dur":1,"args":{"modelId":"3_1","skId":7}},',
])
def test_a_bad_record_in_a_runtime_layout_file_is_named_by_the_regex_tiers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bad: str) -> None:
    path = tmp_path / "sk_prof_device_0.json"
    path.write_text("[\n" + "\n".join([*RUNTIME_LINES[:2], bad, *RUNTIME_LINES[2:]]) + "\n{}\n]\n", encoding="utf-8")
    fast, slow = _both_tiers(path, monkeypatch)
    assert isinstance(fast, str) and "sk_prof_device_0.json:4 (record 2)" in fast
    _same(fast, slow)


def test_a_truncated_runtime_layout_file_warns_as_before(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "sk_prof_device_0.json"
    whole = [RUNTIME_LINES[i] for i in (0, 1, 3, 7)] * 3  # each ends with its separator comma
    path.write_text("[\n" + "\n".join(whole) + "\n" + RUNTIME_LINES[0][:40], encoding="utf-8")
    monkeypatch.setattr(sk_prof, "CHUNK_BYTES", 300)
    fast, slow = _both_tiers(path, monkeypatch)
    _same(fast, slow)
    assert "truncated in record" in fast[1][0]  # type: ignore[index]


def test_the_timing_columns_alone_are_the_full_parse_s(tmp_path: Path) -> None:
    path = tmp_path / "sk_prof_device_3.json"
    path.write_text("[\n" + "\n".join(RUNTIME_LINES) + "\n{}\n]\n", encoding="utf-8")
    columns = ["device_id", "ts_ns", "dur_ns", "node_id", "is_span", "model_id", "sk_id"]
    frame, warnings = sk_prof.sk_prof_events(path, columns=columns)
    assert warnings == [] and frame.equals(parse_sk_prof(path).frame.select(columns))
