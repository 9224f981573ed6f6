"""Where a campaign keeps its sessions: ``<root>/sessions/session=<name>/``.

Constants only (no Polars): the campaign driver and every node's Ray worker
need the layout, not the tables, and importing Polars and Arrow cost each of
them about a second per start.
"""

from __future__ import annotations

SESSIONS_DIR = "sessions"
SESSION_KEY = "session"
"""The hive partition key of a session folder (``session=<name>``), and the column it becomes."""
