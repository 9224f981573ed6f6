"""Reading a campaign across its sessions (analysis only: the campaign itself runs in ``sk_runner.campaign``).

A campaign root holds ordinary session folders at ``sessions/session=<name>/``,
so every table of every session is one hive-partitioned dataset with a
``session`` column, readable by Polars, DuckDB and ``pyarrow.dataset`` alike.
"""

from sk_analytics.campaign.tables import (
    SESSIONS_DIR,
    campaign_files,
    campaign_glob,
    open_campaign,
    session_folders,
)

__all__ = ["SESSIONS_DIR", "campaign_files", "campaign_glob", "open_campaign", "session_folders"]
