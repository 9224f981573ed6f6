"""The clean-device proof: no process outside the trial used the leased devices, before and after every clean run.

Before a clean run the devices must be free: a foreign process there is
recorded and waited for (one progress line), at most the lease timeout, then an
environment blocker. After the run they must still be free: a run that saw a
foreign process is not counted; it is recorded (``foreign_process_on_device``,
pid and command where known), its folder is moved aside by the caller and the
run is made again, at most :data:`FOREIGN_RERUNS` times, then an environment
blocker. Every sighting is one line of ``<round>/foreign-processes.jsonl``.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sk_analytics.errors import EnvironmentBlocker
from sk_analytics.files.atomic import write_json
from sk_analytics.files.io_seam import append_bytes
from sk_analytics.messages import resolve_lang, text
from sk_runner.devices.lease import HeldLease
from sk_runner.devices.markers import format_ids
from sk_runner.devices.occupancy import LOCK_SOURCE, DeviceProcess, OccupancySource

FOREIGN_FILE = "foreign-processes.jsonl"
FOREIGN = "foreign_process_on_device"
FOREIGN_RERUNS = 2
"""A clean run discarded for a foreign process is made again at most this many times, then the trial is blocked."""
DISCARDED_FILE = "DISCARDED.json"
"""Written into the moved-aside folder of a discarded run: why it does not count."""
POLL_S = {"sim-registry": 0.1, "npu-smi": 2.0}
"""Seconds between two looks while a foreign process holds a device, per source (npu-smi takes about a second)."""


@dataclass(frozen=True)
class Sighting:
    """One look at the leased devices: when, by which source, and the processes seen there."""

    phase: str
    checked_ns: int
    source: str
    processes: tuple[DeviceProcess, ...]

    @property
    def clean(self) -> bool:
        return not self.processes

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "checked_ns": self.checked_ns, "source": self.source,
                "processes": [p.to_json() for p in self.processes]}


class ForeignProcessBlocker(EnvironmentBlocker):
    """The leased devices stayed in use by a process outside the trial: never a result."""


class CleanDeviceProof:
    """Before/after checks of one trial's clean runs on ``lease``'s devices, recorded in its round folder."""

    def __init__(self, lease: HeldLease, source: OccupancySource, round_dir: Path, round_name: str, *,
                 wait_s: float, say: Callable[[str], None] | None = None, host: str | None = None, lang: str | None = None) -> None:
        self.lease, self.source, self.round_dir, self.round_name = lease, source, round_dir, round_name
        self.host = host
        """The host of the devices, named in every record (a multi-host run proves each host's devices on that host)."""
        self.wait_s = wait_s
        self.say = say or _announce
        self.lang = resolve_lang(lang)
        """The language of the progress lines (the session's ``--lang``); the blockers' error lines are English."""
        self.discarded: list[dict[str, Any]] = []

    def look(self, phase: str) -> Sighting:
        """The processes the source sees on the leased devices, and the lease's own locks: a lock lost since it was
        taken (its file removed or replaced, an inherited one released) lets a foreign holder in between runs."""
        seen = self.source.snapshot(self.lease.device_ids)
        lost = [DeviceProcess.lock_lost(device, why) for device, why in self.lease.lock_problems()]
        return Sighting(phase, time.time_ns(), self.source.name, (*seen, *lost))

    def _note(self, run: str, sighting: Sighting, action: str, **extra: Any) -> dict[str, Any]:
        entry = {"ts_ns": time.time_ns(), "kind": FOREIGN, "round": self.round_name, "run": run, "action": action,
                 "devices": list(self.lease.device_ids), **({} if self.host is None else {"host": self.host}),
                 **sighting.to_json(), **extra}
        self.round_dir.mkdir(parents=True, exist_ok=True)
        append_bytes(self.round_dir / FOREIGN_FILE, (json.dumps(entry, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))
        return entry

    def before(self, run: str) -> Sighting:
        """The devices free before ``run`` starts: waits for a foreign process to end, at most :attr:`wait_s`."""
        sighting = self.look("before")
        if sighting.clean:
            return sighting
        if any(p.source == LOCK_SOURCE for p in sighting.processes):  # never given back to this lease: no wait helps
            self._note(run, sighting, "blocked")
            raise ForeignProcessBlocker(f"{_who(sighting)} (devices {format_ids(self.lease.device_ids)}) before {run}; a lost "
                                        f"lock never comes back to the lease that lost it, so nothing was measured "
                                        f"(recorded in {self.round_dir / FOREIGN_FILE}): the same command takes the lease anew")
        self._note(run, sighting, "waited")
        self.say(text("proof.waiting", self.lang, who=_who(sighting, self.lang), seconds=self.wait_s, run=run))
        deadline = time.monotonic() + self.wait_s
        while not sighting.clean:
            if time.monotonic() >= deadline:
                self._note(run, sighting, "blocked")
                raise ForeignProcessBlocker(f"{_who(sighting)} outside the lease (devices {format_ids(self.lease.device_ids)}) for "
                                            f"more than {self.wait_s:g} s before {run}; nothing was measured "
                                            f"(recorded in {self.round_dir / FOREIGN_FILE})")
            time.sleep(min(POLL_S.get(self.source.name, 1.0), max(0.0, deadline - time.monotonic())))
            sighting = self.look("before")
        return sighting

    def after(self) -> Sighting:
        """The look right after a run ended (its processes are gone by then)."""
        return self.look("after")

    def discard(self, run: str, before: Sighting, after: Sighting, moved_to: Path | None) -> None:
        """Record that ``run`` saw a foreign process and does not count; past :data:`FOREIGN_RERUNS` re-runs, block."""
        tries = sum(1 for d in self.discarded if d["run"] == run) + 1
        entry = self._note(run, after, "discarded", moved_to=None if moved_to is None else str(moved_to), attempt=tries)
        self.discarded.append(entry)
        if moved_to is not None:
            write_json(moved_to / DISCARDED_FILE, {"reason": FOREIGN, "run": run, "before": before.to_json(), "after": after.to_json()})
        if tries > FOREIGN_RERUNS:
            raise ForeignProcessBlocker(f"{run} saw {_who(after)} outside the lease in {tries} tries; none of them counts "
                                        f"(recorded in {self.round_dir / FOREIGN_FILE}): free the devices, then run the same command again")
        self.say(text("proof.discarded", self.lang, run=run, who=_who(after, self.lang), moved_to=moved_to))

    @staticmethod
    def record(before: Sighting, after: Sighting) -> dict[str, Any]:
        """The ``device_proof`` of a counted run's meta.json."""
        return {"source": before.source, "before": before.to_json(), "after": after.to_json()}


def _announce(text: str) -> None:
    """The default progress line (stderr, like the lease's wait line)."""
    print(f"sk-run: {text}", file=sys.stderr, flush=True)


WHO_LIMIT = 300
"""Characters of the first process an error line names (a command line can be kilobytes long)."""


def _who(sighting: Sighting, lang: str = "en") -> str:
    """The first process seen and how many more: one bounded phrase, never one command per NPU."""
    procs = sighting.processes
    first = procs[0].describe(lang)
    first = first if len(first) <= WHO_LIMIT else first[: WHO_LIMIT - 1] + "…"
    if len(procs) == 1:
        return first
    devices = format_ids(p.device for p in procs[1:])
    return text("device.more_sightings", lang, first=first, n=len(procs) - 1, devices=devices)
