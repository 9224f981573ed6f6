"""The shared-NPU lease (protocol §9): ``flock`` on ``<root>/npu-device-<id>.lock``, in ascending id order.

``fcntl.flock`` is the primitive another program's Python holder uses on the
same files, so either excludes the other. On Linux a ``flock`` and a POSIX record
lock (``fcntl.lockf``, ``F_SETLK``) never conflict, so each device is also locked
with an open-file-description record lock (``F_OFD_SETLK``, whole file) on the
same descriptor: it conflicts with POSIX and OFD locks of any other holder, so a
holder of either style keeps us waiting and sees the device as held. Unlike a
POSIX lock (``lockf``), it is not dropped when this process closes some other
descriptor of the file (reading a holder record does). The kernel drops both
locks when their holder dies, even by SIGKILL, so a killed sk-run never leaves a
device leased.
The holder writes who it is (pid, host, command, session, time) into each lock
file it holds, so the next waiter can name it; a holder that writes nothing,
such as another program, is named by the pid and command line ``/proc/locks``
gives (an OFD lock, listed there with pid -1: the process whose ``/proc/<pid>/fdinfo`` lists it; "unknown holder"
where no process we can see holds it). A process started under the
exact markers of its parent's lease inherits it and takes no lock
(:mod:`sk_runner.devices.markers` decides). One API for every caller, also a
per-host group of a multi-host trial::

    with acquire(Need(root, (0, 1)), timeout_s=600, holder=Holder.current()) as lease:
        env = lease.environ(os.environ)   # the markers and ASCEND_RT_VISIBLE_DEVICES for the children
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shlex
import socket
import struct
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any

from sk_analytics.errors import EnvironmentBlocker
from sk_analytics.messages import coded, render
from sk_runner.devices.holders import HOLDER_COMMAND_CHARS, ancestors, command_of, kernel_holder, lock_holders, visible
from sk_runner.devices.markers import ACQUIRED, INHERITED, MARKERS, Need, child_variables, decide, format_ids, lease_markers
from sk_runner.process import one_line, process_alive

DEFAULT_LEASE_TIMEOUT_S = 600.0
"""How long a command waits for a busy device before it gives up (exit 3; ``--lease-timeout``)."""
POLL_S = 0.05
"""Seconds between two tries of a busy lock: the next waiter gets a released device within this."""
HOLDER_LIMIT = 64 * 1024
"""Bytes of a lock file read for its holder record: room for every record this module writes (a command of
:data:`HOLDER_COMMAND_CHARS` characters, a host name, a session path of up to PATH_MAX characters, each JSON-escaped)."""
UNKNOWN_HOLDER = "unknown holder"


def lock_path(root: str | os.PathLike[str], device: int) -> Path:
    """``<root>/npu-device-<id>.lock``: the protocol's lock file of one device."""
    return Path(root) / f"npu-device-{device}.lock"


@dataclass(frozen=True)
class Holder:
    """Who holds a lease, as written into each lock file for the next waiter."""

    pid: int
    host: str
    command: str
    session: str | None
    since_ns: int

    @classmethod
    def current(cls, session: str | os.PathLike[str] | None = None, command: str | None = None) -> Holder:
        """This process (its command line from ``sys.argv``, or ``command``: the first :data:`HOLDER_COMMAND_CHARS`
        characters, so that the record stays readable whatever argv a launcher gives), optionally working on ``session``."""
        said = one_line(command if command is not None else shlex.join(sys.argv))[:HOLDER_COMMAND_CHARS]
        return cls(os.getpid(), socket.gethostname(), said,
                   None if session is None else os.path.abspath(os.fspath(session)), time.time_ns())

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "since": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(self.since_ns / 1e9))}

    def describe(self) -> str:
        session = f", session {self.session}" if self.session else ""
        since = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.since_ns / 1e9))
        return f"pid {self.pid} on {self.host} ({self.command}{session}) since {since}"


def read_holder(path: Path) -> str:
    """Who holds the lock file at ``path``, in one phrase: what the file says of its holder, else the pid and command
    line ``/proc/locks`` names (:func:`~sk_runner.devices.holders.kernel_holder`), else ``unknown holder``."""
    said = _file_holder(path)
    if said is not None and not said.startswith(UNKNOWN_HOLDER):
        return said
    named = kernel_holder(path)
    if named is None:
        return said or UNKNOWN_HOLDER
    return named if said is None else named + said[len(UNKNOWN_HOLDER):]  # keeps "(the file still names pid …)"


def _file_holder(path: Path) -> str | None:
    """What the lock file says of its holder (None: nothing readable)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return None
    try:
        raw = os.read(fd, HOLDER_LIMIT)
    except OSError:
        return None
    finally:
        os.close(fd)
    try:
        data = json.loads(raw.decode("utf-8").splitlines()[0])
        holder = Holder(int(data["pid"]), str(data["host"]), str(data["command"]), data.get("session"), int(data["since_ns"]))
    except (ValueError, KeyError, TypeError, IndexError, UnicodeDecodeError):
        return None
    if holder.host == socket.gethostname() and not process_alive(holder.pid):
        return f"{UNKNOWN_HOLDER} (the file still names pid {holder.pid}, which has exited)"
    return holder.describe()


@dataclass(frozen=True)
class Busy:
    """A device whose lock another holder has: the device, its lock file and what the file says of the holder."""

    device: int
    path: Path
    holder: str

    def to_json(self) -> dict[str, Any]:
        return {"device": self.device, "lock": str(self.path), "holder": self.holder}


class LeaseFault(EnvironmentBlocker):
    """The lease could not be had: ``blocked`` with ``lease_mode`` null (protocol §9), an environment blocker (exit 3)."""

    reason = "blocked"

    def record(self) -> dict[str, Any]:
        """The ``lease_blocked`` record of a command that ran nothing."""
        return {"lease_mode": None, "reason": self.reason, "message": self.one_line()}


MARKERS_UNSET = "env " + " ".join(f"-u {name}" for name in MARKERS)
"""The prefix that runs a command without a parent's lease markers."""


def then_run(exc: BaseException, command: str) -> str:
    """What to do after ``exc`` stopped a command, ending with ``command``, the one that works: once the cause is
    freed; outside the stale or foreign lease markers that refused it, where they did (they would refuse it again)."""
    if isinstance(exc, LeaseFault) and exc.reason in ("marker_conflict", "stale_markers"):
        return f"Run it without the lease markers (or under the parent that holds the lease): {MARKERS_UNSET} {command}"
    return f"Free the cause, then: {command}"


class LeaseBlocked(LeaseFault):
    """A device stayed leased by someone else past the timeout."""

    reason = "contention"

    def __init__(self, need: Need, busy: Busy, waited_s: float, timeout_s: float) -> None:
        super().__init__(f"NPU {busy.device} is still leased by {busy.holder} after {waited_s:.1f} s (--lease-timeout {timeout_s:g}): "
                         f"{busy.path}; nothing ran")
        self.need, self.busy, self.waited_s, self.timeout_s = need, busy, waited_s, timeout_s

    def record(self) -> dict[str, Any]:
        """Root, devices, the busy one and its holder, how long it waited."""
        return {**super().record(), "root": self.need.root, "device_ids": list(self.need.device_ids), "busy": self.busy.to_json(),
                "waited_s": round(self.waited_s, 3), "timeout_s": self.timeout_s}


class LeaseRefused(LeaseFault):
    """Partial or foreign lease markers: fail closed (protocol §9), before any process or lock."""

    reason = "marker_conflict"

    def __init__(self, reason: str) -> None:
        super().__init__(f"{reason}; refusing to run (protocol §9: a marker conflict fails closed)")


class LeaseStale(LeaseFault):
    """Complete markers naming a lease nobody in this process's tree holds: its holder is gone (or is a stranger).

    Raised before any process or lock (nothing ran); the one line names the first such device, the count, the markers."""

    reason = "stale_markers"

    def __init__(self, need: Need, device: int, path: Path, problem: str, count: int) -> None:
        shown = ", ".join(f"{k}={v}" for k, v in lease_markers(need.root, need.device_ids).items())
        more = f" (and {count - 1} more of the {len(need.device_ids)} marked devices)" if count > 1 else ""
        super().__init__(f"NPU {device} of the inherited lease: {problem} ({path}){more}: the markers {shown} are stale, "
                         f"their holder is not this process's parent; nothing ran. Start sk-run without the {'/'.join(MARKERS)} "
                         "markers (it then takes the lease itself with --lease-root/--device-id), or from the process that holds the lease")
        self.need, self.device, self.path, self.problem = need, device, path, problem

    def record(self) -> dict[str, Any]:
        return {**super().record(), "root": self.need.root, "device_ids": list(self.need.device_ids), "device": self.device,
                "lock": str(self.path), "problem": self.problem}


def inherited_problem(path: Path, tree: Iterable[int]) -> dict[str, Any] | None:
    """Why the lock at ``path`` is not held for a child that inherits it, as a recorded message (:func:`coded`;
    None: it is, as far as can be seen).

    The lock must be busy (a non-blocking attempt fails: someone holds it) and, where the kernel's lock table names a
    live holder, that holder must be in ``tree`` (this process and its ancestors): the parent that exported the markers.
    A POSIX or OFD record lock counts as a lock (:func:`_try_lock`). Our own attempt, when it succeeds, is dropped at
    once (a separate open file: nobody's lock is touched)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except FileNotFoundError:
        return coded("lease.lock_file_missing")
    except OSError as exc:
        return coded("lease.lock_unopenable", **_os_error(exc))
    try:
        if _try_lock(fd):
            return coded("lease.lock_free")
    finally:
        os.close(fd)
    family = set(tree)
    strangers = [pid for pid in lock_holders(path) or () if visible(pid) and pid not in family]
    if strangers:
        return coded("lease.lock_stranger", **_named(strangers[0]))
    return None


def _os_error(exc: OSError) -> dict[str, str]:
    """The facts of an OS error a message names: its errno name (``EACCES``) and the system's words for it."""
    return {"error": errno.errorcode.get(exc.errno or 0, str(exc.errno)), "strerror": exc.strerror or str(exc)}


def _named(pid: int) -> dict[str, Any]:
    """The facts that name a lock holder: its pid and command line (the message for an unknown one where unreadable)."""
    return {"pid": pid, "command": command_of(pid) or coded("device.unknown_command")}


def prove_inherited(need: Need) -> None:
    """Raise :class:`LeaseStale` unless every marked device's lock is held by this process's tree (protocol §9's
    inherit, proven: the parent holds the locks, so our non-blocking attempt fails as it should)."""
    tree = ancestors()
    problems = [(d, lock_path(need.root, d)) for d in need.device_ids]
    found = [(d, path, why) for d, path in problems if (why := inherited_problem(path, tree)) is not None]
    if found:
        device, path, why = found[0]
        raise LeaseStale(need, device, path, render(why, "en"), len(found))


@dataclass
class HeldLease:
    """A lease this process holds (``acquired``: its lock descriptors) or runs under (``inherited``: none)."""

    mode: str
    root: str
    device_ids: tuple[int, ...]
    timeout_s: float = DEFAULT_LEASE_TIMEOUT_S
    """How long its holder waits for the devices (also for a foreign process to leave them before a clean run)."""
    _fds: list[int] = field(default_factory=list, repr=False)

    def markers(self) -> dict[str, str]:
        """The three markers and the device mask every child of the holder gets."""
        return child_variables(self.root, self.device_ids)

    def environ(self, base: Mapping[str, str]) -> dict[str, str]:
        """``base`` with this lease's markers and ``ASCEND_RT_VISIBLE_DEVICES`` (rank i on the i-th leased device)."""
        return {**base, **self.markers()}

    def record(self) -> dict[str, Any]:
        """What run records carry: ``mode`` (acquired | inherited), ``root``, ``device_ids``."""
        return {"mode": self.mode, "root": self.root, "device_ids": list(self.device_ids)}

    def lock_problems(self) -> list[tuple[int, dict[str, Any]]]:
        """(device, why: a recorded message, :func:`coded`) for every device whose lock is no longer this lease's, as far as can be seen now: an
        acquired lock whose file was removed or replaced (another process can lock the new file at that path), an
        inherited one nobody in this process's tree holds any more. Checked around every clean run: a run with a
        problem is not counted (:mod:`sk_runner.devices.proof`)."""
        found: list[tuple[int, dict[str, Any]]] = []
        if self.mode == ACQUIRED:
            for device, fd in zip(self.device_ids, self._fds, strict=True):
                why = _replaced(lock_path(self.root, device), fd)
                if why is not None:
                    found.append((device, why))
            return found
        tree = ancestors()
        for device in self.device_ids:
            why = inherited_problem(lock_path(self.root, device), tree)
            if why is not None:
                found.append((device, why))
        return found

    @property
    def held(self) -> bool:
        """Whether this object still holds its locks (always False for an inherited lease)."""
        return bool(self._fds)

    def release(self) -> None:
        """Clear the holder records and drop every lock (idempotent; a no-op for an inherited lease)."""
        fds, self._fds = self._fds, []
        for fd in reversed(fds):
            _drop(fd, clear=True)

    def __enter__(self) -> HeldLease:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.release()


UNLEASED: dict[str, Any] = {"mode": None, "root": None, "device_ids": None}
"""The lease record of a run that held no lease."""


def lease_record(lease: HeldLease | None) -> dict[str, Any]:
    """The record of ``lease`` (:data:`UNLEASED` for None)."""
    return dict(UNLEASED) if lease is None else lease.record()


def lease_environ(lease: HeldLease | None, base: Mapping[str, str]) -> dict[str, str]:
    """``base`` plus the lease's child variables (unchanged without a lease)."""
    return dict(base) if lease is None else lease.environ(base)


def with_devices(environment: Mapping[str, Any], lease: HeldLease | None) -> dict[str, Any]:
    """The environment part of a fingerprint with the leased device ids (unchanged without a lease):
    runs on other devices are another environment."""
    return dict(environment) if lease is None else {**environment, "device_ids": list(lease.device_ids)}


def lease_devices(lease: HeldLease | LeaseRequest | None) -> tuple[int, ...] | None:
    """The device ids a held lease or a request names (None: none)."""
    if isinstance(lease, HeldLease):
        return lease.device_ids
    if lease is not None and lease.need is not None:
        return lease.need.device_ids
    return None


def _open(path: Path) -> tuple[int, bool]:
    """The lock file's descriptor (created if needed) and whether it can take the holder record."""
    flags = os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
    try:
        return os.open(path, os.O_RDWR | flags, 0o666), True
    except PermissionError:  # another user's lock file: flock works on a read-only descriptor too
        pass
    except OSError as exc:
        raise _open_fault(path, exc) from exc
    try:
        return os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0)), False
    except OSError as exc:
        raise _open_fault(path, exc) from exc


def _open_fault(path: Path, exc: OSError) -> EnvironmentBlocker:
    what = "is a symbolic link (refused)" if exc.errno == errno.ELOOP else f"cannot be opened ({exc.strerror or exc})"
    return EnvironmentBlocker(f"device lock {path} {what}")


def _try_lock(fd: int) -> bool:
    """Take ``fd``'s exclusive ``flock`` and its whole-file OFD record lock without waiting (False: another holder has
    either; nothing is kept). The record lock is a write lock, a read lock on a read-only descriptor (another user's
    lock file): that one still conflicts with every foreign write lock and keeps foreign writers out."""
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    if _record_lock(fd):
        return True
    fcntl.flock(fd, fcntl.LOCK_UN)  # a POSIX or OFD holder has the file: wait for it without blocking sk-run's waiters
    return False


_OFD_SETLK: int | None = getattr(fcntl, "F_OFD_SETLK", None)
"""Linux >= 3.15 (Python >= 3.9); elsewhere only the ``flock`` stands."""


def _record_lock(fd: int) -> bool:
    """Take a whole-file OFD record lock on ``fd`` without waiting (False: a POSIX or OFD lock of another holder
    conflicts). True where the kernel has no OFD locks: only the ``flock`` stands there."""
    if _OFD_SETLK is None:
        return True
    kind = fcntl.F_RDLCK if (fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE) == os.O_RDONLY else fcntl.F_WRLCK
    try:  # struct flock: l_type, l_whence, l_start, l_len (0: to the end, however it grows), l_pid (0 for OFD locks)
        fcntl.fcntl(fd, _OFD_SETLK, struct.pack("hhqqi4x", kind, os.SEEK_SET, 0, 0, 0))
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.EACCES):
            return False
        if exc.errno == errno.EINVAL:  # a kernel without OFD locks
            return True
        raise
    return True


def _replaced(path: Path, fd: int) -> dict[str, Any] | None:
    """Why the file at ``path`` is no longer the one ``fd`` locks, as a recorded message (None: it still is)."""
    try:
        now = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return coded("lease.lock_removed")
    except OSError as exc:
        return coded("lease.lock_unreadable", **_os_error(exc))
    mine = os.fstat(fd)
    if (now.st_dev, now.st_ino) == (mine.st_dev, mine.st_ino):
        return None
    holders = [pid for pid in lock_holders(path) or () if visible(pid)]
    return coded("lease.lock_replaced_held", **_named(holders[0])) if holders else coded("lease.lock_replaced")


def _holder_bytes(holder: Holder) -> bytes:
    return (json.dumps(holder.to_json(), ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")


def _write_holder(fd: int, data: bytes) -> None:
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, data, 0)
    except OSError:  # a full disk keeps the lock; the next waiter just cannot name us
        pass


def _drop(fd: int, *, clear: bool) -> None:
    if clear:
        try:
            os.ftruncate(fd, 0)
        except OSError:
            pass
    os.close(fd)  # the only descriptor of this open file: closing it drops the flock and the OFD lock


def _announce(busy: Busy, timeout_s: float) -> None:
    """The default progress line of a wait: which device, who holds it, for how long we wait."""
    print(f"sk-run: NPU {busy.device} is leased by {busy.holder}; waiting up to {timeout_s:g} s (--lease-timeout) "
          f"for {busy.path}", file=sys.stderr, flush=True)


WaitFn = Callable[[Busy, float], None]


def acquire(need: Need, *, timeout_s: float = DEFAULT_LEASE_TIMEOUT_S, holder: Holder | None = None,
            on_wait: WaitFn | None = _announce, poll_s: float = POLL_S) -> HeldLease:
    """Lock every device of ``need`` in ascending order, waiting at most ``timeout_s`` in all.

    A busy device is tried again every ``poll_s``; ``on_wait(busy, timeout_s)`` is told once per
    (device, holder) waited for. Past the timeout every lock taken so far is dropped and
    :class:`LeaseBlocked` names the busy device and its holder.
    """
    holder = holder or Holder.current()
    root = Path(need.root)
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EnvironmentBlocker(f"lease root {root} cannot be created ({exc.strerror or exc})") from exc
    started = time.monotonic()
    deadline = started + max(0.0, timeout_s)
    record = _holder_bytes(holder)
    held: list[int] = []
    told: tuple[int, str] | None = None
    try:
        for device in sorted(need.device_ids):
            path = lock_path(root, device)
            fd, writable = _open(path)
            try:
                while not _try_lock(fd):
                    busy = Busy(device, path, read_holder(path))
                    now = time.monotonic()
                    if now >= deadline:
                        raise LeaseBlocked(need, busy, now - started, timeout_s)
                    if on_wait is not None and told != (device, busy.holder):
                        told = (device, busy.holder)
                        on_wait(busy, timeout_s)
                    time.sleep(min(poll_s, deadline - now))
            except BaseException:
                _drop(fd, clear=False)
                raise
            held.append(fd)
            if writable:
                _write_holder(fd, record)
    except BaseException:
        for fd in reversed(held):
            _drop(fd, clear=True)
        raise
    return HeldLease(ACQUIRED, need.root, tuple(sorted(need.device_ids)), timeout_s, held)


@dataclass(frozen=True)
class LeaseRequest:
    """What a command was asked for: the lease it needs (None: none asked) and how long to wait for it."""

    need: Need | None
    timeout_s: float = DEFAULT_LEASE_TIMEOUT_S
    unleased: bool = False
    """The user opted out of a lease explicitly (``--unleased``): recorded, and no lease is taken."""

    def describe(self) -> str:
        if self.need is None:
            return "no device lease (--unleased)" if self.unleased else "no device lease"
        return f"devices {format_ids(self.need.device_ids)} under {self.need.root}"


def take(request: LeaseRequest, *, env: Mapping[str, str], holder: Holder | None = None,
         on_wait: WaitFn | None = _announce) -> HeldLease | None:
    """Acquire-or-inherit ``request`` for a process started with ``env`` (None: no lease asked, no markers).

    Raises :class:`LeaseRefused` for partial or foreign markers and :class:`LeaseBlocked` past the timeout."""
    decision = decide(env, request.need)
    if decision.action == "none":
        return None
    if decision.action == "refuse":
        raise LeaseRefused(decision.reason)
    assert decision.need is not None
    if decision.action == "inherit":
        prove_inherited(decision.need)
        return HeldLease(INHERITED, decision.need.root, decision.need.device_ids, request.timeout_s)
    return acquire(decision.need, timeout_s=request.timeout_s, holder=holder, on_wait=on_wait)


LeaseLike = HeldLease | LeaseRequest | None
"""What an engine accepts: a lease its caller holds, a request to take for its own duration, or none."""


@contextmanager
def hold(lease: LeaseLike, *, env: Mapping[str, str], session: str | os.PathLike[str] | None = None,
         on_wait: WaitFn | None = _announce) -> Iterator[HeldLease | None]:
    """The lease for one engine call: a held one as it is (its owner releases it), a request taken now and
    released at the end, or None."""
    if lease is None or isinstance(lease, HeldLease):
        yield lease
        return
    taken = take(lease, env=env, holder=Holder.current(session), on_wait=on_wait)
    try:
        yield taken
    finally:
        if taken is not None:
            taken.release()


class LazyLease:
    """A lease taken at its first use and held until :meth:`release` (a sweep: from its first device command
    to its hand-off). ``on_blocked`` sees a :class:`LeaseFault` before it propagates (the ledger records it)."""

    def __init__(self, request: LeaseRequest | None, *, env: Mapping[str, str], session: str | os.PathLike[str] | None = None,
                 on_blocked: Callable[[LeaseFault], None] | None = None) -> None:
        self.request, self.env, self.session, self.on_blocked = request, dict(env), session, on_blocked
        self._taken = False
        self._lease: HeldLease | None = None

    def held(self) -> HeldLease | None:
        """The lease, taken now if this is its first use (None: the command runs unleased)."""
        if not self._taken and self.request is not None:
            try:
                self._lease = take(self.request, env=self.env, holder=Holder.current(self.session))
            except LeaseFault as exc:
                if self.on_blocked is not None:
                    self.on_blocked(exc)
                raise
            self._taken = True
        return self._lease

    @property
    def lease(self) -> HeldLease | None:
        """The lease if it was taken already (never takes it)."""
        return self._lease

    def release(self) -> None:
        if self._lease is not None:
            self._lease.release()
