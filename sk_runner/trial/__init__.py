"""Trials: one clean, fingerprinted Stage O round (protocol §5) and ``sk-run trial``.

Modules: :mod:`.engine` (:func:`run_trial` and the layout of a round),
:mod:`.spec` (spec, result, layout), :mod:`.state` (preparation and processes
of one invocation), :mod:`.round` (the steps probe -> correctness -> clean
runs), :mod:`.outcome` (how one process ended), :mod:`.scene` (sealed failure
scenes, environment blockers), :mod:`.cli` (the command). This face loads
them on first use, so importing it does not import Polars.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sk_analytics.lazy_module import lazy_face

if TYPE_CHECKING:
    from sk_runner.trial.engine import (
        run_trial as run_trial,
    )
    from sk_runner.trial.spec import (
        LOCK_NAME as LOCK_NAME,
        META_SCHEMA as META_SCHEMA,
        MIN_TRIAL_RUNS as MIN_TRIAL_RUNS,
        ROUND_NAME as ROUND_NAME,
        TRIAL_SCHEMA as TRIAL_SCHEMA,
        Progress as Progress,
        ProgressFn as ProgressFn,
        TrialResult as TrialResult,
        TrialSpec as TrialSpec,
        complete_runs as complete_runs,
        derive_seed as derive_seed,
        round_dir_of as round_dir_of,
    )

_HOMES = {"run_trial": "engine", **dict.fromkeys(("LOCK_NAME", "META_SCHEMA", "MIN_TRIAL_RUNS", "ROUND_NAME", "TRIAL_SCHEMA",
                                                  "Progress", "ProgressFn", "TrialResult", "TrialSpec", "complete_runs",
                                                  "derive_seed", "round_dir_of"), "spec")}
__all__ = sorted(_HOMES)
__getattr__ = lazy_face(__name__, _HOMES)
