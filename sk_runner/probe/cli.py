"""``sk-run probe``: is an exact option value accepted by the wrapper and used by the runtime?"""

from __future__ import annotations

import json
from pathlib import Path

import click

from sk_analytics.cli._base import ExistingPath, PathArg
from sk_analytics.errors import EXIT_NEGATIVE, EXIT_OK, UsageError
from sk_runner.backends import BACKENDS, make_backend
from sk_runner.devices.options import lease_options, lease_request
from sk_runner.limits import RANKS


def _parse_value(text: str) -> object:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        raise UsageError(f"--value {text!r} is not JSON (quote strings: '\"x\"', lists: '[\".*\"]')") from None


@click.command("probe")
@click.option("--option", "option", required=True, help="SK option name, the runtime's or torch_npu's (opt_extend_option or opt_extend), e.g. auto_op_parallel")
@click.option("--value", "values", multiple=True, required=True, metavar="JSON", help="exact value to probe (repeatable)")
@click.option("--backend", type=click.Choice(BACKENDS), default="sim", show_default=True,
              help="whose wrapper and runtime to ask: the simulator, torch_npu, or a command after '--'")
@click.option("--config", "config", type=PathArg(path_type=Path, dir_okay=False), default=None,
              help="base execution config the value is set into (default: a minimal torch.compile config)")
@click.option("--session", type=PathArg(path_type=Path, file_okay=False), default=None, help="session folder (probes go to <session>/probes)")
@click.option("--out", type=PathArg(path_type=Path, file_okay=False), default=None, help="probe folder (default <session>/probes or ./sk-probes)")
@click.option("--network", default=None, type=PathArg(path_type=str), metavar="NAME|FILE", help="simulated network (sim)")
@click.option("--ranks", type=RANKS, default=1, show_default=True,
              help="SK_RUN_RANKS of the probe process (a sweep's probes get the task's rank count)")
@click.option("--cwd", type=ExistingPath(file_okay=False, path_type=Path), default=None,
              help="working directory of the probe process, as of the workload's trials (default: the current one)")
@lease_options
@click.option("--json", "as_json", is_flag=True, help="print the result as JSON")
@click.argument("workload", nargs=-1, type=click.UNPROCESSED)
def probe(option: str, values: tuple[str, ...], backend: str, config: Path | None, session: Path | None, out: Path | None,
          network: str | None, ranks: int, cwd: Path | None, lease_root: Path | None, device_ids: tuple[str, ...], lease_timeout: float, unleased: bool,
          as_json: bool, workload: tuple[str, ...]) -> int:
    """Probe exact option values: ready only when the wrapper accepts the value
    and super_kernel.log does not report it as invalid-and-defaulted. Exit 0
    when every value is ready, 1 when one is not, 3 for the environment.

    Exit 3 also when the probe process wrote no super_kernel.log naming the
    option (docs/runner.md, "Probe mode"): the workload, not the value."""
    import os
    from dataclasses import replace

    from sk_runner.config import load_config, refuse_dirty_env
    from sk_runner.devices.lease import hold, lease_environ, lease_record
    from sk_runner.probe import PROBE_CONTROL, probe_values  # Polars: imported when a probe runs, not for --help

    refuse_dirty_env(os.environ)
    request = lease_request(lease_root, device_ids, lease_timeout, unleased=unleased)
    if not option.strip():
        raise UsageError("--option needs an SK option name, e.g. auto_op_parallel")
    parsed = [_parse_value(v) for v in values]
    out_dir = out or (session / "probes" if session is not None else Path("sk-probes"))
    base = load_config(config) if config is not None else None
    if session is not None:
        from sk_runner.process import lifetime
        from sk_runner.process.session import require_session

        require_session(session)
        lifetime.attach(session)
    with hold(request, env=os.environ, session=session) as lease:  # the probe processes run inside the device lease
        result = probe_values(option, parsed, make_backend(backend, list(workload), network=network, cwd=cwd), out_dir=out_dir,
                              base_config=base, base_source=config, control=replace(PROBE_CONTROL, ranks=ranks), cwd=cwd,
                              env=lease_environ(lease, os.environ))
    if as_json:
        click.echo(json.dumps({**result.to_json(), "lease": lease_record(lease)}, ensure_ascii=False, indent=2))
    else:
        click.echo(f"{result.option}: ready={'true' if result.ready else 'false'} ({result.backend})")
        for record in result.values:
            verdict = "accepted" if record.ready else "blocked" if record.wrapper.blocked else "rejected"
            click.echo(f"  {json.dumps(record.value, ensure_ascii=False)}: {verdict} — {record.reason}")
    return EXIT_OK if result.ready else EXIT_NEGATIVE
