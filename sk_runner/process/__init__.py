"""Workload processes: started isolated, killed as a whole, never outliving sk-run.

:mod:`.run` starts one process (own group, captured output, hard timeout);
:mod:`.lifetime` ties every process to the sk-run that started it (markers,
the session's process table, deferred signals) with :mod:`.watchdog`, a
separate process that kills them when sk-run dies; :mod:`.faults` names the
environment faults of a start; :mod:`.attempts` hands out never-reused
``attempt-<n>`` folders; :mod:`.session` refuses a session folder that does not
exist. This face loads :mod:`.run` on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from sk_analytics.lazy_module import lazy_face

if TYPE_CHECKING:
    from sk_runner.process.run import (
        DEFAULT_GRACE_S as DEFAULT_GRACE_S,
        ProcessResult as ProcessResult,
        command_line as command_line,
        group_alive as group_alive,
        kill_group as kill_group,
        one_line as one_line,
        process_alive as process_alive,
        run_process as run_process,
    )

_HOMES = dict.fromkeys(("DEFAULT_GRACE_S", "ProcessResult", "command_line", "group_alive", "kill_group", "one_line", "process_alive",
                        "run_process"), "run")
__all__ = sorted(_HOMES)
__getattr__ = lazy_face(__name__, _HOMES)
