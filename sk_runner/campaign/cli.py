"""``sk-run campaign``: run, resume, watch and cancel a campaign of Stage O sessions."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import click

from sk_analytics.cli._base import FiniteFloat, PathArg
from sk_analytics.errors import EXIT_OK, UsageError
from sk_analytics.files.strict_json import load_json_file
from sk_analytics.messages import coded, resolve_lang, text
from sk_runner.limits import MAX_TIMEOUT_S

ADDRESS_HELP = "Join this Ray cluster (default: $RAY_ADDRESS; neither: an embedded local Ray, or sessions one by one without Ray)."


def _executor(address: str | None, local: bool) -> Any:
    """Ray when asked or installed; the local sequential path otherwise (saying how to get Ray)."""
    from sk_runner.campaign.local_executor import LocalExecutor

    address = address or os.environ.get("RAY_ADDRESS") or None
    if local:
        if address:
            raise UsageError("--local runs without Ray; it does not go with --address/RAY_ADDRESS")
        return LocalExecutor()
    if address is None:
        try:
            import ray  # noqa: F401
        except ImportError:
            from sk_runner.campaign.ray_executor import INSTALL_HINT

            click.echo(text("campaign.no_ray", resolve_lang(), hint=INSTALL_HINT), err=True)
            return LocalExecutor()
    from sk_runner.campaign.ray_executor import RayExecutor

    return RayExecutor(address)


def _drive(root: Path, spec: Any, address: str | None, local: bool, quiet: bool, resumed: bool, source: str) -> int:
    """Check every task's resources against the cluster before anything runs, then run the driver; a new
    campaign's folder is created only after the check, so a refused campaign leaves no root behind."""
    from sk_runner.campaign.driver import Driver, check_resources, create_campaign
    from sk_runner.campaign.progress import make_view

    executor = _executor(address, local)
    try:
        spanning = [t.id for t in spec.tasks if t.hosts > 1]
        if spanning and executor.kind == "local":
            from sk_runner.campaign.ray_executor import INSTALL_HINT

            raise UsageError(f"{source}: task(s) {', '.join(spanning)} span hosts: a multi-host task needs Ray "
                             f"({INSTALL_HINT}, and no --local); without Ray every session runs on this machine")
        check_resources(spec, executor, source)
        if not resumed:
            if not create_campaign(root, spec):
                click.echo(text("campaign.reused_folder", resolve_lang(), root=root), err=True)
        code = Driver(root, spec, executor, make_view(quiet)).run(resumed)
    finally:
        executor.shutdown()
    _print_status(root)
    return code


@click.group("campaign")
def campaign() -> None:
    """Many Stage O sessions on a fleet, each pinned to one server (see docs/campaign.md)."""


@campaign.command("run")
@click.argument("spec_path", metavar="SPEC", type=PathArg(dir_okay=False, path_type=Path))
@click.option("--root", type=PathArg(file_okay=False, path_type=Path), help="Campaign folder (shared by every node); default: the spec's 'root'.")
@click.option("--address", default=None, help=ADDRESS_HELP)
@click.option("--local", is_flag=True, help="Run the sessions one by one on this machine, without Ray.")
@click.option("--quiet", is_flag=True, help="Campaign events only, no per-session progress.")
def run(spec_path: Path, root: Path | None, address: str | None, local: bool, quiet: bool) -> int:
    """Validate SPEC, create the campaign folder and run every task's session.

    Exit 0 when every session ended with a Sbest-BASE, 1 otherwise (stopped,
    failed, interrupted: 'resume' continues), 2 bad spec, 3 environment.
    """
    from sk_runner.campaign.driver import refuse_existing
    from sk_runner.campaign.spec import load_spec

    spec = load_spec(spec_path)
    target = root or (Path(spec.root) if spec.root else None)
    if target is None:
        raise UsageError(f"{spec_path}: no campaign folder: give --root or the spec's 'root'")
    refuse_existing(target, spec)  # before Ray starts: a folder that cannot take the campaign is named at once
    return _drive(target, spec, address, local, quiet, resumed=False, source=str(spec_path))


@campaign.command("resume")
@click.argument("root", type=PathArg(file_okay=False, path_type=Path))
@click.option("--address", default=None, help=ADDRESS_HELP)
@click.option("--local", is_flag=True, help="Continue without Ray (sessions pinned to this machine only).")
@click.option("--quiet", is_flag=True, help="Campaign events only, no per-session progress.")
def resume(root: Path, address: str | None, local: bool, quiet: bool) -> int:
    """Continue an interrupted campaign: finished sessions stay, the others go on on their own nodes."""
    from sk_runner.campaign.driver import load_campaign

    return _drive(root, load_campaign(root), address, local, quiet, resumed=True, source=str(root / "campaign.json"))


@campaign.command("job", hidden=True)
@click.argument("payload")
@click.option("--quiet", is_flag=True, help="No progress lines.")
def job(payload: str, quiet: bool) -> int:
    """Internal: the sweep process of one campaign job (started by the job on its node). Creates the
    session pinned to the node if it does not exist yet (checks the pin if it does), then runs it."""
    from sk_runner.campaign.job import parse_job, run_sweep_process

    return run_sweep_process(*parse_job(payload), quiet)


def _driver_state(root: Path) -> tuple[dict[str, Any] | None, bool]:
    """The recorded driver and whether it is alive (checked only on its own host)."""
    from sk_runner.campaign.state import RUN_DIR
    from sk_runner.process import process_alive
    from sk_runner.process.lifetime import start_ticks

    path = root / RUN_DIR / "driver.json"
    if not path.is_file():
        return None, False
    rec = load_json_file(path)
    here = rec.get("host") == socket.gethostname()
    alive = here and process_alive(int(rec["pid"])) and start_ticks(int(rec["pid"])) == rec.get("start_ticks")
    return rec, alive


def _print_status(root: Path, as_json: bool = False) -> None:
    from sk_runner.campaign.progress import table
    from sk_runner.campaign.state import read_campaign, rows

    meta, tasks = read_campaign(root)
    items = rows(root, [t["id"] for t in meta["spec"]["tasks"]], tasks)
    rec, alive = _driver_state(root)
    if as_json:
        click.echo(json.dumps({"campaign": meta["spec"]["name"], "driver": {"record": rec, "alive": alive},
                               "sessions": [r.to_json() for r in items],
                               "links": {t.id: t.links for t in tasks.values() if any(t.links.values())}}, ensure_ascii=False, indent=2))
        return
    click.echo(table(items))
    if rec is None:
        driver = coded("campaign.driver_unrecorded")
    elif rec.get("host") != socket.gethostname():
        driver = coded("campaign.driver_elsewhere", host=rec.get("host"), pid=rec["pid"])
    else:
        driver = coded("campaign.driver_running" if alive else "campaign.driver_not_running", pid=rec["pid"])
    click.echo(text("campaign.driver", resolve_lang(), state=driver))


@campaign.command("status")
@click.argument("root", type=PathArg(file_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Machine-readable status.")
def status(root: Path, as_json: bool) -> int:
    """Every session's node, phase, round, last decision and elapsed time, read from the ledgers.

    Works while the campaign runs and after its driver died."""
    from sk_runner.campaign.state import CAMPAIGN_FILE

    if not (root / CAMPAIGN_FILE).is_file():
        from sk_analytics.errors import InputError

        raise InputError(root / CAMPAIGN_FILE, "not a campaign (campaign.json missing)", expected="a folder created by sk-run campaign run")
    _print_status(root, as_json)
    return EXIT_OK


@campaign.command("cancel")
@click.argument("root", type=PathArg(file_okay=False, path_type=Path))
@click.option("--address", default=None, help="With a driver that died: the Ray cluster whose nodes run its sessions.")
@click.option("--wait-s", default=60.0, show_default=True, type=FiniteFloat(min=1, max=MAX_TIMEOUT_S), help="How long to wait for the driver to stop.")
def cancel(root: Path, address: str | None, wait_s: float) -> int:
    """Stop a campaign: the driver cancels its sessions and every workload process group is killed.

    The campaign stays resumable ('sk-run campaign resume ROOT')."""
    from filelock import FileLock, Timeout

    from sk_analytics.ledger.chain import Ledger
    from sk_runner.campaign.job import reap_workers
    from sk_runner.campaign.state import CAMPAIGN_FILE
    from sk_runner.process import process_alive

    if not (root / CAMPAIGN_FILE).is_file():
        from sk_analytics.errors import InputError

        raise InputError(root / CAMPAIGN_FILE, "not a campaign (campaign.json missing)", expected="a folder created by sk-run campaign run")
    rec, alive = _driver_state(root)
    if alive and rec is not None:
        os.kill(int(rec["pid"]), signal.SIGTERM)
        deadline = time.monotonic() + wait_s
        while process_alive(int(rec["pid"])) and time.monotonic() < deadline:
            time.sleep(0.2)
        if process_alive(int(rec["pid"])):
            raise UsageError(f"{root}: the driver (pid {rec['pid']}) did not stop within {wait_s:.0f} s")
    lock = FileLock(str(root / ".driver.lock"))
    try:
        lock.acquire(timeout=5)
    except Timeout:
        raise UsageError(f"{root}: a driver on another host holds the campaign; cancel it there") from None
    try:
        killed = reap_workers(root)
        if address:
            killed += _reap_on_cluster(root, address)
        if not alive:
            _record_cancelled_sessions(root)
            Ledger(root).append("campaign_stopped", {"reason": "cancelled", "reaped": killed,
                                                     "summary": coded("campaign.summary.cancelled_offline", n=len(killed))})
    finally:
        lock.release()
    click.echo(text("campaign.cancelled", resolve_lang(), root=root))
    return EXIT_OK


def _record_cancelled_sessions(root: Path) -> None:
    """With the driver dead, nobody recorded how its sessions ended: each current session that has not
    ended is recorded as cancelled, so ``status`` says so instead of the last phase its ledger reached."""
    from sk_analytics.ledger.chain import Ledger, read_records
    from sk_runner.campaign.state import FINAL, fold

    ledger = Ledger(root)
    for st in fold(read_records(root)).values():
        if st.session is not None and st.outcome not in FINAL and st.outcome != "cancelled" and not st.gave_up:
            ledger.append("session_ended", {"task": st.id, "session": st.session, "outcome": "cancelled", "driver": "dead",
                                            "summary": coded("campaign.summary.session_cancelled", task=st.id, session=st.session)})


def _reap_on_cluster(root: Path, address: str) -> list[str]:
    """Run the reaper on every node of the cluster (each kills the groups recorded for itself)."""
    from sk_runner.campaign.ray_executor import RayExecutor, reap_remote

    executor = RayExecutor(address)
    try:
        return reap_remote(executor, root)
    finally:
        executor.shutdown()
