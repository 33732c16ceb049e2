"""The contract modules type-check under mypy's strict mode (`[tool.mypy]` in
pyproject.toml names them): a change that breaks a contract's types fails the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_the_contract_modules_pass_mypy_strict() -> None:
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
    assert "Success: no issues found in 12 source files" in done.stdout, done.stdout
