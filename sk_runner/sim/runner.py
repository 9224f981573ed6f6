"""One simulated workload process: read the config, compile, run, write every artifact.

This is the I/O edge of the simulator; the cost model (:mod:`.model`), the
noise (:mod:`.noise`) and the artifact formatters are pure. See
``docs/simulator.md`` for the contract the runner and the analysis rely on.
"""

from __future__ import annotations

import os
import secrets
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from sk_analytics.errors import InputError
from sk_analytics.files.atomic import write_text
from sk_analytics.files.strict_json import load_config_file
from sk_runner.hosts.topology import HOSTS_ENV, local_ranks
from sk_runner.limits import MAX_SEED, size_problem
from sk_runner.sim import logs
from sk_runner.sim.devices import occupy
from sk_runner.sim.identity import ProcessIds, rank_process_ids
from sk_runner.sim.model import StepModel, compile_model
from sk_runner.sim.naming import name_graph
from sk_runner.sim.network import load_network
from sk_runner.sim.noise import NoiseParams, step_multipliers
from sk_runner.sim.options import EffectiveOptions, find_options, resolve
from sk_runner.sim.skmeta import write_sk_meta
from sk_runner.sim.superlog import super_kernel_log
from sk_runner.sim.timeline import build_timeline
from sk_runner.sim.truth import write_ground_truth
from sk_runner.sim.variants import FormatVariant, draw_variant

EXIT_CRASH = 1
EXIT_DEVICE_FAULT = 134
PROFILER_OVERHEAD = 1.12
EXPORT_ENV = "SK_RUN_PROFILE_EXPORT"
"""Export type of the profiler (``text``/``db``), set by ``sk-run profile --export-type``."""
EXPORT_TYPES = ("text", "db")
"""torch_npu's ``ExportType.Text`` (CSV/JSON files) and ``ExportType.Db`` (one SQLite file)."""
PROFILE_RANKS_ENV = "SK_RUN_PROFILE_RANKS"
"""Ranks that write profiling artifacts (``all`` or e.g. ``0,3``); default all, as torch_npu does."""
SK_PROF_OVERHEAD = 1.03
FAILING_AFTER_SAMPLES = 3
"""Decode samples a crashing / faulting / hanging process still logs."""
SK_PROF_MAX_KB = 5120
COMPILE_NS = 1_500_000_000
"""Host time between process start and the first prefill (graph compile)."""
HOLD_ENV = "SK_SIM_HOLD"
"""A file that, while it exists, holds every simulated workload process before its first step (:func:`hold`)."""


@dataclass(frozen=True)
class SimRequest:
    """Everything a simulated process is asked to do (CLI flags + environment)."""

    config: Path
    run_dir: Path
    ranks: int = 8
    iterations: int = 200
    warmup: int = 8
    seed: int | None = None
    profile: bool = False
    network: str | None = None
    options_pointer: str | None = None
    ground_truth: Path | None = None
    noise: float = 1.0
    probe_only: bool = False
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    export_type: str | None = None
    """``text`` or ``db``; None: ``$SK_RUN_PROFILE_EXPORT``, else ``text``."""

    profile_ranks: str | None = None
    """``all`` or a comma list of ranks; None: ``$SK_RUN_PROFILE_RANKS``, else ``all``."""

    @property
    def profiler_on(self) -> bool:
        return self.profile or self.env.get("SK_RUN_PROFILE", "") == "1"

    def profiler_export(self) -> str:
        """torch_npu's export type of the profiler output (``--export-type`` or ``SK_RUN_PROFILE_EXPORT``)."""
        value = (self.export_type or self.env.get(EXPORT_ENV, "") or "text").strip().lower()
        if value not in EXPORT_TYPES:
            raise InputError(EXPORT_ENV, f"export type {value!r} is not known", expected=" or ".join(EXPORT_TYPES))
        return value

    def profiled_ranks(self) -> list[int]:
        """The ranks whose processes write profiling artifacts (every rank unless limited)."""
        raw = (self.profile_ranks or self.env.get(PROFILE_RANKS_ENV, "") or "all").strip().lower()
        if raw == "all":
            return list(range(self.ranks))
        expected = f"'all' or a comma list of ranks 0..{self.ranks - 1}"
        try:
            ranks = sorted({int(part) for part in raw.split(",")})
        except ValueError:
            raise InputError(PROFILE_RANKS_ENV, f"value {raw!r} is not a list of ranks", expected=expected) from None
        if not ranks or ranks[0] < 0 or ranks[-1] >= self.ranks:
            raise InputError(PROFILE_RANKS_ENV, f"value {raw!r} names a rank outside the {self.ranks} ranks", expected=expected)
        return ranks

    @property
    def save_meta(self) -> bool:
        return self.env.get("ASCEND_OP_COMPILE_SAVE_KERNEL_META", "") == "1"

    def sk_prof_kb(self) -> int | None:
        """``ASCEND_PROF_SK_ON`` in KB per core, rounded up to 64 KB, at most 5120; None when off."""
        raw = self.env.get("ASCEND_PROF_SK_ON", "").strip()
        if not raw or raw == "0":
            return None
        if not raw.isdigit():
            raise InputError("ASCEND_PROF_SK_ON", f"value {raw!r} is not a positive integer", expected="KB per core, e.g. 1024")
        kb = int(raw)
        return min(-(-kb // 64) * 64, SK_PROF_MAX_KB)


def hold(env: Mapping[str, str], lead: int, poll_s: float = 0.05) -> None:
    """Fault-test hook: while the file ``$SK_SIM_HOLD`` exists, a workload process (not a probe) waits on its devices
    before its first step, after writing ``<file>.held-<first rank>-<pid>`` beside it, so a test can kill a host, a
    driver or a sweep in the middle of a run at a point it chose, never after a guessed delay."""
    raw = env.get(HOLD_ENV, "").strip()
    if not raw or not Path(raw).exists():
        return
    gate = Path(raw)
    write_text(gate.with_name(f"{gate.name}.held-{lead}-{os.getpid()}"), f"{os.getpid()}\n")
    while gate.exists():
        time.sleep(poll_s)


def resolve_seed(request: SimRequest) -> int:
    """The noise seed: ``--seed``, else ``$SK_RUN_SEED`` (an integer from 0 to MAX_SEED, as ``--seed`` takes), else a random one."""
    if request.seed is not None:
        return request.seed
    env = request.env.get("SK_RUN_SEED", "").strip()
    if env:
        try:
            seed = int(env)
        except ValueError:  # not an integer, or one of over 4300 digits
            seed = -1
        if not 0 <= seed <= MAX_SEED:
            raise InputError("SK_RUN_SEED", f"value {env[:40]!r} is not a seed", expected=f"an integer from 0 to {MAX_SEED}")
        return seed
    return secrets.randbits(32)


def load_options(request: SimRequest) -> EffectiveOptions:
    config = load_config_file(request.config)
    if not isinstance(config, dict):
        raise InputError(request.config, "config is not a mapping", expected="a JSON object / YAML mapping at the top")
    optimize, debug = find_options(config, request.config, request.options_pointer)
    return resolve(optimize, debug)


def write_super_kernel_log(request: SimRequest, ids: ProcessIds, model: StepModel, sk_prof_kb: int | None, full_cores: list[int]) -> Path:
    """Only ``sk_meta/<pid>/model_<id>_<n>/super_kernel.log`` (phase markers + option lines [+ buffer-full lines])."""
    folder = request.run_dir / "sk_meta" / str(ids.pid) / ids.model_dir
    graph = model.graph
    text = super_kernel_log(
        ids.pid,
        model.options,
        rts_model_id=ids.rts_model_id,
        sk_count=int(graph.launch_is_sk.sum()),
        scope_count=int((graph.launch_is_sk & (graph.launch_split_part == 0)).sum()),
        sk_prof_kb=sk_prof_kb,
        full_cores=full_cores,
    )
    write_text(folder / "super_kernel.log", text)
    return folder


def clock_bases(ids: ProcessIds, prefill_ms: float) -> tuple[int, int]:
    """(host epoch ns, device clock ps) of the first decode step: after compile and prefill."""
    host_base_ns = ids.started_ns + COMPILE_NS + int(prefill_ms * 1e6)
    return host_base_ns, int(round((host_base_ns / 1000.0 - ids.device_clock_offset_us) * 1e6))


def rank_rng(seed: int, rank: int) -> np.random.Generator:
    """Timing jitter of one rank's profile (rank 0's stream is the one-rank simulator's)."""
    return np.random.default_rng([seed, 1] if rank == 0 else [seed, 1, rank])


def sk_prof_path(request: SimRequest, ids: ProcessIds, variant: FormatVariant) -> Path:
    from sk_runner.sim.skprof import file_name

    return request.run_dir / "sk_meta" / str(ids.pid) / file_name(ids.device_id, legacy=variant.legacy_sk_prof)


def write_profile(request: SimRequest, ids: ProcessIds, model: StepModel, decode_ms: np.ndarray, prefill_ms: float,
                  seed: int, params: NoiseParams, sk_prof_kb: int | None, variant: FormatVariant) -> None:
    """Profiling artifacts of one rank's process: profiler output, sk_prof of its device, SK metadata."""
    from sk_runner.sim.profiler import write_profiler_output  # Polars: only a profiled run pays its import
    from sk_runner.sim.profiler_comm import group_name
    from sk_runner.sim.skprof import sk_prof_trace

    rng = rank_rng(seed, ids.rank)
    names = name_graph(model.graph, ids)
    host_base_ns, device_base_ps = clock_bases(ids, prefill_ms)
    full_cores: list[int] = []
    if request.profiler_on or sk_prof_kb is not None:
        timeline = build_timeline(model, decode_ms, 0, decode_ms.size, rng, params)
        if sk_prof_kb is not None:
            trace = sk_prof_trace(model, names, timeline, kb=sk_prof_kb, model_id=ids.model_id, device_base_ps=device_base_ps,
                                  rng=rng, params=params, legacy=variant.legacy_sk_prof)
            write_text(sk_prof_path(request, ids, variant), trace.text)
            full_cores = trace.full_cores
            if full_cores:
                print(f"[WARNING] [sk time profiling] device {ids.device_id}: buffer full on {len(full_cores)} cores, "
                      "see super_kernel.log", file=sys.stderr)
        if request.profiler_on:
            write_profiler_output(request.run_dir, ids, model, names, timeline, decode_ms, host_base_ns,
                                  export_type=request.profiler_export(), group=group_name(model.graph.network.build_id, request.ranks),
                                  env=request.env)
    if request.save_meta:
        write_sk_meta(request.run_dir, model, names, ids, sk_prof_kb=sk_prof_kb, full_cores=full_cores,
                      long_share=variant.long_member_share)
    elif sk_prof_kb is not None:
        write_super_kernel_log(request, ids, model, sk_prof_kb, full_cores)


def write_partial_profile(request: SimRequest, ids: ProcessIds, model: StepModel, decode_ms: np.ndarray, prefill_ms: float,
                          seed: int, params: NoiseParams, sk_prof_kb: int | None, variant: FormatVariant, *, cut_mid_record: bool) -> None:
    """What one dying rank process leaves: its SK metadata, and of sk_prof an array that is
    never closed; a crash cuts the last record in the middle (a hanging process has flushed whole records)."""
    names = name_graph(model.graph, ids)
    if request.save_meta:
        write_sk_meta(request.run_dir, model, names, ids, sk_prof_kb=sk_prof_kb, full_cores=[], long_share=variant.long_member_share)
    if sk_prof_kb is None:
        return
    from sk_runner.sim.skprof import sk_prof_trace

    rng = rank_rng(seed, ids.rank)
    _, device_base_ps = clock_bases(ids, prefill_ms)
    timeline = build_timeline(model, decode_ms, 0, decode_ms.size, rng, params)
    trace = sk_prof_trace(model, names, timeline, kb=sk_prof_kb, model_id=ids.model_id, device_base_ps=device_base_ps,
                          rng=rng, params=params, legacy=variant.legacy_sk_prof)
    text = trace.text.removesuffix("\n{}\n]\n")
    if cut_mid_record:
        text = text[: text.rfind("\n") + 1 + (len(text) - text.rfind("\n")) // 2]
    write_text(sk_prof_path(request, ids, variant), text)


def _header(request: SimRequest, model: StepModel, seed: int) -> list[str]:
    graph = model.graph
    net = graph.network
    return [
        f"loading model {net.name} (build {net.build_id}), tensor parallel {request.ranks}",
        "torch.compile(backend=npugraph_ex, static_kernel_compile=True, super_kernel_optimize=True)",
        f"graph compiled: {graph.n_launches} launches, {int(graph.launch_is_sk.sum())} super kernels",
        f"simulated device seed: {seed}",
        "start prefill",
    ]


def run(request: SimRequest) -> int:
    """Run one simulated process on its devices (:mod:`sk_runner.sim.devices`); returns the exit code (a hang never returns).

    Under a multi-host run's group variables (:func:`sk_runner.hosts.topology.local_ranks`) the process runs its
    host's ranks only: it computes every rank's times from the seed, as one process of all ranks would, and writes
    its own ranks' logs and artifacts (``correctness.json`` is the group of rank 0's), on its host's devices."""
    problem = size_problem(request.ranks, request.iterations, 0) or size_problem(1, None, request.warmup)
    if problem is not None:  # before anything is allocated: sizes come from the command line
        raise InputError(None, problem)
    try:
        local = local_ranks(request.env, request.ranks)
    except ValueError as exc:
        raise InputError(HOSTS_ENV, str(exc), expected="the rank-group variables of a multi-host run (docs/runner.md)") from None
    with occupy(request.env, len(local)) as slowdown:
        return _run(request, slowdown, local)


def _run(request: SimRequest, slowdown: np.ndarray, local: range) -> int:
    """The process on its devices; ``slowdown`` per rank of ``local`` (this host's ranks) from foreign loads there (1.0: none)."""
    options = load_options(request)
    network = load_network(request.network)
    model = compile_model(network, options, request.ranks)
    sk_prof_kb = request.sk_prof_kb()
    lead = local.start
    profiled = [r for r in request.profiled_ranks() if r in local] if request.profiler_on or sk_prof_kb is not None or request.save_meta else [lead]
    ids = rank_process_ids(profiled if lead in profiled else [lead, *profiled], first=lead)
    seed = resolve_seed(request)
    variant = draw_variant(seed)
    rng = np.random.default_rng(seed)
    request.run_dir.mkdir(parents=True, exist_ok=True)
    for line in options.invalid:
        print(f"[WARNING] SK option {line.text()}", file=sys.stderr)

    if request.probe_only:
        folder = write_super_kernel_log(request, ids[lead], model, sk_prof_kb, [])
        print(f"[INFO] probe only: options written to {folder / 'super_kernel.log'}")
        return 0

    hold(request.env, lead)
    params = NoiseParams(factor=request.noise)
    mult = step_multipliers(rng, request.ranks, request.iterations, request.warmup, params)
    overhead = np.ones(request.ranks)
    overhead[local] = slowdown
    if request.profiler_on:
        overhead[profiled] *= PROFILER_OVERHEAD
    if sk_prof_kb is not None:
        overhead[profiled] *= SK_PROF_OVERHEAD
    decode_ms = model.step_us / 1000.0 * mult * overhead[:, None]
    # prefill: the first sample's process/rank noise without the warm-up ramp
    prefill_ms = model.step_us / 1000.0 * network.timing.prefill_factor * mult[:, 0] / (1.0 + params.warmup_amplitude) * overhead
    header = _header(request, model, seed)
    outcome = model.outcome

    if outcome.kind in ("crash", "device_fault", "hang"):
        n = min(FAILING_AFTER_SAMPLES, request.iterations)
        logs.write_rank_logs(request.run_dir, header, prefill_ms, decode_ms[:, :n], [], only=local)
        if request.save_meta or sk_prof_kb is not None:
            for r in profiled:
                write_partial_profile(request, ids[r], model, decode_ms[r, :n], float(prefill_ms[r]), seed, params, sk_prof_kb,
                                      variant, cut_mid_record=outcome.kind != "hang")
        if outcome.kind == "hang":
            print(f"[INFO] decode step {n} waiting for cross-core event ...", flush=True)
            while True:  # the process stops making progress until it is killed
                time.sleep(3600)
        print(f"[ERROR] RUNTIME {outcome.detail}", file=sys.stderr, flush=True)
        return EXIT_CRASH if outcome.kind == "crash" else EXIT_DEVICE_FAULT

    if request.profiler_on or sk_prof_kb is not None or request.save_meta:
        for r in profiled:
            write_profile(request, ids[r], model, decode_ms[r], float(prefill_ms[r]), seed, params, sk_prof_kb, variant)

    footer = [f"decode steps: {request.iterations}, mean {decode_ms.mean():.3f} ms", "finished"]
    logs.write_rank_logs(request.run_dir, header, prefill_ms, decode_ms, footer, only=local)
    result = logs.correctness(network.build_id, outcome.kind == "wrong_output", rng, outcome.detail)
    if 0 in local:  # the group of rank 0 writes the run's correctness record
        logs.write_correctness(request.run_dir, result)
    print(f"Correctness check: {'PASS' if result.passed else 'FAIL'}")
    if request.ground_truth is not None and 0 in local:
        write_ground_truth(request.ground_truth, network)
    return 0
