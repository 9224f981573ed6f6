"""``sk-run sweep``: execute the Stage O state machine's actions for a session."""
