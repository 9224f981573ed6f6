"""docs/cli.md for both tools: ``python tests/cli_doc.py`` writes it, ``--check`` compares.

The renderer is :mod:`sk_analytics.cli.help_doc`; the roots are named here
because documenting ``sk-run`` imports ``sk_runner``, which no module of
``sk_analytics`` may name (docs/design.md, ``tests/test_import_floors.py``).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping

import click

from sk_analytics.cli._base import run_cli
from sk_analytics.cli.help_doc import help_doc_command, resolve

ROOTS: Mapping[str, str] = {"sk-analyze": "sk_analytics.cli:cli", "sk-run": "sk_runner.cli:cli"}
REGENERATE = "python tests/cli_doc.py"


def roots() -> dict[str, click.Command]:
    """The root groups of both tools, in the order of the reference."""
    return {prog: resolve(target) for prog, target in ROOTS.items()}


help_doc = help_doc_command(roots, REGENERATE)

if __name__ == "__main__":
    sys.exit(run_cli(help_doc, REGENERATE))
