"""SK metadata logs and graph dumps: sk_fused_nodes.log -> sk_structure, super_kernel.log ->
sk_markers, sk_graph_*.json -> symbols (formats.md §4), on the hand-checked samples of
fixtures/sk and on generated variants."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from sk_samples import (
    FusedMember,
    FusedSk,
    GraphDump,
    GraphNode,
    OptionLine,
    fused_nodes_text,
    super_kernel_log_text,
)

from sk_analytics.errors import InputError
from sk_analytics.ingest.canonical import sk_identity
from sk_analytics.ingest.fused_nodes import parse_fused_nodes
from sk_analytics.ingest.graph_dump import parse_graph_dump
from sk_analytics.ingest.super_kernel_log import buffer_full_cores, is_child_trace_complete, parse_super_kernel_log
from sk_analytics.schema import SK_MARKERS, SK_STRUCTURE, SYMBOLS

FIXTURES = Path(__file__).parents[1] / "fixtures" / "sk"
MODEL = FIXTURES / "sk_meta" / "4242" / "model_3_1"
H32 = "5f3c0a9e1b2d4c6f8a7e9d0c1b2a3f4e"
SK3 = f"sk_3_layer0_start_static_kernel_RmsNorm_{H32}_9_d0_end_MatMulV2_ND_FP16_1"
SK9 = "sk_9_none_start_Add_0x1f_high_performance_1_end_hcom_allReduce__520_1_1"


# --------------------------------------------------------------------------- sk_fused_nodes.log


def test_fused_nodes_fixture() -> None:
    result = parse_fused_nodes(MODEL / "sk_fused_nodes.log", root=FIXTURES)
    assert result.warnings == []
    frame = result.frame
    assert frame.schema == SK_STRUCTURE.schema
    assert frame.select("sk_func_name", "scope_id", "scope_name", "node_count", "child_index", "node_id", "stream_id",
                        "member_kind", "canonical_op", "kernel_type", "num_blocks", "line").rows() == [
        (SK3, 3, "layer0", 3, 0, 41, 2, "kernel", "RmsNorm", "AIV_ONLY", 40, 2),
        (SK3, 3, "layer0", 3, 1, 42, 2, "event", None, None, None, 3),
        (SK3, 3, "layer0", 3, 2, 43, 2, "kernel", "MatMulV2", "MIX_AIC_1_0", 24, 4),
        (SK9, 9, "none", 4, 0, 77, 5, "kernel", "Add", "AIV_ONLY", 8, 6),
        (SK9, 9, "none", 4, 1, 78, 5, "memory", None, None, None, 7),
        (SK9, 9, "none", 4, 2, 79, 5, "default", None, None, None, 8),
        (SK9, 9, "none", 4, 3, 80, 5, "kernel", "hcom_allReduce", "DEFAULT", 1, 9),
    ]
    assert frame.get_column("member_detail").to_list()[1] == "EventWait(eventId:0x3, eventFlag:0x0, eventTaskFlag:0x1)"
    assert frame.get_column("func_name").to_list()[2] == "MatMulV2_ND_FP16_1"
    assert set(frame.get_column("model_dir")) == {"model_3_1"}
    assert set(frame.get_column("source_file")) == {"sk_meta/4242/model_3_1/sk_fused_nodes.log"}
    identity = sk_identity(frame).sort("scope_id")
    assert identity.get_column("structure_key").to_list() == [
        "scope=layer0|first=RmsNorm|last=MatMulV2|ops=RmsNorm,MatMulV2",
        "scope=none|first=Add|last=hcom_allReduce|ops=Add,hcom_allReduce",
    ]


def _sks(long_name: str = "Add_1") -> list[FusedSk]:
    return [
        FusedSk("sk_1_l0_start_a_end_b", 1, [FusedMember(10, 1, "Add_1"), FusedMember(11, 1),
                                             FusedMember(12, 1, long_name, kernel_type="MIX_1_2", num_blocks=48)]),
        FusedSk("sk_2_none_start_a_end_a", 2, [FusedMember(20, 3, "Mul_7", kernel_type="AIC_ONLY"),
                                               FusedMember(21, 3, None, detail="EventNotify(eventId:0x1, eventFlag:0x0, eventTaskFlag:0x0)"),
                                               FusedMember(22, 3, None, detail="EventReset(eventId:0x1)"),
                                               FusedMember(23, 3, None, detail="MemoryWait(addr:0x10, value:0x1)")]),
    ]


@pytest.mark.parametrize("prefix", [True, False])
@pytest.mark.parametrize("long_name", ["Add_1", "Long" + "x" * 9000 + "_ND"])
def test_fused_nodes_generated_variants(tmp_path: Path, prefix: bool, long_name: str) -> None:
    text = fused_nodes_text(_sks(long_name), prefix=prefix)
    if prefix and len(long_name) > 4096:
        assert "[CONT:1] " in text and "[CONT:2] " in text  # the member spans three physical lines
    path = tmp_path / "model_8_2" / "sk_fused_nodes.log"
    path.parent.mkdir()
    path.write_text(text)
    frame = parse_fused_nodes(path).frame
    assert frame.get_column("member_kind").to_list() == ["kernel", "event", "kernel", "kernel", "event", "event", "memory"]
    assert frame.get_column("func_name").to_list() == ["Add_1", None, long_name, "Mul_7", None, None, None]
    assert frame.get_column("canonical_op").to_list()[2] == ("Add" if long_name == "Add_1" else "Long" + "x" * 9000)
    assert frame.get_column("num_blocks").to_list()[:4] == [24, None, 48, 24]
    assert frame.get_column("line").to_list() == ([2, 3, 4, 6, 7, 8, 9] if not prefix or len(long_name) < 4096 else [2, 3, 4, 8, 9, 10, 11])
    assert frame.get_column("model_dir").unique().to_list() == ["model_8_2"]


def _fused(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "model_1_1" / "sk_fused_nodes.log"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


def test_fused_nodes_count_mismatch_is_a_warning(tmp_path: Path) -> None:
    sk = FusedSk("sk_1_l0_start_a_end_b", 1, [FusedMember(10, 1, "Add_1")], node_count=3)
    path = _fused(tmp_path, fused_nodes_text([sk], prefix=False) + "some other logger output\n")
    result = parse_fused_nodes(path)
    assert result.rows == 1
    assert result.warnings == [
        f"{path}: skipped 1 line(s) that are neither an SK header nor a member (first: line 3)",
        f"{path}:1: SK sk_1_l0_start_a_end_b (scope id 1) declares Node Count 3 but has 1 member line(s); do not align it",
    ]


HEADER = "  SK Function: sk_1_l0_start_a_end_b, scope id: 1, Node Count: 2\n"
KERNEL = "    [{i}] [nodeId:5, streamId:1, streamIdxInGraph:0, nodeIdxInStream:0] - KernelInfos{{funcName:Add_1, kernelType:AIV_ONLY, numBlocks:2}}\n"


@pytest.mark.parametrize(
    ("text", "line", "message"),
    [
        (KERNEL.format(i=0), 1, "member line before any 'SK Function:' header"),
        (HEADER + KERNEL.format(i=0) + KERNEL.format(i=2), 3, "SK member index out of order"),
        (HEADER + "    [0] [nodeId:5, streamId:1] - KernelInfos{funcName:Add_1}\n", 2, "malformed SK member"),
        (HEADER + "    [0] [nodeId:5, streamId:1, streamIdxInGraph:0, nodeIdxInStream:0, Launch(x)]\n", 2,
         "unknown event/memory member payload"),
        (HEADER + "    [0] [nodeId:5, streamId:1, streamIdxInGraph:0, nodeIdxInStream:0] - KernelInfos{kernelType:AIV_ONLY}\n",
         2, "kernel member without funcName"),
        ("  SK Function: x, scope id: -1, Node Count: 2\n", 1, "malformed SK header"),
        ("[CONT:1] tail\n", 1, "continuation line without a line to continue"),
    ],
)
def test_fused_nodes_errors_name_file_and_line(tmp_path: Path, text: str, line: int, message: str) -> None:
    path = _fused(tmp_path, text)
    with pytest.raises(InputError, match=message) as info:
        parse_fused_nodes(path)
    assert info.value.path == str(path)
    assert info.value.line == line


def test_fused_nodes_needs_a_model_folder(tmp_path: Path) -> None:
    path = tmp_path / "sk_fused_nodes.log"
    path.write_text(HEADER)
    with pytest.raises(InputError, match="model_<rtsModelId>_<callCount>"):
        parse_fused_nodes(path)
    assert parse_fused_nodes(path, model_dir="model_1_1").rows == 0


# --------------------------------------------------------------------------- super_kernel.log


def test_super_kernel_log_fixture() -> None:
    path = MODEL / "super_kernel.log"
    result = parse_super_kernel_log(path, root=FIXTURES)
    frame = result.frame
    assert frame.schema == SK_MARKERS.schema
    assert frame.select("kind", "device", "core", "option_name", "value_text", "valid_range", "default_text", "line").rows() == [
        ("phase", None, None, None, None, None, None, 1),
        ("option_set", None, None, "split_mode", "3", None, None, 2),
        ("option_invalid", None, None, "preload_code", "7", "[0, 2]", "1", 3),
        ("option_set", None, None, "dcci_disable_on_kernel", '[".*"]', None, None, 4),
        ("phase", None, None, None, None, None, None, 5),
        ("sk_time_profiling", None, None, None, None, None, None, 6),
        ("buffer_full", 0, 27, None, None, None, None, 7),
    ]
    assert frame.get_column("text").to_list()[0] == "Begin aclskOptimize"
    assert result.warnings == [
        f"{path}:7: sk time profiling buffer full on device 0 core(s) 27: the child trace is incomplete "
        "(no child-level attribution; shorten the collection window and re-collect)",
        f"{path}:3: option preload_code value 7 is outside [0, 2]; the runtime used the default 1",
    ]
    assert not is_child_trace_complete(frame)
    assert not is_child_trace_complete(frame.lazy(), device=0)
    assert is_child_trace_complete(frame, device=1)


@pytest.mark.parametrize("prefix", [True, False])
def test_super_kernel_log_generated(tmp_path: Path, prefix: bool) -> None:
    text = super_kernel_log_text([OptionLine("early_start", "1")], [(1, 5), (1, 2), (1, 5)], prefix=prefix)
    path = tmp_path / "super_kernel.log"
    path.write_text(text)
    result = parse_super_kernel_log(path)
    assert buffer_full_cores(result.frame).rows() == [(1, 2), (1, 5)]
    assert result.frame.filter(pl.col("kind") == "option_set").select("option_name", "value_text").rows() == [("early_start", "1")]
    assert len(result.warnings) == 1 and "device 1 core(s) 2, 5" in result.warnings[0]


def test_super_kernel_log_clean_trace_and_mismatched_buffer_line(tmp_path: Path) -> None:
    path = tmp_path / "super_kernel.log"
    path.write_text("Begin aclskOptimize\nunrelated\nEnd aclskOptimize\n")
    result = parse_super_kernel_log(path)
    assert result.frame.get_column("kind").to_list() == ["phase", "phase"]
    assert is_child_trace_complete(result.frame)
    path.write_text("[sk time profiling]  device 0 core 1 buffer is full, stop dump the time of nodes on device 0 core 2\n")
    with pytest.raises(InputError, match="two different device/core pairs") as info:
        parse_super_kernel_log(path)
    assert info.value.line == 1


def test_a_byte_that_is_not_utf8_in_a_line_read_is_refused_foreign_lines_are_skipped(tmp_path: Path) -> None:
    """A funcName or an option value holding a byte that is not UTF-8 was stored with U+FFFD in its place
    (``Add_\ufffd1``: a name the file does not hold); such a byte in a line the parser ignores stays harmless."""
    kernel = KERNEL.format(i=0).encode().replace(b"Add_1", b"Add_\xff1")
    path = _fused(tmp_path, "")
    path.write_bytes(b"\xfe foreign output\n" + HEADER.replace("Node Count: 2", "Node Count: 1").encode() + kernel)
    with pytest.raises(InputError, match="not UTF-8") as info:
        parse_fused_nodes(path)
    assert info.value.line == 3
    path.write_bytes(b"\xfe foreign output\n" + HEADER.replace("Node Count: 2", "Node Count: 1").encode() + KERNEL.format(i=0).encode())
    assert parse_fused_nodes(path).frame.get_column("func_name").to_list() == ["Add_1"]
    log = tmp_path / "super_kernel.log"
    log.write_bytes(b"\xfe\nOptionName: split_mode, set value: \xff2\n")
    with pytest.raises(InputError, match="not UTF-8") as info:
        parse_super_kernel_log(log)
    assert info.value.line == 2


# --------------------------------------------------------------------------- graph dumps


@pytest.mark.parametrize("graph", ["origin", "updated"])
def test_graph_dump_fixture(graph: str) -> None:
    result = parse_graph_dump(MODEL / f"sk_graph_{graph}.json", root=FIXTURES)
    assert result.frame.schema == SYMBOLS.schema
    last = (1, 43, "MatMulV2", "MatMulV2_ND_FP16_1", "MatMulV2", "MIX_AIC_1_0") if graph == "origin" else (
        1, 50, "SuperKernel", SK3, "sk_layer0_start_RmsNorm_end_MatMulV2", "MIX_AIC")
    assert result.frame.select("stream_idx", "node_id", "node_type", "func_name", "canonical_op", "kernel_type").rows() == [
        (0, 41, "RmsNorm", f"static_kernel_RmsNorm_{H32}_9_d0", "RmsNorm", "AIV_ONLY"),
        last,
    ]
    assert set(result.frame.get_column("graph")) == {graph}
    assert set(result.frame.get_column("model_dir")) == {"model_3_1"}
    assert result.warnings == []


def _graph(tmp_path: Path, document: object, name: str = "sk_graph_origin.json") -> Path:
    path = tmp_path / "model_1_1" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(document) if not isinstance(document, str) else document)
    return path


def test_graph_dump_errors(tmp_path: Path) -> None:
    good = GraphDump([[GraphNode(1, "Add", "Add_1")]]).document()
    with pytest.raises(InputError, match="invalid JSON") as info:
        parse_graph_dump(_graph(tmp_path, '{\n"streams": [\n}'))
    assert info.value.line == 3
    with pytest.raises(InputError, match="duplicate-key"):
        parse_graph_dump(_graph(tmp_path, '{"streams": [], "streams": []}'))
    bad = json.loads(json.dumps(good))
    bad["streams"][0]["nodes"][0]["taskInfo"][0]["kernelParams"]["funcName"] = 7
    with pytest.raises(InputError, match=r"record streams\[0\]\.nodes\[0\]\.taskInfo\[0\]\.kernelParams\.funcName"):
        parse_graph_dump(_graph(tmp_path, bad))
    with pytest.raises(InputError, match="sk_graph_origin.json or sk_graph_updated.json"):
        parse_graph_dump(_graph(tmp_path, good, "graph.json"))
    good["totalNodes"] = 5
    result = parse_graph_dump(_graph(tmp_path, good))
    assert result.rows == 1
    assert result.warnings == [f"{tmp_path / 'model_1_1' / 'sk_graph_origin.json'}: totalNodes is 5 but the streams hold 1 node(s)"]


# --------------------------------------------------------------------------- robustness

_FUSED = fused_nodes_text(_sks(), prefix=True)
_MARKERS = super_kernel_log_text([OptionLine("split_mode", "2"), OptionLine("preload_code", "9", ("0", "2"), "1")], [(0, 1)])
_GRAPH = json.dumps(GraphDump([[GraphNode(1, "Add", "Add_1"), GraphNode(2, "Wait")]]).document(), indent=1)


def _corrupt(text: str, cut: int, edits: list[tuple[int, str]]) -> str:
    for position, insert in edits:
        position %= len(text) + 1
        text = text[:position] + insert + text[position + 1 :]
    return text[: cut % (len(text) + 1)]


_EDITS = st.lists(st.tuples(st.integers(0, 10_000), st.text(max_size=4)), max_size=3)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(cut=st.integers(0, 10_000), edits=_EDITS, which=st.sampled_from(["fused", "markers", "graph"]))
def test_corrupted_metadata_parses_or_raises_input_error(tmp_path: Path, cut: int, edits: list[tuple[int, str]], which: str) -> None:
    source, name, parser = {
        "fused": (_FUSED, "sk_fused_nodes.log", parse_fused_nodes),
        "markers": (_MARKERS, "super_kernel.log", parse_super_kernel_log),
        "graph": (_GRAPH, "sk_graph_updated.json", parse_graph_dump),
    }[which]
    path = tmp_path / "model_1_1" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(_corrupt(source, cut, edits), encoding="utf-8", errors="surrogatepass")
    try:
        result = parser(path)
    except InputError as exc:
        assert exc.path == str(path)
        assert exc.location is not None and (exc.line is not None or exc.location.record is not None)
        return
    assert result.frame.schema == result.table.schema


def test_crlf_logs(tmp_path: Path) -> None:
    fused = _fused(tmp_path, fused_nodes_text(_sks(), prefix=True).replace("\n", "\r\n"))
    frame = parse_fused_nodes(fused).frame
    assert frame.get_column("member_detail").to_list()[-1] == "MemoryWait(addr:0x10, value:0x1)"
    assert frame.get_column("line").to_list() == [2, 3, 4, 6, 7, 8, 9]
    log = tmp_path / "super_kernel.log"
    log.write_text(super_kernel_log_text([OptionLine("split_mode", "2")]).replace("\n", "\r\n"))
    assert parse_super_kernel_log(log).frame.filter(pl.col("kind") == "option_set").get_column("value_text").to_list() == ["2"]
