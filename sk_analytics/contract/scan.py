"""Reading a capture root from disk: every regular file with its sha256, size and times.

This is the only module of the contract that walks a root. Symbolic links
(to files or folders), hard links and other non-regular entries are refused:
a link would let a root "contain" evidence that lives, and changes, elsewhere.
"""

from __future__ import annotations

import os
import stat
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sk_analytics.contract.roles import classify
from sk_analytics.contract.rules import ContractInputError
from sk_analytics.fingerprint import sha256_file

MANIFEST_NAME = "collection-manifest.json"
"""The manifest finalize writes at the top of the capture root."""

MARKER_NAME = ".collection-session.json"
"""The marker begin writes at the top of the capture root (session fingerprint)."""

RESERVED_NAMES = frozenset({MANIFEST_NAME, MARKER_NAME})


@dataclass(frozen=True)
class FileRecord:
    """One artifact file as the manifest records it.

    ``inode`` and ``device`` identify the very file object written by the
    producer: a copy or a rewrite through a new file gets another inode even
    when bytes and times are made to match (the live check compares them).
    """

    path: str
    sha256: str
    size: int
    ctime_ns: int
    mtime_ns: int
    inode: int
    device: int

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def list_files(root: Path) -> list[str]:
    """Root-relative POSIX paths of every regular file, sorted; the manifest and
    marker at the top level are left out. Raises on links and special files."""
    found: list[str] = []
    stack: list[tuple[Path, str]] = [(root, "")]
    while stack:
        folder, prefix = stack.pop()
        with os.scandir(folder) as entries:
            for entry in entries:
                rel = f"{prefix}{entry.name}"
                st = entry.stat(follow_symlinks=False)
                mode = st.st_mode
                if stat.S_ISLNK(mode):
                    raise ContractInputError(
                        "no-symlinks", root, f"{rel} is a symbolic link", expected="regular files only"
                    )
                if stat.S_ISDIR(mode):
                    stack.append((Path(entry.path), f"{rel}/"))
                elif stat.S_ISREG(mode):
                    if st.st_nlink > 1:
                        raise ContractInputError(
                            "no-symlinks", root, f"{rel} is a hard link ({st.st_nlink} names share its content)",
                            expected="files owned by this root alone",
                        )
                    if not (prefix == "" and entry.name in RESERVED_NAMES):
                        found.append(rel)
                else:
                    raise ContractInputError(
                        "no-symlinks", root, f"{rel} is not a regular file or folder", expected="regular files only"
                    )
    return sorted(found)


def record_file(root: Path, rel: str) -> FileRecord:
    """Fingerprint one file of the root (lstat times, then its content)."""
    path = root / rel
    st = path.lstat()
    if stat.S_ISLNK(st.st_mode):
        raise ContractInputError("no-symlinks", root, f"{rel} is a symbolic link", expected="regular files only")
    return FileRecord(rel, sha256_file(path), st.st_size, st.st_ctime_ns, st.st_mtime_ns, st.st_ino, st.st_dev)


def live_stat(root: Path, rel: str) -> os.stat_result:
    """The file's own lstat (no content read), refusing a link put in its place."""
    st = (root / rel).lstat()
    if stat.S_ISLNK(st.st_mode):
        raise ContractInputError("no-symlinks", root, f"{rel} is a symbolic link", expected="regular files only")
    return st


def scan_root(root: Path) -> dict[str, list[FileRecord]]:
    """Every file of ``root`` grouped by artifact kind, each list sorted by path."""
    grouped: dict[str, list[FileRecord]] = {}
    for rel in list_files(root):
        grouped.setdefault(classify(rel), []).append(record_file(root, rel))
    return dict(sorted(grouped.items()))
