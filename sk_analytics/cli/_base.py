"""Shared pieces of the click CLIs: lazy sub-commands and error mapping."""

from __future__ import annotations

import importlib
import math
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from sk_analytics import interrupts
from sk_analytics.errors import EXIT_BAD_INPUT, EXIT_BROKEN_PIPE, EXIT_NEGATIVE, EXIT_OK, InternalError, SkTuneError
from sk_analytics.files.atomic import write_text
from sk_analytics.files.io_seam import error_exit_code, open_regular, reading
from sk_analytics.files.link_loop import loop_behind, loop_in, loop_message
from sk_analytics.lazy_module import module_exists as _module_exists
from sk_analytics.messages import LANGS, Messages, resolve_lang, tables


class LazyGroup(click.Group):
    """A click group whose sub-commands live in their own modules.

    Each command is imported only when used, which keeps ``--help`` and
    start-up fast (polars/scipy are not imported for a usage error) and lets
    every feature own one module. ``lazy_commands`` maps name -> "module:attr".
    """

    def __init__(self, *args: Any, lazy_commands: Mapping[str, str] | None = None, summaries: Mapping[str, str] | None = None,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy_commands = dict(lazy_commands or {})
        self.summaries = dict(summaries or {})
        """First help paragraph of lazy commands: the group's ``--help`` lists them without
        importing them (a test keeps each equal to its command's help)."""

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """click's command list, with the summaries of lazy commands instead of importing them
        (importing every command pulled Polars, SciPy and Arrow into ``--help``)."""
        names = [name for name in self.list_commands(ctx) if name in self.summaries and name not in self.commands]
        if not names:
            super().format_commands(ctx, formatter)
            return
        entries: list[tuple[str, str | click.Command]] = []
        for name in self.list_commands(ctx):
            if name in names:
                entries.append((name, self.summaries[name]))
                continue
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                entries.append((name, command))
        if entries:
            limit = formatter.width - 6 - max(len(name) for name, _ in entries)
            rows = [(name, _short_help(entry, limit)) for name, entry in entries]
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def list_commands(self, ctx: click.Context) -> list[str]:
        available = {name for name, target in self.lazy_commands.items() if _module_exists(target.split(":")[0])}
        return sorted(set(super().list_commands(ctx)) | available)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in self.lazy_commands and _module_exists(self.lazy_commands[cmd_name].split(":")[0]):
            module_name, attr = self.lazy_commands[cmd_name].split(":")
            command: click.Command = getattr(importlib.import_module(module_name), attr)
            return command
        return super().get_command(ctx, cmd_name)


def _short_help(entry: str | click.Command, limit: int) -> str:
    """The short help click shows for a command, or for a summary the way click shortens a help text."""
    command = entry if isinstance(entry, click.Command) else click.Command(None, help=entry)
    return command.get_short_help_str(limit)


def run_cli(group: click.Command, prog_name: str, argv: list[str] | None = None) -> int:
    """Run ``group``; map product errors to one stderr line and their exit code.

    Usage errors and unreadable files also become one line: a user never sees
    a usage block or a traceback for something they can fix. An exception that a
    SIGINT/SIGTERM caused, in whatever form it arrives (:mod:`sk_analytics.interrupts`),
    exits 130/143, never 70.
    """
    interrupts.clear()  # a signal of an earlier command run in this process does not count
    try:
        result = group.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except SkTuneError as exc:
        return _error(prog_name, argv, exc)
    except click.exceptions.Abort as exc:  # click's form of Ctrl-C (the interrupt is its cause)
        return _interrupted(prog_name, exc.__cause__, "aborted")
    except click.exceptions.NoArgsIsHelpError as exc:  # a bare group: its help is the answer
        exc.show()
        return exc.exit_code
    except click.ClickException as exc:
        click.echo(f"{_command_path(exc, prog_name)}: error: {' '.join(exc.format_message().split())}{_help_hint(exc)}", err=True)
        return EXIT_BAD_INPUT if exc.exit_code == click.ClickException.exit_code else exc.exit_code  # click's 1 is not ours
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except SystemExit as exc:  # click's answer to a closed stdout (EPIPE) is sys.exit(1), our "decision negative"
        if exc.code == 1 and _output_closed():
            return EXIT_BROKEN_PIPE
        raise
    except KeyboardInterrupt as exc:
        return _interrupted(prog_name, exc, "interrupted")
    except OSError as exc:  # a file the command could not open/read/write that no parser anticipated
        return _error(prog_name, argv, exc)
    except RuntimeError as exc:  # after click's Abort and Exit, which are RuntimeErrors too
        return _error(prog_name, argv, exc)
    except Exception as exc:  # a bug of ours: its own exit code, never 1 ("decision negative")
        return _unexpected(prog_name, sys.argv[1:] if argv is None else argv, exc)
    return int(result) if isinstance(result, int) else EXIT_OK


def _error(prog_name: str, argv: list[str] | None, exc: SkTuneError | OSError | RuntimeError) -> int:
    """One line for a product error or an OS error no parser anticipated (a file the command could
    not open/read/write); any other RuntimeError is an interrupt in disguise or a bug of ours (:func:`_unexpected`). Whatever a command
    made of a path that runs into a symbolic link loop ("not a folder", "File exists" ...), the
    line names the loop (exit 2): that is what the user has to fix."""
    loop = loop_behind(exc)
    if loop is not None:
        click.echo(f"{prog_name}: error: {loop_message(loop)}", err=True)
        return EXIT_BAD_INPUT
    if isinstance(exc, SkTuneError):
        for line in exc.details:
            click.echo(f"{prog_name}: error: {' '.join(line.split())}", err=True)
        click.echo(f"{prog_name}: error: {exc.one_line()}", err=True)
        return exc.exit_code
    if isinstance(exc, OSError):
        where = f"{exc.filename}: " if exc.filename else ""
        click.echo(f"{prog_name}: error: {where}{exc.strerror or exc}", err=True)
        return error_exit_code(exc)
    return _unexpected(prog_name, sys.argv[1:] if argv is None else argv, exc)


def _unexpected(prog_name: str, argv: Sequence[str], exc: Exception) -> int:
    """An exception no branch anticipated: an interrupt in disguise (Python 3.11 wraps one raised during class
    creation in a RuntimeError; a C extension may re-raise it as its own error) exits 130/143; anything else is a bug."""
    interrupt = interrupts.interrupt_of(exc)
    if interrupt is not None:
        return _interrupted(prog_name, interrupt, "interrupted")
    return _internal_error(prog_name, argv, exc)


def _output_closed() -> bool:
    """Whether click found stdout or stderr closed under it (EPIPE): it then swaps them for wrappers that swallow
    the flush of what could not be written."""
    return any(type(stream).__name__ == "_PacifyFlushWrapper" for stream in (sys.stdout, sys.stderr))


def run_main(group: click.Group, prog_name: str, argv: list[str] | None = None) -> int:
    """:func:`run_cli` as a program's ``main``: then SIGINT/SIGTERM are held until the exit. An interrupt that lands
    after run_cli mapped the command's outcome (in its ``finally``, or just before the hold) is still 130/143."""
    try:
        try:
            return run_cli(group, prog_name, argv)
        finally:
            interrupts.hold_at_exit()  # raises a signal that arrived just before; none can arrive after it
    except KeyboardInterrupt as exc:
        return interrupts.exit_code(interrupts.interrupt_of(exc) or exc)


class PathArg(click.Path):
    """``click.Path`` that names a symbolic link loop as one, before the command runs: the type of every
    path argument and option of sk-run and sk-analyze (a test walks the command tree to keep it so).

    A path that runs into a loop (the path itself or one of its folders) is refused whether or not
    it must exist: click says "does not exist" for one that must, and a command that creates its
    path said "File exists" or "not a folder" (docs/faults.md)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        loop = loop_in(value) if isinstance(value, (str, os.PathLike)) and value != "-" else None
        if loop is not None:
            self.fail(loop_message(loop), param, ctx)
        return super().convert(value, param, ctx)


class FiniteFloat(click.FloatRange):
    """``click.FloatRange`` that also refuses ``nan`` and ``inf``: the type of every float option of sk-run and sk-analyze.

    click lets ``nan`` through any range (every comparison with NaN is false) and ``inf`` through a range with
    no upper end; either one reached the commands as a number (``--noise nan`` ran, ``--duration nan`` never ended)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{number} is not a finite number.", param, ctx)
        return number


class ExistingPath(PathArg):
    """:class:`PathArg` that must exist (``click.Path(exists=True, ...)``)."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(exists=True, **kwargs)


def _internal_error(prog_name: str, argv: Sequence[str], exc: Exception) -> int:
    """One line naming the failing command and the file holding the traceback; exit 70 (EX_SOFTWARE)."""
    command = " ".join([prog_name, *[a for a in argv if not a.startswith("-")][:1]])
    saved = save_traceback(prog_name, argv, exc)
    where = f"traceback saved to {saved}" if saved is not None else "the traceback could not be saved"
    what = " ".join(f"{type(exc).__name__}: {exc}".split())[:300]
    click.echo(f"{command}: internal error ({what}); {where}. This is a bug in sk-tune, not a result: "
               "please report it with that file", err=True)
    return InternalError.exit_code


def save_traceback(prog_name: str, argv: Sequence[str], exc: BaseException) -> Path | None:
    """Write the traceback of ``exc`` to a new file in the temp folder; its path (None when it cannot be written)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    path = Path(tempfile.gettempdir()) / f"sk-tune-crash-{stamp}-{os.getpid()}.txt"
    text = "".join([f"{prog_name} {' '.join(argv)}\n", f"python {sys.version.split()[0]}\n\n",
                    *traceback.format_exception(type(exc), exc, exc.__traceback__)])
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except OSError:
        return None
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path


def _interrupted(prog_name: str, interrupt: BaseException | None, default: str) -> int:
    """Exit 130 for Ctrl-C; an interrupt that carries its own code (SIGTERM: 143) keeps it."""
    interrupt = None if interrupt is None else interrupts.interrupt_of(interrupt)  # a plain one: the signal recorded
    click.echo(f"{prog_name}: {getattr(interrupt, 'reason', default)}", err=True)
    return interrupts.exit_code(interrupt) if interrupt is not None else interrupts.EXIT_SIGINT


def _command_path(exc: click.ClickException, prog_name: str) -> str:
    ctx = getattr(exc, "ctx", None)
    return ctx.command_path if ctx is not None else prog_name


def _help_hint(exc: click.ClickException) -> str:
    """Usage errors point at ``--help`` on the same line instead of printing the usage block."""
    ctx = getattr(exc, "ctx", None)
    if not isinstance(exc, click.UsageError) or ctx is None:
        return ""
    return f" (see {ctx.command_path} --help)"


F = TypeVar("F", bound=Callable[..., Any])

OUTPUT_LABELS: dict[str, Messages] = tables("output.")
"""Labels of the lines that say where a command's outputs are, per ``--lang``."""


def lang_option(what: str) -> Callable[[F], F]:
    """``--lang zh|en`` of a command that prints or writes prose (``what``: "Report language."); without it the
    language comes from ``SK_LANG``, else the locale, else Chinese (:func:`sk_analytics.messages.resolve_lang`)."""
    return click.option("--lang", type=click.Choice(LANGS), default=None, callback=lambda _ctx, _param, value: resolve_lang(value),
                        help=f"{what} [default: SK_LANG, else the locale's zh/en, else zh]")


def write_or_check(path: Path, text: str, *, source: str, regenerate: str, check: bool) -> int:
    """Write a generated document, or with ``check`` exit 1 when ``path`` differs from ``text``.

    Shared by the generators of ``docs/schema.md``, ``docs/cli.md`` and the generated tables of the docs
    (``regenerate``: the command that writes ``path``): a test runs the check on the committed copy so a
    document can never drift from its source.
    """
    if check:
        current = None
        if os.path.lexists(path):  # a folder, a link loop, an unreadable file: named, never "out of date"
            with reading(path, "generated document", expected="a readable regular file"), \
                    open(open_regular(path, "generated document"), encoding="utf-8") as fh:  # a FIFO or /dev/zero: refused, never read
                current = fh.read()
        if current != text:
            click.echo(f"{path} is out of date with {source}: run `{regenerate}`", err=True)
            return EXIT_NEGATIVE
        click.echo(f"{path} is up to date")
        return EXIT_OK
    write_text(path, text)
    click.echo(f"wrote {path}")
    return EXIT_OK
