"""Progress of a campaign: a live table on a terminal, one line per event otherwise.

Both read the same rows (:func:`sk_runner.campaign.state.rows`): node, phase,
current round, last decision and elapsed time of every task's session.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import TextIO

from sk_runner.campaign.spec import CampaignSpec
from sk_runner.campaign.state import SessionRow, TaskState, rows

HEADER = ("task", "session", "node", "phase", "round", "last decision", "elapsed")


def _cells(row: SessionRow) -> tuple[str, ...]:
    elapsed = "" if row.elapsed_s is None else f"{row.elapsed_s:.0f} s"
    return (row.task, row.session or "-", row.node or "-", row.phase, row.round or "-", row.decision or "-", elapsed)


def table(items: list[SessionRow]) -> str:
    """A plain aligned text table of the rows."""
    cells = [HEADER, *(_cells(r) for r in items)]
    widths = [max(len(c[i]) for c in cells) for i in range(len(HEADER))]
    return "\n".join("  ".join(c[i].ljust(widths[i]) for i in range(len(HEADER))).rstrip() for c in cells)


class LineView:
    """One line per event (not a terminal): campaign notes and every new session ledger record."""

    def __init__(self, out: TextIO | None = None) -> None:
        self.out = out or sys.stdout
        self._seen: dict[str, tuple[int, str, str | None]] = {}

    def note(self, text: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {text}", file=self.out, flush=True)

    def update(self, root: Path, spec: CampaignSpec, tasks: dict[str, TaskState]) -> None:
        for row in rows(root, [t.id for t in spec.tasks], tasks):
            key = (row.events, row.phase, row.decision)
            if row.session is not None and self._seen.get(row.session) != key and row.events:
                self._seen[row.session] = key
                self.note(f"{row.task} [{row.session} @ {row.node or '-'}] {row.phase} {row.round or '-'} "
                          f"{row.last_event}{'' if row.decision is None else ' | ' + row.decision}")

    def close(self) -> None:
        pass


FINISHED_PHASES = frozenset({"done", "stopped", "given_up"})
"""Phases after which a task's row no longer changes: the progress bar counts them as completed."""


class LiveView(LineView):
    """A live table (rich) redrawn in place on a terminal, with a bar of finished tasks, their elapsed time and an
    ETA from the pace so far; campaign notes scroll above it."""

    def __init__(self, out: TextIO | None = None, *, width: int | None = None) -> None:
        from rich.console import Console
        from rich.live import Live
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

        super().__init__(out)
        self._console = Console(file=self.out, force_terminal=True, width=width, highlight=False)
        self._progress = Progress(TextColumn("tasks finished"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                  TextColumn("ETA"), TimeRemainingColumn(), console=self._console)
        self._bar = self._progress.add_task("tasks", total=None)
        self._live = Live(console=self._console, auto_refresh=False, transient=False)
        self._live.start()

    def note(self, text: str) -> None:
        self._console.print(f"{time.strftime('%H:%M:%S')} {text}", markup=False)

    def update(self, root: Path, spec: CampaignSpec, tasks: dict[str, TaskState]) -> None:
        from rich.console import Group
        from rich.table import Table

        items = rows(root, [t.id for t in spec.tasks], tasks)
        grid = Table(*HEADER, box=None, pad_edge=False)
        for row in items:
            grid.add_row(*_cells(row))
        self._progress.update(self._bar, total=len(items), completed=sum(row.phase in FINISHED_PHASES for row in items))
        self._live.update(Group(grid, self._progress), refresh=True)

    def close(self) -> None:
        self._live.stop()


def make_view(quiet: bool = False) -> LineView:
    """Live table on a terminal, event lines otherwise (quiet: campaign notes only)."""
    if quiet:
        view = LineView()
        view.update = lambda *a: None  # type: ignore[method-assign]  # this one view ignores updates (quiet)
        return view
    return LiveView() if sys.stdout.isatty() else LineView()
