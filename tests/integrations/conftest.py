"""Fixtures of the integration tests (helpers in hf_testing.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from hf_testing import Models

from attnswitch.attention import runtime


@pytest.fixture(autouse=True)
def fresh_runtime() -> Iterator[runtime.Runtime]:
    """Each test runs in a fresh attention runtime (see tests/attention/conftest.py)."""
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


