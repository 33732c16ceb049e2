"""The store statements a run's plan (`writer.IndexWriter.plan`) issues: one per `PLAN_BATCH` listed files plus a
fixed few, whatever the number of files, on both stores (counted at the driver,
`store_testing.statements`), with the same plan as one lookup per file would give."""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np
import pytest

from attnswitch.documents.ingest import ingest, scan
from attnswitch.indexing.location import open_store
from attnswitch.indexing.records import is_fresh_row
from attnswitch.indexing.store import ChunkRecord
from attnswitch.indexing.writer import PLAN_BATCH, IndexWriter
from store_testing import statements

FILES = 2 * PLAN_BATCH + 500  # three batches
DIM = 8
# Besides the batches: the root's stored sources (what the listing lost).
FIXED = 1


@pytest.fixture
def indexed(location, tmp_path: Path):
    """`FILES` one-line files, each stored as one chunk, in each store."""
    root = tmp_path / "docs"
    for i in range(FILES):
        folder = root / f"f{i % 7}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"note {i:05}.txt").write_text(f"note number {i}\n")
    vector = np.ones((1, DIM))
    with open_store(location) as store:
        for doc in ingest(root):
            store.write_document(doc, [ChunkRecord(doc.text, 3, 0, len(doc.text))], vector)
        yield store, root


def test_a_plan_issues_one_statement_per_batch_of_files(indexed) -> None:
    """A listing of `FILES` files, one edited since it was indexed and one deleted: the plan
    reads the stored rows in ceil(FILES / PLAN_BATCH) statements plus `FIXED`, and finds
    the fresh, the changed and the deleted file as one lookup per file does."""
    store, root = indexed
    edited = root / "f3" / "note 00010.txt"
    edited.write_text("note number 10, edited\n")
    os.utime(edited, ns=(1, 1))
    (root / "f4" / "note 00011.txt").unlink()
    entries = scan(root)
    with statements(store) as sent:
        plan = IndexWriter(store).plan(root, entries, "")
    assert len(sent) <= math.ceil(len(entries) / PLAN_BATCH) + FIXED, sent[:5]
    assert [e.source for e in plan.to_read] == ["f3/note 00010.txt"]
    assert plan.deleted == ("f4/note 00011.txt",)
    assert len(plan.fresh) == FILES - 2
    one_by_one = [
        e.source for e in entries if not is_fresh_row(store.lookup(root, e.source), e, "")
    ]
    assert one_by_one == [e.source for e in plan.to_read]
    assert plan.stored["f3/note 00010.txt"] == store.lookup(root, "f3/note 00010.txt")


def test_a_plan_of_names_sql_would_misread(location, tmp_path: Path) -> None:
    """Names with quotes, commas, brackets, percent signs and other scripts are planned as
    data: each stored one is fresh, a new one is to be read."""
    root = tmp_path / "docs"
    root.mkdir()
    names = [
        "it's.txt",
        'say "hi", then.txt',
        "[draft] {1}.txt",
        "100% done.txt",
        "日本語.txt",
        "ملف.txt",
        "a\\b.txt",
    ]
    for name in names:
        (root / name).write_text(f"text of {name}\n")
    with open_store(location) as store:
        for doc in ingest(root):
            store.write_document(
                doc, [ChunkRecord(doc.text, 3, 0, len(doc.text))], np.ones((1, DIM))
            )
        (root / "new, 'one'.txt").write_text("a new file\n")
        plan = IndexWriter(store).plan(root, scan(root), "")
    assert sorted(e.source for e in plan.fresh) == sorted(names)
    assert [e.source for e in plan.to_read] == ["new, 'one'.txt"]
    assert plan.deleted == ()
