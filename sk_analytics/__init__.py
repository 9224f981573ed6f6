"""sk_analytics: pure Polars analysis of SuperKernel Stage O evidence.

Notebook entry points::

    import sk_analytics as ska
    tables = ska.open_session("runs/my-session")   # {"timings": LazyFrame, ...}
    tables["timings"].group_by("round").len().collect()
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from sk_analytics.errors import InputError

if TYPE_CHECKING:  # polars is imported by the functions that need it: `sk-analyze --help` stays fast
    import polars as pl

    from sk_analytics.tables import SessionTables

__all__ = ["open_session", "open_profile", "open_campaign", "__version__"]
__version__ = "0.1.0"


def _data_dir(path: str | Path) -> Path:
    root = Path(path)
    if not root.exists():
        raise InputError(root, "no such session or profile folder")
    return root / "data" if (root / "data").is_dir() else root


def open_session(path: str | Path) -> SessionTables:
    """All tables of a Stage O session (``<session>/data``) as LazyFrames.

    The mapping's ``absent`` attribute (:class:`sk_analytics.tables.SessionTables`)
    names each table no file was written for and why: a sweep writes no
    ``sk_occurrences``/``sk_children`` (dcci-diff derives them; ``--tables-out`` writes them).
    """
    from sk_analytics.tables import open_tables

    return open_tables(_data_dir(path))


def open_profile(path: str | Path) -> dict[str, pl.LazyFrame]:
    """All tables ingested from one profile collection (its ``data`` folder, or a
    folder written by ``sk-analyze ingest --out``) as LazyFrames."""
    from sk_analytics.tables import open_tables

    return open_tables(_data_dir(path))


def open_campaign(root: str | Path) -> dict[str, pl.LazyFrame]:
    """The tables of every session of a campaign (``sk-run campaign``), each one lazy
    hive-partitioned scan with a ``session`` column."""
    from sk_analytics.campaign import open_campaign as _open

    return _open(root)
