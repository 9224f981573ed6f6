"""``sk-analyze``: read-only analysis of Stage O evidence.

Each sub-command lives in its own module of this package and is imported
lazily (see :class:`~sk_analytics.cli._base.LazyGroup`). Commands return their
exit code (0 ok, 1 decision negative, 2 bad input, 3 environment).
"""

from __future__ import annotations

import click

from sk_analytics.cli._base import LazyGroup, run_cli

COMMANDS = {
    "ingest": "sk_analytics.cli.ingest:ingest",
    "option-trial": "sk_analytics.cli.option_trial:option_trial",
    "stability": "sk_analytics.cli.option_trial:stability",
    "contract": "sk_analytics.cli.contract:contract",
    "dcci-diff": "sk_analytics.cli.dcci_diff:dcci_diff",
    "ledger": "sk_analytics.cli.ledger:ledger",
    "schema": "sk_analytics.cli.schema_doc:schema",
    "campaign": "sk_analytics.cli.campaign:campaign",
}


@click.group(cls=LazyGroup, lazy_commands=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sk-tune")
def cli() -> None:
    """Analyse SuperKernel Stage O evidence: ingest artifacts into Parquet,
    gate option trials, diagnose DCCI regressions, verify ledgers."""


def main(argv: list[str] | None = None) -> None:
    raise SystemExit(run_cli(cli, "sk-analyze", argv))
