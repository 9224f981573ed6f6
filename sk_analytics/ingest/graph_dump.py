"""``sk_graph_origin.json`` / ``sk_graph_updated.json`` -> the ``symbols`` table (formats.md §4).

The graph dump is the symbol inventory of the current build: one row per
kernel task (``taskInfo[].kernelParams.funcName``) of every node of every
stream. Event tasks (``eventParams``) and nodes without tasks give no row.
``updated`` adds ``skinfos`` on SK launch nodes; their task ``funcName`` is the
SK function, so SK symbols are in the inventory too.

The document is read with the project's strict JSON loader (syntax errors name
the line; duplicate keys and NaN are refused). The walk over streams/nodes/
tasks is a plain traversal of a parsed document of at most some thousand
nodes (I/O at the edge): it exists to name the exact record
(``streams[i].nodes[j].taskInfo[k]``) of a structural error; the rows it
collects become one Polars frame at once.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import polars as pl

from sk_analytics.errors import InputError
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.ingest.base import ParseResult, relative_source
from sk_analytics.ingest.canonical import canonical_op_column
from sk_analytics.ingest.sk_text import model_dir_of
from sk_analytics.schema import SYMBOLS

FILE_NAME = re.compile(r"^sk_graph_(origin|updated)\.json$")

Row = tuple[int, int, str | None, str, str | None]
"""(stream_idx, node_id, node_type, func_name, kernel_type) of one kernel task."""


def graph_of(path: Path) -> str:
    """``origin`` or ``updated`` from the file name."""
    match = FILE_NAME.match(path.name)
    if match is None:
        raise InputError(path, "not an SK graph dump name", expected="sk_graph_origin.json or sk_graph_updated.json")
    return match.group(1)


def parse_graph_dump(path: Path, *, root: Path | None = None, model_dir: str | None = None) -> ParseResult:
    """Parse one graph dump into symbol rows; ``model_dir`` defaults to the parent folder name."""
    graph = graph_of(path)
    model = model_dir if model_dir is not None else model_dir_of(path)
    try:
        document = load_json_file(path)
    except RecursionError as exc:
        raise InputError(path, "JSON nested too deeply", record="document", expected="an SK graph dump") from exc
    rows = list(_kernel_tasks(path, document))
    frame = pl.DataFrame(
        rows,
        schema={"stream_idx": pl.Int32, "node_id": pl.Int64, "node_type": pl.Utf8, "func_name": pl.Utf8, "kernel_type": pl.Utf8},
        orient="row",
    ).with_columns(
        pl.lit(graph).alias("graph"),
        pl.lit(model).alias("model_dir"),
        pl.lit(relative_source(path, root)).alias("source_file"),
    )
    warnings = _count_warnings(path, document, sum(len(s.get("nodes", [])) for s in document["streams"]))
    return ParseResult(SYMBOLS, SYMBOLS.conform(canonical_op_column(frame, "func_name")), path, warnings)


def _fail(path: Path, where: str, message: str, expected: str) -> InputError:
    return InputError(path, message, record=where, expected=expected)


def _list(path: Path, value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(path, where, "not a list", "a JSON array")
    return value


def _object(path: Path, value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(path, where, "not an object", "a JSON object")
    return value


def _integer(path: Path, value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not -(2**63) <= value < 2**63:
        raise _fail(path, where, f"not a 64-bit integer: {value!r}", "an integer")
    return value


def _text(path: Path, value: Any, where: str, *, required: bool) -> str | None:
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise _fail(path, where, f"not a non-empty string: {value!r}", "a string")
    return value


def _kernel_tasks(path: Path, document: Any) -> Iterator[Row]:
    """Every kernel task of the document, validated on the way."""
    top = _object(path, document, "document")
    for i, stream in enumerate(_list(path, top.get("streams"), "streams")):
        where = f"streams[{i}]"
        stream = _object(path, stream, where)
        stream_idx = _integer(path, stream.get("streamIdxInGraph"), f"{where}.streamIdxInGraph")
        if not -(2**31) <= stream_idx < 2**31:
            raise _fail(path, f"{where}.streamIdxInGraph", f"out of range: {stream_idx}", "a 32-bit integer")
        for j, node in enumerate(_list(path, stream.get("nodes", []), f"{where}.nodes")):
            node_where = f"{where}.nodes[{j}]"
            node = _object(path, node, node_where)
            node_id = _integer(path, node.get("nodeId"), f"{node_where}.nodeId")
            node_type = _text(path, node.get("nodeType"), f"{node_where}.nodeType", required=False)
            for k, task in enumerate(_list(path, node.get("taskInfo", []), f"{node_where}.taskInfo")):
                task_where = f"{node_where}.taskInfo[{k}]"
                params = _object(path, task, task_where).get("kernelParams")
                if params is None:
                    continue  # event / memory task: no symbol
                params = _object(path, params, f"{task_where}.kernelParams")
                func = _text(path, params.get("funcName"), f"{task_where}.kernelParams.funcName", required=True)
                kernel_type = _text(path, params.get("kernelType"), f"{task_where}.kernelParams.kernelType", required=False)
                yield (stream_idx, node_id, node_type, func or "", kernel_type)


def _count_warnings(path: Path, document: dict[str, Any], nodes: int) -> list[str]:
    """Warn when the declared ``totalNodes`` differs from the nodes present."""
    declared = document.get("totalNodes")
    if isinstance(declared, int) and not isinstance(declared, bool) and declared != nodes:
        return [f"{path}: totalNodes is {declared} but the streams hold {nodes} node(s)"]
    return []
