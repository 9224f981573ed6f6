"""``super_kernel.log`` of a simulated process: phase markers, option lines, buffer-full lines (formats.md §3, §4)."""

from __future__ import annotations

import time
from collections.abc import Iterable

from sk_runner.sim.options import EffectiveOptions


def log_prefix(pid: int, tid: int, source: str, func: str, level: str = "INFO", when_ns: int | None = None) -> str:
    """The SK logger prefix ``YYYY-MM-DD HH:MM:SS.mmm [<pid>:<tid>] [INFO] [<file>:<n>] [<func>] ``."""
    ns = time.time_ns() if when_ns is None else when_ns
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(ns // 1_000_000_000)) + f".{ns // 1_000_000 % 1000:03d}"
    return f"{stamp} [{pid}:{tid}] [{level}] [{source}] [{func}] "


LOG_LINE_LIMIT = 4096
"""Characters of payload the CANN logger writes on one line; the rest continues on ``[CONT:<n>] `` lines."""


def logged_lines(prefix: str, payload: str, limit: int = LOG_LINE_LIMIT) -> list[str]:
    """One payload as the logger writes it: ``prefix`` on every physical line, a payload
    longer than ``limit`` cut into pieces continued as ``[CONT:1] …``, ``[CONT:2] …``."""
    pieces = [payload[i : i + limit] for i in range(0, max(len(payload), 1), limit)]
    return [prefix + pieces[0], *(f"{prefix}[CONT:{k}] {piece}" for k, piece in enumerate(pieces[1:], start=1))]


def buffer_full_line(device: int, core: int) -> str:
    """The host's line when a core's sk_prof buffer is full (two spaces after ``]``)."""
    return f"[sk time profiling]  device {device} core {core} buffer is full, stop dump the time of nodes on device {device} core {core}"


def super_kernel_log(
    pid: int,
    options: EffectiveOptions,
    *,
    rts_model_id: int,
    sk_count: int,
    scope_count: int,
    sk_prof_kb: int | None,
    full_cores: Iterable[int] = (),
    device: int = 0,
) -> str:
    """Text of super_kernel.log for one compiled model (and the run after it)."""
    tid = pid + 17
    lines: list[tuple[str, str, str]] = [
        ("super_kernel.cpp:88", "aclskOptimize", f"Begin aclskOptimize, model id: {rts_model_id}"),
    ]
    for line in options.lines:
        level = "INFO" if line.valid else "WARNING"
        lines.append(("sk_option_manager.cpp:" + ("141" if line.valid else "163"), "ParseOption" + ("" if line.valid else "|" + level), line.text()))
    if sk_prof_kb is not None:
        lines.append(("sk_time_profiling.cpp:52", "Init", f"[sk time profiling] enable, buffer size per core: {sk_prof_kb} KB"))
    lines.append(("sk_scope_split.cpp:210", "SplitScopes", f"Scope split finished, scope num: {scope_count}, super kernel num: {sk_count}"))
    lines.append(("super_kernel.cpp:301", "aclskOptimize", f"End aclskOptimize, model id: {rts_model_id}"))
    lines.extend(("sk_time_profiling.cpp:118", "DumpNodesTime", buffer_full_line(device, core)) for core in full_cores)
    out = []
    for source, func, text in lines:
        level = "WARNING" if func.endswith("|WARNING") else "INFO"
        out.append(log_prefix(pid, tid, source, func.split("|")[0], level) + text)
    return "\n".join(out) + "\n"
