"""Owner of process lifetimes: every process sk-run starts dies with it.

On Linux each workload runs under a keeper (:mod:`sk_runner.process.keeper`), a child subreaper
that ends every descendant when the workload or sk-run ends. Three more layers, so that
no workload outlives the sk-run that started it (docs/faults.md "Processes and signals"):

1. **Marker.** Each process started through :func:`sk_runner.process.run_process`
   gets ``SK_TUNE_LIFETIME=<token>.<n>`` in its environment (appended to the markers
   of any sk-run above us); every descendant inherits it, also one that calls
   ``setsid()``. :func:`kill_spawn` ends all of one spawn's processes.
2. **Watchdog.** The first spawn starts ``python -m sk_runner.process.watchdog <token>`` in a
   session of its own, holding the read end of a pipe only we can write. When we
   die, by any signal, the pipe reaches EOF and the watchdog SIGKILLs every process
   carrying our token. Direct children also get ``PR_SET_PDEATHSIG(SIGKILL)``.
3. **Process table.** :func:`attach` records this owner (pid, kernel start time,
   token, watchdog pid) in ``<session>/.processes/<token>.json``, and first kills the
   survivors of every recorded owner that is dead (pid gone or reused): the path
   for a watchdog that was killed together with its owner.

Signals: :func:`install_signal_handlers` records SIGINT/SIGTERM
(:mod:`sk_analytics.interrupts`) and turns them into :class:`Interrupted` (exit 130/143); :func:`deferred_signals` holds one back while
a process is being started and registered, then raises it, so an interrupt never
lands inside ``Popen`` (where it used to be lost) and never leaves a child unowned.
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sk_analytics import interrupts
from sk_runner.process.watchdog import MARKER_ENV, has_proc, kill_marked, kill_tied

TABLE_DIR = ".processes"
"""Folder of a session holding one record per sk-run that started processes in it."""


Interrupted = interrupts.Interrupted
"""SIGINT or SIGTERM received by sk-run: unwinds like Ctrl-C, exits 128 + signal (:mod:`sk_analytics.interrupts`)."""
hold_signals_at_exit = interrupts.hold_at_exit


def start_ticks(pid: int) -> str | None:
    """Kernel start time of ``pid`` in clock ticks (tells a recorded process from a later one reusing its pid).

    Read from ``/proc/<pid>/stat`` itself, not through psutil: the raw count is the identity stored in
    process tables, campaign runs and registry entries, and psutil offers only a float derived from it."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def _owner_alive(pid: int, ticks: str | None) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    now = start_ticks(pid)
    return now is None or ticks is None or now == ticks


# ---------------------------------------------------------------------------- signals
_defer_lock = threading.Lock()
_defer_depth = 0
_pending: int | None = None


def _on_signal(signum: int, frame: Any) -> None:
    global _pending
    interrupts.note(signum)  # first: wherever the raise below lands, the CLI knows it was this signal
    if _defer_depth:
        _pending = signum  # raised when the process being started is owned
        return
    raise Interrupted(signum)


def install_signal_handlers() -> None:
    """SIGINT/SIGTERM -> :class:`Interrupted`, held back while a process starts (main thread only; no-op elsewhere)."""
    interrupts.install(_on_signal)


@contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGINT/SIGTERM back inside the block; raise :class:`Interrupted` at its end if one came."""
    global _defer_depth, _pending
    with _defer_lock:
        _defer_depth += 1
    try:
        yield
    finally:
        with _defer_lock:
            _defer_depth -= 1
            signum = _pending if _defer_depth == 0 else None
            if signum is not None:
                _pending = None
        if signum is not None:
            raise Interrupted(signum)


# ---------------------------------------------------------------------------- the owner
class _Owner:
    """This process as owner of the processes it starts (one per pid: a fork gets its own)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self.token = uuid.uuid4().hex[:16]
        self.seq = 0
        self.spawns: dict[int, str] = {}
        self.groups: dict[int, str | None] = {}
        """Live spawns' process groups (a spawn leads its own session) and their leaders' start ticks."""
        self.watchdog: subprocess.Popen[bytes] | None = None
        self.pipe: int | None = None
        self.tables: list[Path] = []
        self.lock = threading.Lock()
        atexit.register(self.close)

    def start_watchdog(self) -> None:
        if self.watchdog is not None:
            return
        read, write = os.pipe()  # both ends close-on-exec: no workload inherits the write end
        env = {k: v for k, v in os.environ.items() if k != MARKER_ENV}
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(Path(__file__).resolve().parents[1]), env.get("PYTHONPATH")) if p)
        try:
            self.watchdog = subprocess.Popen(  # noqa: S603 - fixed argv
                [sys.executable, "-m", "sk_runner.process.watchdog", self.token], stdin=read, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, env=env, start_new_session=True, close_fds=True)
        except OSError:  # no watchdog: the marker, pdeathsig and the process table remain
            os.close(write)
            return
        finally:
            os.close(read)
        self.pipe = write
        for table in self.tables:
            self.write_record(table)

    def announce(self, line: str) -> None:
        if self.pipe is None:
            return
        try:
            os.write(self.pipe, f"{line}\n".encode())
        except OSError:
            pass

    def record(self) -> dict[str, Any]:
        return {"token": self.token, "pid": self.pid, "start_ticks": start_ticks(self.pid), "host": socket.gethostname(),
                "watchdog_pid": None if self.watchdog is None else self.watchdog.pid, "argv": sys.argv[:8],
                "groups": [{"pgid": pid, "start_ticks": ticks} for pid, ticks in sorted(self.groups.items())]}

    def write_record(self, folder: Path) -> None:
        from sk_analytics.files.atomic import write_json  # here: `sk-run --help` installs the handlers without it

        # the folder it works in: a copy of the session (cp -a) carries the record, and tells itself from the original by it
        write_json(folder / TABLE_DIR / f"{self.token}.json", {**self.record(), "folder": str(folder)})

    def rewrite_records(self) -> None:
        """Bring every session's record up to date with the live groups (best effort: a
        session that cannot take the write keeps the older record, the marker still finds them)."""
        for table in self.tables:
            try:
                self.write_record(table)
            except Exception:  # noqa: BLE001 - a failed bookkeeping write must never fail or orphan the spawn
                pass

    def close(self) -> None:
        """Normal exit: kill what is left of our spawns, let the watchdog go, drop our records."""
        if os.getpid() != self.pid:
            return
        if self.spawns and has_proc():
            kill_tied([self.token], set(self.groups), timeout_s=5.0)
        if self.pipe is not None:
            os.close(self.pipe)
            self.pipe = None
        for table in self.tables:
            try:
                (table / TABLE_DIR / f"{self.token}.json").unlink(missing_ok=True)
            except OSError:  # a read-only or vanished session: the next sk-run drops the record (owner dead)
                pass


_owner: _Owner | None = None
_owner_lock = threading.Lock()


def owner() -> _Owner:
    """This process's owner (created on first use; a forked child gets a new one)."""
    global _owner
    with _owner_lock:
        if _owner is None or _owner.pid != os.getpid():
            _owner = _Owner()
        return _owner


def child_env(env: Mapping[str, str]) -> tuple[dict[str, str], str]:
    """``env`` plus a new spawn marker (after ours from above); returns (env, spawn id)."""
    own = owner()
    with own.lock:
        own.seq += 1
        spawn = f"{own.token}.{own.seq}"
    inherited = os.environ.get(MARKER_ENV, "")
    return {**env, MARKER_ENV: f"{inherited} {spawn}".strip()}, spawn


def spawned(pid: int, spawn: str) -> None:
    """Register a started process (call before anything can interrupt us)."""
    own = owner()
    own.start_watchdog()
    own.spawns[pid] = spawn
    own.groups[pid] = start_ticks(pid)
    own.announce(str(pid))
    own.rewrite_records()


def ended(pid: int) -> None:
    """The process group of ``pid`` was reaped: kill escapees of its spawn (``setsid``) and forget it."""
    own = owner()
    spawn = own.spawns.pop(pid, None)
    if spawn is not None:
        kill_spawn(spawn)
    own.announce(f"-{pid}")
    if own.groups.pop(pid, None) is not None or spawn is not None:
        own.rewrite_records()


def spawn_marker(pid: int) -> str | None:
    """The marker of a process this owner started (for records that outlive us)."""
    return owner().spawns.get(pid)


def kill_spawn(marker: str, timeout_s: float = 10.0) -> list[int]:
    """SIGKILL every live process carrying ``marker``, and their descendants (Linux; elsewhere nothing to find)."""
    return kill_marked([marker], timeout_s=timeout_s) if has_proc() else []


def recorded_groups(record: Mapping[str, Any]) -> set[int]:
    """The process groups of a dead owner's record that are still its own: a group whose leader
    is gone (its id cannot be reused while members remain) or alive with the recorded start ticks."""
    groups: set[int] = set()
    for item in record.get("groups") or []:
        try:
            pgid, ticks = int(item["pgid"]), item.get("start_ticks")
        except (KeyError, TypeError, ValueError, AttributeError):
            continue
        now = start_ticks(pgid)
        if pgid > 1 and (now is None or ticks is None or now == ticks):
            groups.add(pgid)
    return groups


def reap_survivors(folder: Path) -> list[int]:
    """Kill the processes of every recorded owner of ``folder`` that is dead; drop their records.

    Records of live owners (another sk-run working in the same session) and of
    other hosts (a session on shared storage) are left alone.
    """
    from sk_analytics.errors import SkTuneError
    from sk_analytics.files.strict_json import load_json_file

    table = Path(folder) / TABLE_DIR
    killed: list[int] = []
    host = socket.gethostname()
    for path in sorted(table.glob("*.json")) if table.is_dir() else []:
        try:
            rec = load_json_file(path)
            token, pid = str(rec["token"]), int(rec["pid"])
        except (OSError, SkTuneError, KeyError, TypeError, ValueError):  # torn record: nothing we could safely kill
            path.unlink(missing_ok=True)
            continue
        if rec.get("host") != host or token == owner().token or _owner_alive(pid, rec.get("start_ticks")):
            continue
        killed += kill_tied([token], recorded_groups(rec)) if has_proc() else []
        path.unlink(missing_ok=True)
    return killed


@dataclass(frozen=True)
class Elsewhere:
    """A live sk-run process that a copied folder's process table records as working in another folder."""

    pid: int
    command: str
    folder: Path

    def describe(self) -> str:
        return f"pid {self.pid} ({self.command}) in {self.folder}"


def writing_elsewhere(folder: Path) -> list[Elsewhere]:
    """The live sk-run processes on this host that ``folder``'s process table records as working in another folder
    (:class:`Elsewhere`): ``folder`` may be a copy (``cp -a``) of a session they still work on. Records of other
    hosts, of dead owners (a reused pid has other start ticks) and of owners recorded before records named their
    folder are left out."""
    from sk_analytics.errors import SkTuneError
    from sk_analytics.files.strict_json import load_json_file

    table = Path(folder) / TABLE_DIR
    here, host, found = Path(folder).absolute(), socket.gethostname(), []
    for path in sorted(table.glob("*.json")) if table.is_dir() else []:
        try:
            rec = load_json_file(path)
            pid, where = int(rec["pid"]), rec.get("folder")
        except (OSError, SkTuneError, KeyError, TypeError, ValueError):
            continue
        if (not isinstance(where, str) or rec.get("host") != host or rec.get("token") == owner().token
                or not _owner_alive(pid, rec.get("start_ticks")) or _same_folder(Path(where), here)):
            continue
        argv = rec.get("argv")
        command = " ".join(str(a) for a in argv) if isinstance(argv, list) else "?"
        found.append(Elsewhere(pid, command, Path(where)))
    return found


def _same_folder(a: Path, b: Path) -> bool:
    try:
        return a.samefile(b)
    except OSError:
        return a == b


def attach(folder: Path) -> list[int]:
    """Make ``folder`` (a session) record this owner; first end survivors of dead earlier owners there.

    Every engine (trial, probe, profile, sweep) calls it before starting anything in the
    session, so survivors of an earlier sk-run there die first. Returns the pids killed. The folder is kept
    absolute: the owner outlives one command (an in-process caller may chdir before the next
    record rewrite), and a relative path would then plant a session folder in the new cwd.
    """
    folder = Path(folder).absolute()
    killed = reap_survivors(folder)
    own = owner()
    own.start_watchdog()
    if folder not in own.tables:
        own.tables.append(folder)
        own.write_record(folder)
    return killed
