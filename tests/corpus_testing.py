"""Copies of real documents of the example corpus, for the pipeline tests: one importable
module (test modules must not import `conftest` by name: with several test folders on
sys.path, `conftest` may name another folder's)."""

from __future__ import annotations

import shutil
from pathlib import Path

CORPUS = Path(__file__).resolve().parents[1] / "examples" / "corpus"


def copy_corpus(dest: Path, sources: tuple[str, ...]) -> Path:
    """`sources` (paths relative to examples/corpus) copied under `dest`; returns `dest`."""
    for source in sources:
        (dest / source).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(CORPUS / source, dest / source)
    return dest
