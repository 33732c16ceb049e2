"""Attention tests. Having a conftest here puts this directory on `sys.path` (pytest's
prepend import mode), so tests below it import the shared pins from grid_pins.py."""


def pytest_configure(config) -> None:
    # xdist registers this marker; registered here too so that `-p no:xdist` runs collect
    # the files that group their tests on one worker (--strict-markers refuses it otherwise).
    config.addinivalue_line("markers", "xdist_group(name): run these tests on one xdist worker")
