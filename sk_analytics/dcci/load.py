"""Read one diagnostic collection root into a :class:`SideInput` (the I/O edge of dcci-diff).

Layout (formats.md §3-§4)::

    ROOT/sk_meta/<pid>/sk_prof_device_<id>.json            (legacy sk_event_dev_device_<id>.json)
    ROOT/sk_meta/<pid>/model_<id>_<n>/sk_fused_nodes.log
    ROOT/sk_meta/<pid>/model_<id>_<n>/super_kernel.log
    ROOT/sk_meta/<pid>/model_<id>_<n>/sk_graph_{origin,updated}.json

Every ``<pid>`` folder is one process: launches are mapped to SK metadata only
inside their own process. The foundation parsers do the parsing; this module
only finds the files, tags each frame with its process and concatenates.

The events of a multi-rank profile are large (one ``sk_prof`` file per rank,
~0.5 M events each on a 40-step default profile), so each file's events are
spilled to an Arrow IPC file in a private temporary folder as soon as it is
parsed and the side scans them lazily: the peak is one parsed file plus what
the analysis collects, not every rank at once. Only the columns the diff reads
(:data:`~sk_analytics.dcci.occurrences.EVENT_COLUMNS`) are parsed out and kept:
the name-derived columns of every row are never built (issue 47), and the
uncompressed IPC write costs a few ms a rank.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

import polars as pl

from sk_analytics.dcci.analysis import SideInput
from sk_analytics.dcci.ingested import ingested_events
from sk_analytics.dcci.occurrences import EVENT_COLUMNS
from sk_analytics.errors import InputError
from sk_analytics.ingest.base import ParseResult, relative_source
from sk_analytics.ingest.discover import hollow_refusal
from sk_analytics.ingest.fused_nodes import parse_fused_nodes
from sk_analytics.ingest.graph_dump import parse_graph_dump
from sk_analytics.ingest.sk_prof import FILE_NAME as SK_PROF_NAME, sk_prof_events
from sk_analytics.ingest.super_kernel_log import parse_super_kernel_log
from sk_analytics.schema import SK_MARKERS, SK_STRUCTURE, SYMBOLS, Table

SK_META = "sk_meta"
TRUNCATION_WORD = "truncated"
"""sk_prof parser warnings that report a truncated trace contain this word."""


def _processes(root: Path) -> list[Path]:
    meta = root / SK_META
    folders = sorted(p for p in meta.iterdir() if p.is_dir()) if meta.is_dir() else []
    if not folders:
        raise InputError(root, f"no {SK_META}/<pid>/ folder", expected="SK metadata and sk_prof of the profile process")
    return folders


def _parse_all(
    files: Iterable[Path], parser: Callable[..., ParseResult], process: str, root: Path, warnings: list[str]
) -> list[pl.DataFrame]:
    """Parse ``files`` with ``parser``; tag each frame with its process and collect the warnings."""
    frames = []
    for path in files:
        result = parser(path, root=root)
        warnings.extend(result.warnings)
        frames.append(result.frame.with_columns(pl.lit(process, dtype=pl.Utf8).alias("process")))
    return frames


def _spill_events(files: Iterable[Path], process: str, root: Path, warnings: list[str], spill: Path, empty: list[Path]) -> list[Path]:
    """Parse each sk_prof file's :data:`EVENT_COLUMNS` and write them, process-tagged, to ``spill``
    (Arrow IPC, uncompressed); returns the file paths. A file without an event goes to ``empty``."""
    paths = []
    for path in files:
        frame, parsed_warnings = sk_prof_events(path, root=root, columns=[c for c in EVENT_COLUMNS if c != "process"])
        warnings.extend(parsed_warnings)
        if not frame.height:
            empty.append(path)
        target = spill / f"events-{process}-{path.stem}.arrow"
        frame.with_columns(pl.lit(process, dtype=pl.Utf8).alias("process")).select(EVENT_COLUMNS).write_ipc(target)
        paths.append(target)
    return paths


def _concat(frames: list[pl.DataFrame], table: Table) -> pl.DataFrame:
    if frames:
        return pl.concat(frames, how="vertical")
    return pl.DataFrame(schema={**table.schema, "process": pl.Utf8})


def load_side(
    root: Path, identity: dict[str, Any] | None = None, *, data_dir: Path | None = None, vouched: Mapping[str, str] | None = None
) -> SideInput:
    """Parse every process of a collection root; raise InputError when a required artifact is missing.

    With ``data_dir`` (a session's Parquet folder) and ``vouched`` (source_file ->
    SHA-256 from the root's verified manifest), the events come from the table
    the ingest already wrote for exactly those bytes (:mod:`sk_analytics.dcci.ingested`)
    instead of a second parse; the side is the same either way. Otherwise the events are
    spilled to a temporary folder that lives as long as the returned side."""
    folders = _processes(root)
    prof = {folder.name: sorted(p for p in folder.iterdir() if p.is_file() and SK_PROF_NAME.match(p.name)) for folder in folders}
    files = [(relative_source(path, root), process) for process, paths in prof.items() for path in paths]
    reused = ingested_events(data_dir, root, files, vouched or {}) if data_dir is not None else None
    spill = None if reused is not None else tempfile.TemporaryDirectory(prefix="sk-tune-dcci-events-")
    warnings: list[str] = []
    events: dict[str, list[Path]] = {}
    structure: list[pl.DataFrame] = []
    markers: list[pl.DataFrame] = []
    symbols: list[pl.DataFrame] = []
    truncated: set[str] = set()
    empty: list[Path] = []
    for folder in folders:
        process = folder.name
        prof_files = prof[process]
        before = len(warnings)
        if spill is not None:  # nothing reused
            events[process] = _spill_events(prof_files, process, root, warnings, Path(spill.name), empty)
        elif reused is not None:
            warnings += [w for path in prof_files for w in reused.warnings[relative_source(path, root)]]
        if any(TRUNCATION_WORD in w for w in warnings[before:]):
            truncated.add(process)
        models = sorted(p for p in folder.glob("model_*") if p.is_dir())
        fused = [m / "sk_fused_nodes.log" for m in models if (m / "sk_fused_nodes.log").is_file()]
        structure += _parse_all(fused, parse_fused_nodes, process, root, warnings)
        logs = [m / "super_kernel.log" for m in models if (m / "super_kernel.log").is_file()]
        markers += _parse_all(logs, parse_super_kernel_log, process, root, warnings)
        graphs = [m / f"sk_graph_{g}.json" for m in models for g in ("origin", "updated") if (m / f"sk_graph_{g}.json").is_file()]
        symbols += _parse_all(graphs, parse_graph_dump, process, root, warnings)
        if prof_files and not fused:
            raise InputError(folder, "sk_prof present but no model_*/sk_fused_nodes.log in this process",
                             expected="the SK metadata written by the same profile process")
    if not files:
        raise InputError(root, f"no sk_prof_device_<id>.json under {SK_META}/<pid>/",
                         expected="a profile collected with ASCEND_PROF_SK_ON=<KB>")
    if empty:  # a rank whose trace recorded nothing has no SK to compare: its empty side is no diff, no table, no track
        raise hollow_refusal(empty)
    return SideInput(
        root=root,
        events=reused.events if reused is not None else pl.scan_ipc([p for paths in events.values() for p in paths]),
        structure=_concat(structure, SK_STRUCTURE),
        markers=_concat(markers, SK_MARKERS),
        symbols=_concat(symbols, SYMBOLS),
        truncated_processes=frozenset(truncated),
        warnings=tuple(warnings),
        identity=dict(identity or {}),
        spill=spill,
        by_process=reused.by_process if reused is not None else {process: pl.scan_ipc(paths) for process, paths in events.items() if paths},
    )
