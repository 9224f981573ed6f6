"""``sk-run profile``: collect one diagnostic profile under the artifact contract."""

from __future__ import annotations

import json
from pathlib import Path

import click

from sk_analytics.cli._base import ExistingPath, PathArg
from sk_analytics.contract import CAPTURE_ROLES
from sk_analytics.errors import EXIT_NEGATIVE, EXIT_OK, InputError
from sk_analytics.files.strict_json import load_config_file
from sk_analytics.messages import resolve_lang, text
from sk_runner.backends import BACKENDS, make_backend
from sk_runner.backends.base import Control
from sk_runner.devices.options import lease_options, lease_request
from sk_runner.limits import ATTEMPTS, ITERATIONS, RANKS, SEED, TIMEOUT
from sk_runner.profile.defaults import DEFAULT_MAX_ATTEMPTS, DEFAULT_PROFILE_ITERATIONS, DEFAULT_SK_PROF_KB, MAX_SK_PROF_KB


@click.command("profile")
@click.option("--session", required=True, type=PathArg(file_okay=False, path_type=Path), help="Stage O session folder")
@click.option("--round", "round_name", required=True, help="round name, e.g. DCCI")
@click.option("--role", required=True, type=click.Choice(CAPTURE_ROLES), help="capture role of this collection")
@click.option("--config", "config", required=True, type=ExistingPath(dir_okay=False, path_type=Path),
              help="exact execution config (JSON/YAML)")
@click.option("--iterations", default=DEFAULT_PROFILE_ITERATIONS, show_default=True, type=ITERATIONS,
              help="iterations of the first window (halved after a full sk_prof buffer)")
@click.option("--warmup", default=8, show_default=True, type=click.IntRange(min=0), help="warm-up iterations")
@click.option("--ranks", default=8, show_default=True, type=RANKS, help="ranks (TP)")
@click.option("--timeout", "timeout_s", default=None, type=TIMEOUT,
              help="seconds before the producer's process group is killed")
@click.option("--backend", default="sim", show_default=True, type=click.Choice(BACKENDS),
              help="where the producer runs: the simulator, a torch_npu script, or any command after '--'")
@click.option("--network", default=None, type=PathArg(path_type=str), metavar="NAME|FILE", help="simulator network (sim backend)")
@click.option("--workload", "workload_path", type=ExistingPath(dir_okay=False, path_type=Path),
              help="workload identity fields (JSON/YAML: model, input, batch, mode, runtime …)")
@click.option("--sk-prof-kb", default=DEFAULT_SK_PROF_KB, show_default=True, type=click.IntRange(1, MAX_SK_PROF_KB),
              help="ASCEND_PROF_SK_ON: sk_prof buffer per core in KB")
@click.option("--export-type", "export_type", default="text", show_default=True, type=click.Choice(["text", "db"]),
              help="profiler export: text (kernel_details.csv, trace_view.json, task_time) or db "
                   "(ascend_pytorch_profiler_<rank>.db, torch_npu ExportType.Db); SK_RUN_PROFILE_EXPORT for the workload")
@click.option("--require-sk-prof/--no-require-sk-prof", default=None,
              help="sk_prof required [default: yes for baseline_profile/candidate_profile]")
@click.option("--max-attempts", default=DEFAULT_MAX_ATTEMPTS, show_default=True, type=ATTEMPTS,
              help="collections at most (each in a new root)")
@click.option("--seed", default=0, show_default=True, type=SEED, help="workload seed ({seed} / SK_RUN_SEED)")
@click.option("--cwd", type=ExistingPath(file_okay=False, path_type=Path), default=None,
              help="working directory of the producer, as of the workload's trials (default: the current one)")
@click.option("--no-ingest", is_flag=True, help="do not ingest the profile into <session>/data")
@lease_options
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
@click.argument("workload_cmd", nargs=-1, type=click.UNPROCESSED)
def profile(
    session: Path, round_name: str, role: str, config: Path, iterations: int, warmup: int, ranks: int,
    timeout_s: float | None, backend: str, network: str | None, workload_path: Path | None, sk_prof_kb: int, export_type: str,
    require_sk_prof: bool | None, max_attempts: int, seed: int, cwd: Path | None, no_ingest: bool, lease_root: Path | None,
    device_ids: tuple[str, ...], lease_timeout: float, unleased: bool, as_json: bool, workload_cmd: tuple[str, ...],
) -> int:
    """Collect a diagnostic profile into a new, contract-sealed root (protocol §6).

    The workload command goes after '--' (command/npu backends) with {config},
    {run_dir} and {seed} placeholders; it also gets SK_RUN_CONFIG, SK_RUN_DIR,
    SK_RUN_ITERATIONS, SK_RUN_WARMUP and the profiling switches.
    """
    from sk_runner.profile import ProfileSpec, collect_profile  # Polars, Arrow: when a profile is collected

    workload = {}
    if workload_path is not None:
        workload = load_config_file(workload_path)
        if not isinstance(workload, dict):
            raise InputError(workload_path, "workload is not an object", expected="a JSON/YAML object")
    spec = ProfileSpec(
        session=session, round=round_name, role=role, config=config,
        backend=make_backend(backend, list(workload_cmd), network=network, cwd=cwd),
        control=Control(ranks=ranks, iterations=iterations, warmup=warmup, timeout_s=timeout_s),
        workload=workload, sk_prof_kb=sk_prof_kb, export_type=export_type, require_sk_prof=require_sk_prof, max_attempts=max_attempts,
        seed=seed, ingest=not no_ingest, cwd=cwd, lease=lease_request(lease_root, device_ids, lease_timeout, unleased=unleased),
    )
    result = collect_profile(spec, progress=lambda m: click.echo(m, err=True))
    if as_json:
        click.echo(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
    elif result.ok:
        click.echo(f"complete: {result.root} (manifest {result.manifest_fingerprint}, {result.iterations} iterations)")
    else:
        click.echo(f"blocked: {result.reason}" + ("" if resolve_lang() == "en" else "\n" + text("profile.blocked_zh", "zh", reason=result.reason_zh)))
    return EXIT_OK if result.ok else EXIT_NEGATIVE
