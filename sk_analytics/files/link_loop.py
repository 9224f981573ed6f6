"""A symbolic link loop is named as one, wherever a path runs into it.

Python hides a loop behind whatever the caller asked: ``Path.is_dir()`` and
``exists()`` say False (so a command says "not a folder", "session.json
missing", "no such file or folder"), ``mkdir`` says "File exists",
``Path.resolve`` raises ``RuntimeError`` (Python < 3.13). The user then looks
for a missing or misplaced file instead of the link that leads back to itself.
:func:`loop_in` finds the loop a path runs into; the CLIs use it on every path
argument before a command runs (``PathArg`` in :mod:`sk_analytics.cli._base`)
and on the path named by any bad-input error a command raises
(:func:`loop_behind`), so paths read from inside sessions and campaigns are
covered too.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

LOOP_EXPECTED = "a file or folder, or a link that leads to one"


def loop_message(loop: str) -> str:
    """The one-line description of a loop at ``loop`` (docs/faults.md)."""
    return f"{loop}: symbolic link loop (expected {LOOP_EXPECTED})"


def _loops(path: str) -> bool:
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno == errno.ELOOP
    except ValueError:  # a NUL byte in a name: not a path of the file system at all
        return False
    return False


def loop_in(path: str | os.PathLike[str]) -> str | None:
    """The part of ``path`` that is a symbolic link loop, or None when following it never loops.

    The part is the shortest prefix that loops: ``loop/sub/file`` names ``loop``. One
    ``stat`` when there is no loop (the common case), one per folder of the path when there is.
    """
    text = os.fsdecode(path)
    if not text or not _loops(text):
        return None
    for prefix in [*reversed(Path(text).parents), text]:
        if str(prefix) not in ("", ".", "/") and _loops(str(prefix)):
            return str(prefix)
    return text


def loop_behind(exc: BaseException) -> str | None:
    """The loop behind an error that names a path: an :class:`~sk_analytics.errors.InputError`'s
    file, an ``OSError``'s file names, or ``Path.resolve``'s ``RuntimeError`` for one; else None.

    Only bad input and OS errors are looked at: an integrity or environment error keeps its
    own message (a loop never hides evidence of tampering)."""
    from sk_analytics.errors import InputError

    if isinstance(exc, InputError):
        names = [exc.path]
    elif isinstance(exc, OSError):
        names = [exc.filename, exc.filename2]
    elif type(exc) is RuntimeError and str(exc).startswith(_RESOLVE_LOOP) and str(exc).endswith("'"):
        looped = str(exc)[len(_RESOLVE_LOOP):-1]
        return loop_in(looped) or looped
    else:
        return None
    for name in names:
        if isinstance(name, (str, bytes, os.PathLike)):
            loop = loop_in(name)
            if loop is not None:
                return loop
    return None


_RESOLVE_LOOP = "Symlink loop from '"
"""How ``Path.resolve`` (Python < 3.13) starts its RuntimeError for a loop."""
