"""Diagnostic profile collections under the artifact contract (protocol §6) and ``sk-run profile``.

:mod:`.engine` collects (new root per attempt, re-collection with a shorter
window), :mod:`.defaults` holds the defaults ``--help`` shows, :mod:`.cli` is
the command. This face loads the engine on first use (it imports Polars and Arrow).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sk_analytics.lazy_module import lazy_face

if TYPE_CHECKING:
    from sk_runner.profile.defaults import (
        DEFAULT_MAX_ATTEMPTS as DEFAULT_MAX_ATTEMPTS,
        DEFAULT_PROFILE_ITERATIONS as DEFAULT_PROFILE_ITERATIONS,
        DEFAULT_SK_PROF_KB as DEFAULT_SK_PROF_KB,
        MAX_SK_PROF_KB as MAX_SK_PROF_KB,
    )
    from sk_runner.profile.engine import (
        AttemptRecord as AttemptRecord,
        ProfileResult as ProfileResult,
        ProfileSpec as ProfileSpec,
        buffer_full_lines as buffer_full_lines,
        collect_profile as collect_profile,
        profile_env as profile_env,
        profile_workload as profile_workload,
        revision_text as revision_text,
        shorter_window as shorter_window,
    )

_HOMES = {**dict.fromkeys(("AttemptRecord", "ProfileResult", "ProfileSpec", "buffer_full_lines", "collect_profile", "profile_env",
                           "profile_workload", "revision_text", "shorter_window"), "engine"),
          **dict.fromkeys(("DEFAULT_MAX_ATTEMPTS", "DEFAULT_PROFILE_ITERATIONS", "DEFAULT_SK_PROF_KB", "MAX_SK_PROF_KB"), "defaults")}
__all__ = sorted(_HOMES)
__getattr__ = lazy_face(__name__, _HOMES)
