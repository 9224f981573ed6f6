"""The clean-device proof of a multi-host run: every host proves its own leased devices, the run counts only if all do.

Each host's agent keeps the round's :class:`~sk_runner.devices.proof.CleanDeviceProof`
of its lease and its occupancy source (``npu-smi`` or the simulated registry
of that host) and writes its sightings, naming the host, to the round's
``foreign-processes.jsonl`` on the session's storage. :class:`HostsProof` asks
every host at once and offers the trial engine the one-host interface: a
foreign process before the run is waited for on its host; one seen after the
run on any host discards the run (moved aside, made again, at most
``FOREIGN_RERUNS`` times per host, then an environment blocker).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sk_runner.devices.proof import ForeignProcessBlocker

Ask = Callable[..., Sequence[Any]]
"""``ask(phase, **arguments)``: every host's answer to one proof step, in host order."""


@dataclass(frozen=True)
class HostsSighting:
    """One look at every host's leased devices (None: that host holds no lease)."""

    phase: str
    hosts: tuple[Any, ...]

    @property
    def clean(self) -> bool:
        return all(s is None or s.clean for s in self.hosts)

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "hosts": [None if s is None else s.to_json() for s in self.hosts]}


def _checked(answers: Sequence[Any]) -> tuple[Any, ...]:
    """The hosts' answers; a host whose devices stayed used (or that could not look) blocks the run."""
    faults = [a["fault"] for a in answers if isinstance(a, dict) and "fault" in a]
    if faults:
        raise ForeignProcessBlocker("; ".join(faults))
    return tuple(answers)


class HostsProof:
    """Before/after checks of one round's clean runs on every host (see the module docstring)."""

    def __init__(self, ask: Ask) -> None:
        self.ask = ask
        self.discarded: list[dict[str, Any]] = []

    def before(self, run: str) -> HostsSighting:
        return HostsSighting("before", _checked(self.ask("before", run=run)))

    def after(self) -> HostsSighting:
        return HostsSighting("after", _checked(self.ask("after")))

    def discard(self, run: str, before: HostsSighting, after: HostsSighting, moved_to: Path | None) -> None:
        """Every host that saw a foreign process records the discarded run (the first also writes ``DISCARDED.json``
        into the moved folder); past a host's re-run limit the trial is blocked."""
        first = next(i for i, s in enumerate(after.hosts) if s is not None and not s.clean)
        answers = self.ask("discard", run=run, before=list(before.hosts), after=list(after.hosts),
                           moved_to=None if moved_to is None else str(moved_to), first=first)
        entries = _checked([a for a in answers if a is not None])
        self.discarded = [entry for host in entries for entry in host]

    @staticmethod
    def record(before: HostsSighting, after: HostsSighting) -> dict[str, Any]:
        """The ``device_proof`` of a counted run's meta.json: each host's before and after looks."""
        return {"source": "hosts", "hosts": [None if b is None else {"source": b.source, "before": b.to_json(), "after": a.to_json()}
                                             for b, a in zip(before.hosts, after.hosts, strict=True)]}
