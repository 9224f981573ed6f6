"""``sk-run sweep``: the whole Stage O session (phase entry, demo, resume)."""

from __future__ import annotations

import json
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from sk_analytics.cli._base import PathArg, lang_option
from sk_analytics.errors import EXIT_NEGATIVE, EXIT_OK, UsageError
from sk_analytics.interrupts import interrupt_of
from sk_analytics.option_trial.modes import GATE_MODES
from sk_runner.devices.options import lease_options, lease_request, require_lease
from sk_runner.hosts.options import hosts_options, hosts_request
from sk_runner.hosts.topology import HostsSpec, check_hosts
from sk_runner.limits import MAX_ITERATIONS, RANKS, SEED

if TYPE_CHECKING:  # the sweep (Polars, Arrow) is imported when it runs: --help stays fast
    from sk_runner.devices.lease import LeaseRequest
    from sk_runner.hosts.base import Hosts
    from sk_runner.sweep.session import SweepSession


def run_and_print(session: SweepSession, lang: str = "zh", quiet: bool = False, lease: LeaseRequest | None = None,
                  hosts: Hosts | None = None, started: Callable[[], None] | None = None) -> int:
    """Run a session to its hand-off with progress; print where the report is (exit 0 BASE, 1 stopped).

    ``lease``: the devices the sweep holds from its first device command to its hand-off; ``hosts``: the hosts
    of a session that spans hosts (each holding its own lease), held by the caller; ``started``: called once the
    sweep holds the session (after the session line)."""
    from sk_analytics.cli._base import OUTPUT_LABELS
    from sk_runner.sweep.driver import run_sweep

    labels = OUTPUT_LABELS[lang]
    say = (lambda text: None) if quiet else (lambda text: click.echo(text, err=True))  # stdout: the result lines only
    for notice in session.notices:
        click.echo(f"sk-run: warning: {notice}", err=True)
    try:  # the session line once the sweep holds the session: a refused one prints nothing on stdout
        def holding() -> None:
            click.echo(f"{labels['session']}{session.root}")
            if started is not None:
                started()

        outcome = run_sweep(session, say=say, lang=lang, lease=lease, hosts=hosts, started=holding)
    except BaseException as exc:  # Ctrl-C / SIGTERM (also one Python wrapped): every started process is already killed
        if interrupt_of(exc) is not None:
            click.echo(f"continue with: sk-run sweep --resume {shlex.quote(str(session.root.resolve()))}", err=True)
        raise
    assert outcome is not None
    click.echo(f"{labels['report']}{outcome.report}")
    click.echo(f"{labels['html']}{outcome.html}")
    click.echo(f"{labels['handoff']}{outcome.handoff}")
    if outcome.outcome != "base":  # a session stopped at O0: where its failure is, as the report and hand-off say
        from sk_analytics.ledger.chain import read_records
        from sk_analytics.stage_o.reasons import stop_reason
        from sk_analytics.stage_o.state import fold

        state = fold(read_records(session.root))
        stop = state.stopped or {}
        scene = (stop.get("evidence") or {}).get("scene")
        if scene:
            click.echo(f"{labels['scene']}{session.root / scene}")
        # the cause itself, not only where it is written (also with --quiet, on --resume), worded as the report and the
        # hand-off word it: also a stop recorded before stops were recorded messages (its reason_zh)
        cause = stop_reason(stop, state, lang) if stop else ""
        if cause:
            click.echo(f"sk-run: {cause}", err=True)
        click.echo(f"sk-run: {fresh_session_advice(session)}", err=True)
    return EXIT_OK if outcome.outcome == "base" else EXIT_NEGATIVE


def fresh_session_advice(session: SweepSession) -> str:
    """What to do after a stop: a stopped session is final (its signed ledger holds the stop, and a fixed
    workload is another workload than the one its records were made with), so ``--resume`` only shows the stop
    again; the way forward is a fresh session of the same task, named by the exact command (docs/sweep.md)."""
    from sk_runner.sweep.session import fresh_session_argv

    return ("this session stopped and stays stopped (sk-run sweep --resume shows this stop again); after fixing the cause "
            f"(said above; its failure scene, when it has one, holds the details), start a fresh session: {shlex.join(fresh_session_argv(session))}")


def full_profile_option(prefix: str = "") -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """``--full-profile`` of ``sk-run demo`` and ``sk-run sweep --demo`` (one option, one meaning: the
    ``full_profile`` of :func:`sk_runner.sweep.demo.demo_session`; a stopped demo's fresh command repeats it)."""
    return click.option("--full-profile", is_flag=True,
                        help=f"{prefix}DCCI collections profile the full 40 steps (~1.9 GB, ~2.5 min) instead of the demo's 14 (~0.7 GB).")


@click.command("sweep")
@click.option("--task", "task", type=PathArg(dir_okay=False, path_type=Path), help="Dispatched stage-O task (phase entry).")
@click.option("--resume", "resume", type=PathArg(file_okay=False, path_type=Path), help="Continue an interrupted session.")
@click.option("--demo", is_flag=True, help="A complete sweep on the simulated device with the default network.")
@click.option("--redecide", "redecide", type=PathArg(file_okay=False, path_type=Path),
              help="Re-decide a finished session under --gate (default family) into a linked successor --session, "
                   "reusing its runs and adding only the runs the gate needs; the original stays untouched.")
@click.option("--session", "session_dir", type=PathArg(file_okay=False, path_type=Path), help="Folder of a new session.")
@click.option("--plan-only", is_flag=True,
              help="With --task: validate, check the workload command (executable, placeholders) and print the plan "
                   "with the resolved command of every mode; run nothing.")
@click.option("--network", default=None, type=PathArg(path_type=str), metavar="NAME|FILE", help="With --demo: simulator network (default moe-decode).")
@click.option("--seed", default=2026, show_default=True, type=SEED, help="With --demo: session seed.")
@click.option("--ranks", default=None, type=RANKS, help="With --demo: ranks per process.")
@click.option("--iterations", default=None, type=click.IntRange(10, MAX_ITERATIONS), help="With --demo: decode samples per rank.")
@click.option("--gate", type=click.Choice(GATE_MODES), default=None,
              help="With --demo: gate mode of every option trial (default protocol; stats, sequential and family are NOT the "
                   "protocol; a task sets it as policy.gate). With --redecide: the successor's gate (default family).")
@full_profile_option("With --demo: ")
@lang_option("Language of the progress lines, the report and the hand-off reasons.")
@click.option("--quiet", is_flag=True, help="No progress lines and no plan on stderr: stdout keeps only the result lines.")
@lease_options
@hosts_options
def sweep(task: Path | None, resume: Path | None, demo: bool, redecide: Path | None, session_dir: Path | None, plan_only: bool, network: str | None,
          seed: int, ranks: int | None, iterations: int | None, gate: str | None, full_profile: bool, lang: str, quiet: bool,
          lease_root: Path | None, device_ids: tuple[str, ...], lease_timeout: float, unleased: bool,
          hosts: int, npus_per_host: int | None, cpus_per_host: float, ray_address: str | None) -> int:
    """Run Stage O from a frozen Sbest-SEED to a sealed Sbest-BASE (see docs/sweep.md).

    The sweep holds its device lease from its first device command to its hand-off; the session records the
    lease it was started with and every --resume takes that lease again. With --demo the lease lives under
    the session. On real NPUs a clean run is leased unless --unleased (recorded). With --hosts
    above 1 (a task on a Ray cluster) the ranks span hosts: one rank group per host, each host leasing the NPUs
    Ray assigns it; --resume continues such a session on the same hosts."""
    if sum((task is not None, resume is not None, demo, redecide is not None)) != 1:
        raise UsageError("give exactly one of --task FILE, --resume SESSION, --demo or --redecide SESSION")
    if plan_only and task is None:
        raise UsageError("--plan-only goes with --task")
    if gate is not None and not (demo or redecide is not None):
        raise UsageError("--gate goes with --demo or --redecide (a task sets policy.gate; a resumed session keeps its own)")
    if full_profile and not demo:
        raise UsageError("--full-profile goes with --demo (a task sets policy.profile_iterations; a resumed session keeps its own)")
    if redecide is not None:
        from sk_runner.sweep.leasing import session_request
        from sk_runner.sweep.redecide import successor_session
        from sk_runner.sweep.session import load_session

        if session_dir is None:
            raise UsageError("--redecide needs --session NEW: the successor's folder (the original stays untouched)")
        request = session_request(redecide, lease_root, device_ids, lease_timeout, unleased=unleased)  # the predecessor's lease
        require_lease(request, load_session(redecide).backend.name)
        successor = successor_session(redecide, session_dir, gate or "family", lease=_requested(request))
        return run_and_print(successor, lang, quiet, request)
    if demo and hosts > 1:
        raise UsageError("--hosts goes with --task (or --resume of a session that spans hosts); the demo runs on this host")
    if resume is not None:
        if session_dir is not None:
            raise UsageError("--resume takes the session folder itself; --session is for new sessions")
        from sk_runner.sweep.leasing import session_request
        from sk_runner.sweep.session import load_session
        from sk_runner.sweep.spans import recorded

        session = load_session(resume)
        spans = recorded(resume)
        if spans is None and hosts > 1:
            raise UsageError(f"{resume} runs on one host: --resume continues a session on the hosts it recorded (a new session "
                             "spans hosts with --task ... --hosts)")
        if spans is not None:
            spec = hosts_request(spans[0].hosts, spans[0].npus_per_host, spans[0].cpus_per_host, ray_address, ranks=session.control.ranks,
                                 device_ids=device_ids)
            return _on_hosts(resume, spec, ray_address, lease_root, lease_timeout,
                             lambda held: run_and_print(session, lang, quiet, None, held))
        request = session_request(resume, lease_root, device_ids, lease_timeout, unleased=unleased)
        require_lease(request, session.backend.name)
        return run_and_print(session, lang, quiet, request)
    if demo:
        from dataclasses import replace

        from sk_runner.backends.base import Control
        from sk_runner.sweep.demo import DEMO_CONTROL, DEMO_POLICY, demo_need, demo_root, demo_session

        request = lease_request(lease_root, device_ids, lease_timeout, unleased=unleased)  # a usage error before the session exists
        control = Control(ranks or DEMO_CONTROL.ranks, iterations or DEMO_CONTROL.iterations, DEMO_CONTROL.warmup)
        control.check()  # --ranks 10**8 leased 10**8 devices (exit 3, 'Too many open files'); refused before the session exists
        policy = DEMO_POLICY if gate is None else replace(DEMO_POLICY, gate=gate)
        folder = demo_root(session_dir)
        if request.need is None and not request.unleased:  # the demo's own lease, under its session
            request = replace(request, need=demo_need(folder, control.ranks))
        _require_fit(request, control.ranks)
        session = demo_session(folder, network=network, seed=seed, control=control, policy=policy, full_profile=full_profile, lease=request)
        return run_and_print(session, lang, quiet, request)
    from sk_runner.sweep.phase import check_workload_command, enter_phase, validate_task
    from sk_runner.sweep.spans import recorded

    assert task is not None
    checked = validate_task(task)
    root = session_dir or checked.session
    spans = None if root is None else recorded(root)  # a session that spans hosts, entered again: on its own hosts
    if (hosts > 1 or spans is not None) and not plan_only:
        if spans is not None and hosts == 1:
            hosts, npus_per_host, cpus_per_host = spans[0].hosts, spans[0].npus_per_host, spans[0].cpus_per_host
        spec = hosts_request(hosts, npus_per_host, cpus_per_host, ray_address, ranks=checked.control.ranks, device_ids=device_ids)
        if lease_root is None and spans is None and checked.backend.name != "sim":  # entered again: the roots it recorded
            raise UsageError(f"--hosts {hosts} with the {checked.backend.name} backend: every host must lease its NPUs; give "
                             "--lease-root DIR (the hosts' lease folder, the same path on every host) or SK_RUN_LEASE_ROOT")
        if root is None:
            raise UsageError(f"{task}: no session folder: give --session or the task's 'session'")
        check_workload_command(checked)  # a command that cannot start is said now, not after the hosts are reserved

        def run(held: Hosts | None) -> int:
            assert held is not None
            session, plan = enter_phase(task, root, placement=held.placement())
            _echo_plan(session, plan, quiet=quiet)
            return run_and_print(session, lang, quiet, None, held)

        return _on_hosts(root, spec, ray_address, lease_root, lease_timeout, run)
    check_hosts(hosts, npus_per_host, checked.control.ranks, cpus_per_host)  # --plan-only: the values, not the cluster
    request = _task_request(root, lease_root, device_ids, lease_timeout, unleased)
    if not plan_only:
        require_lease(request, checked.backend.name)
    _require_fit(request, checked.control.ranks)
    session, plan = enter_phase(task, session_dir, lease=_requested(request))
    _echo_plan(session, plan, plan_only=plan_only, quiet=quiet)
    if plan_only:
        return EXIT_OK
    return run_and_print(session, lang, quiet, request)


def _require_fit(request: LeaseRequest, ranks: int) -> None:
    """Refuse ranks the requested devices cannot hold before the session exists: a session created with that lease
    recorded could never run (every --resume takes the recorded lease again, and a new one is another environment)."""
    from sk_runner.hosts.base import ranks_problem

    problem = ranks_problem(None, request, ranks)
    if problem is not None:
        raise UsageError(problem)


def _task_request(root: Path | None, lease_root: Path | None, device_ids: tuple[str, ...], lease_timeout: float,
                  unleased: bool) -> LeaseRequest:
    """The lease of a task's sweep: a session entered again takes the lease it recorded, a new one the options'."""
    from sk_runner.sweep.leasing import session_request
    from sk_runner.sweep.session import SESSION_FILE

    if root is not None and (root / SESSION_FILE).is_file():
        return session_request(root, lease_root, device_ids, lease_timeout, unleased=unleased)
    return lease_request(lease_root, device_ids, lease_timeout, unleased=unleased)


def _requested(request: LeaseRequest) -> dict[str, Any] | None:
    """The ``lease_requested`` record a new session starts with (None: no lease asked)."""
    import os

    from sk_runner.sweep.leasing import request_record, request_source

    if request.need is None and not request.unleased:
        return None
    return request_record(request, request_source(request, os.environ))


def _echo_plan(session: SweepSession, plan: dict[str, Any], *, plan_only: bool = False, quiet: bool = False) -> None:
    """The recorded plan (formats.md §8) plus what each mode of the workload will run, resolved, and the option
    matrix the session will freeze (one line per entry): on stdout with ``--plan-only`` (it is that command's
    result), else on stderr with the progress lines (none with ``--quiet``), so a sweep's stdout is its result lines."""
    if quiet and not plan_only:
        return
    from sk_runner.sweep.plan import matrix_plan, workload_plan

    click.echo(json.dumps({**plan, "workload": workload_plan(session), "matrix": matrix_plan(session)}, ensure_ascii=False, indent=2),
               err=not plan_only)


def _on_hosts(root: Path, spec: HostsSpec | None, ray_address: str | None, lease_root: Path | None, lease_timeout: float,
              run: Callable[[Hosts | None], int]) -> int:
    """``run`` with the session's hosts reserved on Ray (pinned to its recorded ones), given back at the end."""
    from sk_runner.sweep.spans import session_hosts

    with session_hosts(root, spec, address=ray_address, lease_root=None if lease_root is None else str(lease_root),
                       lease_timeout_s=lease_timeout) as held:
        return run(held)
