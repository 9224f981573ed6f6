"""``begin``: open a collection session on a new, empty capture root.

The session record (formats.md §6) is written *outside* the root, so the
producer cannot rewrite it; a small marker with the same session fingerprint
is left inside the root, so a root can be matched to exactly one session.
The session start is taken from the file system's own clock (the marker's
ctime) as well as the wall clock, whichever is earlier: file systems stamp
files with a coarse clock that can lag ``time.time_ns()`` by a tick, and the
time-window rule must never refuse a file created after ``begin``.
"""

from __future__ import annotations

import os
import time
from os import PathLike
from pathlib import Path
from typing import Any, TypedDict

from sk_analytics.contract.roles import CAPTURE_ROLES
from sk_analytics.contract.rules import ContractInputError, ContractIntegrityError
from sk_analytics.contract.scan import MARKER_NAME
from sk_analytics.contract.schemas import check_schema
from sk_analytics.files.atomic import write_json
from sk_analytics.files.io_seam import guard
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.fingerprint import fingerprint

SESSION_SCHEMA = "sk-tune-collection-session-v1"
MARKER_SCHEMA = "sk-tune-collection-marker-v1"


class SessionRecord(TypedDict):
    """What ``begin`` writes outside the root (formats.md §6)."""

    schema_version: str
    capture_role: str
    capture_root: str
    session_fingerprint: str
    started_ns: int
    root_was_empty: bool


def body_fingerprint(record: dict[str, Any], key: str) -> str:
    """Fingerprint of ``record`` without its own fingerprint field ``key``."""
    return fingerprint({k: v for k, v in record.items() if k != key})


def session_body(role: str, root_abs: str, started_ns: int) -> dict[str, Any]:
    """The fingerprinted part of a session record: role, absolute root, start (formats.md §6)."""
    return {
        "schema_version": SESSION_SCHEMA,
        "capture_role": role,
        "capture_root": root_abs,
        "started_ns": started_ns,
        "root_was_empty": True,
    }


def check_binding(root: Path, manifest: dict[str, Any], source: str | PathLike[str]) -> None:
    """Live rule session-binding: recompute the session fingerprint from the manifest's role
    and start and the root's *current* absolute path; the marker must carry the same start.

    A root moved or copied elsewhere, or a start shifted in the marker and manifest to widen
    the window, no longer yields the fingerprint that ``begin`` recorded. The root is tried
    as given and with symbolic links resolved (a session may be reached through a link).
    """
    cap = manifest["capture"]
    candidates = {os.path.abspath(root), os.path.realpath(root)}
    if not any(
        fingerprint(session_body(manifest["capture_role"], c, cap["started_ns"])) == cap["session_fingerprint"]
        for c in candidates
    ):
        raise ContractIntegrityError(
            "session-binding", source,
            f"the session fingerprint recomputed from role {manifest['capture_role']}, root {os.path.abspath(root)} "
            f"and started_ns {cap['started_ns']} is not {cap['session_fingerprint'][:12]} "
            "(root moved or copied, or the session start shifted)",
        )
    marker = load_json_file(root / MARKER_NAME)
    if marker.get("started_ns") != cap["started_ns"]:
        raise ContractIntegrityError(
            "session-binding", root / MARKER_NAME,
            f"the marker's started_ns {marker.get('started_ns')} differs from the manifest's {cap['started_ns']}",
        )


def check_role(role: str) -> None:
    """Refuse a capture role outside formats.md §6 (schema rule)."""
    if role not in CAPTURE_ROLES:
        raise ContractInputError("schema", None, f"unknown capture role {role!r}", expected=" | ".join(CAPTURE_ROLES))


def _is_inside(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def _check_empty_root(root: Path) -> None:
    if root.is_symlink():
        raise ContractInputError("no-symlinks", root, "the capture root is a symbolic link", expected="a real folder")
    if not root.exists():
        return
    if not root.is_dir():
        raise ContractInputError("empty-root", root, "the capture root is not a folder", expected="an empty folder")
    entries = sorted(os.listdir(root))
    extra = [e for e in entries if e != MARKER_NAME]
    marker = root / MARKER_NAME
    if extra or (entries and (marker.is_symlink() or not marker.is_file())):
        shown = ", ".join((extra or entries)[:5]) + (" …" if len(extra) > 5 else "")
        raise ContractInputError(
            "empty-root", root, f"the capture root already holds {shown}", expected=f"an empty folder (or only {MARKER_NAME})"
        )


def begin(role: str, root: str | PathLike[str], session_out: str | PathLike[str]) -> SessionRecord:
    """Start a session for ``role`` on the empty ``root``; write the record to ``session_out``."""
    check_role(role)
    root_abs = Path(os.path.abspath(root))
    out_abs = Path(os.path.abspath(session_out))
    _check_empty_root(root_abs)
    if _is_inside(out_abs.resolve(), root_abs.resolve()):
        raise ContractInputError(
            "session-outside-root", out_abs, f"the session record would lie inside the root {root_abs}",
            expected="a path outside the capture root",
        )
    if out_abs.exists() or out_abs.is_symlink():
        raise ContractInputError(
            "session-record", out_abs, "a session record already exists here and is never replaced",
            expected="a new path",
        )
    root_abs.mkdir(parents=True, exist_ok=True)
    wall_ns = time.time_ns()
    marker = root_abs / MARKER_NAME
    guard("atomic", marker)
    with open(marker, "w", encoding="utf-8") as fh:
        fh.write("{}\n")
    st = marker.stat()
    started_ns = min(wall_ns, st.st_ctime_ns, st.st_mtime_ns)
    body = session_body(role, str(root_abs), started_ns)
    # session_body() builds exactly the SessionRecord's other keys, as a plain dict mypy cannot match to the TypedDict
    record: SessionRecord = {**body, "session_fingerprint": fingerprint(body)}  # type: ignore[typeddict-item]
    write_json(
        marker,
        {
            "schema_version": MARKER_SCHEMA,
            "capture_role": role,
            "session_fingerprint": record["session_fingerprint"],
            "started_ns": started_ns,
        },
    )
    write_json(out_abs, dict(sorted(record.items())))
    return record


def load_session(path: str | PathLike[str]) -> SessionRecord:
    """Read a session record strictly and check its schema and fingerprint."""
    data = load_json_file(path)
    check_schema("session", data, path)
    if body_fingerprint(data, "session_fingerprint") != data["session_fingerprint"]:
        raise ContractIntegrityError("fingerprint", path, "session_fingerprint does not match the session record")
    record: SessionRecord = data  # the schema and the fingerprint were just checked
    return record


def check_marker(root: Path, session_fingerprint: str, role: str) -> None:
    """The root's marker names this session (the root was opened by this ``begin``)."""
    marker = root / MARKER_NAME
    if marker.is_symlink() or not marker.is_file():
        raise ContractIntegrityError("session-record", marker, "the session marker of the root is missing")
    data = load_json_file(marker)
    check_schema("marker", data, marker)
    if data["session_fingerprint"] != session_fingerprint or data["capture_role"] != role:
        raise ContractIntegrityError(
            "session-record", marker,
            f"the root belongs to session {data['session_fingerprint'][:12]} ({data['capture_role']}), "
            f"not {session_fingerprint[:12]} ({role})",
        )
