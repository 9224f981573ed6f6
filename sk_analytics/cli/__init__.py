"""``sk-analyze``: analysis of Stage O evidence; it never starts a workload process.

Most commands only read. Some write what they are asked to and nothing else:
``ingest`` Parquet tables under ``--out``, ``contract`` a collection's session
record and manifest, ``ledger hand-over`` one signed ledger record, and the
``--out``/``--json-out`` files of the others. Each sub-command lives in its own module of this
package and is imported lazily (see :class:`~sk_analytics.cli._base.LazyGroup`).
Commands return their exit code (0 ok, 1 decision negative, 2 bad input,
3 environment, 70 internal error).
"""

from __future__ import annotations

import click

from sk_analytics import interrupts
from sk_analytics.cli._base import LazyGroup, run_main

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


SUMMARIES = {
    "contract": "Artifact collection contract of diagnostic profiles (formats.md §6).",
    "dcci-diff": "Align SKs structurally, classify each, decompose slower ones into children and propose the one joint repair "
                 "(exit 0: repair proposed, 1: no repair, 2: bad input).",
    "ingest": "Read every SK artifact under PATH (rank logs, kernel_details.csv, sk_prof traces, SK metadata) into typed, "
              "hive-partitioned Parquet tables under --out.",
    "ledger": "Verify, print or hand over the hash-chained ledger of a session (folder or ledger.jsonl).",
    "option-trial": "Compare trial candidates with the five-run incumbent (protocol §5 gate), print a table and the statistics "
                    "beside the gate; exit 0 when accepted.",
    "schema": "Print the Parquet schema document (from the schema constants), or write/check it with --out.",
    "stability": "Five-run stability of SOURCE (exactly 5 runs, decimal spread <= 5%); exit 0 when stable.",
}  # fmt: skip
"""First help paragraph of each command, so that ``sk-analyze --help`` imports none of them
(tests/test_cli_help_speed.py keeps them equal to the commands' help)."""


@click.group(cls=LazyGroup, lazy_commands=COMMANDS, summaries=SUMMARIES, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sk-tune")
def cli() -> None:
    """Analyse SuperKernel Stage O evidence: ingest artifacts into Parquet,
    gate option trials, diagnose DCCI regressions, verify ledgers."""


def main(argv: list[str] | None = None) -> None:
    interrupts.install()  # SIGINT -> exit 130, SIGTERM -> 143, whatever window they land in
    raise SystemExit(run_main(cli, "sk-analyze", argv))
