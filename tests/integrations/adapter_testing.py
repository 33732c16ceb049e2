"""Helpers of the framework adapters' tests: a small real folder (four PostgreSQL tutorial
pages of examples/corpus) indexed with the real default model, and a real `attnswitch
serve` over that index."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[2] / "examples" / "corpus"
PAGES = (
    "postgresql/tutorial-start.html",
    "postgresql/tutorial-advanced.html",
    "postgresql/tutorial-update.html",
    "postgresql/tutorial-conclusion.html",
)
UPDATE_PAGE = "postgresql/tutorial-update.html"
QUESTION = "how do I update rows in a table"


@dataclasses.dataclass(frozen=True)
class Indexed:
    """A folder of documents and the SQLite index `attnswitch.index` made of it."""

    folder: Path
    db: Path


def copy_pages(dest: Path, pages: tuple[str, ...] = PAGES) -> Path:
    for page in pages:
        (dest / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(CORPUS / page, dest / page)
    return dest


def hit_fields() -> set[str]:
    """The fields of a search hit, whatever `Hit` holds today."""
    from attnswitch.indexing.search import Hit

    return {f.name for f in dataclasses.fields(Hit)}
