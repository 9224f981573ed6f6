"""Evidence binding: every file of a session is vouched for by the signed ledger when it is written.

The ledger signs decisions; the runs, tables, summaries, blockers, scenes,
collections, BASE and diffs they rest on are ordinary files. Before each record
is appended, :func:`bind` walks the session folder and hashes (once) every file
that is new or changed since the last binding, writes the list to a manifest
``EVIDENCE/bind-<ns>.json`` and returns ``{manifest, blake3, files, bytes}``,
which the record carries under ``bound``: the record's signature covers the
manifest's hash, the manifest covers each file's BLAKE3 digest and size. A file that
disappears (a run moved aside) is listed under ``removed``.

:func:`fold` replays the manifests of a verified ledger into the expected
content of the folder; :mod:`sk_analytics.ledger.evidence_verify` re-hashes it.

Not evidence (:func:`is_machinery`): the ledger with its head, lock and torn-tail
side files, the lock files sk-tune creates, the process registry ``.processes/``, a session's own device
lease folder ``.device-leases/`` (the demo's NPU lock files, rewritten by every holder), atomic-write temp
files, the manifests themselves (bound by their record) and the two reports,
which ``ledger verify`` re-renders from the vouched inputs instead. A file in
``EVIDENCE/`` that no record names (:func:`unreferenced_manifests`) vouches for
nothing and is reported like any planted file; the one an append cut short leaves
(manifest written, record not) is dropped when the sweep resumes
(:func:`drop_unreferenced_manifests`).
"""

from __future__ import annotations

import os
import re
import stat
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypedDict

from blake3 import blake3

from sk_analytics.errors import IntegrityError
from sk_analytics.files.atomic import write_json
from sk_analytics.files.io_seam import reading
from sk_analytics.files.stale_temps import is_leftover
from sk_analytics.files.strict_json import load_json_file

EVIDENCE_DIR = "EVIDENCE"
MANIFEST_SCHEMA = "sk-tune-evidence-manifest-v1"
BOUND_KEY = "bound"
REPORT_FILES = frozenset({"EXPERIMENT_REPORT.md", "report.html"})
_TOP_MACHINERY = frozenset({"ledger.jsonl", "ledger.jsonl.head", "ledger.jsonl.lock", ".sweep.lock"}) | REPORT_FILES
LEASE_DIR = ".device-leases"
"""A lease root inside a session (the demo's): lock files whose holder records change with every holder."""
_TOP_DIRS = frozenset({EVIDENCE_DIR, ".processes", LEASE_DIR})
_ROUND_LOCK = ".sk-run.lock"
_MANIFEST_NAME = re.compile(r"bind-[0-9]+\.json")
_PARALLEL = 1 << 20


class Bound(TypedDict):
    """What a ledger record carries under ``bound``: its manifest and that manifest's BLAKE3 digest."""

    manifest: str
    blake3: str
    files: int
    bytes: int


@dataclass(frozen=True)
class FileState:
    """One vouched file: BLAKE3 of its content and its size (``mtime_ns`` only lets the writer skip unchanged files)."""

    digest: str
    size: int
    mtime_ns: int = 0


def is_machinery(rel: str) -> bool:
    """Whether the session-relative path ``rel`` is not evidence (see the module docstring)."""
    parts = rel.split("/")
    name = parts[-1]
    if len(parts) == 1 and (name in _TOP_MACHINERY or name.startswith("ledger.jsonl.torn-")):
        return True
    if parts[0] in _TOP_DIRS and len(parts) > 1:
        return True
    # only the lock and temp names sk-tune creates (a round's sk_runner.trial.spec.LOCK_NAME, the top-level ones
    # above, an atomic write's or the ledger head's temp): a planted ``notes.lock`` in BASE/ or ``.notes.tmp`` in a
    # run is evidence-unvouched like any other file
    return name == _ROUND_LOCK or is_leftover(name)


def walk(root: Path) -> Iterator[tuple[str, os.stat_result]]:
    """Every evidence file under ``root`` (session-relative POSIX path, lstat), symlinks not followed."""
    stack: list[tuple[str, str]] = [(os.fspath(root), "")]  # (folder, its session-relative prefix): no Path per file
    while stack:
        folder, prefix = stack.pop()
        with reading(Path(folder), "session folder", expected="a readable session folder"), os.scandir(folder) as entries:
            listed = sorted(entries, key=lambda e: e.name)
        for entry in listed:
            rel = prefix + entry.name
            if entry.is_dir(follow_symlinks=False):
                if rel not in _TOP_DIRS:
                    stack.append((entry.path, rel + "/"))
            elif not is_machinery(rel):
                yield rel, entry.stat(follow_symlinks=False)


def hash_file(path: Path, st: os.stat_result | None = None) -> str:
    """BLAKE3 of a file's bytes (of a symlink: of its target text, never followed).

    BLAKE3 rather than SHA-256: re-hashing a 2 GB session must keep pace with ``b3sum``;
    files over 1 MiB are memory-mapped and hashed on every core."""
    with reading(path, "evidence file", expected="a readable evidence file"):
        st = st or path.lstat()
        if stat.S_ISLNK(st.st_mode):
            return blake3(b"symlink\0" + os.readlink(path).encode()).hexdigest()
        if st.st_size == 0:
            return blake3(b"").hexdigest()
        digest = blake3(max_threads=blake3.AUTO if st.st_size > _PARALLEL else 1)
        digest.update_mmap(str(path))
        return digest.hexdigest()


def fold(root: Path, records: Sequence[Any]) -> tuple[dict[str, FileState], list[tuple[int, str]]]:
    """The vouched content of ``root`` after every binding of ``records`` (a verified ledger).

    Returns (relative path -> state, problems as (seq, message)) where a problem is a
    manifest that is missing, differs from the hash its record signed, or is malformed.
    """
    vouched: dict[str, FileState] = {}
    problems: list[tuple[int, str]] = []
    for record in records:
        bound = record.data.get(BOUND_KEY)
        if not isinstance(bound, dict):
            continue
        rel = str(bound.get("manifest"))
        path = root / rel
        if not path.is_file():
            problems.append((record.seq, f"{rel}: manifest missing (record seq {record.seq} vouches for it)"))
            continue
        if hash_file(path) != bound.get("blake3"):
            problems.append((record.seq, f"{rel}: manifest differs from the BLAKE3 digest record seq {record.seq} signed"))
            continue
        manifest = load_json_file(path)
        if not isinstance(manifest, dict) or manifest.get("schema_version") != MANIFEST_SCHEMA:
            problems.append((record.seq, f"{rel}: not a {MANIFEST_SCHEMA} manifest"))
            continue
        for gone in manifest.get("removed", []):
            vouched.pop(gone, None)
        for name, (digest, size, mtime_ns) in manifest.get("files", {}).items():
            vouched[name] = FileState(digest, size, mtime_ns)
    return vouched, problems


_KNOWN: dict[str, dict[str, FileState]] = {}
"""resolved session root -> what this process last bound there (so each file is hashed once)."""


def bind(root: Path, records: Sequence[Any] | None = None) -> Bound | None:
    """Hash what changed in ``root`` since the last binding and write its manifest; None when nothing changed.

    ``records``: the session's verified records, read when this process binds
    ``root`` for the first time (a resumed sweep); a manifest that no longer
    matches its record is refused (:class:`IntegrityError`) rather than re-bound.
    """
    key = str(Path(root).resolve())
    known = _KNOWN.get(key)
    if known is None:
        if records is None:
            from sk_analytics.ledger.chain import read_records

            records = read_records(root) if (root / "ledger.jsonl").exists() else []
        known, problems = fold(root, records)
        if problems:
            raise IntegrityError(f"{root / EVIDENCE_DIR}: refusing to bind new evidence: {problems[0][1]}")
    files: dict[str, list[Any]] = {}
    present: set[str] = set()
    total = 0
    for rel, st in walk(root):
        present.add(rel)
        old = known.get(rel)
        if old is not None and old.size == st.st_size and old.mtime_ns == st.st_mtime_ns:
            continue
        state = FileState(hash_file(root / rel, st), st.st_size, st.st_mtime_ns)
        if old is not None and (old.digest, old.size) == (state.digest, state.size):
            known[rel] = state  # touched, not changed: nothing to vouch again
            continue
        files[rel] = [state.digest, state.size, state.mtime_ns]
        known[rel] = state
        total += st.st_size
    removed = sorted(set(known) - present)
    for rel in removed:
        del known[rel]
    _KNOWN[key] = known
    if not files and not removed:
        return None
    rel = f"{EVIDENCE_DIR}/bind-{time.time_ns()}.json"
    write_json(root / rel, {"schema_version": MANIFEST_SCHEMA, "files": files, "removed": removed}, indent=None)
    return Bound(manifest=rel, blake3=hash_file(root / rel), files=len(files), bytes=total)


def with_binding(root: Path, data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` plus the ``bound`` field of what changed in ``root`` (unchanged when nothing did)."""
    bound = bind(root)
    return dict(data) if bound is None else {**data, BOUND_KEY: dict(bound)}


def referenced_manifests(records: Sequence[Any]) -> set[str]:
    """The manifests the ``records`` name under ``bound`` (session-relative paths)."""
    return {str(r.data[BOUND_KEY].get("manifest")) for r in records if isinstance(r.data.get(BOUND_KEY), dict)}


def unreferenced_manifests(root: Path, records: Sequence[Any]) -> list[tuple[str, bool]]:
    """Every file under ``EVIDENCE/`` that no record names, as (session-relative path, named like a manifest).

    Such a file vouches for nothing and is vouched for by nothing: a copy of a manifest under a
    new name, a planted file, or the manifest of an append that a crash or a fault cut short
    before its record (named like one: ``bind-<ns>.json``). Atomic-write temp files are machinery."""
    folder = Path(root) / EVIDENCE_DIR
    if not folder.is_dir():
        return []
    named = referenced_manifests(records)
    found: list[tuple[str, bool]] = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames.sort()
        for name in sorted(filenames):
            rel = Path(dirpath, name).relative_to(root).as_posix()
            if rel not in named and not (name.startswith(".") and name.endswith(".tmp")):
                found.append((rel, Path(dirpath) == folder and _MANIFEST_NAME.fullmatch(name) is not None))
    return found


def drop_unreferenced_manifests(root: Path, records: Sequence[Any]) -> list[str]:
    """Remove the manifests (``EVIDENCE/bind-<ns>.json``) no record of ``records`` names: each is what an
    append cut short between its manifest and its record left behind, and the files it listed are
    bound again by the next record. Other files are left for ``ledger verify`` to report. Call where
    no other writer binds (under the sweep's lock)."""
    dropped = [rel for rel, manifest_named in unreferenced_manifests(root, records) if manifest_named]
    for rel in dropped:
        (Path(root) / rel).unlink(missing_ok=True)
    if dropped:  # what this process bound into them is vouched for by no record: bind it again from the records
        forget(root)
    return dropped


def forget(root: Path) -> None:
    """Drop this process's memory of ``root``'s bindings (the folder was moved or replaced)."""
    _KNOWN.pop(str(Path(root).resolve()), None)
