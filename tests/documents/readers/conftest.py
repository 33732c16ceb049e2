"""Fixtures of the reader tests."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest


@pytest.fixture
def tesseract_calls(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A log of the page readings (OSD and recognition) Tesseract is asked for."""
    real = shutil.which("tesseract")
    assert real is not None
    folder, log = tmp_path / "bin", tmp_path / "tesseract.log"
    folder.mkdir()
    wrapper = folder / "tesseract"
    wrapper.write_text(
        f'#!/bin/sh\ncase "$1" in stdin) echo "$@" >> "{log}";; esac\nexec "{real}" "$@"\n'
    )
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{folder}{os.pathsep}{os.environ['PATH']}")
    log.touch()
    return log
