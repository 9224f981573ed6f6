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


class LiveView(LineView):
    """Redraws the table in place on a terminal; campaign notes scroll above it."""

    def __init__(self, out: TextIO | None = None) -> None:
        super().__init__(out)
        self._lines = 0
        self._last: str = ""

    def _clear(self) -> None:
        if self._lines:
            self.out.write(f"\x1b[{self._lines}F\x1b[J")
            self._lines = 0

    def note(self, text: str) -> None:
        self._clear()
        super().note(text)
        if self._last:
            self._draw(self._last)

    def _draw(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()
        self._lines = text.count("\n") + 1

    def update(self, root: Path, spec: CampaignSpec, tasks: dict[str, TaskState]) -> None:
        text = table(rows(root, [t.id for t in spec.tasks], tasks))
        self._clear()
        self._last = text
        self._draw(text)

    def close(self) -> None:
        self._lines = 0


def make_view(quiet: bool = False) -> LineView:
    """Live table on a terminal, event lines otherwise (quiet: campaign notes only)."""
    if quiet:
        view = LineView()
        view.update = lambda *a: None  # type: ignore[method-assign]
        return view
    return LiveView() if sys.stdout.isatty() else LineView()
