"""What every artifact parser returns, so ``ingest`` can treat them alike."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import polars as pl

from sk_analytics.schema import Table


@dataclass
class ParseResult:
    """A parsed artifact: its rows (conformed to ``table``) and what the user
    should be told about it (truncation, buffer-full, ignored records)."""

    table: Table
    frame: pl.DataFrame
    source: Path
    warnings: list[str] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return self.frame.height


def relative_source(path: Path, root: Path | None) -> str:
    """POSIX path of ``path`` relative to ``root`` (or as given when outside it).

    Where the file is, not where a link points: the folder is resolved, the
    name kept, so a rank log that is a symlink (even a loop) keeps its own name."""
    if root is not None:
        try:
            return (path.parent.resolve() / path.name).relative_to(root.resolve()).as_posix()
        except (ValueError, RuntimeError, OSError):  # outside root, or a folder that is itself a loop
            pass
    return path.as_posix()
