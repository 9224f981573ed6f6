"""Tables in the docs that are rendered from their one source, never edited by hand.

A page holds a generated table between two marker lines::

    <!-- BEGIN generated NAME: python -m sk_analytics.cli.doc_tables -->
    ...
    <!-- END generated NAME -->

and :data:`BLOCKS` says what renders ``NAME``: ``sk-options`` the option
registry (:data:`sk_analytics.stage_o.options.REGISTRY`), ``exit-codes`` the
exit codes of the error classes (:func:`sk_analytics.errors.exit_codes`).
``python -m sk_analytics.cli.doc_tables`` rewrites every block of every page of
``docs/``; ``--check`` writes nothing and exits 1 when one differs (a test runs
it on the repository's pages).
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import click

from sk_analytics.cli._base import PathArg, run_cli, write_or_check
from sk_analytics.errors import EXIT_OK, InputError, exit_codes
from sk_analytics.messages import text
from sk_analytics.stage_o.options import (
    TORCH_NPU_RELEASES,
    WRAPPER_TYPES,
    EveryOtherValue,
    OptionSpec,
    current_registry,
    trial_ordered,
    wrapper_section,
)

REGENERATE = "python -m sk_analytics.cli.doc_tables"
DOCS = Path("docs")
BLOCK = re.compile(r"^<!-- BEGIN generated (?P<name>[\w-]+): [^>]*-->\n(?P<body>.*?)^<!-- END generated (?P=name) -->$", re.M | re.S)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _code(value: Any) -> str:
    return f"`{json.dumps(value, ensure_ascii=False, separators=(',', ':'))}`"


def release_ranges(releases: Sequence[str], checked: Sequence[str] = TORCH_NPU_RELEASES) -> str:
    """``releases`` as runs of consecutive checked releases (``2.7.1.post11, 2.10.0.post7 – 2.14.0``); ``none``."""
    runs: list[list[str]] = []
    for index, release in enumerate(checked):
        if release in releases:
            if runs and checked.index(runs[-1][-1]) == index - 1:
                runs[-1].append(release)
            else:
                runs.append([release])
    return ", ".join(run[0] if len(run) == 1 else f"{run[0]} – {run[-1]}" for run in runs) or "none"


def _stage_o(spec: OptionSpec) -> str:
    """What Stage O does with the option: its trials (id, risk, conditions), why it is never tried, or debug."""
    if spec.debug or spec.name.startswith("debug_"):
        return "debug option: never in the matrix or a clean sample"
    trials = spec.trial_values()
    if not trials:  # a whole registry names a reason for every option it never tries (registry_problems)
        return f"excluded: {text(spec.excluded or '', 'zh')}"
    notes = []
    for t in trials:
        extra = [*t.prerequisites, *([f"authorisation {t.authorisation}"] if t.authorisation else [])]
        notes.append(f"`{t.id}` ({t.risk}{'; ' + ', '.join(extra) if extra else ''})")
    how = "every other value of the range" if isinstance(spec.trials, EveryOtherValue) else "trials"
    return f"{spec.category}, {how}: {', '.join(notes)}"


def render_option_table(registry: Sequence[OptionSpec] | None = None) -> str:
    """One row per registered option, in registry order: names, kind, default and range, what Stage O tries
    (matrix entries in trial order ``n``), and the torch_npu releases that accept it."""
    specs = current_registry() if registry is None else tuple(registry)
    order = {spec.name: n for n, spec in enumerate(trial_ordered(specs), start=1)}
    lines = [
        "| option (runtime name) | torch_npu name, table, type | kind | default | range | Stage O (trial order) | accepted by torch_npu |",
        "|---|---|---|---|---|---|---|",
    ]
    for spec in specs:
        wrapper = "—" if spec.kind == "not_settable" else (
            f"`{spec.wrapper}`, `{wrapper_section(spec)}`, {WRAPPER_TYPES[spec.kind]}")
        span = "—" if spec.low is None else f"{spec.low} – {spec.high}"
        stage_o = _stage_o(spec)
        if spec.name in order:
            stage_o = f"{order[spec.name]}. {stage_o}"
        accepted = "not settable" if spec.kind == "not_settable" else release_ranges(spec.torch_npu)
        lines.append(f"| `{spec.name}` | {wrapper} | {spec.kind} | {_code(spec.default)} | {span} | {_cell(stage_o)} | {accepted} |")
    return "\n".join(lines) + "\n"


def render_exit_codes() -> str:
    """The exit codes of sk-run and sk-analyze and their meanings."""
    return "\n".join(["| code | meaning |", "|---|---|", *[f"| {code} | {_cell(meaning)} |" for code, meaning in exit_codes()]]) + "\n"


BLOCKS: Mapping[str, Callable[[], str]] = {"sk-options": render_option_table, "exit-codes": render_exit_codes}


def render_blocks(text: str, blocks: Mapping[str, Callable[[], str]] = BLOCKS, *, source: str = "page") -> str:
    """``text`` with the body of every generated block rendered anew; an unknown block name is an InputError."""

    def fill(match: re.Match[str]) -> str:
        name = match["name"]
        if name not in blocks:
            raise InputError(source, f"generated block {name!r} is unknown", expected=", ".join(blocks))
        begin = match.group(0).split("\n", 1)[0]
        return f"{begin}\n{blocks[name]()}<!-- END generated {name} -->"

    return BLOCK.sub(fill, text)


def pages(folder: Path) -> list[Path]:
    """The Markdown pages of ``folder`` that hold a generated block."""
    return [p for p in sorted(folder.glob("*.md")) if BLOCK.search(p.read_text(encoding="utf-8"))]


@click.command("doc-tables")
@click.option("--docs", "folder", type=PathArg(file_okay=False, exists=True, path_type=Path), default=DOCS, show_default=True,
              help="Folder of the Markdown pages whose generated tables to write or check.")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 when a page differs from the tables' sources.")
def doc_tables(folder: Path, check: bool) -> int:
    """Render the generated tables (SK options, exit codes) into the docs pages."""
    worst = EXIT_OK
    for page in pages(folder):
        text = render_blocks(page.read_text(encoding="utf-8"), source=str(page))
        worst = max(worst, write_or_check(page, text, source="the option registry and the error classes", regenerate=REGENERATE,
                                          check=check))
    return worst


if __name__ == "__main__":
    sys.exit(run_cli(doc_tables, REGENERATE))
