"""Helpers of the command-line tests: the app run in this process, the index fixture's
type, and the options that keep a test index small."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from typer.testing import CliRunner

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"
SMALL = (
    "postgresql/tutorial-start.html",
    "postgresql/tutorial-advanced.html",
    "postgresql/tutorial-update.html",
    "postgresql/tutorial-conclusion.html",
)
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
