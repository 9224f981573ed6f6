"""``sk-run trial``: one Stage O round — probe, correctness, N clean processes."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from sk_analytics.cli._base import PathArg, lang_option
from sk_runner.backends import BACKENDS, make_backend
from sk_runner.backends.base import Control
from sk_runner.devices.options import lease_options, require_lease, rerun_options, resume_request
from sk_runner.limits import ITERATIONS, RANKS, RUNS, SEED, TIMEOUT

if TYPE_CHECKING:  # the trial machinery (Polars, Arrow) is imported when a trial runs: --help stays fast
    from sk_runner.trial import Progress, TrialResult


def print_progress(event: Progress, round_name: str, lang: str = "en") -> None:
    """One status line on stderr, in ``lang``: stage, run k of N, elapsed, estimate."""
    from sk_analytics.messages import text

    eta = "" if event.eta_s is None else text("trial.eta", lang, seconds=event.eta_s)
    step = text(f"progress.trial_{event.stage}", lang, k=event.k, n=event.n)
    click.echo(text("trial.progress", lang, round=round_name, step=step, elapsed=event.elapsed_s, eta=eta), err=True)


def result_lines(result: TrialResult, lang: str) -> list[str]:
    """The trial's result in ``lang``: ok or failed with its reason (the failure's kind and the runner's words, as a
    sweep's console and report say them), the clean runs, the failure scene."""
    from sk_analytics.messages import render, text
    from sk_analytics.stage_o.steps import failure_message

    if result.status == "ok":
        lines = [text("trial.result_ok", lang, round=result.round)]
    else:
        failure = {"stage": result.outcome, "message": result.message, **({"words": result.words} if result.words else {})}
        lines = [text("trial.result_failed", lang, round=result.round, status=result.outcome, reason=render(failure_message(failure), lang))]
    runs = ", ".join(f"run-{k}" for k in result.runs_completed) or text("trial.no_runs", lang)
    lines.append("  " + text("trial.clean_runs", lang, runs=runs, target=result.runs_target, folder=result.round_dir / "CLEAN"))
    if result.scene_dir is not None:
        lines.append("  " + text("trial.scene", lang, folder=result.scene_dir))
    return lines


def rerun_argv(params: dict[str, Any], workload: tuple[str, ...], lease: list[str] | None = None) -> list[str]:
    """The sk-run command that resumes this trial (recorded in failure scenes).

    Every path is absolute and the workload's working directory is pinned
    (``--cwd``), so the command works from any folder."""
    argv = ["sk-run", "trial", "--session", str(Path(params["session"]).resolve()), "--round", params["round_name"],
            "--base-config", str(Path(params["base_config"]).resolve()), "--backend", params["backend"],
            "--cwd", str(Path(params["cwd"] or Path.cwd()).resolve())]
    argv += [a for s in params["sets"] for a in ("--set", s)]
    argv += [a for s in params["sources"] for a in ("--source", s)]
    for flag in ("joint_dcci", "incumbent"):
        if params[flag]:
            argv.append("--" + flag.replace("_", "-"))
    for name in ("runs", "top_up_to", "timeout", "ranks", "iterations", "warmup", "network", "seed", "same_identity_as", "lang"):
        if params[name] is not None:
            argv += ["--" + name.replace("_", "-"), str(params[name])]
    argv += lease or []
    return argv + (["--", *workload] if workload else [])


@click.command("trial")
@click.option("--session", type=PathArg(path_type=Path, file_okay=False), required=True, help="session folder")
@click.option("--round", "round_name", required=True, help="round name, e.g. O1 or O0-INCUMBENT")
@click.option("--base-config", type=PathArg(path_type=Path, dir_okay=False), required=True, help="incumbent execution config (JSON/YAML)")
@click.option("--set", "sets", multiple=True, metavar="/POINTER=JSON", help="the one RFC 6901 pointer to change")
@click.option("--joint-dcci", is_flag=True, help="allow the DCCI joint repair: before+after with identical lists")
@click.option("--incumbent", is_flag=True, help="run the base config unchanged (O0-INCUMBENT)")
@click.option("--runs", type=RUNS, default=3, show_default=True, help="clean processes to have (a trial needs at least 3)")
@click.option("--top-up-to", type=RUNS, default=None, help="add clean runs until exactly this many exist")
@click.option("--timeout", type=TIMEOUT, default=None, help="seconds per process before its group is killed")
@click.option("--backend", type=click.Choice(BACKENDS), default="sim", show_default=True,
              help="where the workload runs: the simulator, a torch_npu script, or any command after '--'")
@click.option("--ranks", type=RANKS, default=8, show_default=True, help="rank logs each process must write")
@click.option("--iterations", type=ITERATIONS, default=None,
              help="decode samples each rank log must hold, warm-up included (SK_RUN_ITERATIONS) [default: unset: the "
                   "simulator's own count, else the same count on every rank]")
@click.option("--warmup", type=click.IntRange(min=0), default=8, show_default=True, help="decode warm-up samples per rank")
@click.option("--network", default=None, type=PathArg(path_type=str), metavar="NAME|FILE", help="simulated network (sim)")
@click.option("--seed", type=SEED, default=None, help="session seed (default: session.json, else 0)")
@click.option("--cwd", type=PathArg(path_type=Path, file_okay=False), default=None,
              help="working directory of every process of the trial (probe, correctness, clean runs) [default: the current one]")
@click.option("--source", "sources", multiple=True, metavar="PATH",
              help="a file or folder that makes up the workload (relative to --cwd; repeat it), hashed into the trial identity "
                   "[default: the files the command names and the working directory's source files]")
@click.option("--same-identity-as", default=None, metavar="ROUND",
              help="round of the session whose recorded source/workload/controls/environment this trial must share "
                   "(the incumbent it will be compared with); a difference blocks the trial before it starts")
@lease_options
@lang_option("Language of the progress lines, the result lines and the failure scene.")
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
@click.argument("workload", nargs=-1, type=click.UNPROCESSED)
def trial(
    session: Path, round_name: str, base_config: Path, sets: tuple[str, ...], joint_dcci: bool, incumbent: bool,
    runs: int, top_up_to: int | None, timeout: float | None, backend: str, ranks: int, iterations: int | None,
    warmup: int, network: str | None, seed: int | None, cwd: Path | None, sources: tuple[str, ...], same_identity_as: str | None,
    lease_root: Path | None, device_ids: tuple[str, ...], lease_timeout: float, unleased: bool, lang: str, as_json: bool,
    workload: tuple[str, ...],
) -> int:
    """Run one clean, fingerprinted trial: probe the changed value, run
    correctness, then N fresh processes; resume or top up a trial by running the
    same command again. Workload args after '--' may use {config}, {run_dir}, {seed}."""
    params = dict(locals())
    from sk_runner.config import parse_set
    from sk_runner.devices.lease import LeaseFault, then_run
    from sk_runner.devices.recorded import round_request
    from sk_runner.trial import TrialSpec, round_dir_of, run_trial

    # a round run again takes the lease it asked for (recorded before any run), else the one its runs held
    recorded, recorded_unleased = round_request(round_dir_of(session, round_name))
    again = shlex.join(rerun_argv(params, workload))
    lease = resume_request(lease_root, device_ids, lease_timeout, recorded=recorded, recorded_unleased=recorded_unleased,
                           unleased=unleased, what=f"round {round_name} of {session}",
                           again=f"run it again with no lease options: {again}")
    require_lease(lease, backend)
    spec = TrialSpec(
        session=session,
        round=round_name,
        base_config=base_config,
        backend=make_backend(backend, list(workload), network=network, cwd=cwd),
        changes=tuple(parse_set(s) for s in sets),
        joint_dcci=joint_dcci,
        incumbent=incumbent,
        runs=runs,
        top_up_to=top_up_to,
        control=Control(ranks=ranks, iterations=iterations, warmup=warmup, timeout_s=timeout),
        seed=seed,
        cwd=cwd,
        sources=sources or None,
        rerun_command=tuple(rerun_argv(params, workload, rerun_options(lease))),
        same_identity_as=None if same_identity_as is None else round_dir_of(session, same_identity_as),
        lease=lease,
        lang=lang,
    )
    from sk_runner.devices.occupancy import simulated_devices
    from sk_runner.devices.registry import session_registry

    with session_registry(session, simulated_devices(backend)):  # a simulated session that names no registry: its own host
        try:
            result = run_trial(spec, progress=lambda e: print_progress(e, round_name, lang))  # SIGTERM: sk_runner.process.lifetime
        except LeaseFault as exc:  # nothing ran: the one line ends with the command that takes the round's lease again
            stop = LeaseFault(f"{exc.one_line()}. {then_run(exc, again)}")
            stop.reason, stop.recorded_in = exc.reason, exc.recorded_in
            raise stop from exc
    if as_json:
        click.echo(json.dumps(result.to_json(), ensure_ascii=False, indent=2))
    else:
        for line in result_lines(result, lang):
            click.echo(line)
    return result.exit_code
