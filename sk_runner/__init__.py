"""sk_runner: thin process orchestration of Stage O (trials, profiles, sweeps).

It starts processes and writes raw artifacts, then calls :mod:`sk_analytics`
to ingest and decide. The dependency goes one way: sk_runner -> sk_analytics.
"""

__version__ = "0.1.0"
