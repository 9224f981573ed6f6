"""The Stage O option-trial decision: protocol gate exact to the legacy tool,
with honest statistics beside it. See ``docs/option-trial.md``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sk_analytics.option_trial.modes import GATE_MODES

if TYPE_CHECKING:
    from sk_analytics.option_trial.api import evaluate_option_trial, stability

__all__ = ["GATE_MODES", "evaluate_option_trial", "stability"]


def __getattr__(name: str) -> Any:
    """The decision functions, imported on first use: code that needs only the gate modes
    (task and campaign validation, the campaign driver) should not pay for Polars and SciPy."""
    if name in __all__:
        from sk_analytics.option_trial import api

        return getattr(api, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
