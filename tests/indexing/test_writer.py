"""The index writer (`indexing/writer.py`) on both stores: a plan of 10,000 unchanged files
costs one statement per `PLAN_BATCH` files plus one (counted at the driver,
`store_testing.statements`); a run begun by the writer holds the run lock until it is
finished, its writes carry its id, a bad status still lets go of the lock; a `with` block
keeps the lock across a run it begins; and on SQLite a block that wrote saves the HNSW
graph when it ends (one that failed does not), as a completed run does."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from attnswitch.documents.ingest import Document, Skip, SourceFile
from attnswitch.indexing.ann import HnswIndex
from attnswitch.indexing.location import open_store
from attnswitch.indexing.store import (
    ChunkRecord,
    SQLiteStore,
    StoreBusyError,
    StoreInputError,
    root_key,
)
from attnswitch.indexing.writer import PLAN_BATCH, IndexWriter
from store_testing import FIRST_SEGMENT, statements

DIM = 8
CONFIG = "cfg"


def document(root: Path, i: int, text: str = "") -> Document:
    """The `i`th file of `root` as read (its text `text`, or a line naming it)."""
    text = text or f"note number {i}"
    source = f"f{i % 10}/note {i:05}.txt"
    return Document(
        root_key(root), source, root / source, len(text) + 1, 10**18 + i, f"{i:064x}", "text", text
    )


def entry(doc: Document) -> SourceFile:
    """What `ingest.scan` lists for the file `doc` was read from, unchanged since."""
    return SourceFile(doc.root, doc.source, doc.path, doc.size, doc.mtime_ns)


def chunk(doc: Document) -> list[ChunkRecord]:
    return [ChunkRecord(doc.text, len(doc.text.split()), 0, len(doc.text))]


def skipped(root: Path) -> Document:
    """An empty file of `root`, skipped as read."""
    return Document(
        root_key(root), "empty.txt", root / "empty.txt", 0, 1, None, None, None, skip=Skip.EMPTY
    )


def test_planning_10k_unchanged_files_costs_a_statement_per_thousand(
    location, tmp_path: Path
) -> None:
    """10,000 stored files listed unchanged: all fresh, none to read or deleted, in
    ceil(10,000 / PLAN_BATCH) + 1 statements (not one per file)."""
    root = tmp_path / "docs"
    docs = [document(root, i) for i in range(10_000)]
    with open_store(location) as store, IndexWriter(store) as writer:
        for doc in docs:  # no chunks: what is planned is the documents' rows
            writer.write_document(doc, [], np.zeros((0, DIM)), config=CONFIG)
        listing = [entry(doc) for doc in docs]
        with statements(store) as sent:
            plan = writer.plan(root, listing, CONFIG)
        assert len(plan.fresh) == len(docs) and plan.to_read == () and plan.deleted == ()
        assert len(sent) == math.ceil(len(docs) / PLAN_BATCH) + 1, sent[:3]
        # a changed one is read again: its stored row comes with it
        changed = [*listing[:-1], SourceFile(**{**vars(listing[-1]), "mtime_ns": 1})]
        plan = writer.plan(root, changed, CONFIG)
        assert [e.source for e in plan.to_read] == [docs[-1].source]
        assert plan.stored[docs[-1].source].sha256 == docs[-1].sha256


def test_a_run_holds_the_lock_from_its_beginning_to_its_end(location, tmp_path: Path) -> None:
    root = tmp_path / "docs"
    doc = document(root, 1)
    with open_store(location) as store, open_store(location) as other:
        writer = IndexWriter(store, wait_s=0)
        run_id = writer.begin_run(root, CONFIG)
        with pytest.raises(StoreBusyError):
            IndexWriter(other, wait_s=0).check_unlocked()
        writer.write_document(doc, chunk(doc), np.ones((1, DIM)), config=CONFIG)
        writer.record_skip(skipped(root), config=CONFIG)
        with pytest.raises(StoreInputError, match="status"):
            writer.finish_run(run_id, "running")  # refused, and the lock goes all the same
        assert not writer.locked
        IndexWriter(other, wait_s=0).check_unlocked()
        rows = store._read(
            f"SELECT source, run_id FROM documents WHERE root = {store._mark} ORDER BY source",
            (root_key(root),),
        )
        assert [tuple(r) for r in rows] == [("empty.txt", run_id), (doc.source, run_id)]


def test_a_with_block_keeps_the_lock_across_the_run_it_begins(location, tmp_path: Path) -> None:
    root = tmp_path / "docs"
    with open_store(location) as store, open_store(location) as other:
        with IndexWriter(store) as writer:
            run_id = writer.begin_run(root, CONFIG)
            writer.finish_run(run_id, "failed")
            assert writer.locked and writer.run_id is None  # the block's lock, still held
            with pytest.raises(StoreBusyError, match="another attnswitch run"):
                IndexWriter(other, wait_s=0).lock()
        assert not writer.locked
        with IndexWriter(other, wait_s=0) as second:
            second.begin_run(root, CONFIG)
        assert [r.status for r in other.runs()] == ["running", "failed"]


def test_a_block_that_wrote_saves_the_graph_and_one_that_failed_does_not(tmp_path: Path) -> None:
    """SQLite with `exact_below=0` (every search through the HNSW graph): a block that
    wrote and ended saves the graph beside the file, as a completed run does; one that
    raised leaves the log for the next search to replay."""
    root = tmp_path / "docs"
    db = tmp_path / "db" / "index.sqlite3"
    with SQLiteStore(db, exact_below=0) as store:
        with pytest.raises(RuntimeError, match="stopped"):
            with IndexWriter(store) as writer:
                doc = document(root, 1)
                writer.write_document(doc, chunk(doc), np.ones((1, DIM)), config=CONFIG)
                raise RuntimeError("stopped")
        assert not any(p.exists() for p in HnswIndex.paths(store.path, FIRST_SEGMENT))
        with IndexWriter(store) as writer:
            doc = document(root, 2)
            writer.write_document(doc, chunk(doc), np.ones((1, DIM)), config=CONFIG)
        assert all(p.exists() for p in HnswIndex.paths(store.path, FIRST_SEGMENT))
        assert store.chunk_log_state()[0] is None  # the log the graph took in, pruned
        assert store.count() == 2
