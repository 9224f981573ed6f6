"""Exact-value probes (protocol §3) and ``sk-run probe``.

:mod:`.engine` probes (wrapper verdict, then one short runtime process whose
``super_kernel.log`` must not report the value as defaulted), :mod:`.evidence`
judges what that process wrote (no evidence at all stops the session); :mod:`.cli` is
the command. This face loads the engine on first use (it imports Polars).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sk_analytics.lazy_module import lazy_face

if TYPE_CHECKING:
    from sk_runner.probe.engine import (
        PROBE_CONTROL as PROBE_CONTROL,
        ProbeResult as ProbeResult,
        RuntimeCheck as RuntimeCheck,
        ValueProbe as ValueProbe,
        probe_config as probe_config,
        probe_value as probe_value,
        probe_values as probe_values,
        runtime_check as runtime_check,
    )
    from sk_runner.probe.evidence import (
        ProbeEvidenceMissing as ProbeEvidenceMissing,
    )

_HOMES = dict.fromkeys(("PROBE_CONTROL", "ProbeResult", "RuntimeCheck", "ValueProbe", "probe_config", "probe_value", "probe_values",
                        "runtime_check"), "engine") | {"ProbeEvidenceMissing": "evidence"}
__all__ = sorted(_HOMES)
__getattr__ = lazy_face(__name__, _HOMES)
