"""The real ``torch-npu`` package's Python sources, for the API check of the npu backend.

The npu backend (``sk_runner/backends/npu.py``) runs only on an Ascend machine,
so its unit tests use a stand-in torch_npu; ``tests/test_torch_npu_api.py``
checks every name it uses against the real package instead. This module says
which releases are checked (:data:`VERSIONS`), where their sources are cached
(:data:`CACHE`, gitignored) and how they get there::

    make torch-npu-sources            # = python tests/torch_npu_sources.py

For each version it runs ``pip download torch-npu==V --no-deps
--only-binary=:all:`` (this interpreter's tags first, then other Linux tags:
the Python sources are the same in every wheel of a release), keeps only the
``.py`` files of the ``torch_npu`` package (a wheel is a zip; nothing is
installed or imported: torch_npu needs the Ascend libraries) in
``.cache/torch-npu/<V>/`` and deletes the wheel. A version already cached is
not fetched again.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Sequence
from pathlib import Path

from sk_analytics.stage_o.options import TORCH_NPU_RELEASES

REPO = Path(__file__).resolve().parent.parent
CACHE = REPO / ".cache" / "torch-npu"
"""One folder per version: ``<V>/torch_npu/**.py`` and ``<V>/WHEEL`` (name and sha256 of the wheel)."""
MARKER = "WHEEL"
"""Written last: a version folder without it is not a cache entry."""
PACKAGE = "torch_npu"

VERSIONS: tuple[str, ...] = TORCH_NPU_RELEASES
"""The supported range (docs/runner.md), as the option registry names it: the newest build of every minor release
from 2.7 to 2.14.

Older releases fail the check (read once when the range was set): up to 2.6
have no ``torch.npu.NPUGraph._validate_options`` (the exact-value probe), up to
2.5 no ``npugraph_ex`` compile backend, and 2.3-2.5 stamp the profiler folder
in UTC instead of local time."""

PLATFORM_TRIES: tuple[tuple[str, ...], ...] = (
    (),
    *(
        ("--python-version", py, "--implementation", "cp",
         "--platform", "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64",
         "--platform", "manylinux_2_28_aarch64", "--platform", "manylinux2014_aarch64")
        for py in ("3.11", "3.10", "3.9", "3.12")
    ),
)  # fmt: skip
"""``pip download`` tag options tried in turn: this interpreter, then other CPython/Linux builds."""


def source_root(version: str, cache: Path = CACHE) -> Path | None:
    """The cached source folder of ``version`` (holding ``torch_npu/``), or None when not fetched."""
    folder = cache / version
    return folder if (folder / MARKER).is_file() else None


def cached_versions(cache: Path = CACHE) -> list[str]:
    """The versions of :data:`VERSIONS` whose sources are in the cache."""
    return [v for v in VERSIONS if source_root(v, cache) is not None]


def python_members(wheel: zipfile.ZipFile) -> list[str]:
    """The wheel's ``torch_npu/**.py`` members (the only ones the check reads)."""
    return [n for n in wheel.namelist() if n.startswith(PACKAGE + "/") and n.endswith(".py") and ".." not in n.split("/")]


def unpack_sources(wheel_path: Path, dest: Path) -> int:
    """Extract the ``.py`` files of ``torch_npu`` from a wheel into ``dest`` (made afresh); return their count.

    ``dest`` is filled under a temporary name and renamed at the end, with
    :data:`MARKER` written last, so an interrupted unpack leaves no cache entry.
    """
    partial = dest.with_name(dest.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    with zipfile.ZipFile(wheel_path) as wheel:
        members = python_members(wheel)
        if not members:
            raise ValueError(f"{wheel_path.name}: no {PACKAGE}/*.py file in the wheel")
        for name in members:
            wheel.extract(name, partial)
    digest = hashlib.sha256(wheel_path.read_bytes()).hexdigest()
    (partial / MARKER).write_text(f"{wheel_path.name} sha256={digest}\n", encoding="utf-8")
    shutil.rmtree(dest, ignore_errors=True)
    partial.rename(dest)
    return len(members)


def download_wheel(version: str, into: Path) -> Path:
    """``pip download`` the wheel of ``version`` into ``into``, trying :data:`PLATFORM_TRIES` in turn."""
    errors = []
    for tags in PLATFORM_TRIES:
        cmd = [sys.executable, "-m", "pip", "download", f"torch-npu=={version}", "--no-deps", "--only-binary=:all:",
               "--disable-pip-version-check", "-q", "-d", str(into), *tags]  # fmt: skip
        done = subprocess.run(cmd, capture_output=True, text=True, check=False)
        wheels = sorted(into.glob("torch_npu-*.whl"))
        if done.returncode == 0 and wheels:
            return wheels[0]
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        errors.append(f"[{' '.join(tags) or 'this interpreter'}] {last}")
    raise RuntimeError(f"torch-npu=={version}: no wheel could be downloaded: " + "; ".join(errors))


def fetch(version: str, cache: Path | None = None) -> str:
    """Make sure the sources of ``version`` are cached (default: in :data:`CACHE`); return one line saying what was done."""
    cache = CACHE if cache is None else cache
    if (root := source_root(version, cache)) is not None:
        return f"torch-npu {version}: cached ({(root / MARKER).read_text(encoding='utf-8').split()[0]})"
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as tmp:
        wheel = download_wheel(version, Path(tmp))
        count = unpack_sources(wheel, cache / version)
    dest = cache / version
    return f"torch-npu {version}: fetched {wheel.name}, {count} .py files -> {dest.relative_to(REPO) if dest.is_relative_to(REPO) else dest}"


def main(argv: Sequence[str] | None = None) -> int:
    """Fetch the given versions (default: all of :data:`VERSIONS`); exit 1 when one could not be fetched."""
    versions = list(argv if argv is not None else sys.argv[1:]) or list(VERSIONS)
    failed = 0
    for version in versions:
        try:
            print(fetch(version), flush=True)
        except (RuntimeError, ValueError, OSError, zipfile.BadZipFile) as exc:
            failed += 1
            print(f"torch-npu {version}: FAILED: {exc}", file=sys.stderr, flush=True)
    print(f"{len(versions) - failed} of {len(versions)} torch-npu versions in {CACHE}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
