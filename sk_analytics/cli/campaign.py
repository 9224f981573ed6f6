"""``sk-analyze campaign``: the cross-session report of a campaign."""

from __future__ import annotations

from pathlib import Path

import click

from sk_analytics.cli._base import PathArg, lang_option
from sk_analytics.errors import EXIT_OK


@click.command("campaign")
@click.argument("root", type=PathArg(file_okay=False, path_type=Path))
@lang_option("Report language.")
@click.option("--out", type=PathArg(file_okay=False, path_type=Path), default=None, help="Folder of the report (default: the campaign root).")
def campaign(root: Path, lang: str, out: Path | None) -> int:
    """Per option value: in how many sessions it was accepted, rejected, failed or blocked,
    its improvement spread, and whether it generalises (Markdown + HTML, see docs/campaign.md)."""
    from sk_analytics.campaign.report import write_campaign_report
    from sk_analytics.cli._base import OUTPUT_LABELS

    paths = write_campaign_report(root, lang=lang, out=out)
    labels = OUTPUT_LABELS[lang]
    click.echo(f"{labels['report']}{paths['report']}")
    click.echo(f"{labels['html']}{paths['html']}")
    return EXIT_OK
