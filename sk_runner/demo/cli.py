"""``sk-run demo``: the README's main command — a complete Stage O sweep on the simulated device.

By default this runs ``sk-run sweep --demo`` into ``--session`` (default
``./demo-session``; a folder written by an earlier demo is replaced, any other
non-empty folder is refused) and prints where the report is. ``--samples``
keeps the earlier quick sample: three clean runs of two ranks (rank logs in
the real format) and one profile (a kernel_details.csv with SuperKernel rows),
ingested into ``<session>/data`` exactly as the runner does after each run and
summarised from the Parquet tables.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import click

from sk_analytics.cli._base import PathArg, lang_option
from sk_analytics.errors import EXIT_OK, UsageError
from sk_analytics.files.atomic import write_text
from sk_runner.devices.lease import DEFAULT_LEASE_TIMEOUT_S
from sk_runner.limits import SEED
from sk_runner.sweep.cli import full_profile_option

MARKER = ".sk-tune-demo"
"""Marks a folder written by the demo, so that a rerun may replace it (and nothing else)."""
ROUND = "O0-INCUMBENT"
RUNS, RANKS, DECODE_SAMPLES, WARMUP = 3, 2, 24, 8
KERNEL_ROWS = 600


def decode_texts(seed: int, ranks: int, samples: int) -> list[list[str]]:
    """Decode times (ms, 3 decimals) per rank: a slow warm-up, then noise around ~12 ms."""
    import numpy as np  # here, not at the top: `sk-run demo --help` imports no NumPy

    rng = np.random.default_rng(seed)
    values = 12.0 + rng.normal(0.0, 0.15, (ranks, samples)) + np.arange(ranks)[:, None] * 0.2
    values[:, :WARMUP] += 3.0
    return [[f"{v:.3f}" for v in row] for row in values]


def prepare(session: Path) -> None:
    """Empty ``session`` for a new demo; refuse a folder the demo did not write, or one whose sweep is running (a
    demo started in the same folder from another terminal): its session is never deleted under it."""
    if session.exists() and any(session.iterdir()):
        if not (session / MARKER).is_file():
            raise UsageError(f"{session} exists and is not a demo session: choose another --session")
        from filelock import FileLock, Timeout

        from sk_analytics.stage_o.session_notes import SWEEP_LOCK

        lock = FileLock(str(session / SWEEP_LOCK))
        try:
            lock.acquire(timeout=0)  # held while the folder goes: a resume of it cannot start meanwhile
        except Timeout:
            raise UsageError(f"{session}: a demo is running in this folder (its sweep holds {session / SWEEP_LOCK}); "
                             "wait for it to end or choose another --session") from None
        try:
            shutil.rmtree(session)
        finally:
            lock.release()
    session.mkdir(parents=True, exist_ok=True)
    write_text(session / MARKER, "written by sk-run demo; rerunning the demo replaces this folder\n")


def generate(session: Path, seed: int) -> tuple[list[Path], Path]:
    """Write the runs and the profile; return the run folders and the profile folder."""
    from sk_runner.demo.samples import VARIANTS, kernel_rows, write_kernel_details, write_rank_logs

    runs = []
    for k in range(1, RUNS + 1):
        run_dir = session / "experiments" / "Sbest" / ROUND / "CLEAN" / f"run-{k}"
        write_rank_logs(run_dir, RANKS, decode_texts(seed + k, RANKS, DECODE_SAMPLES), prefill_ms="85.250")
        runs.append(run_dir)
    profile = session / "experiments" / "Sbest" / ROUND / "profile"
    write_kernel_details(profile / "kernel_details.csv", kernel_rows(KERNEL_ROWS, seed), VARIANTS["level1_full"])
    return runs, profile


def summary(session: Path) -> str:
    """What the ingested tables say (read back through the notebook API)."""
    import polars as pl

    import sk_analytics as ska

    tables = ska.open_session(session)
    decode = tables["timings"].filter((pl.col("phase") == "decode") & (pl.col("sample_index") >= WARMUP))
    per_run = (
        decode.group_by("run", "rank").agg(pl.col("value_ms").mean().alias("mean_ms"))
        .group_by("run").agg(pl.col("mean_ms").max().alias("worst_rank_mean_ms"))
        .sort("run").collect()
    )  # fmt: skip
    kernels = tables["kernels"].collect()
    top = (
        kernels.group_by("canonical_op").agg(pl.col("duration_us").sum().alias("total_us"), pl.len().alias("n"))
        .sort("total_us", descending=True).head(3)
    )  # fmt: skip
    lines = [f"round {ROUND}: worst-rank mean decode after {WARMUP} warm-up samples"]
    lines += [f"  {run}: {ms:.3f} ms" for run, ms in per_run.rows()]
    lines.append(f"profile: {kernels.height} kernels, {int(kernels['is_sk'].sum())} SuperKernel rows; top ops by time:")
    lines += [f"  {op}: {total:,.1f} us over {n} launches" for op, total, n in top.rows()]
    lines.append(f"notebook: sk_analytics.open_session({str(session)!r})")
    return "\n".join(lines)


@click.command("demo")
@click.option("--session", type=PathArg(file_okay=False, path_type=Path), default=Path("demo-session"), show_default=True,
              help="Folder of the demo session (a folder an earlier demo wrote is replaced).")
@click.option("--seed", type=SEED, default=7, show_default=True, help="Seed of the sweep session (or of the generated samples).")
@click.option("--samples", is_flag=True, help="Only generate, ingest and summarise a small sample session (no sweep).")
@lang_option("Language of the progress lines, the report and the hand-off reasons.")
@full_profile_option()
def demo(session: Path, seed: int, samples: bool, lang: str, full_profile: bool) -> int:
    """Run a complete Stage O sweep on the simulated device (default network) and
    print where the report is; --samples: the small ingest-only sample session."""
    if not samples:
        from sk_runner.devices.options import lease_request
        from sk_runner.sweep.cli import run_and_print
        from sk_runner.sweep.demo import DEMO_CONTROL, demo_need, demo_session

        prepare(session)
        shutil.rmtree(session)  # the sweep session needs a new, empty folder; mark it as a demo again below
        # the lease lives under the session (docs/runner.md "Devices and leases"); a parent's lease markers win
        lease = lease_request(None, (), DEFAULT_LEASE_TIMEOUT_S, default=demo_need(session, DEMO_CONTROL.ranks))
        sweep_session = demo_session(session, seed=seed, full_profile=full_profile, lease=lease)

        def mark() -> None:  # once the sweep holds the session: until then a second demo finds no demo's folder, refused
            write_text(session / MARKER, "written by sk-run demo; rerunning the demo replaces this folder\n")

        return run_and_print(sweep_session, lang, lease=lease, started=mark)
    from sk_analytics.ingest import ingest_path, ingest_run_dir

    prepare(session)
    runs, profile = generate(session, seed)
    data = session / "data"
    files = 0
    for run_dir in runs:
        files += len(ingest_run_dir(run_dir, data, ROUND, "baseline", run_dir.name).files)
    report = ingest_path(profile, data, round=ROUND, role="profile")
    files += len(report.files)
    warnings = report.warnings
    click.echo(f"sample session: {session} ({files} artifacts ingested into {data})")
    click.echo(summary(session))
    if warnings:
        click.echo("warnings:\n" + "\n".join(f"  - {w}" for w in warnings))
    return EXIT_OK
