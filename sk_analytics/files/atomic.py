"""Atomic writes: every result is written to a temp file in the same folder,
fsynced, then renamed over the target, so a crash never leaves half a file.

Each write passes the session's write seam (:func:`sk_analytics.files.io_seam.guard`)."""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from sk_analytics.errors import InputError
from sk_analytics.files.io_seam import guard


@contextmanager
def atomic_path(target: str | os.PathLike[str], *, site: str = "atomic") -> Iterator[Path]:
    """Yield a temp path beside ``target``; on success it replaces ``target``.

    ``site`` names the write for the seam (``parquet`` for tables)."""
    target = Path(target)
    tmp = temp_beside(target)
    try:
        yield tmp
        commit_temp(tmp, target, site=site)
    finally:
        if tmp.exists():
            tmp.unlink()


TEMP_NAME = re.compile(r"\.(?P<target>.+)\.[a-z0-9_]{8}\.tmp")
"""The name of :func:`temp_beside`'s temp files (``tempfile.mkstemp``'s eight random characters between
the target's name and ``.tmp``): what :mod:`sk_analytics.files.stale_temps` finds when a killed writer left one."""


def temp_beside(target: Path) -> Path:
    """A new empty temp file in ``target``'s folder (created if needed), as readable as any result file.

    The first half of :func:`atomic_path`, for writers whose temp outlives one ``with`` block
    (a Parquet file streamed while other inputs are still being parsed)."""
    refuse_link(target)
    make_parent(target)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:  # name the file the user asked for, not our temp beside it
        raise OSError(exc.errno, exc.strerror, str(target)) from None
    try:
        os.fchmod(fd, 0o666 & ~current_umask())  # mkstemp makes it owner-only; a result file is as readable as any other
    finally:
        os.close(fd)
    return Path(tmp_name)


def make_parent(target: Path) -> None:
    """Create ``target``'s folders; a file where one of them must be is bad input naming that file
    (``mkdir`` says "File exists" of it, which reads as if the output itself were taken)."""
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        blocker = next((p for p in reversed(target.parents) if p.exists() and not p.is_dir()), None)
        if blocker is None:
            raise
        raise InputError(blocker, f"is a file, not a folder: {target} cannot be written under it",
                         expected="an output path whose folders are folders or not yet there") from None


def commit_temp(tmp: Path, target: Path, *, site: str = "atomic") -> None:
    """Put the written temp file ``tmp`` in place of ``target`` (the second half of :func:`atomic_path`):
    the write seam, fsync, rename, fsync of the folder. On a fault ``tmp`` is left for the caller to remove."""
    guard(site, target)  # after the temp file was written: a fault leaves it, and only it, to clean up
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, target)
    _fsync_dir(target.parent)


def replace_locked(target: Path, data: bytes, *, temp: str, site: str = "atomic") -> None:
    """Atomically replace ``target`` (in an existing folder) with ``data`` through the fixed temp file ``temp`` beside it.

    For a small file rewritten after every append under a lock the caller holds (the ledger
    head): a fixed temp name needs no random name, no umask lookup (``open`` applies it) and
    no clean-up walk, and a temp a killed writer left is simply truncated by the next one.
    Otherwise as :func:`atomic_path`: a link at the target or the temp is refused (the temp is
    opened ``O_NOFOLLOW``), the seam is passed after the temp is written, the temp is fsynced
    before the rename and the folder after it, so a crash leaves the old or the new file."""
    tmp = target.with_name(temp)
    refuse_link(target)
    refuse_link(tmp)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o666)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        guard(site, target)
        os.fsync(fd)
    except BaseException:
        os.close(fd)
        tmp.unlink(missing_ok=True)
        raise
    os.close(fd)
    os.replace(tmp, target)
    _fsync_dir(target.parent)


def refuse_link(target: Path) -> None:
    """An output is never written through or over a symbolic link (sk-tune creates none):
    a link there, even a loop or a dangling one, is bad input naming it (exit 2)."""
    if os.path.islink(target):
        raise InputError(target, "is a symbolic link: sk-tune neither follows nor replaces a link it did not create",
                         expected="a path that is a regular file or does not exist yet")


def current_umask() -> int:
    """The process umask (read from /proc on Linux: setting it to read it is not thread-safe)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def atomic_dir(target: str | os.PathLike[str], *, site: str = "atomic") -> Iterator[Path]:
    """Yield an empty temp folder beside ``target``; on success it becomes ``target`` by one rename.

    For a folder that must appear complete or not at all (a profiler output tree of many small
    files): the files inside are written plainly, without a fsync each, and published together.
    ``target`` must not exist yet; on an error the temp folder is removed."""
    target = Path(target)
    refuse_link(target)
    make_parent(target)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent))
    try:
        os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp makes it owner-only
        yield tmp
        guard(site, target)
        os.rename(tmp, target)  # refuses an existing non-empty target instead of merging into it
        _fsync_dir(target.parent)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def write_with(target: str | os.PathLike[str], writer: Callable[[IO[str]], object]) -> Path:
    """Write text through ``writer(fh)`` atomically."""
    with atomic_path(target) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="\n") as fh:
            writer(fh)
    return Path(target)


def write_text(target: str | os.PathLike[str], text: str) -> Path:
    """Write UTF-8 text atomically, line ends exactly as given (no platform translation)."""
    return write_with(target, lambda fh: fh.write(text))


def write_json(target: str | os.PathLike[str], data: Any, *, indent: int | None = 2) -> Path:
    """Write JSON atomically (UTF-8, non-ASCII kept so Chinese text stays readable)."""
    return write_text(target, json.dumps(data, ensure_ascii=False, indent=indent, sort_keys=False) + "\n")
