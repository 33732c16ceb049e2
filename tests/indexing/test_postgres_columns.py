"""The PostgreSQL store's full-vector column (`indexing/postgres_columns.py`): typed ahead
of the vectors when a run names its model (`expect_dim`) or by the first fill, in both
cases without rewriting the chunks a quick pass stored (the table's and the keyword
index's files are the same before and after) and with the indexes that name the column in
their predicate made again; the store's dimension still set by its first vectors; vectors
stored before the dimension was recorded kept."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from quick_testing import (
    FULL_DIM,
    SOURCES,
    fill,
    found,
    full_queries,
    make_folder,
    queries,
    write_quick,
)

from attnswitch.indexing.location import open_store
from attnswitch.indexing.store import StoreInputError
from attnswitch.indexing.writer import IndexWriter

pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")

from attnswitch.indexing.postgres_schema import column_dim  # noqa: E402
from attnswitch.indexing.postgres_segments import drop_all, layout  # noqa: E402
from attnswitch.indexing.store_postgres import PostgresStore  # noqa: E402

PER_DOC = 400  # 1,600 chunks
THRESHOLD = 1000  # the quick list's index is made
QUERIES = queries(8)


@pytest.fixture
def store(pg_url: str, tmp_path: Path):
    """A store after a quick pass of 1,600 chunks (quick vectors, no full one), its quick
    list's HNSW index made."""
    root = make_folder(tmp_path)
    with PostgresStore(pg_url, quick_exact_below=THRESHOLD) as store:
        run = store.begin_run(root)
        write_quick(store, root, PER_DOC)
        store.finish_run(run)
        assert store._quick_indexed() and column_dim(store._conn, "embedding") is None
        yield store


def files(store: PostgresStore) -> dict[str, int]:
    """The file node of the chunks' table and of its keyword index: a new one when
    PostgreSQL rewrites them."""
    return {
        name: store._conn.execute("SELECT pg_relation_filenode(%s)", (name,)).fetchone()[0]
        for name in ("chunks", "chunks_terms")
    }


def indexes(store: PostgresStore) -> set[str]:
    return {
        r[0]
        for r in store._conn.execute("SELECT indexname FROM pg_indexes WHERE tablename = 'chunks'")
    }


def full_count(store: PostgresStore) -> int:
    return store.coverage().full


def test_expecting_the_dimension_types_the_column_and_rewrites_no_chunk(
    store: PostgresStore,
) -> None:
    before, quick_before, names = files(store), found(store, QUERIES, 10), indexes(store)
    with IndexWriter(store) as writer:
        writer.expect_dim(FULL_DIM)
    assert column_dim(store._conn, "embedding") == FULL_DIM
    assert files(store) == before
    assert store.dim is None  # the first vectors set it
    assert indexes(store) == names  # the queue, the tail and the quick list's index again
    assert found(store, QUERIES, 10) == quick_before
    assert len(store.unencoded(10_000)) == len(SOURCES) * PER_DOC
    # expected again: nothing to do
    store.expect_dim(FULL_DIM)
    assert files(store) == before and indexes(store) == names
    ids = [u.id for u in store.unencoded(100)]
    fill(store, ids)
    assert store.dim == FULL_DIM and files(store) == before
    assert {cid for hits in store.dense(full_queries(3), 100) for cid, _ in hits} == set(ids)


def test_the_first_fill_types_an_untyped_column_and_rewrites_no_chunk(
    store: PostgresStore,
) -> None:
    """A store whose quick pass did not name the model (a version before `expect_dim`, a
    caller of the store's own API): its first fill types the column."""
    before, names = files(store), indexes(store)
    ids = [u.id for u in store.unencoded(100)]
    fill(store, ids)
    assert column_dim(store._conn, "embedding") == FULL_DIM and store.dim == FULL_DIM
    assert files(store) == before
    assert indexes(store) == names
    assert full_count(store) == 100
    assert len(store.unencoded(10_000)) == len(SOURCES) * PER_DOC - 100
    assert not set(ids) & {cid for hits in store.quick(QUERIES, 2000) for cid, _ in hits}


def test_the_dimension_is_still_set_by_the_first_vectors(store: PostgresStore) -> None:
    """`expect_dim` prepares the column; vectors of another dimension written first (no
    full vector stored yet) type it again and set the store's dimension."""
    store.expect_dim(FULL_DIM + 8)
    fill(store, [u.id for u in store.unencoded(10)])  # FULL_DIM
    assert store.dim == FULL_DIM and column_dim(store._conn, "embedding") == FULL_DIM
    assert full_count(store) == 10


def test_with_vectors_stored_another_dimension_changes_nothing(store: PostgresStore) -> None:
    fill(store, [u.id for u in store.unencoded(300)])
    store.sync_index()
    names = indexes(store)
    store.expect_dim(FULL_DIM + 8)
    assert column_dim(store._conn, "embedding") == FULL_DIM and indexes(store) == names
    (chunk,) = store.unencoded(1)
    with pytest.raises(StoreInputError, match=rf"^vectors: expected dimension {FULL_DIM} "):
        store.fill_vectors([chunk.id], [chunk.vector_key], np.ones((1, FULL_DIM + 8)))
    assert full_count(store) == 300


def test_vectors_stored_before_the_dimension_was_recorded_are_kept(
    store: PostgresStore,
) -> None:
    """A store holding full vectors in an untyped column with no recorded dimension: the
    next fill types the column in place (every row rewritten), and no vector is lost."""
    ids = [u.id for u in store.unencoded(200)]
    fill(store, ids)
    conn = store._conn
    with conn.transaction():
        drop_all(conn)
        conn.execute("ALTER TABLE chunks ALTER COLUMN embedding TYPE halfvec")
        conn.execute("DELETE FROM meta WHERE key = 'dim'")
    store._dim = None
    assert column_dim(conn, "embedding") is None and store.dim is None
    more = [u.id for u in store.unencoded(50)]
    fill(store, more)
    assert column_dim(conn, "embedding") == FULL_DIM and store.dim == FULL_DIM
    assert full_count(store) == 250
    assert not layout(conn)[1]  # the segments went with the untyped column
    got = {cid for hits in store.dense(full_queries(3), 250) for cid, _ in hits}
    assert got == set(ids) | set(more)


@pytest.mark.parametrize("store_kind", ["sqlite", "postgres"])
def test_both_stores_take_the_expected_dimension_as_a_hint(
    store_kind: str, pg_url: str, tmp_path: Path
) -> None:
    location = str(tmp_path / "index.sqlite3") if store_kind == "sqlite" else pg_url
    root = make_folder(tmp_path)
    with open_store(location) as any_store, IndexWriter(any_store) as writer:
        write_quick(writer, root, 20, SOURCES[:1])
        writer.expect_dim(FULL_DIM)
        assert any_store.dim is None
        fill(any_store, [u.id for u in writer.unencoded(5)])
        assert any_store.dim == FULL_DIM and any_store.coverage().full == 5
        assert len(any_store.quick(QUERIES[:1], 20)[0]) == 15  # the others: quick only
