"""Reading a campaign across its sessions (analysis only: the campaign itself runs in ``sk_runner.campaign``).

A campaign root holds ordinary session folders at ``sessions/session=<name>/``,
so every table of every session is one hive-partitioned dataset with a
``session`` column, readable by Polars, DuckDB and ``pyarrow.dataset`` alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sk_analytics.campaign.layout import SESSIONS_DIR
from sk_analytics.lazy_module import lazy_face

if TYPE_CHECKING:
    from sk_analytics.campaign.tables import campaign_files, campaign_glob, open_campaign, session_folders

__all__ = ["SESSIONS_DIR", "campaign_files", "campaign_glob", "open_campaign", "session_folders"]
_HOMES = dict.fromkeys(__all__[1:], "tables")
"""The table readers, imported on first use: the campaign driver and its Ray workers import this package
for the layout only and should not pay for Polars and Arrow."""
__getattr__ = lazy_face(__name__, _HOMES)
