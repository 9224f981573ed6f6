"""The agent on one host of a multi-host run: it holds that host's lease and starts that host's rank groups.

One agent per reserved host lives as long as the session holds its hosts (a
Ray actor in its placement-group bundle: :mod:`sk_runner.hosts.ray_hosts`).
At :meth:`HostAgent.start` it takes the host's device lease on the NPUs Ray
assigned to its bundle (under the run's lease root, else the host's
``SK_RUN_LEASE_ROOT``), and holds it until it is released or dies, so every
run of the session on this host is measured inside one lease. Each group is
one process started by :func:`sk_runner.process.run_process` (own process
group, hard timeout, killed with every descendant when the agent dies) with
this host's environment, scrubbed like a local run's, the lease's markers and
device mask, the workload contract and the group's variables. Plain Python:
the Ray wrapper adds nothing but where it runs, so the unit tests use it as is.
"""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sk_analytics.errors import EnvironmentBlocker
from sk_runner.config import scrub_env
from sk_runner.devices.lease import HeldLease, Holder, LeaseFault, LeaseRequest, lease_environ, lease_record, take
from sk_runner.devices.markers import ROOT_ENV, Need, lease_root_text
from sk_runner.fingerprint import env_hash
from sk_runner.process import kill_group, run_process
from sk_runner.process.faults import EnvironmentFault


def free_port() -> int:
    """A TCP port free on this host right now (the master port of one run)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("", 0))
        return int(sock.getsockname()[1])


class HostAgent:
    """One host's lease holder and group starter (see the module docstring)."""

    def __init__(self, index: int, device_ids: tuple[int, ...] | None, *, lease_root: str | None, lease_timeout_s: float,
                 session: str | None, command: str, env: Mapping[str, str] | None = None, name: str | None = None) -> None:
        self.index = index
        self.device_ids = device_ids
        self.env = dict(os.environ if env is None else env)
        root = lease_root or self.env.get(ROOT_ENV, "").strip() or None
        self.root = root
        self.request = LeaseRequest(None if root is None or not device_ids else Need(lease_root_text(root), tuple(sorted(device_ids))),
                                    lease_timeout_s)
        self.session, self.command = session, command
        self.lease: HeldLease | None = None
        self._lock = threading.Lock()
        self._running: dict[str, int] = {}
        self._stopped: set[str] = set()
        self._proofs: dict[str, Any] = {}
        self.name = name or socket.gethostname()

    # -- the lease ------------------------------------------------------------------
    def start(self) -> dict[str, Any]:
        """Take the host's lease (waits up to its timeout); ``{"lease": record}`` or ``{"fault": ...}`` naming why not."""
        if self.root is not None and not self.device_ids:  # a lease root is given: this host never runs unleased
            return {"fault": f"Ray assigned this host's bundle no NPU ids, so its NPUs cannot be leased under {self.root} "
                             "(does the node declare NPU as Ray's accelerator resource?); nothing ran"}
        try:
            self.lease = take(self.request, env=self.env, holder=Holder.current(self.session, self.command), on_wait=None)
        except LeaseFault as exc:
            return {"fault": exc.one_line(), "lease_blocked": exc.record()}
        except EnvironmentBlocker as exc:
            return {"fault": exc.one_line()}
        return {"lease": lease_record(self.lease), "timeout_s": self.request.timeout_s}

    def release(self) -> None:
        """Drop the lease (the kernel drops it too when this process dies)."""
        if self.lease is not None:
            self.lease.release()

    # -- one group ------------------------------------------------------------------
    def group_environ(self, contract_env: Mapping[str, str], group: Mapping[str, str]) -> dict[str, str]:
        """This host's scrubbed environment, the lease's markers and device mask, the contract, the group's variables."""
        return {**lease_environ(self.lease, scrub_env(self.env)), **contract_env, **group}

    def run(self, run_id: str, argv: list[str], cwd: str, contract_env: Mapping[str, str], group: Mapping[str, str],
            stdout_path: str, stderr_path: str, timeout_s: float | None) -> dict[str, Any]:
        """Run this host's group to its end (or timeout, or :meth:`stop`); the record :func:`~sk_runner.hosts.base.combine` takes."""
        env = self.group_environ(contract_env, group)

        def started(pid: int) -> None:
            with self._lock:
                self._running[run_id] = pid
                stop = run_id in self._stopped
            if stop:  # stopped before it ran: it ends now
                kill_group(pid, grace_s=1.0)

        try:
            result = run_process(argv, cwd=Path(cwd), env=env, stdout_path=Path(stdout_path), stderr_path=Path(stderr_path),
                                 timeout_s=timeout_s, on_start=started)
        except EnvironmentFault as exc:  # the group died of the machine (disk full …): the session raises this very fault
            return {"index": self.index, "fault": exc.one_line(), "environment_fault": exc.to_json()}
        except EnvironmentBlocker as exc:
            return {"index": self.index, "fault": exc.one_line()}
        except OSError as exc:  # the group's streams cannot be opened here (the session folder not writable on this host)
            return {"index": self.index, "fault": f"cannot start the group: {exc.strerror or exc} ({exc.filename or stdout_path})"}
        finally:
            with self._lock:
                self._running.pop(run_id, None)
        with self._lock:
            stopped = run_id in self._stopped
            self._stopped.discard(run_id)
        return {"index": self.index, "process": result, "stopped": stopped and not result.ok,
                "env_hash": env_hash({k: v for k, v in env.items() if k != "MASTER_PORT"}), "stdout": stdout_path, "stderr": stderr_path}

    def running(self, run_id: str) -> bool:
        """Whether the group of ``run_id`` has started here and not yet ended (what :meth:`stop` would end now)."""
        with self._lock:
            return run_id in self._running

    def stop(self, run_id: str, grace_s: float = 2.0) -> bool:
        """End the group of ``run_id`` (TERM, then KILL after ``grace_s``), also one that has not started yet."""
        with self._lock:
            self._stopped.add(run_id)
            pid = self._running.get(run_id)
        if pid is not None:
            kill_group(pid, grace_s=grace_s)
        return pid is not None

    def free_port(self) -> int:
        return free_port()

    def sees(self, path: str, content: str) -> str | None:
        """Why this host does not see the file ``path`` with ``content`` that the session's process wrote (None: it
        does): every host writes its group's logs into the session's folders, so they must share its storage."""
        try:
            found = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            return f"cannot read {path} there ({exc.strerror or type(exc).__name__})"
        return None if found == content else f"{path} holds other content there (another folder at the same path)"

    # -- the clean-device proof on this host -------------------------------------------
    def proof(self, phase: str, key: str, round_dir: str, round_name: str, backend: str, run: str = "", before: Any = None, after: Any = None,
              moved_to: str | None = None, first: int = 0) -> Any:
        """One step of the clean-device proof of this host's leased devices, kept per round like a one-host trial keeps
        its :class:`~sk_runner.devices.proof.CleanDeviceProof` (``key``: one trial's proof): ``before`` (waits for a foreign process to leave, at
        most the lease timeout), ``after`` (a :class:`~sk_runner.devices.proof.Sighting`), ``discard`` (every host's
        ``before``/``after``: this host records the run as not counted when it saw a foreign process, and blocks past the
        re-run limit; host ``first`` writes ``DISCARDED.json`` into ``moved_to``); it answers with its records so far.
        A blocker is ``{"fault": ...}``."""
        from sk_runner.devices.occupancy import occupancy_source
        from sk_runner.devices.proof import CleanDeviceProof

        if self.lease is None:
            return None
        proof = self._proofs.get(key)
        if proof is None:
            proof = self._proofs[key] = CleanDeviceProof(self.lease, occupancy_source(backend, self.env), Path(round_dir), round_name,
                                                         wait_s=self.lease.timeout_s, say=lambda text: None, host=self.name)
        try:
            if phase == "before":
                return proof.before(run)
            if phase == "after":
                return proof.after()
            mine = None if after is None else after[self.index]
            if phase == "discard" and mine is not None and not mine.clean:
                proof.discard(run, before[self.index], mine, Path(moved_to) if moved_to is not None and self.index == first else None)
            return list(proof.discarded)
        except EnvironmentBlocker as exc:
            return {"fault": f"host {self.index} ({self.name}): {exc.one_line()}"}
