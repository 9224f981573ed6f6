"""``sk-run options`` (every SK option, its valid values and its candidates) and ``sk-run task init`` (a valid task)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from sk_analytics.cli._base import PathArg
from sk_analytics.errors import EXIT_OK, UsageError
from sk_analytics.option_trial.modes import GATE_MODES
from sk_runner.devices.options import lease_options, lease_request
from sk_runner.limits import ITERATIONS, RANKS, SEED, TIMEOUT


@click.command("options")
@click.option("--json", "as_json", is_flag=True, help="Print the table as JSON (one object per option).")
def options(as_json: bool) -> int:
    """List every SK option: its type and range, its default and the candidate values the option matrix tries
    (the valid option/value pairs of a task's accepted_option_values)."""
    from sk_analytics.fingerprint import canonical_json
    from sk_runner.sweep.task_init import option_table

    table = option_table()
    if as_json:
        click.echo(json.dumps(table, ensure_ascii=False, indent=2))
        return EXIT_OK
    for row in table:
        names = row["option"] + ("" if row["wrapper"] == row["option"] else f" (torch_npu: {row['wrapper']})")
        tried = ", ".join(canonical_json(v) for v in row["candidates"]) or ("never (a debug option)" if row["debug"] else "never")
        click.echo(f"{names}: {row['kind']}, {row['expected']}; default {canonical_json(row['default'])}; candidates: {tried}")
    return EXIT_OK


@click.group("task")
def task() -> None:
    """Write a dispatched Stage O task (see docs/sweep.md)."""


def _accepted(items: tuple[str, ...]) -> list[dict[str, object]] | None:
    """``--accept OPTION=JSON`` items as ``{option, value}`` records (none given: None, every candidate)."""
    from sk_analytics.errors import InputError
    from sk_analytics.files.strict_json import loads_strict

    out: list[dict[str, object]] = []
    for text in items:
        option, sep, raw = text.partition("=")
        if not sep:
            raise UsageError(f"--accept {text!r}: expected OPTION=JSON_VALUE (sk-run options lists them)")
        try:
            out.append({"option": option, "value": loads_strict(raw, f"--accept {option}")})
        except InputError as exc:
            raise UsageError(f"--accept {text[:80]!r}: {exc.message}") from None
    return out or None


@task.command("init")
@click.option("--seed-config", type=PathArg(dir_okay=False, path_type=Path), required=True,
              help="The frozen Sbest-SEED execution config (JSON/YAML); copied into the task folder with its fingerprint.")
@click.option("--out", "folder", type=PathArg(file_okay=False, path_type=Path), default=Path("stage-o-task"), show_default=True,
              help="Folder of the task (task.json, phase.json, seed-config.json, S0/); must not hold a task yet.")
@click.option("--ranks", type=RANKS, default=8, show_default=True, help="Rank logs each process writes.")
@click.option("--iterations", type=ITERATIONS, default=None, help="Decode iterations per rank (SK_RUN_ITERATIONS).")
@click.option("--warmup", type=click.IntRange(min=0), default=8, show_default=True, help="Decode warm-up samples per rank.")
@click.option("--seed", type=SEED, default=0, show_default=True, help="Workload seed of the session.")
@click.option("--timeout", type=TIMEOUT, default=None,
              help="Seconds per process (the S0 run and the task's policy.timeout_s).")
@click.option("--cwd", type=PathArg(file_okay=False, path_type=Path), default=None,
              help="Working directory of every workload process [default: the current one].")
@click.option("--source", "sources", multiple=True, metavar="PATH",
              help="A file or folder that makes up the workload (relative to --cwd; repeatable), the task's workload.sources "
                   "[default: the files the command names and the working directory's source files].")
@click.option("--accept", "accept", multiple=True, metavar="OPTION=JSON",
              help="An option value the active wrapper accepts (repeatable) [default: every candidate; sk-run options lists them].")
@click.option("--gate", type=click.Choice(GATE_MODES), default="protocol", show_default=True,
              help="Gate mode of every option trial (policy.gate).")
@lease_options
@click.argument("workload", nargs=-1, required=True)
def init(seed_config: Path, folder: Path, ranks: int, iterations: int | None, warmup: int, seed: int, timeout: float | None,
         cwd: Path | None, sources: tuple[str, ...], accept: tuple[str, ...], gate: str, lease_root: Path | None, device_ids: tuple[str, ...],
         lease_timeout: float, unleased: bool, workload: tuple[str, ...]) -> int:
    """Write a valid task for a command workload (after '--'): run it once on the SEED config (correctness and the S0
    clean run the task is bound to), then write the task, its phase manifest and the SEED with its fingerprint.
    `sk-run sweep --task FOLDER/task.json --plan-only` then shows the matrix it would run."""
    from sk_runner.backends.base import Control
    from sk_runner.sweep.task_init import init_task

    if (folder / "task.json").exists():
        raise UsageError(f"{folder / 'task.json'} exists: choose a new --out folder")
    control = Control(ranks=ranks, iterations=iterations, warmup=warmup, timeout_s=timeout)
    control.check()
    written = init_task(folder, seed_config, workload, control=control, seed=seed, cwd=cwd, sources=sources or None,
                        accepted=_accepted(accept),
                        policy={"gate": gate}, lease=lease_request(lease_root, device_ids, lease_timeout, unleased=unleased))
    click.echo(f"task: {written.path}")
    click.echo(f"accepted option values: {len(written.data['accepted_option_values'])} (sk-run options lists every candidate)")
    click.echo(f"next: sk-run sweep --task {written.path} --plan-only")
    return EXIT_OK
