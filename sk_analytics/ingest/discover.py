"""Find the SK artifacts under a run or profile folder and name their partitions.

What is an artifact (file name -> parser, table) is declared once in
:data:`KINDS`; :func:`discover` walks a folder (recursively, symlinks not
followed, sorted) and :func:`default_partition` derives the hive partition
``round/role/run`` of each artifact from the folder names:

* ``run`` = the nearest ``run-<k>`` folder holding the file (a session with many
  runs gives one partition per run); outside run folders, the nearest
  collection root (a folder holding ``collection-manifest.json`` or
  ``.collection-session.json``, formats.md §6) or else the ingested folder,
  by name;
* ``round`` = the folder above ``run-<k>`` (skipping a ``CLEAN`` folder, so
  ``O1/CLEAN/run-2`` is round ``O1``); outside run folders, the ingested
  folder's name;
* ``role`` = ``clean`` inside ``run-<k>`` folders, ``profile`` outside.

Explicit ``round``/``role`` values override the derived ones.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from sk_analytics.contract.scan import MANIFEST_NAME, MARKER_NAME
from sk_analytics.errors import InputError

COLLECTION_FILES = (MANIFEST_NAME, MARKER_NAME)
"""Files that mark the root of one profile collection."""
PROFILER_DB_NAME = r"^(?:ascend_pytorch_profiler(?:_[0-9]+)?|msprof_[0-9]+)\.db$"
"""torch_npu's DB export of one rank (``ascend_pytorch_profiler_<rank>.db``; not ``analysis.db``)
and msprof's own DB export (``msprof_<timestamp>.db``): both hold the ``TASK`` tables."""
RUN_DIR = re.compile(r"^run-[0-9]+$")
CLEAN_DIR = "CLEAN"
ROLE_CLEAN = "clean"
ROLE_PROFILE = "profile"


@dataclass(frozen=True)
class ArtifactKind:
    """One kind of artifact: how its file is recognised and which parser reads it."""

    name: str
    table: str
    parser: str
    """``module:function`` with signature ``(path, *, root) -> ParseResult``."""
    matches: Callable[[Path], bool]
    hollow: str
    """What a file of this kind that gives no row lacks: ``ingest`` (and ``dcci-diff``, of a trace) refuses it
    by name (exit 2, :func:`hollow_refusal`) instead of writing a table that holds nothing."""
    holds: str
    """What a file of this kind must hold to give rows (the ``expected`` of that refusal)."""
    stream: str | None = None
    """``module:function`` with signature ``(path, *, root) -> Iterator[ParseResult]``: the parse
    as consecutive rows, for files whose rows should not all be held at once (rank logs)."""
    each_file: bool = True
    """Whether every file of this kind must give rows (a rank's log, a device's trace or export), or only the
    files of its table in one partition together: SK metadata is written per model (``model_<id>_<n>/``), and
    a model whose graph fused no SK holds none, a fact beside the models that did."""


def _named(*names: str) -> Callable[[Path], bool]:
    return lambda path: path.name in names


def _pattern(regex: str, *, in_run_dir: bool = False) -> Callable[[Path], bool]:
    compiled = re.compile(regex)
    return lambda path: compiled.match(path.name) is not None and (not in_run_dir or RUN_DIR.match(path.parent.name) is not None)


KINDS: tuple[ArtifactKind, ...] = (
    ArtifactKind("rank_log", "timings", "sk_analytics.ingest.timings:parse_rank_log", _pattern(r"^log_[0-9]+\.log$", in_run_dir=True),
                 "no timing line: the log holds no sample of its rank",
                 "at least one 'Inference time (decode|prefill): <value> ms' line, formats.md §1: a rank that logged none ran no step",
                 "sk_analytics.ingest.timings:stream_rank_log"),
    ArtifactKind("kernel_details", "kernels", "sk_analytics.ingest.kernel_details:parse_kernel_details", _named("kernel_details.csv"),
                 "no data rows (header only): the profiler exported no kernel",
                 "one row per kernel launch under the header, formats.md §2"),
    ArtifactKind("profiler_db", "kernels", "sk_analytics.ingest.profiler_db:parse_profiler_db", _pattern(PROFILER_DB_NAME),
                 "no compute tasks or communication ops: the export holds no kernel",
                 "TASK rows of kernels (COMPUTE_TASK_INFO) or COMMUNICATION_OP rows"),
    ArtifactKind("sk_prof", "sk_events", "sk_analytics.ingest.sk_prof:parse_sk_prof", _pattern(r"^(?:sk_prof_device|sk_event_dev_device)_[0-9]+\.json$"),
                 "no SK event, the empty trace [{}] or one cut before its first record: SK time profiling recorded no launch",
                 "'X' events of SK launches before the closing {}, formats.md §3: a workload that launches SKs, "
                 "profiled with ASCEND_PROF_SK_ON=<KB per core>"),
    ArtifactKind("fused_nodes", "sk_structure", "sk_analytics.ingest.fused_nodes:parse_fused_nodes", _named("sk_fused_nodes.log"),
                 "no fused SK: no 'SK Function:' header with members",
                 "'SK Function: <name>, scope id: <id>, Node Count: <n>' headers, each with its '[i] [nodeId:…]' member lines, formats.md §4", each_file=False),
    ArtifactKind("super_kernel_log", "sk_markers", "sk_analytics.ingest.super_kernel_log:parse_super_kernel_log", _named("super_kernel.log"),
                 "no SK marker: no phase, option or [sk time profiling] line",
                 "'Begin <Phase>'/'End <Phase>', 'OptionName: …' or '[sk time profiling] …' lines, formats.md §4", each_file=False),
    ArtifactKind("graph_dump", "symbols", "sk_analytics.ingest.graph_dump:parse_graph_dump", _named("sk_graph_origin.json", "sk_graph_updated.json"),
                 "no kernel symbol: no task of any node has kernelParams.funcName",
                 "streams[].nodes[].taskInfo[].kernelParams.funcName of the build's kernels, formats.md §4", each_file=False),
)  # fmt: skip
"""Every artifact kind that ``ingest`` reads (formats.md §1-§4)."""
_RANK_LOG = next(kind for kind in KINDS if kind.name == "rank_log")


@dataclass(frozen=True)
class Artifact:
    """A file to ingest: its path, its kind and the run folder it belongs to (if any)."""

    path: Path
    kind: ArtifactKind
    run_dir: Path | None
    """The ``run-<k>`` folder holding the file, if any."""
    profile_dir: Path | None = None
    """Outside run folders: the collection root holding the file, if any."""


def kind_of(path: Path) -> ArtifactKind | None:
    """The artifact kind of ``path`` (by name and, for rank logs, its folder)."""
    return next((kind for kind in KINDS if kind.matches(path)), None)


def hollow_refusal(paths: list[Path]) -> InputError:
    """Bad input naming every artifact in ``paths`` that gave no row, with what its kind lacks and must hold
    (:attr:`ArtifactKind.hollow`, :attr:`ArtifactKind.holds`). A table or a diff of no rows would claim what
    its sources do not hold, and a run short of one rank's log would read as a run of one rank less, so the
    command writes nothing. Several: each on a line of its own, then one line that counts them."""
    def line(path: Path) -> InputError:
        kind = kind_of(path)
        if kind is None:
            raise ValueError(f"{path} is no artifact")
        return InputError(path, f"{kind.hollow}; nothing was written", expected=kind.holds)

    lines = [line(path) for path in paths]
    if len(lines) == 1:
        return lines[0]
    error = InputError(paths[0], f"this and {len(paths) - 1} more file(s) hold no row (each listed above); nothing was written",
                       expected="every file that is read to hold rows of its table")
    error.details = tuple(each.one_line() for each in lines)
    return error


def discover(root: Path, *, skip: tuple[Path, ...] = ()) -> list[Artifact]:
    """Every artifact under ``root`` (``root`` may be a single file), sorted by path.

    Folders in ``skip`` (e.g. the output folder) and symlinks are not entered; a symlink to a
    file is skipped, except where a rank log is expected (:func:`_expected_file`).
    """
    root = Path(root)
    if root.is_file():
        kind = kind_of(root)
        return [] if kind is None else [Artifact(root, kind, _run_dir_of(root, root.parent), _collection_of(root, root.parent))]
    skipped = {p.resolve() for p in skip}
    found: list[Artifact] = []
    for folder, dirs, files in os.walk(root, followlinks=False):
        here = Path(folder)
        for name in sorted(files) + [d for d in dirs if _expected_file(here / d)]:
            path = here / name
            kind = kind_of(path) if _expected_file(path) or not path.is_symlink() else None
            if kind is not None:
                found.append(Artifact(path, kind, _run_dir_of(path, root), _collection_of(path, root)))
        dirs[:] = sorted(d for d in dirs if (here / d).resolve() not in skipped and not (here / d).is_symlink() and not _expected_file(here / d))
    return sorted(found, key=lambda a: a.path.as_posix())


def _expected_file(path: Path) -> bool:
    """Whether ``path`` is where a file is expected whatever it is (a rank log of a run folder):
    a folder, a symlink loop or a dangling link there is handed to the parser, which refuses it
    as ``option-trial`` does, instead of leaving the run silently short of a rank."""
    return _RANK_LOG.matches(path)


def _run_dir_of(path: Path, root: Path) -> Path | None:
    """The nearest ``run-<k>`` folder holding ``path``, up to and including ``root``."""
    root_resolved = root.resolve()
    for folder in path.parents:
        if RUN_DIR.match(folder.name):
            return folder
        if folder.resolve() == root_resolved:
            return None
    return None


def _collection_of(path: Path, root: Path) -> Path | None:
    """The nearest collection root holding ``path``, up to and including ``root``."""
    root_resolved = root.resolve()
    for folder in path.parents:
        if any((folder / name).is_file() for name in COLLECTION_FILES):
            return folder
        if folder.resolve() == root_resolved:
            return None
    return None


def default_partition(artifact: Artifact, root: Path, *, round: str | None = None, role: str | None = None) -> dict[str, str]:
    """``round/role/run`` of an artifact (module docstring); explicit values win."""
    folder = Path(root) if Path(root).is_dir() else Path(root).parent
    name = folder.resolve().name
    if artifact.run_dir is None:
        run = name if artifact.profile_dir is None else artifact.profile_dir.resolve().name
        return {"round": _given(round, name), "role": _given(role, ROLE_PROFILE), "run": run}
    above = artifact.run_dir.resolve().parent
    if above.name == CLEAN_DIR:
        above = above.parent
    return {"round": _given(round, above.name), "role": _given(role, ROLE_CLEAN), "run": artifact.run_dir.name}


def _given(explicit: str | None, derived: str) -> str:
    """An explicit value wins even when empty (the partition check then refuses it, never a silent default)."""
    return derived if explicit is None else explicit
