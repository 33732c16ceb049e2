"""The SQLite store's full vectors' graph in segments (`sqlite_segments`): a full pass seals
its tail every `seal_at` vectors and merges `FANIN` segments of one tier into one; a
search ranks segments and tail together as exact search does; a searching process keeps
its memory-mapped segments through the full pass's writes and loads one only when its
chunks change; a store made before segments takes its one graph as the first segment."""

from __future__ import annotations

import contextlib
import json
import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from quick_testing import (
    FILL_BATCH,
    FULL_DIM,
    SEAL_AT,
    SEGMENTS_PER_DOC,
    SOURCES,
    assert_recall,
    full_queries,
    make_folder,
    write_quick,
)

from attnswitch.indexing.ann import HnswIndex, exact_top_k
from attnswitch.indexing.records import MAX_EF_SEARCH
from attnswitch.indexing.segment_tiers import FANIN
from attnswitch.indexing.sqlite_segments import FullGraph, FullSegment, layout
from attnswitch.indexing.store import SQLiteStore
from attnswitch.indexing.writer import IndexWriter

pytest.importorskip("usearch", reason="usearch (the HNSW library) is not installed")

PER_DOC, BATCH = SEGMENTS_PER_DOC, FILL_BATCH
QUERIES = full_queries()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_folder(tmp_path)


def open_store(db: Path) -> SQLiteStore:
    """Graphs from the first vector on, the tail sealed at `SEAL_AT`."""
    return SQLiteStore(db, exact_below=0, seal_at=SEAL_AT)


@contextlib.contextmanager
def quick_passed(db: Path, root: Path) -> Iterator[tuple[SQLiteStore, IndexWriter]]:
    """`open_store` and its writer holding the run lock, the quick pass written."""
    with open_store(db) as store, IndexWriter(store) as writer:
        write_quick(writer, root, PER_DOC)
        yield store, writer


def fill_next(store: SQLiteStore, writer, n: int, seed: int) -> None:
    """Write the full vectors of the next `n` chunks the full pass would encode, through
    `writer` (an `IndexWriter` or the store)."""
    todo = store.unencoded(n)
    vectors = np.random.default_rng(seed).normal(size=(len(todo), FULL_DIM))
    assert writer.fill_vectors([u.id for u in todo], [u.vector_key for u in todo], vectors)


def exact(store: SQLiteStore, n: int) -> list[list[int]]:
    return [[c for c, _ in hits] for hits in exact_top_k(*store.vectors(), QUERIES, n)]


def dense(store: SQLiteStore, n: int) -> list[list[int]]:
    return [[c for c, _ in hits] for hits in store.dense(QUERIES, n, ef=MAX_EF_SEARCH)]


def tail_size(store: SQLiteStore) -> int:
    return store._conn.execute(
        "SELECT COUNT(*) FROM chunks WHERE vector IS NOT NULL AND full_gen IS NULL"
    ).fetchone()[0]


def assert_tiled(store: SQLiteStore) -> list[tuple[int, int, int]]:
    """The segments tile [0, H), each holds the vectors of its generations, and the tail
    holds fewer than `SEAL_AT`."""
    segments = layout(store)
    edges = [0] + [hi for _, hi, _ in segments]
    assert [lo for lo, _, _ in segments] == edges[:-1], segments
    for lo, hi, n in segments:
        assert FullSegment(store, lo, hi).count() == n
    assert tail_size(store) < SEAL_AT
    return segments


def full_pass(store: SQLiteStore, writer: IndexWriter) -> list[list[tuple[int, int, int]]]:
    """Fill every chunk's full vector, `BATCH` at a time under the writer's lock, as the
    full pass does; the layout after each fill."""
    rng = np.random.default_rng(3)
    seen = []
    while todo := store.unencoded(BATCH):
        vectors = rng.normal(size=(len(todo), FULL_DIM))
        assert writer.fill_vectors([u.id for u in todo], [u.vector_key for u in todo], vectors)
        seen.append(assert_tiled(store))
        assert_recall(dense(store, 10), exact(store, 10))
    return seen


def test_a_full_pass_seals_its_tail_into_segments_that_merge_and_search_exactly(
    tmp_path: Path, root: Path
) -> None:
    db = tmp_path / "index.sqlite3"
    with quick_passed(db, root) as (store, writer):
        seen = full_pass(store, writer)
        # 600 vectors, a seal at each 100: four of tier 0 merged into one of 400, then two
        assert FANIN == 4
        assert [len(s) for s in seen] == [0, 1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3]
        assert seen[-1] == [(0, 4, 400), (4, 5, 100), (5, 6, 100)]
        folder = db.with_name(db.name + ".full")
        assert sorted(p.name for p in folder.glob("*.hnsw")) == [
            "0_4.hnsw",
            "4_5.hnsw",
            "5_6.hnsw",
        ]
        searcher = store._dense[1]
        assert isinstance(searcher, FullGraph) and len(searcher.graph.parts) == 3
        # each seal moved the older segments' headers on: none looks back past the last
        seqs = {json.loads(p.read_text())["seq"] for p in folder.glob("*.hnsw.json")}
        assert seqs == {store._log_position()}
    with SQLiteStore(db, exact_below=0) as store:
        assert_recall(dense(store, 10), exact(store, 10))
        assert store._dense[1].mapped  # every segment read from its file


def test_a_searching_process_keeps_its_segments_mapped_through_the_full_pass(
    tmp_path: Path, root: Path
) -> None:
    db = tmp_path / "index.sqlite3"
    with quick_passed(db, root) as (store, writer):
        fill_next(store, writer, 2 * SEAL_AT, seed=5)
        assert [n for _, _, n in layout(store)] == [2 * SEAL_AT]
        with SQLiteStore(db, exact_below=0) as searcher:
            assert_recall(dense(searcher, 10), exact(searcher, 10))
            graph = searcher._dense[1]
            assert graph.mapped and not graph.rebuilt
            fill_next(store, writer, BATCH, seed=6)  # into the tail only
            assert_recall(dense(searcher, 10), exact(searcher, 10))
            assert searcher._dense[1] is graph and graph.mapped  # caught up, still mapped
            assert len(graph.tail[0]) == BATCH
            ((held,),) = store._conn.execute(
                "SELECT source FROM documents WHERE id = "
                "(SELECT doc_id FROM chunks WHERE full_gen = 0 LIMIT 1)"
            ).fetchall()
            writer.remove(root, [held])  # chunks the segment holds
            assert_recall(dense(searcher, 10), exact(searcher, 10))
            assert not searcher._dense[1].mapped  # that segment loaded to replay


def test_a_store_made_before_segments_takes_its_graph_as_the_first(
    tmp_path: Path, root: Path
) -> None:
    db = tmp_path / "index.sqlite3"
    with open_store(db) as store:
        run = store.begin_run(root)
        write_quick(store, root, PER_DOC)
        fill_next(store, store, len(SOURCES) * PER_DOC, seed=1)
        store.finish_run(run)
        want = exact(store, 10)
    folder = db.with_name(db.name + ".full")
    (first,) = layout_of(db)
    # the files and the schema of version 12: one graph of every full vector, no column
    graph, header = (
        folder / f"{first[0]}_{first[1]}.hnsw",
        folder / f"{first[0]}_{first[1]}.hnsw.json",
    )
    assert first[2] == len(SOURCES) * PER_DOC
    shutil.move(graph, db.with_name(db.name + ".hnsw"))
    shutil.move(header, db.with_name(db.name + ".hnsw.json"))
    folder.rmdir()
    with sqlite3.connect(db) as conn:
        conn.executescript(
            "DROP INDEX chunks_full_gen; DROP INDEX chunks_full_tail; "
            "ALTER TABLE chunks DROP COLUMN full_gen; "
            "DELETE FROM meta WHERE key = 'full_segments'; PRAGMA user_version = 12;"
        )
    with SQLiteStore(db, exact_below=0) as store:
        assert layout(store) == [(0, 1, len(SOURCES) * PER_DOC)]
        index = HnswIndex.open(FullSegment(store, 0, 1))
        assert index.mapped and not index.rebuilt  # the old graph, moved, not built again
        assert_recall(dense(store, 10), want)
    assert not db.with_name(db.name + ".hnsw").exists()


def layout_of(db: Path) -> list[tuple[int, int, int]]:
    with sqlite3.connect(db) as conn:
        (raw,) = conn.execute("SELECT value FROM meta WHERE key = 'full_segments'").fetchone()
    return [tuple(s) for s in json.loads(raw)]
