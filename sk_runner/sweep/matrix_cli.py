"""``sk-run matrix init|freeze``: build and seal the session's option matrix."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import click

from sk_analytics.cli._base import ExistingPath, PathArg
from sk_analytics.errors import EXIT_OK, InputError, IntegrityError
from sk_analytics.messages import coded

MATRIX_NAME = "matrix.json"


def init_matrix(
    session: Path, seed_config: dict[str, Any], probes: list[dict[str, Any]], *, root: str | None = None, probes_source: str = "probes",
    seed_source: str | Path = "SEED config",
) -> Path:
    """Write ``<session>/matrix.json`` (unfrozen, :func:`checked_matrix`); a frozen matrix is never replaced."""
    from sk_analytics.files.atomic import write_json
    from sk_analytics.stage_o.matrix import load_matrix

    target = session / MATRIX_NAME
    if target.exists() and "freeze" in load_matrix(target):
        raise IntegrityError(f"{target}: the option matrix is frozen and immutable; start a new session to change it")
    write_json(target, checked_matrix(seed_config, probes, root=root, probes_source=probes_source, seed_source=seed_source))
    return target


def checked_matrix(
    seed_config: dict[str, Any], probes: list[dict[str, Any]], *, root: str | None = None, probes_source: str = "probes",
    seed_source: str | Path = "SEED config",
) -> dict[str, Any]:
    """The option matrix of these probes (:func:`~sk_analytics.stage_o.matrix.build_matrix`).

    The options object (``root``, else the layout's default) must exist in the
    SEED: every trial changes one pointer inside it.
    """
    from jsonpointer import JsonPointerException, resolve_pointer

    from sk_analytics.stage_o.matrix import build_matrix
    from sk_analytics.stage_o.options import options_root

    pointer = root or options_root(seed_config)
    try:
        options = resolve_pointer(seed_config, pointer, None)
    except JsonPointerException as exc:
        raise InputError(None, f"--options-root {pointer!r} is not an RFC 6901 pointer: {exc}") from None
    if not isinstance(options, dict):
        raise InputError(seed_source, f"no options object at {pointer}", expected="the super_kernel_optimize_options object of the SEED (--options-root)")
    return build_matrix(seed_config, probes, root=root, probes_source=probes_source)


def freeze_session_matrix(session: Path) -> str:
    """Freeze ``<session>/matrix.json`` and record its fingerprint in the ledger."""
    from sk_analytics.files.atomic import write_json
    from sk_analytics.ledger.chain import Ledger
    from sk_analytics.ledger.evidence import with_binding
    from sk_analytics.stage_o.matrix import check_frozen, freeze_matrix, load_matrix

    target = session / MATRIX_NAME
    matrix = load_matrix(target)
    ledger = Ledger(session)
    recorded = [r.data["fingerprint"] for r in ledger.records() if r.kind == "matrix_frozen"]
    if "freeze" in matrix:
        fp = check_frozen(matrix, target, expected=recorded[0] if recorded else None)
    else:
        matrix = freeze_matrix(matrix, frozen_ns=time.time_ns())
        write_json(target, matrix)
        fp = matrix["freeze"]["fingerprint"]
    if not recorded:  # also completes a freeze interrupted between the write and the ledger append
        ledger.append(
            "matrix_frozen",
            with_binding(session, {"fingerprint": fp, "path": MATRIX_NAME, "entries": [e["id"] for e in matrix["entries"]],
             "summary": coded("summary.matrix_frozen", n=len(matrix["entries"]), fp=fp[:12])}),
        )
    return fp


@click.group("matrix")
def matrix() -> None:
    """Build (init) and seal (freeze) the winner option matrix of a session."""


@matrix.command("init")
@click.option("--session", "session", required=True, type=PathArg(file_okay=False, path_type=Path), help="Session folder (matrix.json is written there).")
@click.option("--config", "config", required=True, type=PathArg(dir_okay=False, path_type=Path), help="Frozen Sbest-SEED execution config (JSON or YAML).")
@click.option("--probes", "probes", required=True, type=PathArg(dir_okay=False, path_type=Path), help="JSON list of exact-value probe results.")
@click.option("--options-root", "root", default=None, help="RFC 6901 pointer of the options object (auto-detected).")
def init(session: Path, config: Path, probes: Path, root: str | None) -> int:
    """Build superkernel-winner-option-matrix-v1 from the registry and probe results."""
    from sk_analytics.files.strict_json import load_config_file, load_json_file
    from sk_analytics.stage_o.matrix import load_matrix

    seed = load_config_file(config)
    probe_list = load_json_file(probes)
    if not isinstance(seed, dict):
        raise InputError(config, "SEED config must be a JSON object")
    if not isinstance(probe_list, list):
        raise InputError(probes, "probe results must be a JSON list")
    target = init_matrix(session, seed, probe_list, root=root, probes_source=str(probes), seed_source=config)
    entries = load_matrix(target)["entries"]
    click.echo(f"{target}: {len(entries)} entries ({sum(e['probe_evidence']['ready'] for e in entries)} probe-ready)")
    return EXIT_OK


@matrix.command("freeze")
@click.option("--session", "session", required=True, type=ExistingPath(file_okay=False, path_type=Path), help="Session folder holding matrix.json.")
def freeze(session: Path) -> int:
    """Seal the matrix with its fingerprint; any later edit is refused."""
    fp = freeze_session_matrix(session)
    click.echo(f"{session / MATRIX_NAME}: frozen, fingerprint {fp}")
    return EXIT_OK
