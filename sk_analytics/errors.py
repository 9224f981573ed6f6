"""One exception hierarchy for the whole product.

The CLIs map every :class:`SkTuneError` to a single line on stderr and a
documented exit code, so no Python traceback ever reaches a user for bad input:

* 0 ok
* 1 decision negative / blocked (returned by commands, not raised)
* 2 bad input or usage (:class:`InputError`, :class:`IntegrityError`)
* 3 environment (:class:`EnvironmentBlocker`)
* 70 internal error (``EX_SOFTWARE``): an unexpected exception, i.e. a bug of
  ours; never 1, so a bug can never read as a negative decision
"""

from __future__ import annotations

from dataclasses import dataclass
from os import PathLike
from pathlib import Path

EXIT_OK = 0
EXIT_NEGATIVE = 1
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3
EXIT_INTERNAL = 70


class SkTuneError(Exception):
    """Base of every error the product raises on purpose."""

    exit_code: int = EXIT_BAD_INPUT
    details: tuple[str, ...] = ()
    """Lines the CLIs print before :meth:`one_line`, one each: the items of an error that names several
    (every task of a campaign no node can hold), so the user fixes them all at once."""

    def one_line(self) -> str:
        """The message the CLI prints (never more than one line)."""
        return " ".join(str(self).split())


@dataclass(frozen=True)
class Location:
    """Where in an input the problem is: file plus line (1-based) or record."""

    path: str
    line: int | None = None
    record: int | str | None = None

    def __str__(self) -> str:
        text = self.path
        if self.line is not None:
            text += f":{self.line}"
        if self.record is not None:
            text += f" (record {self.record})"
        return text


class InputError(SkTuneError):
    """Bad input: a file, a line/record in it, what was wrong and what was expected."""

    exit_code = EXIT_BAD_INPUT

    def __init__(
        self,
        path: str | PathLike[str] | None,
        message: str,
        *,
        line: int | None = None,
        record: int | str | None = None,
        expected: str | None = None,
    ) -> None:
        self.location = Location(str(path), line, record) if path is not None else None
        self.message = message
        self.expected = expected
        text = message if self.location is None else f"{self.location}: {message}"
        if expected:
            text += f" (expected {expected})"
        super().__init__(text)

    @property
    def path(self) -> str | None:
        return None if self.location is None else self.location.path

    @property
    def line(self) -> int | None:
        return None if self.location is None else self.location.line


class UsageError(InputError):
    """A command was called with arguments that cannot work together."""

    def __init__(self, message: str) -> None:
        super().__init__(None, message)


class IntegrityError(SkTuneError):
    """Evidence that must not change did change (ledger, frozen matrix, manifest)."""

    exit_code = EXIT_BAD_INPUT


class EnvironmentBlocker(SkTuneError):
    """The environment cannot run the request (backend missing, dirty env, no device, disk full)."""

    exit_code = EXIT_ENVIRONMENT
    recorded_in: Path | None = None
    """The ``environment-blockers.jsonl`` that holds it, once someone recorded it."""
    errno_name: str | None = None
    """``EIO``, ``ENOSPC`` …: the errno of a machine fault behind it (None: not an errno fault)."""


class ReadFault(EnvironmentBlocker):
    """An input could not be read because the machine failed (I/O error, no file descriptors …), not the input.

    Raised by :func:`sk_analytics.files.io_seam.read_error`; exit 3, and in a sweep a
    recorded blocker that ``--resume`` retries, never a bad-input verdict.
    """

    def __init__(self, path: str | PathLike[str], kind: str, errno_name: str, reason: str) -> None:
        self.path = str(path)
        self.errno_name = errno_name
        super().__init__(f"{path}: {kind}: {reason} ({errno_name}), a fault of the machine, not of the input")


def display_path(path: str | Path) -> str:
    """Path as shown in messages: relative to the cwd when that is shorter."""
    p = Path(path)
    try:
        rel = p.resolve().relative_to(Path.cwd().resolve())
        return str(rel)
    except ValueError:
        return str(p)
