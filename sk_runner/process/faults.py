"""Did a failed workload or producer die of an environment fault?

A process that failed because the disk was full, the file system went
read-only, an I/O error hit it, its permissions changed or it ran out of file
descriptors failed for the machine, not for the option it ran: protocol §8
makes that an environment blocker, and the step is retried on ``--resume``
instead of being decided. The process tells us on stderr (a Python
``OSError`` prints ``[Errno 28] No space left on device``; ``sk-run sim``
prints the C library's text); a process whose stderr itself could not be
written is recognised by the disk it wrote to having no space left.
"""

from __future__ import annotations

import errno
import os
import re
import shlex
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sk_analytics.errors import EnvironmentBlocker

LOW_SPACE_BYTES = 64 * 1024
"""Below this many free bytes on the run folder's file system a failed process counts as ENOSPC."""

TAIL_CHARS = 8000
"""How much of the end of stderr is searched (a traceback's last lines name the error)."""

COMMAND_CHARS = 120
"""How much of a failed command a message quotes (a launcher's argv can run to pages)."""

_CODES = tuple(code for code in (errno.ENOSPC, getattr(errno, "EDQUOT", None), errno.EIO, errno.EROFS, errno.EACCES,
                                 errno.EMFILE, errno.ENFILE) if code is not None)
"""EPERM is left out: "Operation not permitted" is printed for too many unrelated reasons."""

_SIGNATURE = re.compile(
    "|".join(rf"(?P<e{code}>\[Errno {code}\]|{re.escape(os.strerror(code))})" for code in _CODES)
)


@dataclass(frozen=True)
class FaultEvidence:
    """Which environment fault, and the stderr line (or disk figure) that shows it."""

    errno_name: str
    evidence: str

    def describe(self) -> str:
        return f"{self.errno_name}: {self.evidence}"


def command_text(argv: Sequence[str], limit: int = COMMAND_CHARS) -> str:
    """``argv`` as a shell would take it, cut to ``limit`` characters (``…`` marks the cut)."""
    text = shlex.join(argv)
    return text if len(text) <= limit else text[: limit - 1] + "…"


class EnvironmentFault(EnvironmentBlocker):
    """A started process died of an environment fault: a blocker, never a decision.

    The message names the command as configured (for ``python -m x …`` the
    module and its arguments, not just the interpreter), its stderr file and,
    for one host's group of a multi-host run, that host (``where``).
    """

    def __init__(self, argv: Sequence[str], evidence: FaultEvidence, stderr_path: Path, where: str | None = None) -> None:
        self.argv = list(argv)
        self.evidence = evidence
        self.errno_name = evidence.errno_name
        self.stderr_path = stderr_path
        self.where = where
        super().__init__(self._message())

    def _message(self) -> str:
        return (f"{'' if self.where is None else self.where + ': '}{command_text(self.argv)} died of an environment fault "
                f"({self.evidence.describe()}); its stderr: {self.stderr_path}")

    def to_json(self) -> dict[str, object]:
        """What a host's agent sends back so the session raises this fault, not a plain blocker (:meth:`from_json`)."""
        return {"argv": self.argv, "errno_name": self.errno_name, "evidence": self.evidence.evidence, "stderr": str(self.stderr_path)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str | None = None) -> EnvironmentFault:
        return cls(list(data["argv"]), FaultEvidence(str(data["errno_name"]), str(data["evidence"])), Path(data["stderr"]), where)

    def moved(self, old: Path, new: Path) -> None:
        """The folder ``old`` holding the stderr file was moved to ``new``: name the file where it is now."""
        if self.stderr_path.is_relative_to(old):
            self.stderr_path = new / self.stderr_path.relative_to(old)
            self.args = (self._message(),)


def tail_text(path: Path | None, chars: int = TAIL_CHARS) -> str:
    """The last ``chars`` bytes of a file as text ('' when it is missing or unreadable)."""
    if path is None:
        return ""
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - chars))
            return fh.read().decode("utf-8", errors="replace")
    except OSError:
        return ""


def classify_fault(stderr_tail: str, free_bytes: int | None) -> FaultEvidence | None:
    """The environment fault a failed process shows: its last stderr line naming one, else a full disk."""
    for line in reversed(stderr_tail.splitlines()):
        match = _SIGNATURE.search(line)
        if match is not None:
            code = int(next(name for name, value in match.groupdict().items() if value is not None)[1:])
            return FaultEvidence(errno.errorcode[code], " ".join(line.split())[-300:])
    if free_bytes is not None and free_bytes < LOW_SPACE_BYTES:
        return FaultEvidence("ENOSPC", f"{free_bytes} bytes free where the process wrote its output")
    return None


def free_bytes(path: Path) -> int | None:
    """Free bytes for unprivileged writers on ``path``'s file system (None when unknown)."""
    try:
        return shutil.disk_usage(path).free
    except OSError:
        return None


def process_fault(stderr_path: Path) -> FaultEvidence | None:
    """:func:`classify_fault` of a failed process from its stderr file and the disk it lies on."""
    return classify_fault(tail_text(stderr_path), free_bytes(stderr_path.parent))
