"""``sk-run``: start Stage O processes (trials, probes, profiles, sweeps, the simulator)."""

from __future__ import annotations

import click

from sk_analytics.cli._base import LazyGroup, run_main
from sk_runner.commands import SUMMARIES

COMMANDS = {
    "sim": "sk_runner.sim.cli:sim",
    "trial": "sk_runner.trial.cli:trial",
    "probe": "sk_runner.probe.cli:probe",
    "profile": "sk_runner.profile.cli:profile",
    "sweep": "sk_runner.sweep.cli:sweep",
    "matrix": "sk_runner.sweep.matrix_cli:matrix",
    "demo": "sk_runner.demo.cli:demo",
    "campaign": "sk_runner.campaign.cli:campaign",
    "options": "sk_runner.sweep.task_cli:options",
    "task": "sk_runner.sweep.task_cli:task",
}
"""Where each ``sk-run`` command lives (imported when it is used); their help summaries are :data:`SUMMARIES`."""


@click.group(cls=LazyGroup, lazy_commands=COMMANDS, summaries=SUMMARIES, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sk-tune")
def cli() -> None:
    """Run Stage O experiments on the simulated device, a real Ascend NPU
    (--backend npu) or any command that follows the {config}/{run_dir} contract."""


def main(argv: list[str] | None = None) -> None:
    from sk_runner.process.lifetime import install_signal_handlers

    install_signal_handlers()  # SIGINT -> exit 130, SIGTERM -> 143; never lost while a process starts
    raise SystemExit(run_main(cli, "sk-run", argv))
