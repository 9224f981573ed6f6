"""``sk-analyze contract``: begin / finalize / verify / validate-set of diagnostic collections.

Thin click layer over :mod:`sk_analytics.contract`; every rule violation is
raised as a product error whose one-line message names the rule (exit 2).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from sk_analytics.cli._base import ExistingPath, PathArg
from sk_analytics.contract import (
    CAPTURE_ROLES,
    MANIFEST_NAME,
    ProducerInfo,
    begin,
    command_fingerprint,
    finalize,
    load_manifest,
    validate_set,
)
from sk_analytics.contract.manifest import check_signature, manifest_location
from sk_analytics.errors import EXIT_OK, InputError, UsageError
from sk_analytics.files.atomic import write_json
from sk_analytics.files.strict_json import load_config_file, loads_strict

_PATH = PathArg(path_type=Path)
_EXISTING = ExistingPath(dir_okay=False, path_type=Path)


def _object_file(path: Path, what: str) -> dict[str, Any]:
    data = load_config_file(path)
    if not isinstance(data, dict):
        raise InputError(path, f"{what} is {type(data).__name__}", expected="a JSON/YAML object")
    return data


@click.group()
def contract() -> None:
    """Artifact collection contract of diagnostic profiles (formats.md §6)."""


@contract.command("begin")
@click.option("--role", required=True, type=click.Choice(CAPTURE_ROLES), help="capture role of the collection")
@click.option("--root", required=True, type=_PATH, help="new, empty capture root (created if absent)")
@click.option("--session-out", required=True, type=_PATH, help="session record to write, outside the root")
def begin_cmd(role: str, root: Path, session_out: Path) -> int:
    """Open a collection session before the producer starts."""
    record = begin(role, root, session_out)
    click.echo(json.dumps(record, ensure_ascii=False, sort_keys=True))
    return EXIT_OK


@contract.command("finalize")
@click.option("--session", "session_path", required=True, type=_EXISTING, help="session record written by begin")
@click.option("--source-revision", required=True, help="source revision of the producer (git commit or release)")
@click.option("--config", "config_path", required=True, type=_EXISTING, help="exact execution config (JSON/YAML)")
@click.option("--control", "control_path", required=True, type=_EXISTING, help="run controls (JSON/YAML object)")
@click.option("--workload", "workload_path", required=True, type=_EXISTING, help="workload identity (JSON/YAML object)")
@click.option("--producer-pid", required=True, type=click.IntRange(min=1), help="native pid of the producer")
@click.option("--producer-started-ns", required=True, type=click.IntRange(min=0), help="producer start, ns since epoch")
@click.option("--producer-ended-ns", required=True, type=click.IntRange(min=0), help="producer end, ns since epoch")
@click.option("--command-fingerprint", "command_fp", help="SHA-256 of the producer command (canonical JSON argv)")
@click.option("--command-argv", help="producer argv as a JSON array (fingerprinted here)")
@click.option("--require-sk-prof", is_flag=True, help="sk_prof is required (DCCI child attribution)")
def finalize_cmd(
    session_path: Path,
    source_revision: str,
    config_path: Path,
    control_path: Path,
    workload_path: Path,
    producer_pid: int,
    producer_started_ns: int,
    producer_ended_ns: int,
    command_fp: str | None,
    command_argv: str | None,
    require_sk_prof: bool,
) -> int:
    """Seal the root after the producer ran: write its manifest."""
    if (command_fp is None) == (command_argv is None):
        raise UsageError("give exactly one of --command-fingerprint and --command-argv")
    if command_argv is not None:
        argv = loads_strict(command_argv, "--command-argv")
        if not isinstance(argv, list) or not argv or not all(isinstance(a, str) for a in argv):
            raise UsageError("--command-argv must be a non-empty JSON array of strings")
        command_fp = command_fingerprint(argv)
    assert command_fp is not None
    manifest = finalize(
        session_path,
        source_revision=source_revision,
        config=_object_file(config_path, "config"),
        control=_object_file(control_path, "control"),
        workload=_object_file(workload_path, "workload"),
        producer=ProducerInfo(producer_pid, producer_started_ns, producer_ended_ns, command_fp.lower()),
        require_sk_prof=require_sk_prof,
    )
    count = sum(len(v) for v in manifest["files"].values())
    click.echo(f"sealed {manifest['capture_role']}: {count} files, manifest_fingerprint {manifest['manifest_fingerprint']}")
    return EXIT_OK


_ARCHIVE_HELP = ("archive check of a copied collection: skip the live rules (session-binding to the root's path, "
                 "live-stat of each file) but keep content, manifest and signature checks")


@contract.command("verify")
@click.argument("root", type=_PATH)
@click.option("--require-sk-prof", is_flag=True, help="sk_prof is required (DCCI child attribution)")
@click.option("--archive", is_flag=True, help=_ARCHIVE_HELP)
def verify_cmd(root: Path, require_sk_prof: bool, archive: bool) -> int:
    """Re-verify one sealed collection (manifest, marker, session binding and every file)."""
    manifest = load_manifest(root, require_sk_prof=require_sk_prof, archive=archive)
    mode = "archive" if archive else "live"
    signer = check_signature(manifest, manifest_location(root)[0], root)
    click.echo(f"valid {manifest['capture_role']} ({mode} check): manifest_fingerprint {manifest['manifest_fingerprint']},"
               f" signed by {signer}")
    return EXIT_OK


def _role_paths(items: tuple[str, ...]) -> dict[str, Path]:
    result: dict[str, Path] = {}
    for item in items:
        role, sep, path = item.partition("=")
        if not sep or role not in CAPTURE_ROLES or not path:
            raise UsageError(f"--manifest {item!r}: expected ROLE=PATH with ROLE one of {', '.join(CAPTURE_ROLES)}")
        if role in result:
            raise UsageError(f"--manifest: role {role} given twice")
        result[role] = Path(path)
    return result


@contract.command("validate-set")
@click.option("--manifest", "manifests", multiple=True, required=True,
              help=f"ROLE=PATH, PATH a collection root or its {MANIFEST_NAME} (repeat per role)")
@click.option("--allow-change", "allowed", multiple=True, help="RFC 6901 config pointer allowed (and required) to differ")
@click.option("--require-sk-prof", is_flag=True, help="sk_prof is required (DCCI child attribution)")
@click.option("--json-out", type=_PATH, help="write the set record here")
@click.option("--archive", is_flag=True, help=_ARCHIVE_HELP)
def validate_set_cmd(
    manifests: tuple[str, ...], allowed: tuple[str, ...], require_sk_prof: bool, json_out: Path | None, archive: bool
) -> int:
    """Prove that a set of collections may be compared (formats.md §6); live check unless --archive."""
    record = validate_set(_role_paths(manifests), list(allowed), require_sk_prof=require_sk_prof, archive=archive)
    if json_out is not None:
        write_json(json_out, record)
    click.echo(f"valid set of {', '.join(record['roles'])}: set_fingerprint {record['set_fingerprint']}")
    return EXIT_OK
