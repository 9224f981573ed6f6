"""``sk-run sim`` / ``python -m sk_runner.sim``: one simulated SuperKernel workload process."""

from __future__ import annotations

from pathlib import Path

import click

from sk_analytics.cli._base import FiniteFloat, PathArg
from sk_analytics.errors import UsageError
from sk_runner.limits import NOISE, SEED, TIMEOUT

MAX_SLOWDOWN = 100.0
"""Largest factor by which a foreign load slows the kernels of its simulated NPUs."""


@click.command("sim")
@click.option("--config", "config", type=PathArg(dir_okay=False, path_type=Path), help="Execution config (JSON or YAML); required for a workload.")
@click.option("--run-dir", "run_dir", type=PathArg(file_okay=False, path_type=Path), help="Where log_<rank>.log and the artifacts go; required for a workload.")
@click.option("--ranks", default=8, show_default=True, type=int, help="Tensor-parallel ranks (one log per rank).")
@click.option("--iterations", default=200, show_default=True, type=int, help="Decode samples logged per rank (warm-up included).")
@click.option("--warmup", default=8, show_default=True, type=int, help="Length of the warm-up ramp in decode samples.")
@click.option("--seed", default=None, type=SEED, help="Noise seed [default: $SK_RUN_SEED, else random].")
@click.option("--profile", is_flag=True, help="Profiler on (also SK_RUN_PROFILE=1): kernel_details.csv, trace_view.json, task time.")
@click.option("--export-type", "export_type", type=click.Choice(["text", "db"]), default=None,
              help="Profiler export: text (CSV/JSON) or db (ascend_pytorch_profiler_<rank>.db) [default: $SK_RUN_PROFILE_EXPORT, else text].")
@click.option("--profile-ranks", "profile_ranks", default=None, metavar="all|R[,R...]",
              help="Ranks that write profiling artifacts, each in its own folders [default: $SK_RUN_PROFILE_RANKS, else all].")
@click.option("--network", default=None, type=PathArg(path_type=str), metavar="NAME|FILE",
              help="Network spec file or built-in scenario name [default: moe-decode].")
@click.option("--options-pointer", default=None, help="RFC 6901 pointer of the options object in the config.")
@click.option("--ground-truth", "ground_truth", default=None, type=PathArg(dir_okay=False, path_type=Path), help="Write the ground truth JSON here.")
@click.option("--noise", default=1.0, show_default=True, type=NOISE, help="Scale of all random noise (0 = deterministic).")
@click.option("--probe-only", is_flag=True, help="Compile only: write sk_meta/<pid>/model_*/super_kernel.log with the option lines, no inference.")
@click.option("--foreign-load", "foreign_load", multiple=True, metavar="N|A-B",
              help="Instead of a workload: occupy these simulated NPUs outside any lease (registered in the occupancy registry, "
                   "$SK_SIM_DEVICE_REGISTRY) and slow every simulated kernel there, until SIGTERM/Ctrl-C, --until-file or --duration.")
@click.option("--slowdown", default=1.08, show_default=True, type=FiniteFloat(min=1.0, max=MAX_SLOWDOWN),
              help="With --foreign-load: factor by which the load slows kernels on its devices.")
@click.option("--until-file", "until_file", type=PathArg(dir_okay=False, path_type=Path), default=None,
              help="With --foreign-load: end when this file exists.")
@click.option("--duration", "duration_s", type=TIMEOUT, default=None,
              help="With --foreign-load: end after this many seconds.")
def sim(
    config: Path | None,
    run_dir: Path | None,
    ranks: int,
    iterations: int,
    warmup: int,
    seed: int | None,
    profile: bool,
    export_type: str | None,
    profile_ranks: str | None,
    network: str | None,
    options_pointer: str | None,
    ground_truth: Path | None,
    noise: float,
    probe_only: bool,
    foreign_load: tuple[str, ...],
    slowdown: float,
    until_file: Path | None,
    duration_s: float | None,
) -> int:
    """Run the simulated SK device as one workload process (see docs/simulator.md)."""
    if foreign_load:
        return _foreign_load(foreign_load, slowdown, until_file, duration_s)
    if config is None or run_dir is None:
        raise UsageError(f"missing option {'--config' if config is None else '--run-dir'} (a workload needs --config and --run-dir)")
    from sk_runner.sim.runner import SimRequest, run  # NumPy: imported when it runs, not for --help

    request = SimRequest(
        config=config,
        run_dir=run_dir,
        ranks=ranks,
        iterations=iterations,
        warmup=warmup,
        seed=seed,
        profile=profile,
        export_type=export_type,
        profile_ranks=profile_ranks,
        network=network,
        options_pointer=options_pointer,
        ground_truth=ground_truth,
        noise=noise,
        probe_only=probe_only,
    )
    return run(request)


def _foreign_load(specs: tuple[str, ...], slowdown: float, until_file: Path | None, duration_s: float | None) -> int:
    import os

    from sk_runner.devices.markers import parse_device_ids
    from sk_runner.sim.devices import foreign_load

    try:
        devices = parse_device_ids(specs)
    except ValueError as exc:
        raise UsageError(str(exc).replace("--device-id", "--foreign-load")) from None
    return foreign_load(devices, slowdown, env=os.environ, until_file=until_file, duration_s=duration_s)
