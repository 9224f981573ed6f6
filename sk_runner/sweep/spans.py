"""A sweep whose ranks span hosts: its hosts are reserved on Ray before it runs and held to its hand-off.

A new session records the hosts it got in ``session.json`` (``placement``:
``spans`` and ``hosts``, part of its fingerprinted identity); a resumed one is
reserved on exactly those servers again (a restarted server, same name and
host, is the same server), each host leasing its NPUs under the same lease
root as before unless another is given. Used by ``sk-run sweep`` and by a
campaign's job (docs/sweep.md "Sessions that span hosts").
"""

from __future__ import annotations

import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sk_analytics.errors import UsageError
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.messages import coded
from sk_runner.devices.lease import LeaseFault
from sk_runner.hosts.base import Hosts
from sk_runner.hosts.topology import HostsSpec, recorded_spans
from sk_runner.sweep.session import SESSION_FILE


def recorded(root: Path) -> tuple[HostsSpec, list[dict[str, Any]]] | None:
    """The hosts an existing session at ``root`` recorded (None: no session there, or a one-host one)."""
    path = Path(root) / SESSION_FILE
    return recorded_spans(load_json_file(path).get("placement")) if path.is_file() else None


@contextmanager
def session_hosts(root: Path, spec: HostsSpec | None, *, address: str | None, lease_root: str | None,
                  lease_timeout_s: float) -> Iterator[Hosts | None]:
    """The hosts of the session at ``root`` for the duration of the block (None: a one-host session).

    An existing session's recorded hosts win (``spec``, when given, must be theirs); a new session's are ``spec``.
    A lease a host could not have is recorded in an existing session's ledger (``lease_blocked``) and raised."""
    found = recorded(root)
    if found is not None and spec is not None and spec != found[0]:
        raise UsageError(f"{root} runs on {found[0].hosts} hosts x {found[0].npus_per_host} NPUs; it continues only on them")
    if found is None and spec is not None and (Path(root) / SESSION_FILE).is_file():
        raise UsageError(f"{root} runs on one host; it continues only there (a session that spans hosts starts with --hosts)")
    if found is None and spec is None:
        yield None
        return
    from sk_runner.hosts.ray_hosts import reserve

    spec = found[0] if found is not None else spec
    assert spec is not None
    try:
        hosts = reserve(spec, address=address, lease_root=lease_root, lease_timeout_s=lease_timeout_s, session=str(Path(root).absolute()),
                        command=shlex.join(["sk-run", *sys.argv[1:]]),
                        pinned=None if found is None else found[1])
    except LeaseFault as exc:
        if found is not None:
            from sk_runner.sweep.session import load_session

            load_session(root).append("lease_blocked", {**exc.record(), "action": None,
                                                        "summary": coded("summary.hosts_lease_blocked", detail=exc.one_line())})
        raise
    try:
        hosts.check_storage(Path(root).absolute().parent)  # every host writes its group's logs into the session's folders
        yield hosts
    finally:
        hosts.close()
