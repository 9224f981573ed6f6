"""``sk-run``: start Stage O processes (trials, probes, profiles, sweeps, the simulator)."""

from __future__ import annotations

import click

from sk_analytics.cli._base import LazyGroup, run_cli

COMMANDS = {
    "sim": "sk_runner.sim.cli:sim",
    "trial": "sk_runner.trial_cli:trial",
    "probe": "sk_runner.probe_cli:probe",
    "profile": "sk_runner.profile_cli:profile",
    "sweep": "sk_runner.sweep.cli:sweep",
    "matrix": "sk_runner.sweep.matrix_cli:matrix",
    "demo": "sk_runner.demo:demo",
    "campaign": "sk_runner.campaign.cli:campaign",
}


@click.group(cls=LazyGroup, lazy_commands=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sk-tune")
def cli() -> None:
    """Run Stage O experiments on the simulated device, a real Ascend NPU
    (--backend npu) or any command that follows the {config}/{run_dir} contract."""


def main(argv: list[str] | None = None) -> None:
    raise SystemExit(run_cli(cli, "sk-run", argv))
