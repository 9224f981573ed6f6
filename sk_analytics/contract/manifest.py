"""``finalize`` and ``load_manifest``: seal a capture root and re-verify it later.

The manifest (formats.md §6) binds a root's files to one session, one
producer process and the exact config/control/workload/source revision. It
is built and checked by pure functions (:func:`build_manifest`,
:func:`check_manifest`); only :func:`finalize` and :func:`load_manifest`
touch the disk. Both apply the same checks, so finalize never seals what a
later reader would refuse.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from os import PathLike
from pathlib import Path, PurePosixPath
from typing import Any

from sk_analytics.contract.roles import classify, missing_kinds
from sk_analytics.contract.rules import ContractInputError, ContractIntegrityError
from sk_analytics.contract.scan import MANIFEST_NAME, FileRecord, list_files, live_stat, record_file, scan_root
from sk_analytics.contract.schemas import check_schema
from sk_analytics.contract.session import SessionRecord, check_binding, check_marker, load_session
from sk_analytics.contract.workload import normalize_workload
from sk_analytics.errors import InputError
from sk_analytics.files.atomic import write_json
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.fingerprint import fingerprint
from sk_analytics.ledger.signing import SignatureError, signer, trusted_keys

MANIFEST_SCHEMA = "sk-tune-collection-manifest-v3"
EARLIER_SCHEMAS = {
    "sk-tune-collection-manifest-v1": "without inode/device records or a signature",
    "sk-tune-collection-manifest-v2": "without a signature",
}
SIGNATURE_PURPOSE = "collection-manifest"
UNSIGNED_KEYS = ("manifest_fingerprint", "signature")  # the signature covers manifest_fingerprint, which covers the rest


@dataclass(frozen=True)
class ProducerInfo:
    """The process that wrote the artifacts (the launcher's native pid and wall times)."""

    native_pid: int
    started_ns: int
    ended_ns: int
    command_fingerprint: str

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def command_fingerprint(argv: Sequence[str]) -> str:
    """Fingerprint of a producer command line (the argv list, canonical JSON)."""
    return fingerprint([str(a) for a in argv])


def build_manifest(
    session: SessionRecord,
    *,
    files: Mapping[str, Sequence[FileRecord]],
    finalized_ns: int,
    source_revision: str,
    config: dict[str, Any],
    control: dict[str, Any],
    workload: dict[str, Any],
    producer: ProducerInfo,
) -> dict[str, Any]:
    """The manifest of a root (pure): exactly the keys of formats.md §6."""
    body: dict[str, Any] = {
        "schema_version": MANIFEST_SCHEMA,
        "capture_role": session["capture_role"],
        "capture_root": ".",
        "capture": {
            "session_fingerprint": session["session_fingerprint"],
            "started_ns": session["started_ns"],
            "finalized_ns": finalized_ns,
            "root_was_empty": session["root_was_empty"],
        },
        "source_revision": source_revision,
        "config": config,
        "config_fingerprint": fingerprint(config),
        "control": control,
        "control_fingerprint": fingerprint(control),
        "producer": producer.to_json(),
        "workload": workload,
        "workload_fingerprint": fingerprint(workload),
        "files": {kind: [r.to_json() for r in records] for kind, records in sorted(files.items())},
    }
    return {**body, "manifest_fingerprint": fingerprint(body)}


def _check_path(rel: str, source: str | PathLike[str]) -> None:
    parts = rel.split("/")
    if (
        "\\" in rel
        or PurePosixPath(rel).is_absolute()
        or any(p in ("", ".", "..") for p in parts)
        or rel in (MANIFEST_NAME,)
    ):
        raise ContractInputError(
            "path-form", source, f"file path {rel!r} is not a plain relative POSIX path", record=rel,
            expected="a/b/c.ext inside the root, no '..', '.', '\\' or leading '/'",
        )


def _check_files(manifest: dict[str, Any], source: str | PathLike[str]) -> None:
    cap = manifest["capture"]
    start, end = cap["started_ns"], cap["finalized_ns"]
    owner: dict[str, str] = {}
    for kind, records in manifest["files"].items():
        paths = [r["path"] for r in records]
        for rel in paths:
            _check_path(rel, source)
        if paths != sorted(set(paths)):
            raise ContractInputError(
                "sorted-unique", source, f"records of {kind} are not sorted by path or repeat a path", record=kind
            )
        for rec in records:
            rel = rec["path"]
            if rel in owner:
                raise ContractInputError(
                    "one-role-per-file", source, f"{rel} is listed under {owner[rel]} and {kind}", record=rel
                )
            owner[rel] = kind
            if classify(rel) != kind:
                raise ContractInputError(
                    "one-role-per-file", source, f"{rel} is listed under {kind} but its name makes it {classify(rel)}",
                    record=rel,
                )
            for stamp in ("ctime_ns", "mtime_ns"):
                if not start <= rec[stamp] <= end:
                    raise ContractInputError(
                        "created-in-window", source,
                        f"{rel} has {stamp}={rec[stamp]} outside the session window [{start}, {end}]"
                        " (copied in from elsewhere, or written before begin / after finalize)",
                        record=rel,
                    )


def check_manifest(manifest: Any, source: str | PathLike[str], *, require_sk_prof: bool = False, schema: bool = True) -> None:
    """Every rule of formats.md §6 that needs no disk access (pure).

    ``schema=False`` skips only the JSON Schema pass (~40 ms for a demo manifest), for a manifest whose
    bytes a signed ledger binding was just proven to vouch for: :func:`finalize` checked every rule,
    the schema included, before it wrote them; the fingerprint and window rules still run."""
    if isinstance(manifest, dict) and manifest.get("schema_version") in EARLIER_SCHEMAS:
        raise ContractInputError(
            "manifest-version", source,
            f"{manifest['schema_version']} was sealed by an earlier sk-tune {EARLIER_SCHEMAS[manifest['schema_version']]};"
            " it cannot be verified any more",
            expected=f"{MANIFEST_SCHEMA} (collect the profile again)",
        )
    if schema:
        check_schema("manifest", manifest, source)
    if fingerprint({k: v for k, v in manifest.items() if k not in UNSIGNED_KEYS}) != manifest["manifest_fingerprint"]:
        raise ContractIntegrityError("fingerprint", source, "manifest_fingerprint does not match the manifest (edited?)")
    for part in ("config", "control", "workload"):
        if fingerprint(manifest[part]) != manifest[f"{part}_fingerprint"]:
            raise ContractIntegrityError("fingerprint", source, f"{part}_fingerprint does not match {part}")
    if normalize_workload(manifest["workload"], source) != manifest["workload"]:
        raise ContractInputError("workload-fields", source, "workload is not in canonical form (aliases left in it)")
    cap, prod = manifest["capture"], manifest["producer"]
    if cap["finalized_ns"] < cap["started_ns"]:
        raise ContractInputError("producer-in-window", source, "finalized_ns precedes started_ns")
    if not cap["started_ns"] <= prod["started_ns"] <= prod["ended_ns"] <= cap["finalized_ns"]:
        raise ContractInputError(
            "producer-in-window", source,
            f"producer ran [{prod['started_ns']}, {prod['ended_ns']}], "
            f"session window is [{cap['started_ns']}, {cap['finalized_ns']}]",
        )
    _check_files(manifest, source)
    present = [kind for kind, records in manifest["files"].items() if records]
    missing = missing_kinds(manifest["capture_role"], present, require_sk_prof=require_sk_prof)
    if missing:
        raise ContractInputError(
            "required-files", source,
            f"a {manifest['capture_role']} collection lacks {', '.join(missing)}"
            + (" (sk_prof is required for DCCI child attribution)" if "sk_prof" in missing else ""),
        )


def finalize(
    session_path: str | PathLike[str],
    *,
    source_revision: str,
    config: dict[str, Any],
    control: dict[str, Any],
    workload: Mapping[str, Any],
    producer: ProducerInfo,
    require_sk_prof: bool = False,
) -> dict[str, Any]:
    """Seal the session's root: scan it, check every rule, write the manifest once."""
    session = load_session(session_path)
    root = Path(session["capture_root"])
    session_abs = Path(os.path.abspath(session_path)).resolve()
    if root.is_symlink() or not root.is_dir():
        raise ContractInputError("empty-root", root, "the capture root is missing or not a folder")
    if session_abs == root.resolve() or root.resolve() in session_abs.parents:
        raise ContractInputError("session-outside-root", session_path, "the session record lies inside the capture root")
    check_marker(root, session["session_fingerprint"], session["capture_role"])
    target = root / MANIFEST_NAME
    if target.exists() or target.is_symlink():
        raise ContractInputError("manifest-once", target, "the root is already finalized; a manifest is never replaced")
    finalized_ns = time.time_ns()
    files = scan_root(root)
    manifest = build_manifest(
        session,
        files=files,
        finalized_ns=finalized_ns,
        source_revision=source_revision,
        config=dict(config),
        control=dict(control),
        workload=normalize_workload(dict(workload), session_path),
        producer=producer,
    )
    check_manifest(manifest, target, require_sk_prof=require_sk_prof)
    signed = sign_manifest(manifest, root)
    write_json(target, signed)
    return signed


def _as_contract_error(exc: SignatureError, source: str | PathLike[str]) -> ContractIntegrityError:
    return ContractIntegrityError(exc.rule, exc.path or source, exc.detail)


def sign_manifest(manifest: dict[str, Any], root: Path) -> dict[str, Any]:
    """``manifest`` plus its ``signature``: the user's key over ``manifest_fingerprint``
    (which covers every other key). The key may not lie inside the root."""
    try:
        key = signer(outside=root)
    except SignatureError as exc:
        raise _as_contract_error(exc, root) from exc
    return {**manifest, "signature": key.sign(SIGNATURE_PURPOSE, manifest["manifest_fingerprint"])}


def check_signature(manifest: dict[str, Any], root: Path, source: str | PathLike[str]) -> str:
    """Rules signed, trusted-key, signature-valid: a trusted key signed this very manifest.

    Returns ``NAME (SHA256:…)`` of the signer. The trusted-keys file may not lie inside the root.
    """
    try:
        return trusted_keys(outside=root).verify(manifest.get("signature"), SIGNATURE_PURPOSE, manifest["manifest_fingerprint"]).label()
    except SignatureError as exc:
        raise _as_contract_error(exc, source) from exc


def manifest_location(path: str | PathLike[str]) -> tuple[Path, Path]:
    """(root, manifest file) from a root folder or a manifest path."""
    p = Path(path)
    if p.is_dir() and not p.is_symlink():
        return p, p / MANIFEST_NAME
    if p.name != MANIFEST_NAME:
        raise InputError(p, "not a collection root or manifest", expected=f"a folder holding {MANIFEST_NAME}")
    return p.parent, p


def load_manifest(path: str | PathLike[str], *, require_sk_prof: bool = False, archive: bool = False) -> dict[str, Any]:
    """Read a root's manifest and re-verify it against the disk.

    Checks every rule of :func:`check_manifest`, that a trusted key signed the
    manifest (:func:`check_signature`, live and archive), that the marker names the
    manifest's session, that each listed file is unchanged (sha256, size) and
    that no file was added after finalize. The *live* check (default, for
    analysis in place) also recomputes the session binding from the root's
    current path and compares each file's live stat (ctime, mtime, size,
    inode, device) with the recorded one; ``archive=True`` drops those two
    rules, which a copy to other storage necessarily breaks. Returns the manifest.
    """
    root, target = manifest_location(path)
    if target.is_symlink():
        raise ContractInputError("no-symlinks", target, "the manifest is a symbolic link")
    if not target.is_file():
        raise ContractInputError("required-files", target, "no manifest: the collection was never finalized")
    manifest: dict[str, Any] = load_json_file(target)
    check_manifest(manifest, target, require_sk_prof=require_sk_prof)
    check_signature(manifest, root, target)
    check_marker(root, manifest["capture"]["session_fingerprint"], manifest["capture_role"])
    if not archive:
        check_binding(root, manifest, target)
    listed = {rec["path"]: rec for records in manifest["files"].values() for rec in records}
    actual = set(list_files(root))
    added = sorted(actual - set(listed))
    if added:
        raise ContractIntegrityError(
            "no-files-after-finalize", root, f"{len(added)} file(s) not in the manifest: {', '.join(added[:5])}"
        )
    for rel, rec in sorted(listed.items()):
        if rel not in actual:
            raise ContractIntegrityError("file-unchanged", root, f"{rel} was removed after finalize")
        now = record_file(root, rel)
        if now.size != rec["size"] or now.sha256 != rec["sha256"]:
            raise ContractIntegrityError(
                "file-unchanged", root, f"{rel} changed after finalize (sha256/size differ from the manifest)"
            )
        if not archive:
            _check_live_stat(root, rel, rec)
    return manifest


_STAT_FIELDS = (("ctime_ns", "st_ctime_ns"), ("mtime_ns", "st_mtime_ns"), ("size", "st_size"),
                ("inode", "st_ino"), ("device", "st_dev"))


def _check_live_stat(root: Path, rel: str, rec: Mapping[str, Any]) -> None:
    """Live rule live-stat: the file is the very file object sealed at finalize (no content read)."""
    st = live_stat(root, rel)
    for key, attr in _STAT_FIELDS:
        if getattr(st, attr) != rec[key]:
            raise ContractIntegrityError(
                "live-stat", root,
                f"{rel} has {key}={getattr(st, attr)} but {rec[key]} was recorded at finalize"
                " (touched, rewritten, replaced or copied after finalize)",
            )
