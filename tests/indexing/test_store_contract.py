"""The `Store` contract, held by behaviour on both stores (a SQLite file and a PostgreSQL
database, opened through `open_store`), through the writer that drives it
(`writer.IndexWriter`): a document written is planned unchanged, changed once its file
changes, deleted once its file goes; `remove` and `forget` take exactly what they name;
copies are found by content and copied or moved with their chunks; one writer holds the
run lock and a second is refused with `StoreBusyError`; no write goes in without it."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from attnswitch.documents.ingest import Document, load, scan
from attnswitch.indexing.location import open_store
from attnswitch.indexing.store import ChunkRecord, StoreBusyError, StoreInputError
from attnswitch.indexing.writer import IndexWriter
from store_testing import hold_run_lock_until_stdin_closes

DIM = 8
CONFIG = "cfg"


def doc_of(root: Path, source: str) -> Document:
    """The file `source` of `root` as a run reads it now."""
    return load(next(e for e in scan(root) if e.source == source))


def write(writer: IndexWriter, root: Path, source: str) -> int:
    """Index the file `source` of `root` as it is now: one chunk per line."""
    doc = doc_of(root, source)
    lines = doc.text.splitlines(keepends=True)
    chunks, at = [], 0
    for line in lines:
        chunks.append(ChunkRecord(line, len(line.split()), at, at + len(line)))
        at += len(line)
    vectors = np.random.default_rng(len(doc.text)).normal(size=(len(chunks), DIM))
    return writer.write_document(doc, chunks, vectors, config=CONFIG)


def plan_of(writer: IndexWriter, root: Path) -> dict[str, list[str]]:
    plan = writer.plan(root, scan(root), CONFIG)
    return {
        "to_read": sorted(e.source for e in plan.to_read),
        "fresh": sorted(e.source for e in plan.fresh),
        "deleted": sorted(plan.deleted),
    }


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    (folder / "sub").mkdir(parents=True)
    (folder / "subway").mkdir()
    (folder / "a.txt").write_text("alpha one\nalpha two\n")
    (folder / "sub" / "b.txt").write_text("beta\n")
    (folder / "sub" / "c.txt").write_text("gamma\n")
    (folder / "subway" / "d.txt").write_text("delta\n")
    return folder


def test_a_written_document_is_planned_unchanged_then_changed_then_deleted(
    location, root: Path
) -> None:
    with open_store(location) as store, IndexWriter(store) as writer:
        assert plan_of(writer, root)["fresh"] == []  # nothing stored yet: all to read
        write(writer, root, "a.txt")
        assert plan_of(writer, root) == {
            "to_read": ["sub/b.txt", "sub/c.txt", "subway/d.txt"],
            "fresh": ["a.txt"],
            "deleted": [],
        }
        doc = doc_of(root, "a.txt")
        assert writer.classify(doc, CONFIG) == "unchanged"
        assert writer.classify(doc, "another config") == "changed"
        assert len(store.document_chunks(root, "a.txt")) == 2

        (root / "a.txt").write_text("alpha one, edited\n")
        os.utime(root / "a.txt", ns=(1, 1))
        assert "a.txt" in plan_of(writer, root)["to_read"]
        assert writer.classify(doc_of(root, "a.txt"), CONFIG) == "changed"
        write(writer, root, "a.txt")
        assert "a.txt" in plan_of(writer, root)["fresh"]
        assert [c.text for c in store.document_chunks(root, "a.txt")] == ["alpha one, edited"]

        (root / "a.txt").unlink()
        assert plan_of(writer, root)["deleted"] == ["a.txt"]
        assert writer.remove(root, ["a.txt"]) == 1
        assert store.lookup(root, "a.txt") is None and store.document_chunks(root, "a.txt") == []
        assert plan_of(writer, root)["deleted"] == []


def test_forget_takes_a_folder_and_nothing_beside_it(location, root: Path) -> None:
    """A folder forgets what lies below it, not a sibling whose name it begins ("sub" and
    "subway"); a file forgets itself; "" the whole root."""
    with open_store(location) as store, IndexWriter(store) as writer:
        for source in ("a.txt", "sub/b.txt", "sub/c.txt", "subway/d.txt"):
            write(writer, root, source)
        assert writer.forget(root, "sub/") == 2
        assert store.sources(root) == {"a.txt", "subway/d.txt"}
        assert writer.forget(root, "subway/d.txt") == 1
        assert writer.forget(root, "nothing/here") == 0
        assert store.sources(root) == {"a.txt"}
        assert writer.forget(root) == 1
        assert store.sources(root) == set() and store.count() == 0


def test_copies_are_found_by_content_and_copied_or_moved_with_their_chunks(
    location, root: Path
) -> None:
    (root / "copy.txt").write_bytes((root / "a.txt").read_bytes())
    with open_store(location) as store, IndexWriter(store) as writer:
        write(writer, root, "a.txt")
        copy = doc_of(root, "copy.txt")
        assert copy.size in writer.indexed_sizes(CONFIG)
        (original,) = writer.copies_of(copy.sha256, CONFIG)
        assert original.source == "a.txt" and writer.copies_of(copy.sha256, "other") == []
        writer.copy_document(original, copy)
        texts = [c.text for c in store.document_chunks(root, "copy.txt")]
        assert texts == [c.text for c in store.document_chunks(root, "a.txt")] and texts
        with pytest.raises(StoreInputError, match="another path"):
            writer.copy_document(original, doc_of(root, "a.txt"))

        (root / "a.txt").rename(root / "moved.txt")
        moved = doc_of(root, "moved.txt")
        assert writer.move_document(root, "a.txt", moved)
        assert not writer.move_document(root, "a.txt", moved)  # no longer stored there
        assert [c.text for c in store.document_chunks(root, "moved.txt")] == texts
        assert plan_of(writer, root)["deleted"] == []
        assert {"copy.txt", "moved.txt"} <= set(plan_of(writer, root)["fresh"])


def test_one_writer_holds_the_run_lock_and_a_second_is_refused(location, root: Path) -> None:
    """A writer's lock refuses a second writer of the same store object at once, and one of
    another connection once `wait_s` has passed, with `StoreBusyError`; once the first lets
    go, the second takes it."""
    with open_store(location) as store, open_store(location) as other:
        first = IndexWriter(store)
        with first:
            assert first.locked
            with pytest.raises(StoreBusyError):
                IndexWriter(store, wait_s=0).lock()
            with pytest.raises(StoreBusyError):
                first.lock()  # a writer is taken once
            with pytest.raises(StoreBusyError):
                IndexWriter(other, wait_s=0).lock()
            with pytest.raises(StoreBusyError):
                IndexWriter(other).check_unlocked()
        assert not first.locked
        with IndexWriter(other, wait_s=0) as second:
            write(second, root, "a.txt")
        IndexWriter(store).check_unlocked()


def test_a_run_lock_held_by_another_process_refuses_a_writer(location, root: Path) -> None:
    holder = hold_run_lock_until_stdin_closes(location)
    try:
        with open_store(location) as store:
            with pytest.raises(StoreBusyError):
                IndexWriter(store, wait_s=0).begin_run(root, CONFIG)
            assert [r.status for r in store.runs()] == ["running"]  # the holder's only
    finally:
        holder.stdin.close()
        holder.wait()
    with open_store(location) as store:
        writer = IndexWriter(store, wait_s=0)
        run_id = writer.begin_run(root, CONFIG)
        assert writer.locked and writer.run_id == run_id
        write(writer, root, "a.txt")
        writer.finish_run(run_id, counts={"new": 1})
        assert not writer.locked and writer.run_id is None
        runs = store.runs()
        assert (runs[0].id, runs[0].status, runs[0].counts) == (run_id, "completed", {"new": 1})
        assert runs[1].status == "interrupted"  # the holder's run, ended by its death


def test_no_write_goes_in_without_the_run_lock(location, root: Path) -> None:
    with open_store(location) as store:
        writer = IndexWriter(store)
        doc = doc_of(root, "a.txt")
        assert writer.classify(doc, CONFIG) == "new"  # planning reads: no lock needed
        for attempt in (
            lambda: write(writer, root, "a.txt"),
            lambda: writer.touch(doc),
            lambda: writer.remove(root, ["a.txt"]),
            lambda: writer.forget(root),
        ):
            with pytest.raises(StoreInputError, match="writer: expected a writer holding"):
                attempt()
        assert store.sources(root) == set()
