"""What a session hands over, and the proof that it agrees with the signed ledger.

:mod:`.outputs` derives the hand-off texts (settled matrix, report digests,
next steps) from the ledger alone; :mod:`.crosscheck` re-derives every output
file to check it against the ledger; :mod:`.proof` is everything
``sk-analyze ledger verify`` proves beyond the chain. It stands above the
report (:mod:`sk_analytics.report`), which it re-renders.
"""
