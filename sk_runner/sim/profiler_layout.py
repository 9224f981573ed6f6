"""The descriptive files of one rank's torch_npu profiler folder (docs/simulator.md, "Profiler folder").

Pure builders, one per file: ``profiler_info_<rank>.json`` and
``profiler_metadata.json`` at the top of ``<host>_<pid>_<ts>_ascend_pt/``, and
in ``PROF_<n>_<ts>_<letters>/`` the msprof collection files ``host/{info.json,
host_start.log, start_info, end_info}`` and ``device_<id>/{info.json.<id>,
sample.json, start_info.<id>, end_info.<id>}``. Field names and value types
follow the real exports cited in docs/simulator.md; every value is one the
simulator knows (its own clocks, ids, core counts and frequencies, the
collection's switches). The clocks: the host epoch of ``started_ns``, the
monotonic raw clock = the device clock (ns since boot, ``ProcessIds.
device_clock_offset_us``), and the system counter at 100 MHz on that clock.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass

from sk_runner.sim.identity import ProcessIds
from sk_runner.sim.network import AIC_CORES, AIV_CORES

SYSCNT_MHZ = 100
"""System counter frequency (``freq`` of profiler_info, ``hwts_frequency``, host ``CPU[0].Frequency``)."""
CORE_MHZ = 1800
"""AI core clock of the simulated device (``aic_frequency``/``aiv_frequency``; cycles in kernel_details)."""
CHIP = "Ascend910B"
ENV_VARIABLES = ("ASCEND_GLOBAL_LOG_LEVEL", "HCCL_RDMA_TC", "HCCL_RDMA_SL", "ACLNN_CACHE_LIMIT", "HOST_CACHE_CAPACITY",
                 "ASCEND_ENHANCE_ENABLE", "PYTORCH_NPU_ALLOC_CONF", "ASCEND_LAUNCH_BLOCKING")  # fmt: skip
"""The variables torch_npu records in ``profiler_metadata.json`` (value ``""`` when unset)."""


@dataclass(frozen=True)
class Collection:
    """When and how one rank's profiler collected: host epoch ns of start and end, the switches."""

    begin_ns: int
    end_ns: int
    steps: int
    export_type: str
    monotonic_offset_ns: int
    """host epoch ns - monotonic raw ns (the device clock origin)."""

    def monotonic(self, epoch_ns: int) -> int:
        return epoch_ns - self.monotonic_offset_ns


def collection(ids: ProcessIds, end_ns: int, steps: int, export_type: str) -> Collection:
    return Collection(ids.started_ns, end_ns, steps, export_type, int(round(ids.device_clock_offset_us * 1000)))


def _date(epoch_ns: int) -> str:
    """Local ``YYYY-mm-dd HH:MM:SS.ffffff`` (``collectionDateBegin``/``End``)."""
    seconds, rest = divmod(epoch_ns, 1_000_000_000)
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(seconds)) + f".{rest // 1000:06d}"


def export_stamp(c: Collection) -> str:
    """``YYYYmmddHHMMSS`` (local) of the msprof export: the suffix of ``op_summary_<stamp>.csv`` etc."""
    return time.strftime("%Y%m%d%H%M%S", time.localtime(c.end_ns // 1_000_000_000))


def profiler_info(rank: int, c: Collection) -> dict[str, object]:
    """``profiler_info_<rank>.json``: the profiler's config, its start (system counter) and end clocks, the rank."""
    return {
        "config": {
            "common_config": {
                "activities": ["ProfilerActivity.CPU", "ProfilerActivity.NPU"],
                "schedule": {"wait": 0, "active": c.steps, "warmup": 0, "repeat": 1, "skip_first": 0},
                "record_shapes": True,
                "profile_memory": False,
                "with_stack": False,
                "with_flops": False,
                "with_modules": False,
            },
            "experimental_config": {
                "_profiler_level": "Level1",
                "_aic_metrics": "ACL_AICORE_PIPE_UTILIZATION",
                "_l2_cache": False,
                "_msprof_tx": False,
                "_data_simplification": False,
                "record_op_args": False,
                "_export_type": c.export_type,
                "_op_attr": False,
                "_gc_detect_threshold": None,
            },
        },
        "start_info": {
            "syscnt_enable": True,
            "freq": SYSCNT_MHZ,
            "start_cnt": c.monotonic(c.begin_ns) * SYSCNT_MHZ // 1000,
            "start_monotonic": c.monotonic(c.begin_ns),
        },
        "end_info": {"collectionTimeEnd": c.end_ns, "MonotonicTimeEnd": c.monotonic(c.end_ns)},
        "rank_id": rank,
    }


def profiler_metadata(env: Mapping[str, str]) -> dict[str, object]:
    """``profiler_metadata.json``: the recorded environment variables of the process."""
    return {"ENV_VARIABLES": {name: env.get(name, "") for name in ENV_VARIABLES}}


def _start_info(c: Collection) -> dict[str, str]:
    return {"collectionDateBegin": _date(c.begin_ns), "collectionTimeBegin": str(c.begin_ns // 1000),
            "clockMonotonicRaw": str(c.monotonic(c.begin_ns))}  # fmt: skip


def _end_info(c: Collection) -> dict[str, str]:
    return {"collectionDateEnd": _date(c.end_ns), "collectionTimeEnd": str(c.end_ns // 1000),
            "clockMonotonicRaw": str(c.monotonic(c.end_ns))}  # fmt: skip


def _info(ids: ProcessIds, *, device: bool) -> dict[str, object]:
    info: dict[str, object] = {
        "jobInfo": "NA",
        "devices": str(ids.device_id) if device else "",
        "CPU": [{"Id": 0, "Name": "HostCPU", "Frequency": f"{SYSCNT_MHZ:.6f}", "Logical_CPU_Count": 1, "Type": "simulated"}],
        "pid": str(ids.pid),
        "hostname": ids.host,
        "rank_id": ids.rank,
    }
    if device:
        info["DeviceInfo"] = [{
            "id": ids.device_id, "env_type": 3, "ai_core_num": AIC_CORES, "aiv_num": AIV_CORES,
            "hwts_frequency": str(SYSCNT_MHZ), "aic_frequency": str(CORE_MHZ), "aiv_frequency": str(CORE_MHZ), "chip_name": CHIP,
        }]  # fmt: skip
    return info


def _sample(ids: ProcessIds, prof_dir: str) -> dict[str, object]:
    return {"ai_core_metrics": "PipeUtilization", "ai_core_profiling": "on", "ai_core_profiling_mode": "task-based",
            "aiv_metrics": "PipeUtilization", "aiv_profiling": "on", "aiv_profiling_mode": "task-based", "devices": str(ids.device_id),
            "hwts_log": "on", "hcclTrace": "on", "l2CacheTaskProfiling": "off", "msproftx": "off", "runtimeApi": "on",
            "result_dir": f"{prof_dir}/device_{ids.device_id}/"}  # fmt: skip


def _json(data: object) -> str:
    return json.dumps(data, separators=(",", ":"))


def prof_collection_files(ids: ProcessIds, c: Collection, prof_dir: str) -> dict[str, str]:
    """The msprof collection files of ``PROF_*/`` (paths relative to it): host and device info and clocks."""
    d = ids.device_id
    begin_mono = c.monotonic(c.begin_ns)
    host_start = f"[Host]\nclock_monotonic_raw: {begin_mono}\ncntvct: {begin_mono * SYSCNT_MHZ // 1000}\ncntvct_diff: 0\n"
    return {
        "host/info.json": _json(_info(ids, device=False)),
        "host/host_start.log": host_start,
        "host/start_info": _json(_start_info(c)),
        "host/end_info": _json(_end_info(c)),
        f"device_{d}/info.json.{d}": _json(_info(ids, device=True)),
        f"device_{d}/sample.json": _json(_sample(ids, prof_dir)),
        f"device_{d}/start_info.{d}": _json(_start_info(c)),
        f"device_{d}/end_info.{d}": _json(_end_info(c)),
    }
