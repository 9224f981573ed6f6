"""Test-wide setup: a signing key and trusted-keys file of the test run, never the user's; the run's own
simulated-device registry, no inherited device lease, and Chinese output whatever the shell's locale.

Session-scoped and set in ``os.environ`` before any other fixture (autouse
fixtures of a scope run first), so the sweeps, CLIs and Ray workers the tests
start sign with it too. No test writes into ``~`` or the user's registry in the temp folder. Every process of the run
gets a fresh ``TMPDIR`` that must be empty when the run ends (``tests/tmp_guard.py``). A test that runs a
CLI's ``main`` in this process leaves SIGINT/SIGTERM blocked and handled (its exit hold): each test's
signal state is put back after it, so that the next one's children do not inherit it; and SIGINT/SIGTERM
are unblocked, and set back to their default when ignored, as the run starts (a harness may hand them on
blocked, a shell's ``make test &`` ignored; tests that start Python directly check what a signal does to it).
"""

from __future__ import annotations

import signal
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from tmp_guard import pytest_configure, pytest_sessionfinish  # noqa: F401 - the run's own TMPDIR, checked empty at the end

from sk_analytics.ledger.signing import KEY_ENV, TRUSTED_ENV
from sk_analytics.messages import LANG_ENV
from sk_runner.devices.markers import DEVICES_ENV, MARKERS, ROOT_ENV, TIMEOUT_ENV, VISIBLE
from sk_runner.devices.registry import REGISTRY_ENV

# The property tests draw the same examples on every run (derived from each test's name), so the suite CI runs once
# passes or fails the same way every time; `pytest --hypothesis-profile=explore` draws new ones, to look for bugs.
# No wall-clock checks either: an example that a loaded 2-core machine slowed past Hypothesis's 200 ms deadline (or a
# draw past its too_slow health check) failed the run as DeadlineExceeded / Flaky, whatever the code did.
settings.register_profile("repeatable", derandomize=True, database=None, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore")
settings.load_profile("repeatable")

signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT, signal.SIGTERM})  # a harness may start pytest with them blocked
if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:  # or ignoring them: a shell does for `make test &`, and the
    signal.signal(signal.SIGINT, signal.default_int_handler)  # children inherit an ignored signal through exec
if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


@pytest.fixture(scope="session", autouse=True)
def signing_key(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The run's key (created on first use, trusted on creation); yields its path."""
    folder = tmp_path_factory.mktemp("signing")
    key = folder / "signing_key"
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(KEY_ENV, str(key))
        mp.setenv(TRUSTED_ENV, str(folder / "trusted_keys"))
        yield key


@pytest.fixture(scope="session", autouse=True)
def simulated_devices(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The run's simulated-device occupancy registry (each xdist worker its own); no lease markers, lease defaults or
    device mask from the shell that started pytest. Yields the registry folder."""
    registry = tmp_path_factory.mktemp("sim-devices")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(REGISTRY_ENV, str(registry))
        for name in (*MARKERS, ROOT_ENV, DEVICES_ENV, TIMEOUT_ENV, VISIBLE):
            mp.delenv(name, raising=False)
        yield registry


@pytest.fixture(scope="session", autouse=True)
def output_language() -> Iterator[None]:
    """Chinese output (the default the tests check) whatever the locale of the shell that started pytest: a
    ``LANG=en_US.UTF-8`` would otherwise make every command without ``--lang`` speak English (docs/design.md)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(LANG_ENV, "zh")
        yield


@pytest.fixture(autouse=True)
def signal_state() -> Iterator[None]:
    """This process's signal mask and SIGINT/SIGTERM handlers as they were before the test."""
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, ())
    handlers = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    yield
    for sig, handler in handlers.items():
        if handler is not None:
            signal.signal(sig, handler)
    signal.pthread_sigmask(signal.SIG_SETMASK, mask)
