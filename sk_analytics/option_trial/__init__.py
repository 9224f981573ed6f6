"""The Stage O option-trial decision: protocol gate exact to the legacy tool,
with honest statistics beside it. See ``docs/option-trial.md``."""

from __future__ import annotations

from sk_analytics.option_trial.api import GATE_MODES, evaluate_option_trial, stability

__all__ = ["GATE_MODES", "evaluate_option_trial", "stability"]
