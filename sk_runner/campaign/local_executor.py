"""The local sequential path: sessions one after another on this machine, without Ray."""

from __future__ import annotations

import socket
from collections.abc import Callable
from concurrent.futures import (
    FIRST_COMPLETED,
    CancelledError,
    Future,
    ThreadPoolExecutor,
    wait,
)
from pathlib import Path

from sk_runner.campaign import storage
from sk_runner.campaign.job import Job, JobResult, NodeInfo, run_job
from sk_runner.process import kill_group


class LocalExecutor:
    """Runs one job at a time in a worker thread; this machine is the only node."""

    kind = "local"

    def __init__(self) -> None:
        host = socket.gethostname()
        self.node = NodeInfo(f"local-{host}", host, host)
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sk-campaign")
        self._pids: dict[str, int] = {}
        self._cancelled: set[str] = set()
        self._stopping = False

    def nodes(self) -> list[NodeInfo]:
        return [self.node]

    def capacity(self) -> None:
        """No check: the sessions run one at a time on this machine whatever resources they name."""
        return None

    def node_alive(self, node_id: str, settle_s: float = 0.0) -> bool:
        return node_id == self.node.node_id

    def check_storage(self, root: Path, needs: list[dict[str, float]]) -> list[dict[str, str]]:
        token = storage.write_driver_token(root)
        return storage.verdict(root, token, {self.node.node_id: (self.node.node_name, storage.probe(str(root), token, self.node.node_id))})

    def submit(self, job: Job, resources: dict[str, float], pin: NodeInfo | None) -> Future[JobResult]:
        def started(pid: int) -> None:
            self._pids[job.session] = pid
            if job.session in self._cancelled:  # cancelled while the session was being prepared
                kill_group(pid, grace_s=2.0)

        self._cancelled.discard(job.session)
        return self._pool.submit(self._run, job, started)

    def _run(self, job: Job, started: Callable[[int], None]) -> JobResult:
        if self._stopping:  # queued behind a job that was just cancelled: never start
            raise CancelledError(job.session)
        return run_job(job, self.node, started)

    def wait(self, handles: list[Future[JobResult]], timeout: float) -> list[Future[JobResult]]:
        return list(wait(handles, timeout=timeout, return_when=FIRST_COMPLETED).done) if handles else []

    def result(self, handle: Future[JobResult]) -> JobResult:
        return handle.result()

    def cancel(self, handle: Future[JobResult], session: str) -> None:
        self._stopping = True
        self._cancelled.add(session)
        if not handle.cancel() and session in self._pids:
            kill_group(self._pids[session], grace_s=2.0)

    def is_node_failure(self, exc: BaseException) -> bool:
        return False

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)
