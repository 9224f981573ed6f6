"""SIGINT and SIGTERM end a command with 130 / 143, whatever window they land in.

The handler (:func:`install`) *records* the signal, then raises :class:`Interrupted`
(a ``KeyboardInterrupt``) so the command unwinds as for Ctrl-C. Where it lands
decides what reaches the CLI's error mapping: usually the interrupt itself, but
Python 3.11 wraps one raised in ``__set_name__`` during class creation (a module
imported lazily, e.g. at the hand-off) in a ``RuntimeError``, and a C extension or
a broad ``except`` may turn it into any other exception. :func:`interrupt_of`
recognises the interrupt in an exception's ``__cause__``/``__context__`` chain,
or, failing that, by the recorded signal, so that such an exception is never
reported as a bug of sk-tune (exit 70). Standard library only: the CLIs install
the handler before they import anything heavy.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import Any, ClassVar

_received: int | None = None
HANDLED = (signal.SIGINT, signal.SIGTERM)
"""The signals a command turns into :class:`Interrupted` (and holds at its exit)."""
EXIT_SIGINT = 128 + signal.SIGINT
EXIT_SIGTERM = 128 + signal.SIGTERM


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM received by a command: unwinds like Ctrl-C, exits 128 + signal."""

    MEANINGS: ClassVar[dict[int, str]] = {
        EXIT_SIGINT: "interrupted (Ctrl-C, SIGINT) or aborted: every process the command started is killed; `--resume` continues "
                     "(docs/faults.md)",
        EXIT_SIGTERM: "terminated (SIGTERM to `sk-run` or `sk-analyze`): as 130",
    }
    """The exit codes of the handled signals and their one-line meanings (:func:`sk_analytics.errors.exit_codes`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum
        self.exit_code = 128 + signum
        self.reason = "terminated" if signum == signal.SIGTERM else "interrupted"


def note(signum: int) -> None:
    """Record that ``signum`` arrived (the handler's first act, before anything can go wrong)."""
    global _received
    _received = signum


def received() -> int | None:
    """The signal recorded since the last :func:`clear` (None: none)."""
    return _received


def clear() -> None:
    """Forget a recorded signal (a command starts: one that ended earlier in this process does not count)."""
    global _received
    _received = None


def _on_signal(signum: int, frame: Any) -> None:
    note(signum)
    raise Interrupted(signum)


def install(handler: Callable[[int, Any], None] = _on_signal) -> None:
    """SIGINT/SIGTERM -> ``handler`` (by default: recorded, then :class:`Interrupted`); main thread only.
    A handler of its own must call :func:`note` first.

    Both are unblocked too: a parent that started us with them blocked (a supervisor, a test harness
    after :func:`hold_at_exit`) would otherwise leave a Ctrl-C or a SIGTERM pending for ever, and the
    command would end with whatever it decided instead of 130/143; the processes it starts inherit the
    unblocked mask. And both are handled even when the parent ignored them (a shell's ``cmd &`` ignores
    SIGINT): Polars puts its own SIGINT handler over an inherited ignore on import, so an "ignored" Ctrl-C
    would still break whichever Polars call runs when it lands, at random; handled, it always ends the
    command with 130 and a resumable state (shield a background run with ``setsid``: docs/faults.md)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in HANDLED:
        signal.signal(sig, handler)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED)


def hold_at_exit() -> None:
    """Block SIGINT/SIGTERM once the command has its exit code: the interpreter's shutdown
    restores their default action, so a late Ctrl-C would kill it by signal (exit -2, no
    message) instead of letting it report what it decided. A signal that arrived just
    before is raised here (``pthread_sigmask`` runs pending handlers), never later."""
    if threading.current_thread() is threading.main_thread() and hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, HANDLED)


def interrupt_of(exc: BaseException) -> KeyboardInterrupt | None:
    """The interrupt behind ``exc``: ``exc`` itself or one in its cause/context chain when it is a
    ``KeyboardInterrupt``, else :class:`Interrupted` for the signal recorded, else None (a real error).
    A plain ``KeyboardInterrupt`` raised after the handler recorded a signal is that signal's: a C
    extension that runs the handler and raises its own (Ray's ``ray.wait``/``ray.get`` do) loses
    which signal it was, SIGTERM's 143 included."""
    seen: set[int] = set()
    todo: list[BaseException] = [exc]
    while todo:
        current = todo.pop()
        if isinstance(current, KeyboardInterrupt):
            return current if isinstance(current, Interrupted) or _received is None else Interrupted(_received)
        seen.add(id(current))
        todo += [e for e in (current.__cause__, current.__context__) if e is not None and id(e) not in seen]
    return None if _received is None else Interrupted(_received)


def exit_code(interrupt: BaseException) -> int:
    """130 for Ctrl-C (a plain ``KeyboardInterrupt`` too), 128 + signal for an :class:`Interrupted`."""
    code = getattr(interrupt, "exit_code", EXIT_SIGINT)
    return code if isinstance(code, int) else EXIT_SIGINT
