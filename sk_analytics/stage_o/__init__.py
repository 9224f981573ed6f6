"""Stage O decisions: the option registry, the winner option matrix and the
pure state machine that decides the next step of a sweep from its ledger.

Nothing here reads a whole session or renders: :mod:`sk_analytics.session_view`
reads a session on top of these decisions, :mod:`sk_analytics.report` renders
it and :mod:`sk_analytics.handoff` proves the hand-off files."""
