"""Fixtures of the pipeline tests: a copy of a few real corpus documents and the model,
loaded once per test process."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"
# Small real documents: four short html pages (19 chunks of 32 tokens), and six documents
# of three formats (html, reStructuredText, pdf; 66 such chunks).
SMALL = ("postgresql/tutorial-start.html", "postgresql/tutorial-advanced.html",
         "postgresql/tutorial-update.html", "postgresql/tutorial-conclusion.html")
LARGER = SMALL + ("sqlite/copyright-release.pdf", "python-tutorial/index.rst.txt")


def copy_corpus(dest: Path, sources: tuple[str, ...]) -> Path:
    for source in sources:
        (dest / source).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(CORPUS / source, dest / source)
    return dest


@pytest.fixture(scope="session")
def encoder():
    """The default model on the default engine, float32 (what `run` uses by default)."""
    from attnswitch.engines import get_engine

    return get_engine()


@pytest.fixture
def docs(tmp_path: Path) -> Path:
    """A copy of four short html pages."""
    return copy_corpus(tmp_path / "docs", SMALL)


@pytest.fixture
def more_docs(tmp_path: Path) -> Path:
    """A copy of six documents (html, rst, pdf)."""
    return copy_corpus(tmp_path / "more", LARGER)
