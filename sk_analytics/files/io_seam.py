"""The one seam every write and read of a session goes through, and the environment faults it can raise.

A full disk, an I/O error, a read-only remount, a permission change or an
exhausted file-descriptor table are *environment* faults (protocol §8
environment blockers): they say nothing about an option and must never be
recorded as a decision. Every write of a session (atomic files and Parquet
through :mod:`sk_analytics.files.atomic`, ledger and blocker appends, scene copies,
folders moved aside) passes :func:`guard` with the name of its site, so

* callers can tell such a fault from a bug by its errno alone
  (:func:`environment_errno`), and
* a test injects ENOSPC, EIO, EROFS, EACCES or EMFILE at any write site, or
  at the n-th write of a whole sweep, without editing a call site
  (:func:`inject` in this process; ``SK_TUNE_INJECT_FAULT=ENOSPC:atomic:1``
  in the environment of a process started later, e.g. a workload).

Reads of inputs (logs, JSON, CSV, the ledger) pass the same seam at the site
``read`` (:func:`reading`), and :func:`read_error` is the one place that
tells a read the user can fix (missing file, no permission, a folder where a
file belongs: bad input, exit 2) from one the machine failed (EIO, no file
descriptors, no memory, a stale NFS handle: an environment blocker, exit 3,
which a sweep records and ``--resume`` retries).

Outside a test :func:`guard` is one global read.
"""

from __future__ import annotations

import errno
import os
import shutil
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from sk_analytics.errors import EXIT_BAD_INPUT, EXIT_ENVIRONMENT, EnvironmentBlocker, InputError, ReadFault, SkTuneError

MACHINE_ERRNOS: frozenset[int] = frozenset(
    code for code in (errno.EIO, errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS, getattr(errno, "ESTALE", None),
                      errno.ETIMEDOUT) if code is not None
)
"""Errnos of a machine that failed whatever the file: an I/O error, no file descriptors or
memory left, a stale or timed-out network file system. A read failing with one is an
environment blocker; any other failed read (missing file, no permission, a folder) is bad input."""

STORAGE_ERRNOS: frozenset[int] = MACHINE_ERRNOS | frozenset(
    code for code in (errno.ENOSPC, getattr(errno, "EDQUOT", None), errno.EROFS) if code is not None
)
"""A machine fault or storage that cannot take a write (full disk, quota, read-only remount):
an environment fault whoever asked and for whatever file."""

ENVIRONMENT_ERRNOS: frozenset[int] = STORAGE_ERRNOS | frozenset((errno.EACCES, errno.EPERM))
"""Errnos that mean "the machine cannot store or open files now", not "the input is wrong":
for a write of the session's own files also a permission changed under it (on a file a user
named, the same errno is theirs to fix: :func:`error_exit_code`)."""

SITES = ("atomic", "parquet", "ledger", "append", "copy", "move")
"""Write sites: whole files written atomically (JSON, text, reports), Parquet tables,
ledger records, appended lines (environment blockers), scene copies, folders moved aside."""

READ = "read"
"""The site of every read of an input (:func:`reading`); a fault for any site (None, ``*``) never hits it."""


def environment_errno(exc: BaseException) -> str | None:
    """The errno name (``ENOSPC`` …) when ``exc`` is an environment fault, else None."""
    if isinstance(exc, OSError) and exc.errno in ENVIRONMENT_ERRNOS:
        return errno.errorcode.get(exc.errno, str(exc.errno))
    return None


def as_blocker(exc: BaseException) -> EnvironmentBlocker | None:
    """``exc`` as an environment blocker when it is one: itself, or an OSError of the
    machine (a write of sk-run that hit a full disk, an I/O error …) with its errno name; else None."""
    if isinstance(exc, EnvironmentBlocker):
        return exc
    code = environment_errno(exc)
    if code is None:
        return None
    assert isinstance(exc, OSError)
    where = f" at {exc.filename}" if exc.filename else ""
    blocker = EnvironmentBlocker(f"sk-run could not write{where}: {exc.strerror or exc} ({code})")
    blocker.errno_name = code
    return blocker


def error_exit_code(exc: OSError) -> int:
    """Exit code of an OSError no reader anticipated: 3 (environment) for a machine or storage
    fault, else 2 (bad input: a missing file, no permission on it, a folder), as :func:`read_error` decides."""
    return EXIT_ENVIRONMENT if exc.errno in STORAGE_ERRNOS else EXIT_BAD_INPUT


def read_error(path: str | os.PathLike[str], exc: OSError, what: str = "", *, expected: str | None = None) -> SkTuneError:
    """The error for a failed read of ``path`` (``what``: the kind of file, for the message).

    :class:`~sk_analytics.errors.ReadFault` (exit 3, carries the errno name)
    when the machine failed (:data:`MACHINE_ERRNOS`); otherwise
    :class:`~sk_analytics.errors.InputError` (exit 2): the user can fix it.
    """
    kind = f"cannot read {what}".rstrip()
    if exc.errno in MACHINE_ERRNOS:
        return ReadFault(path, kind, errno.errorcode[exc.errno], exc.strerror or str(exc))
    reason = "file not found" if isinstance(exc, FileNotFoundError) else exc.strerror or str(exc)
    return InputError(path, f"{kind}: {reason}", expected=expected)


@contextmanager
def reading(path: str | os.PathLike[str], what: str = "", *, expected: str | None = None) -> Iterator[None]:
    """Read ``path`` inside: passes the seam (site ``read``) and turns an OSError into :func:`read_error`'s error."""
    try:
        guard(READ, path)
        yield
    except OSError as exc:
        raise read_error(path, exc, what, expected=expected) from exc


_KINDS = ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))


def kind_of_mode(mode: int) -> str:
    """What a non-regular file is, in words (``a folder`` …)."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def open_regular(path: Path, what: str) -> int:
    """A read-only descriptor of ``path`` (symlinks followed), which must be a regular file.

    Opened non-blocking so a FIFO in its place cannot hang the reader; an
    OSError (missing, no permission, symlink loop) is left to the caller's
    :func:`~sk_analytics.files.io_seam.reading`.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        raise InputError(path, f"cannot read {what}: {kind_of_mode(mode)}, not a regular file", expected=f"a regular file ({what})")
    os.set_blocking(fd, True)
    return fd


# --------------------------------------------------------------------------- injection


@dataclass(frozen=True)
class Fault:
    """An OSError to raise at the ``nth`` write matching ``site`` (None: any write site), or read (site ``read``).

    ``sticky``: every later matching write fails too, as on a disk that stays
    full until someone frees it. ``torn``: an append writes the first half of
    its bytes before failing (what ENOSPC in the middle of a write leaves).
    """

    code: int
    site: str | None = None
    nth: int = 1
    sticky: bool = True
    torn: bool = False


@dataclass
class FaultPlan:
    """The writes and reads seen while a plan is active; raises its fault when due."""

    fault: Fault | None
    writes: list[tuple[str, str]] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    matching: int = 0
    fired: int = 0

    def hit(self, site: str, path: str) -> Fault | None:
        """Record one write or read; the fault to raise at it, if any."""
        if site == READ:
            self.reads.append(path)
        else:
            self.writes.append((site, path))
        fault = self.fault
        if fault is None or not (fault.site == site or (fault.site is None and site != READ)):  # None: any write site
            return None
        self.matching += 1
        if self.matching == fault.nth or (fault.sticky and self.matching > fault.nth):
            self.fired += 1
            return fault
        return None


FAULT_ENV = "SK_TUNE_INJECT_FAULT"
"""``ERRNO:SITE:N`` (SITE ``*``: any write site; ``read``: reads): the N-th matching write or read of this process fails, and every later one."""


def parse_fault(text: str) -> Fault:
    """A :class:`Fault` from ``ERRNO:SITE:N`` (e.g. ``ENOSPC:parquet:2``); ValueError when malformed."""
    name, site, nth = text.split(":")
    code = getattr(errno, name.strip().upper(), None)
    if not isinstance(code, int) or (site != "*" and site not in (*SITES, READ)) or int(nth) < 1:
        raise ValueError(f"{FAULT_ENV}={text!r}: expected ERRNO:SITE:N with SITE among {', '.join(SITES)}, {READ} or *")
    return Fault(code, None if site == "*" else site, int(nth))


_ACTIVE: FaultPlan | None = FaultPlan(parse_fault(os.environ[FAULT_ENV])) if os.environ.get(FAULT_ENV) else None


@contextmanager
def inject(fault: Fault | None = None) -> Iterator[FaultPlan]:
    """Activate ``fault`` for the writes and reads of this process (None: only record them)."""
    global _ACTIVE
    previous, _ACTIVE = _ACTIVE, FaultPlan(fault)
    try:
        yield _ACTIVE
    finally:
        _ACTIVE = previous


def _fault_error(fault: Fault, path: str) -> OSError:
    return OSError(fault.code, f"{os.strerror(fault.code)} (injected)", path)


def _due(site: str, path: str | os.PathLike[str]) -> Fault | None:
    plan = _ACTIVE
    return None if plan is None else plan.hit(site, os.fspath(path))


def guard(site: str, path: str | os.PathLike[str]) -> None:
    """Called by every write before it changes the file system (and every read before it reads); raises an injected fault."""
    fault = _due(site, path)
    if fault is not None:
        raise _fault_error(fault, os.fspath(path))


# --------------------------------------------------------------------------- guarded primitives


def append_bytes(path: str | os.PathLike[str], data: bytes, *, site: str = "append") -> int:
    """Append ``data`` with one write and fsync it; the file's size afterwards.

    The file is created with mode 0o644 less the umask, like other tools' files. A symbolic link
    there is never followed (``O_NOFOLLOW``: ELOOP, bad input naming it), as no output of ours is one.
    """
    fault = _due(site, path)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o644)
    try:
        if fault is not None:
            if fault.torn:
                os.write(fd, data[: len(data) // 2])
                os.fsync(fd)
            raise _fault_error(fault, os.fspath(path))
        os.write(fd, data)
        os.fsync(fd)
        return os.fstat(fd).st_size
    finally:
        os.close(fd)


def copy_tree(src: Path, dest: Path) -> None:
    """Copy a folder (links kept as links)."""
    guard("copy", dest)
    shutil.copytree(src, dest, symlinks=True)


def copy_file(src: Path, dest: Path) -> None:
    """Copy one file with its times and mode."""
    guard("copy", dest)
    shutil.copy2(src, dest)


def move(src: Path, dest: Path) -> None:
    """Move a file or folder (a rename when both are on one file system)."""
    guard("move", dest)
    shutil.move(str(src), str(dest))
