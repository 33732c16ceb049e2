"""Fixtures of the command-line tests: a small real corpus indexed once per test process
(four short PostgreSQL tutorial pages, chunks of 32 tokens), by the `run` command itself."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"
SMALL = ("postgresql/tutorial-start.html", "postgresql/tutorial-advanced.html",
         "postgresql/tutorial-update.html", "postgresql/tutorial-conclusion.html")
FAST = ("--max-tokens", "32", "--overlap", "4", "--chunks-per-call", "8")


@dataclass(frozen=True)
class Indexed:
    """A folder of documents and the data folder (`--db`) of its index."""

    folder: Path
    db: Path


def invoke(*args: str, **env: str):
    """The `attnswitch` app in this process (sharing its loaded model), on a wide terminal
    so rich folds no path; exceptions are kept on the result, not raised."""
    from attnswitch.cli import app

    return CliRunner(env={"COLUMNS": "200", **env}).invoke(app, list(args))


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
