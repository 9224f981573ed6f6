"""The Stage O option-trial decision: protocol gate exact to the legacy tool,
with honest statistics beside it. See ``docs/option-trial.md``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sk_analytics.lazy_module import lazy_face
from sk_analytics.option_trial.modes import GATE_MODES

if TYPE_CHECKING:
    from sk_analytics.option_trial.api import evaluate_option_trial, stability

__all__ = ["GATE_MODES", "evaluate_option_trial", "stability"]
_HOMES = dict.fromkeys(__all__[1:], "api")
"""The decision functions, imported on first use: code that needs only the gate modes (task and campaign
validation, the campaign driver) should not pay for Polars and SciPy."""
__getattr__ = lazy_face(__name__, _HOMES)
