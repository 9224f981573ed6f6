"""One exception hierarchy for the whole product, and every exit code the commands end with.

The CLIs map every :class:`SkTuneError` to a single line on stderr and the
``exit_code`` of its class, so no Python traceback ever reaches a user for bad
input. Each code is written down once, with its one-line ``meaning``, on the
class that ends a command with it (as click does with ``exit_code``): the
outcomes 0 and 1 (:data:`OUTCOMES`, returned, not raised), 2
(:class:`SkTuneError`), 3 (:class:`EnvironmentBlocker`), 70
(:class:`InternalError`) and 130 / 143
(:class:`sk_analytics.interrupts.Interrupted`). :func:`exit_codes` lists them;
docs/cli.md and the exit-code tables of docs/design.md, docs/faults.md and
docs/index.md are generated from it (``python -m sk_analytics.cli.doc_tables``).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from os import PathLike
from pathlib import Path
from typing import ClassVar

EXIT_OK = 0
EXIT_NEGATIVE = 1
EXIT_BAD_INPUT = 2
EXIT_ENVIRONMENT = 3
EXIT_INTERNAL = 70
"""``EX_SOFTWARE`` of sysexits.h: a bug of ours; never 1, so a bug can never read as a negative decision."""
EXIT_BROKEN_PIPE = 141
"""128 + SIGPIPE, what a shell reports for a program a closed pipe ended: the reader of stdout went away."""

OUTCOMES: dict[int, str] = {
    EXIT_OK: "ok: done; the gate accepted, the baseline is stable, the values are ready, the repair is proposed, the sweep sealed a BASE",
    EXIT_NEGATIVE: "decision negative or blocked (returned, not an error): the gate rejected, not stable, a value not ready, no repair, "
                   "a trial or profile not ok, the sweep ended without BASE, a `--check` found drift",
}
"""The two codes a command returns as its result rather than raises."""


class SkTuneError(Exception):
    """Base of every error the product raises on purpose."""

    exit_code: ClassVar[int] = EXIT_BAD_INPUT
    meaning: ClassVar[str] = ("bad input or usage: a missing, unreadable or malformed file, line or record, tampered evidence "
                              "(`InputError`, `IntegrityError`), a usage error")
    """The one-line meaning of ``exit_code`` in the exit-code tables (a subclass with the same code keeps it)."""
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
    meaning = ("environment (`EnvironmentBlocker`): torch_npu/CANN not loadable, workload not startable, profiling switches set "
               "for a clean run, any other OS error (e.g. disk full)")
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


class InternalError(SkTuneError):
    """An unexpected exception, i.e. a bug of sk-tune: the CLIs end with this class's code (never raised on purpose)."""

    exit_code = EXIT_INTERNAL
    meaning = ("internal error (`EX_SOFTWARE`): an unexpected exception, a bug of sk-tune; one line names the command and the "
               "file its traceback was saved to (docs/faults.md)")


def exit_codes() -> list[tuple[int, str]]:
    """Every exit code of sk-run and sk-analyze with its one-line meaning, ascending: the source of every
    exit-code table in the docs."""
    from sk_analytics.interrupts import Interrupted

    rows = [*OUTCOMES.items(), *((cls.exit_code, cls.meaning) for cls in (SkTuneError, EnvironmentBlocker, InternalError)),
            *Interrupted.MEANINGS.items(),
            (EXIT_BROKEN_PIPE, "the reader of the output went away (a closed pipe, e.g. output piped into `head`): the output is cut short; "
                               "never 1, so a cut output can never read as a negative decision")]
    return sorted(rows)


def display_path(path: str | Path) -> str:
    """Path as shown in messages: relative to the cwd when that is shorter."""
    p = Path(path)
    try:
        rel = p.resolve().relative_to(Path.cwd().resolve())
        return str(rel)
    except ValueError:
        return str(p)


def did_you_mean(name: str, valid: Iterable[str]) -> str:
    """`` (did you mean 'warmup'?)`` for the valid names closest to a mistyped ``name`` (difflib's ratio), else
    ``""``: what an error about an unknown key or option adds, so the fix is on the same line."""
    close = difflib.get_close_matches(name, sorted(set(valid)), n=3, cutoff=0.6)
    return f" (did you mean {' or '.join(repr(c) for c in close)}?)" if close else ""
