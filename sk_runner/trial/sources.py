"""The files that make up a workload, hashed into every trial's identity (docs/runner.md, "Source revision").

A launcher often runs code that its command line never names (``run.sh`` starting
``decode_rank.py`` per rank). So the identity holds the SHA-256 of every file of
the workload: the files or folders the task's ``workload.sources`` / ``sk-run
trial --source`` name, else by default the files the command names plus the
source files (:data:`SOURCE_SUFFIXES`) of the working directory: those git lists
there (tracked, and untracked but not ignored) inside a git work tree, else those
found below it (hidden folders, ``__pycache__``, virtual environments and
``node_modules`` skipped). The session folder is never part of it. More than
:data:`MAX_SOURCE_FILES` files or :data:`MAX_SOURCE_BYTES` bytes is refused
(exit 2) with the fix: name the workload's files. An edited file changes the
trial identity, so a resumed or later round refuses to run naming it.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

from sk_analytics.errors import UsageError
from sk_analytics.fingerprint import sha256_file

SOURCE_SUFFIXES = frozenset({".py", ".pyx", ".pxd", ".sh", ".bash", ".c", ".cc", ".cpp", ".cxx", ".h", ".hpp", ".cu", ".cuh"})
"""What counts as a source file of the working directory when no ``sources`` are named."""
MAX_SOURCE_FILES = 2000
"""Most files of a workload's sources (a model repository holds a few hundred)."""
MAX_SOURCE_BYTES = 256 << 20
"""Most bytes of a workload's sources hashed for every round."""
SKIPPED_FOLDERS = frozenset({"__pycache__", "node_modules", "site-packages"})
"""Folders below the working directory never searched (besides hidden ones and virtual environments)."""


def _git_listed(cwd: Path) -> list[Path] | None:
    """Files git lists below ``cwd`` (tracked, and untracked but not ignored); None outside a work tree."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "."], cwd=cwd,
                             capture_output=True, timeout=60, check=True, stdin=subprocess.DEVNULL).stdout
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return None
    return [cwd / os.fsdecode(name) for name in out.split(b"\0") if name]


def _kept(paths: list[Path], cwd: Path) -> Iterator[Path]:
    """``paths`` (below ``cwd``) not inside a folder :func:`_walk` skips: git lists untracked files there too."""
    venv: dict[Path, bool] = {}
    for path in paths:
        folders = path.relative_to(cwd).parts[:-1]
        if any(part.startswith(".") or part in SKIPPED_FOLDERS for part in folders):
            continue
        parents = [cwd.joinpath(*folders[:n]) for n in range(1, len(folders) + 1)]
        if not any(venv.setdefault(d, (d / "pyvenv.cfg").exists()) for d in parents):
            yield path


def _walk(folder: Path, *, every_file: bool) -> Iterator[Path]:
    """Regular files below ``folder`` (symbolic links to folders not followed), skipping hidden
    entries, :data:`SKIPPED_FOLDERS` and virtual environments; only source files unless ``every_file``."""
    for top, dirs, files in os.walk(folder):
        here = Path(top)
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIPPED_FOLDERS
                         and not (here / d / "pyvenv.cfg").exists())  # fmt: skip
        for name in sorted(files):
            if not name.startswith(".") and (every_file or Path(name).suffix in SOURCE_SUFFIXES):
                yield here / name


WHERE_SOURCES_ARE_NAMED = "the task's workload.sources, sk-run trial --source, sk-run task init --source"
"""Where a user names the workload's files (every message that asks for them says all three)."""


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def source_files(cwd: Path, declared: Sequence[str] | None, named: Sequence[Path], skip: Sequence[Path] = ()) -> list[Path]:
    """The workload's files, sorted: ``declared`` (paths relative to ``cwd``: a file, or every file
    of a folder) when given, else ``named`` plus the source files of ``cwd``; never below ``skip``
    (the session folder). A declared path that does not exist, or a list past the caps, is a
    :class:`UsageError`."""
    cwd = cwd.resolve()
    skipped = [Path(s).resolve() for s in skip]
    found: list[Path] = []
    if declared is not None:
        for entry in declared:
            path = (cwd / entry).resolve()
            if path.is_dir():
                found += _walk(path, every_file=True)
            elif path.is_file():
                found.append(path)
            else:
                raise UsageError(f"workload source {entry!r} ({path}) is neither a file nor a folder: name the files or folders "
                                 f"the workload runs ({WHERE_SOURCES_ARE_NAMED}), relative to its working directory")
    else:
        listed = _git_listed(cwd)
        tree = _kept([p for p in listed if p.suffix in SOURCE_SUFFIXES], cwd) if listed is not None else _walk(cwd, every_file=False)
        found = [*named, *tree]
    files = sorted({p.resolve() for p in found if p.is_file() and not any(_inside(p.resolve(), s) for s in skipped)})
    _check_size(files, cwd, declared is not None)
    return files


def _check_size(files: list[Path], cwd: Path, declared: bool) -> None:
    fix = ("name fewer files or folders in workload.sources / --source" if declared else
           f"name the files or folders the workload runs ({WHERE_SOURCES_ARE_NAMED}), or start it from its own folder")
    if len(files) > MAX_SOURCE_FILES:
        raise UsageError(f"the workload's sources in {cwd} are {len(files)} files, more than {MAX_SOURCE_FILES} hashed for every round: {fix}")
    size = sum(p.stat().st_size for p in files)
    if size > MAX_SOURCE_BYTES:
        raise UsageError(f"the workload's sources in {cwd} are {size >> 20} MiB, more than {MAX_SOURCE_BYTES >> 20} MiB hashed "
                         f"for every round: {fix}")


def source_hashes(files: Sequence[Path]) -> dict[str, str]:
    """SHA-256 of each file, keyed by its absolute path (as the source revision keys the files the command names)."""
    return {str(p): sha256_file(p) for p in files}
