"""The strict modules type-check under mypy's strict mode (`[tool.mypy]` in pyproject.toml
names them): a change that breaks their types fails the suite. Every file the list names
must be checked, so that a file that moved or was misspelt is not silently left out."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def strict_files() -> list[str]:
    """The files `[tool.mypy] files` in pyproject.toml lists."""
    with open(ROOT / "pyproject.toml", "rb") as fh:
        files = tomllib.load(fh)["tool"]["mypy"]["files"]
    assert isinstance(files, list) and all(isinstance(f, str) for f in files), files
    return files


def test_the_listed_files_exist_once() -> None:
    files = strict_files()
    assert files, "[tool.mypy] files lists no file"
    assert len(set(files)) == len(files), sorted(f for f in files if files.count(f) > 1)
    missing = [f for f in files if not (ROOT / f).is_file()]
    assert not missing, f"[tool.mypy] files names files that do not exist: {missing}"


def test_the_strict_modules_pass_mypy_strict() -> None:
    pytest.importorskip("mypy", reason="mypy (the test extra) is not installed")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--no-incremental",
            "--config-file",
            str(ROOT / "pyproject.toml"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    checked = re.search(r"^Success: no issues found in (\d+) source files?$", done.stdout, re.M)
    assert checked, done.stdout
    assert int(checked.group(1)) == len(strict_files()), done.stdout
