"""Shared storage check: every node writes a token into the campaign root and reads the driver's back.

Sessions of a campaign are ordinary folders under one root that every node must
see (a shared file system). Before any session starts, the driver writes a
token; a probe pinned to each node reads it and writes its own; the driver
reads every node's token back. Any node that cannot is named in a refusal.
"""

from __future__ import annotations

import secrets
from pathlib import Path

from sk_analytics.errors import EnvironmentBlocker

CHECK_DIR = ".storage-check"


def probe(root: str, driver_token: str, node_id: str) -> str:
    """On a node: read the driver's token, write this node's; return what went wrong ('' when fine)."""
    folder = Path(root) / CHECK_DIR
    try:
        seen = (folder / f"driver-{driver_token}.token").read_text(encoding="utf-8")
    except OSError as exc:
        return f"cannot read the driver's token ({exc.strerror or exc})"
    if seen != driver_token:
        return "reads a different driver token"
    try:
        (folder / f"node-{node_id}.token").write_text(driver_token + node_id, encoding="utf-8")
    except OSError as exc:
        return f"cannot write its token ({exc.strerror or exc})"
    return ""


def write_driver_token(root: Path) -> str:
    """Write a fresh driver token under the root; return it."""
    token = secrets.token_hex(16)
    folder = Path(root) / CHECK_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.token"):
        old.unlink(missing_ok=True)
    (folder / f"driver-{token}.token").write_text(token, encoding="utf-8")
    return token


def verdict(root: Path, token: str, answers: dict[str, tuple[str, str]]) -> list[dict[str, str]]:
    """Check every node's answer and its token read back here; raise naming the nodes that do not share the root.

    ``answers`` maps node id -> (node name, probe problem or '').
    """
    folder = Path(root) / CHECK_DIR
    bad = []
    for node_id, (name, problem) in answers.items():
        if not problem:
            path = folder / f"node-{node_id}.token"
            try:
                problem = "" if path.read_text(encoding="utf-8") == token + node_id else "its token reads back differently here"
            except OSError:
                problem = "its token is not visible here"
        if problem:
            bad.append(f"{name} ({node_id[:12]}): {problem}")
    if not answers:
        raise EnvironmentBlocker("no alive node has the resources of any task of the campaign")
    if bad:
        raise EnvironmentBlocker(f"campaign root {root} is not shared by every node: {'; '.join(bad)} "
                                 "(put the root on a file system that every node mounts at the same path, then 'sk-run campaign resume')")
    return [{"node_id": n, "node_name": name} for n, (name, _) in sorted(answers.items())]
