"""``npu`` backend and the helper a torch_npu inference script calls.

``torch`` / ``torch_npu`` are imported lazily, only inside the functions that
need them, so the rest of the product installs and runs without them; when
they are absent the caller gets an :class:`EnvironmentBlocker` (exit 3).

A user script follows the workload contract with three calls::

    from sk_runner.backends import npu as sk
    model = sk.compile_model(model)                   # options from $SK_RUN_CONFIG
    with sk.TimingLog() as log:                        # $SK_RUN_DIR/log_<rank>.log
        out = log.timed("prefill", model, prompt)      # "Inference time (prefill): X ms"
        for _ in range(n): log.timed("decode", step)   # device-synchronised timing
    sk.write_correctness(passed=..., max_abs_err=...)

In a diagnostic profile collection (``sk-run profile`` sets ``SK_RUN_PROFILE=1``)
the ``TimingLog`` block also runs under the torch_npu profiler
(:func:`npu_profiler`), which writes
``<run dir>/<host>_<pid>_…_ascend_pt/ASCEND_PROFILER_OUTPUT/kernel_details.csv``
(``ascend_pytorch_profiler_<rank>.db`` with ``SK_RUN_PROFILE_EXPORT=db``); a clean run (no ``SK_RUN_PROFILE``) never starts it.

The exact-value probe asks the installed wrapper
(``torch.npu.NPUGraph._validate_options(None, "optimize_options", {name: value})``,
``"debug_options"`` for a debug option) in torch_npu's option names and value
forms (``opt_extend`` / ``debug_extend`` as text, :mod:`.torch_npu_options`),
unless the installed release is known to refuse the option or the value's type
(``blocked``, naming the release: never tried). :func:`compile_options` hands
``torch.compile`` the options in those names whichever names the config uses.
"""

from __future__ import annotations

import importlib
import os
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from types import ModuleType, TracebackType
from typing import IO, Any, TypeVar

from sk_analytics.errors import EnvironmentBlocker, InputError
from sk_analytics.files.atomic import write_json
from sk_analytics.stage_o.options import OptionSpec, spec_of
from sk_runner.backends import torch_npu_options as names
from sk_runner.backends.base import Control, WrapperVerdict
from sk_runner.backends.command import CommandBackend
from sk_runner.config import DEBUG_OPTIONS_KEY, OPTIONS_KEY, load_config
from sk_runner.fingerprint import environment_record

T = TypeVar("T")

#: Keys of an execution config that go into ``torch.compile(options=…)`` (formats §5).
COMPILE_KEYS = ("static_kernel_compile", "super_kernel_optimize", OPTIONS_KEY, DEBUG_OPTIONS_KEY)
PROFILE_SWITCH = "SK_RUN_PROFILE"
"""Set to ``1`` by the runner for a diagnostic profile collection (:func:`sk_runner.profile.profile_env`)."""
EXPORT_SWITCH = "SK_RUN_PROFILE_EXPORT"
"""``db`` when the collection asks for torch_npu's DB export (``sk-run profile --export-type db``)."""


def require_torch_npu() -> ModuleType:
    """Import torch_npu (which patches ``torch.npu``) and return ``torch``."""
    try:
        importlib.import_module("torch_npu")
        torch = importlib.import_module("torch")
    except ImportError as exc:
        raise EnvironmentBlocker(f"torch_npu is not importable ({exc}): install torch_npu and source the CANN set_env.sh") from exc
    except Exception as exc:  # torch_npu raises RuntimeError when CANN cannot load
        raise EnvironmentBlocker(f"torch_npu failed to load: {type(exc).__name__}: {exc}") from exc
    if not hasattr(torch, "npu"):
        raise EnvironmentBlocker("torch has no 'npu' module after importing torch_npu")
    return torch


def compile_options(config: Mapping[str, Any], *, source: str | os.PathLike[str] | None = None) -> dict[str, Any]:
    """The ``torch.compile`` options of an execution config, in either layout, with the SK
    options in torch_npu's names and value forms (``opt_extend_option`` -> ``opt_extend`` text).

    Top-level keys (torch.compile layout) win; otherwise the YAML layout
    ``model_config.custom_params`` is used. Absent keys are left out.
    """
    found: Mapping[str, Any] = config
    if not any(k in config for k in COMPILE_KEYS):
        custom = config.get("model_config", {}).get("custom_params") if isinstance(config.get("model_config"), dict) else None
        if isinstance(custom, dict):
            found = custom
    return names.wrapper_config({k: found[k] for k in COMPILE_KEYS if k in found}, source=source)


def config_path_from_env(config_path: str | os.PathLike[str] | None = None) -> Path:
    """The explicit path, or ``$SK_RUN_CONFIG`` of the workload contract."""
    value = config_path if config_path is not None else os.environ.get("SK_RUN_CONFIG")
    if not value:
        raise InputError(None, "no execution config given", expected="config_path or the SK_RUN_CONFIG variable")
    return Path(value)


def compile_model(model: T, config_path: str | os.PathLike[str] | None = None, *, fullgraph: bool = True, **kwargs: Any) -> T:
    """``torch.compile(model, backend="npugraph_ex", options=<config options>)``."""
    torch = require_torch_npu()
    path = config_path_from_env(config_path)
    options = compile_options(load_config(path), source=path)
    compiled: T = torch.compile(model, backend="npugraph_ex", fullgraph=fullgraph, options=options, **kwargs)
    return compiled


def profiling_requested(env: Mapping[str, str] | None = None) -> bool:
    """Did the runner ask for the profiler (``SK_RUN_PROFILE=1``)? A clean run never does."""
    return (os.environ if env is None else env).get(PROFILE_SWITCH, "") == "1"


def run_dir_from_env(run_dir: str | os.PathLike[str] | None = None) -> Path:
    """The explicit folder, or ``$SK_RUN_DIR`` of the workload contract."""
    folder = run_dir if run_dir is not None else os.environ.get("SK_RUN_DIR")
    if not folder:
        raise InputError(None, "no run folder given", expected="run_dir or the SK_RUN_DIR variable")
    return Path(folder)


def export_type_requested(env: Mapping[str, str] | None = None) -> str:
    """``db`` when the runner asked for the DB export (``SK_RUN_PROFILE_EXPORT=db``), else ``text``."""
    value = (os.environ if env is None else env).get(EXPORT_SWITCH, "").strip().lower() or "text"
    if value not in ("text", "db"):
        raise InputError(EXPORT_SWITCH, f"export type {value!r} is not known", expected="text or db")
    return value


def start_profiler(run_dir: str | os.PathLike[str], export_type: str = "text") -> Any:
    """A torch_npu profiler (not yet entered) tracing CPU and NPU into ``run_dir``.

    Level1 with no AI Core metrics: enough for ``kernel_details.csv`` (kernel
    names and durations) at the lowest cost; the trace is parsed when the
    profiler stops (``tensorboard_trace_handler``), which writes
    ``<run_dir>/<worker>_ascend_pt/ASCEND_PROFILER_OUTPUT/``. With
    ``export_type="db"`` the output is ``ascend_pytorch_profiler_<rank>.db``
    instead (``_ExperimentalConfig(export_type=ExportType.Db)``).
    """
    require_torch_npu()
    profiler = getattr(importlib.import_module("torch_npu"), "profiler", None)
    needed: tuple[str, ...] = ("profile", "tensorboard_trace_handler", "_ExperimentalConfig", "ProfilerActivity", "ProfilerLevel", "AiCMetrics")
    needed += ("ExportType",) if export_type == "db" else ()
    missing = [name for name in needed if not hasattr(profiler, name)]
    if profiler is None or missing:
        raise EnvironmentBlocker(f"this torch_npu has no torch_npu.profiler.{', '.join(missing)}: cannot profile")
    options: dict[str, Any] = {"aic_metrics": profiler.AiCMetrics.AiCoreNone, "profiler_level": profiler.ProfilerLevel.Level1}
    if export_type == "db":
        options["export_type"] = profiler.ExportType.Db
    experimental = profiler._ExperimentalConfig(**options)
    return profiler.profile(
        activities=[profiler.ProfilerActivity.CPU, profiler.ProfilerActivity.NPU],
        on_trace_ready=profiler.tensorboard_trace_handler(str(run_dir)),
        experimental_config=experimental,
    )


@contextmanager
def npu_profiler(run_dir: str | os.PathLike[str] | None = None, *, env: Mapping[str, str] | None = None) -> Iterator[Any | None]:
    """Run the block under :func:`start_profiler` when :func:`profiling_requested`;
    otherwise do nothing (yields None). Yields the running profiler."""
    if not profiling_requested(env):
        yield None
        return
    with start_profiler(run_dir_from_env(run_dir), export_type_requested(env)) as prof:
        yield prof


def synchronize() -> None:
    """Wait for the device so a timing covers the work, not only its launch."""
    require_torch_npu().npu.synchronize()


def rank_from_env() -> int:
    """Rank of this process (``RANK``, then ``LOCAL_RANK``, else 0)."""
    for key in ("RANK", "LOCAL_RANK"):
        value = os.environ.get(key)
        if value is not None and value.isdigit():
            return int(value)
    return 0


class TimingLog:
    """Writes the standard timing lines to ``<run_dir>/log_<rank>.log`` (and stdout)."""

    def __init__(self, run_dir: str | os.PathLike[str] | None = None, rank: int | None = None, *, echo: IO[str] | None = None) -> None:
        folder = run_dir_from_env(run_dir)
        self.rank = rank_from_env() if rank is None else rank
        self.path = folder / f"log_{self.rank}.log"
        self.echo = echo if echo is not None else sys.stdout
        self.profiler: Any | None = None
        """The running torch_npu profiler in a profile collection (``SK_RUN_PROFILE=1``), else None."""
        self._fh: IO[str] | None = None
        self._stack = ExitStack()

    def __enter__(self) -> TimingLog:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with ExitStack() as stack:
            self._fh = stack.enter_context(open(self.path, "a", encoding="utf-8"))
            self.profiler = stack.enter_context(npu_profiler(self.path.parent))
            self._stack = stack.pop_all()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        """Stop the profiler (it writes its output now), then close the log."""
        stack, self._stack = self._stack, ExitStack()
        self._fh = self.profiler = None
        stack.__exit__(exc_type, exc, tb)

    def record(self, phase: str, ms: float) -> str:
        """Write one ``Inference time (<phase>): <ms> ms`` line; return it."""
        if phase not in ("decode", "prefill"):
            raise ValueError(f"phase must be decode or prefill, got {phase!r}")
        line = f"Inference time ({phase}): {ms:.3f} ms"
        if self._fh is None:
            raise RuntimeError("TimingLog used outside its 'with' block")
        self._fh.write(line + "\n")
        self._fh.flush()
        print(line, file=self.echo, flush=True)
        return line

    def timed(self, phase: str, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``fn`` between two device synchronisations and record its wall time."""
        synchronize()
        start = time.perf_counter()
        result = fn(*args, **kwargs)
        synchronize()
        self.record(phase, (time.perf_counter() - start) * 1000.0)
        return result


def write_correctness(passed: bool, run_dir: str | os.PathLike[str] | None = None, **details: Any) -> Path:
    """Write ``correctness.json`` (``{"passed": bool, ...}``) into the run folder."""
    return write_json(run_dir_from_env(run_dir) / "correctness.json", {"passed": bool(passed), **details})


def wrapper_section(option: str) -> str:
    """The ``_validate_options`` table an option (either name) is checked in: ``debug_options`` for the
    registry's debug options (``super_kernel_debug_options``), else ``optimize_options`` (the real wrapper
    keeps two tables)."""
    spec = spec_of(option)
    return "optimize_options" if spec is None else names.wrapper_section(spec)


def installed_release() -> str:
    """``torch_npu.__version__`` of the installed torch_npu (empty when it does not say)."""
    require_torch_npu()
    return str(getattr(importlib.import_module("torch_npu"), "__version__", "") or "")


def validate_option(option: str, value: Any) -> WrapperVerdict:
    """Would the installed wrapper accept ``option = value`` exactly? Asked in torch_npu's name and
    value form; ``blocked`` (not asked) when the installed release is known to refuse it."""
    torch = require_torch_npu()
    graph = getattr(torch.npu, "NPUGraph", None)
    validate = getattr(graph, "_validate_options", None)
    if validate is None:
        raise EnvironmentBlocker("this torch_npu has no torch.npu.NPUGraph._validate_options: cannot probe option values")
    spec, release = spec_of(option), installed_release()
    name, wrapped = (option, value) if spec is None else (spec.wrapper, names.wrapper_value(spec, value))
    section = wrapper_section(option)
    evidence: dict[str, Any] = {"call": f'torch.npu.NPUGraph._validate_options(None, "{section}", {{{name!r}: {wrapped!r}}})',
                                "torch_npu": release, "wrapper_name": name}
    problem = _blocked(release, spec, wrapped)
    if problem:
        return WrapperVerdict(False, f"blocked, not tried: {problem}", {**evidence, "call": None}, blocked=True)
    try:
        returned = validate(None, section, {name: wrapped})
    except Exception as exc:  # the wrapper signals rejection by raising
        return WrapperVerdict(False, f"wrapper rejected {name}={wrapped!r}: {type(exc).__name__}: {exc}", evidence)
    if returned is False:
        return WrapperVerdict(False, f"wrapper returned False for {name}={wrapped!r}", evidence)
    return WrapperVerdict(True, f"wrapper accepted {name}={wrapped!r}", {**evidence, "returned": repr(returned)})


def _blocked(release: str, spec: OptionSpec | None, wrapped: Any) -> str | None:
    """Why a checked release's wrapper refuses the option or the value's type (naming the release);
    None to ask the wrapper (an unregistered option, a release outside the checked range)."""
    if spec is None or names.checked_release(release) is None:
        return None
    problem = names.release_problem(release, spec)
    type_problem = names.value_problem(spec, wrapped)
    return problem or (f"torch_npu {release}: {type_problem}" if type_problem else None)


class NpuBackend(CommandBackend):
    """A user's torch_npu inference command on a real Ascend device."""

    name = "npu"

    def check_ready(self) -> None:
        super().check_ready()
        torch = require_torch_npu()
        try:
            count = int(torch.npu.device_count())
        except Exception as exc:
            raise EnvironmentBlocker(f"cannot query NPU devices: {type(exc).__name__}: {exc}") from exc
        if count < 1:
            visible = os.environ.get("ASCEND_RT_VISIBLE_DEVICES")
            raise EnvironmentBlocker(f"no NPU device visible (ASCEND_RT_VISIBLE_DEVICES={visible!r})")

    def workload(self, control: Control) -> dict[str, Any]:
        return {**super().workload(control), "mode": "npugraph_ex"}

    def environment(self) -> dict[str, Any]:
        return environment_record(self.name, os.environ.get("ASCEND_RT_VISIBLE_DEVICES", "all"),
                                  {"ascend_home": os.environ.get("ASCEND_HOME_PATH") or os.environ.get("ASCEND_TOOLKIT_HOME")})

    def wrapper_check(self, option: str, value: Any) -> WrapperVerdict:
        return validate_option(option, value)

    def workload_config(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The config with every SK option map in torch_npu's names and value forms (what its wrapper accepts)."""
        return names.wrapper_config(config)
