"""Fixtures of the command-line tests: a small real corpus indexed once per test process
(four short PostgreSQL tutorial pages, chunks of 32 tokens), by the `run` command itself
(helpers in cli_testing.py)."""

from __future__ import annotations

import shutil

import pytest
from cli_testing import CORPUS, FAST, SMALL, Indexed, invoke


@pytest.fixture(scope="session")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Indexed:
    base = tmp_path_factory.mktemp("cli")
    folder = base / "docs"
    for source in SMALL:
        (folder / source).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(CORPUS / source, folder / source)
    db = base / "data"
    result = invoke("run", str(folder), "--db", str(db), "--no-progress", "--json", *FAST)
    assert result.exit_code == 0, result.output
    return Indexed(folder, db)
