"""Shared fixtures. Tests never touch the user's cache: verdicts and autotune tables go to a
temporary directory for the whole session (each xdist worker has its own).

The suite runs `engine="auto"` as the torch engine (`ATTNSWITCH_ENGINE=torch`), so that
each worker does not first measure every engine on the real model (about a minute on two
cores); tests/engines/test_autopick.py clears it and tests the measured pick."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import pytest

_SESSION_CACHE: str | None = None
_PREVIOUS_CACHE: str | None = None


def pytest_configure(config: pytest.Config) -> None:
    # Set at configure time, not in a fixture, so code run while collecting is covered too.
    global _SESSION_CACHE, _PREVIOUS_CACHE
    _PREVIOUS_CACHE = os.environ.get("ATTNSWITCH_CACHE_DIR")
    _SESSION_CACHE = tempfile.mkdtemp(prefix="attnswitch-test-cache-")
    os.environ["ATTNSWITCH_CACHE_DIR"] = _SESSION_CACHE
    os.environ.setdefault("ATTNSWITCH_ENGINE", "torch")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _SESSION_CACHE is not None:
        shutil.rmtree(_SESSION_CACHE, ignore_errors=True)
    if _PREVIOUS_CACHE is None:
        os.environ.pop("ATTNSWITCH_CACHE_DIR", None)
    else:
        os.environ["ATTNSWITCH_CACHE_DIR"] = _PREVIOUS_CACHE


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty cache directory of this test's own (verdicts, autotune table)."""
    path = tmp_path / "cache"
    path.mkdir()
    monkeypatch.setenv("ATTNSWITCH_CACHE_DIR", str(path))
    return path
