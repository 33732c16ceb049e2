"""Fixtures of the integration tests (helpers in hf_testing.py and adapter_testing.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from adapter_testing import PAGES, Indexed, copy_pages
from hf_testing import Models

from attnswitch.kernels import runtime


@pytest.fixture(autouse=True)
def fresh_runtime() -> Iterator[runtime.Runtime]:
    """Each test runs in a fresh attention runtime (see tests/kernels/conftest.py)."""
    with runtime.fresh() as rt:
        yield rt


@pytest.fixture(scope="module")
def models() -> Callable[[str], Models]:
    import attnswitch.integrations.transformers  # noqa: F401  (registers)

    cache: dict[str, Models] = {}

    def get(family: str) -> Models:
        if family not in cache:
            cache[family] = Models(family)
        return cache[family]

    return get


@pytest.fixture(scope="session")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Indexed:
    """Four real HTML pages indexed once per test process by `attnswitch.index` (the default
    model, as the suite runs it: the torch engine, float32)."""
    import attnswitch

    base = tmp_path_factory.mktemp("adapters")
    folder = copy_pages(base / "docs")
    db = base / "index"
    summary = attnswitch.index(folder, db=db)
    assert summary.indexed == len(PAGES), summary.to_dict()
    return Indexed(folder, db / "index.sqlite3")


@pytest.fixture(scope="session")
def served(indexed: Indexed, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of a real `attnswitch serve` over `indexed` (stopped at the end)."""
    from attnswitch.service import launch

    server = launch.start(tmp_path_factory.mktemp("served"), "--db", str(indexed.db), "--no-ui")
    try:
        yield server.url
    finally:
        server.stop()
