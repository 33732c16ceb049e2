"""Attention tests. Having a conftest here puts this directory on `sys.path` (pytest's
prepend import mode), so tests below it import the shared pins from grid_pins.py."""

from collections.abc import Iterator

import pytest

from attnswitch.kernels import runtime


def pytest_configure(config) -> None:
    # xdist registers this marker; registered here too so that `-p no:xdist` runs collect
    # the files that group their tests on one worker (--strict-markers refuses it otherwise).
    config.addinivalue_line("markers", "xdist_group(name): run these tests on one xdist worker")


@pytest.fixture(autouse=True)
def fresh_runtime() -> Iterator[runtime.Runtime]:
    """Each test runs in a fresh attention runtime (settings read from the environment at
    first use, empty plan cache, warn-once registry, probe cache and counters)."""
    with runtime.fresh() as rt:
        yield rt
