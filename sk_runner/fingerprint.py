"""Trial fingerprints: source revision, config, control, workload, environment.

Each part is a JSON record plus its SHA-256 (canonical JSON, via the product's
one helper :mod:`sk_analytics.fingerprint`), so two trials can be shown to
differ in exactly the declared config pointer and nothing else (protocol §5.1).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import platform
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from sk_analytics.fingerprint import fingerprint, sha256_file

#: Environment keys that differ per run by design; left out of the env hash so
#: all runs of one trial share it.
PER_RUN_ENV = frozenset({"SK_RUN_DIR", "SK_RUN_SEED", "SK_RUN_CONFIG"})


def source_revision(path: Path, files: Sequence[Path] = (), sources: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Git revision of the workload source at ``path``; outside a repository the SHA-256 of
    each of ``files`` (the files the workload command names: ``{"kind": "files"}``), and
    ``{"kind": "none"}`` when there are none either. ``sources`` (the SHA-256 of every file of
    the workload, :mod:`sk_runner.trial.sources`) is recorded as it is in every kind, so a
    file the command does not name (a per-rank script a launcher starts) is part of the identity too.

    Only the workload's own folder counts: its committed content is the git
    tree of that folder (a commit elsewhere in the repository leaves it
    unchanged) and an uncommitted edit there is identified by the SHA-256 of
    its diff against HEAD (the same edit gives the same revision). ``commit``
    is kept for people; the identity is ``tree`` + ``dirty_sha256``. Without
    git, an edited script changes ``files`` just the same, so a trial is
    never compared with a round that ran another version of it (protocol §5.1).
    """
    extra = {} if sources is None else {"sources": dict(sources)}
    folder = path if path.is_dir() else path.parent
    try:
        top = _git(folder, "rev-parse", "--show-toplevel")
        commit = _git(folder, "rev-parse", "HEAD")
        tree = _git(folder, "rev-parse", "HEAD:./")
        status = _git(folder, "status", "--porcelain", "--untracked-files=no", "--", ".")
        diff = _git(folder, "diff", "HEAD", "--binary", "--", ".") if status else ""
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        if files:
            return {"kind": "files", "path": str(folder), "files": {str(f): sha256_file(f) for f in files}, **extra}
        return {"kind": "none", "path": str(folder), **extra}
    return {
        "kind": "git",
        "root": top,
        "commit": commit,
        "tree": tree,
        "dirty": bool(status),
        "modified_files": len(status.splitlines()),
        "dirty_sha256": hashlib.sha256(diff.encode()).hexdigest() if status else None,
        **extra,
    }


def _git(folder: Path, *args: str) -> str:
    out = subprocess.run(
        ["git", *args], cwd=folder, capture_output=True, text=True, timeout=20, check=True,
        stdin=subprocess.DEVNULL,
    )
    return out.stdout.strip()


def env_hash(env: Mapping[str, str]) -> str:
    """SHA-256 of the child environment without the per-run keys."""
    return fingerprint({k: v for k, v in sorted(env.items()) if k not in PER_RUN_ENV})


def package_versions(names: tuple[str, ...] = ("sk-tune", "torch", "torch_npu", "polars", "numpy")) -> dict[str, str | None]:
    """Installed versions (None when absent), read from metadata without importing."""
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = None
    return versions


def environment_record(backend: str, device: str, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Environment part of the fingerprint: backend, device, python and package versions."""
    return {
        "backend": backend,
        "device": device,
        "python": platform.python_version(),
        "platform": sys.platform,
        "packages": package_versions(),
        **dict(extra or {}),
    }


@dataclass(frozen=True)
class TrialFingerprints:
    """The five recorded parts of a trial's identity and their SHA-256."""

    source_revision: dict[str, Any]
    config: dict[str, Any]
    control: dict[str, Any]
    workload: dict[str, Any]
    environment: dict[str, Any]

    def digests(self) -> dict[str, str]:
        return {
            "source_revision": fingerprint(self.source_revision),
            "config": fingerprint(self.config),
            "control": fingerprint(self.control),
            "workload": fingerprint(self.workload),
            "environment": fingerprint(self.environment),
        }

    def to_json(self) -> dict[str, Any]:
        """Records, their digests and one combined ``trial_fingerprint``."""
        digests = self.digests()
        parts = {k: v for k, v in asdict(self).items() if k != "config"}
        return {**parts, "fingerprints": digests, "trial_fingerprint": fingerprint(digests)}
