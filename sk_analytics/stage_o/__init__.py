"""Stage O decisions: the option registry, the winner option matrix and the
pure state machine that decides the next step of a sweep from its ledger."""
