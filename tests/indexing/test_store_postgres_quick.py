"""The PostgreSQL store's quick list over its partial HNSW index (`chunks_quick_hnsw`, the
quick vectors of the chunks without a full vector): made when a run ends above the
threshold and dropped below it, used by `quick` with the recall of the exact list,
filtered to `n` allowed hits, left by the chunks that get a full vector; the quick column
typed with the static model's dimension (another one refused while its vectors are stored,
an old untyped column upgraded when opened)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from quick_testing import (
    QUICK_DIM,
    SOURCES,
    assert_recall,
    fill,
    found,
    make_folder,
    queries,
    write_quick,
)

from attnswitch.documents.ingest import ingest
from attnswitch.indexing.filters import SearchFilter
from attnswitch.indexing.store import ChunkRecord, StoreInputError

pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")

from attnswitch.indexing.postgres_schema import QUICK_HNSW, column_dim  # noqa: E402
from attnswitch.indexing.store_postgres import PostgresStore  # noqa: E402

PER_DOC = 750  # 3,000 chunks
THRESHOLD = 1000  # quick-only chunks from which a run's end makes the index
QUERIES = queries(20)


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_folder(tmp_path)


def open_pg(url: str) -> PostgresStore:
    return PostgresStore(url, quick_exact_below=THRESHOLD)


def quick_pass(url: str, root: Path, sources=SOURCES) -> None:
    """Store `sources` as the quick pass does, in one run that completes."""
    with open_pg(url) as store:
        run = store.begin_run(root)
        write_quick(store, root, PER_DOC, sources)
        store.finish_run(run)


def quick_vectors(store: PostgresStore, among=None) -> tuple[np.ndarray, np.ndarray]:
    rows = store._conn.execute(
        "SELECT id, quick FROM chunks WHERE embedding IS NULL AND quick IS NOT NULL ORDER BY id"
    ).fetchall()
    ids = np.array([r[0] for r in rows], np.int64)
    matrix = np.stack([r[1].to_numpy().astype(np.float32) for r in rows])
    if among is not None:
        keep = np.isin(ids, list(among))
        ids, matrix = ids[keep], matrix[keep]
    return ids, matrix


def exact(store: PostgresStore, queries: np.ndarray, n: int, among=None) -> list[list[int]]:
    """The exact top `n` by inner product of the stored (float16) quick vectors."""
    ids, matrix = quick_vectors(store, among)
    q = queries.astype(np.float16).astype(np.float32)  # pgvector rounds the query too
    return [[int(ids[j]) for j in np.argsort(-(matrix @ v), kind="stable")[:n]] for v in q]


def indexed(store: PostgresStore) -> bool:
    return store._quick_indexed()


def index_scans(store: PostgresStore) -> int:
    """How many scans of the quick list's index the server has counted (this session's
    counts flushed first)."""
    store._conn.execute("SELECT pg_stat_force_next_flush()")
    store._conn.execute("SELECT pg_stat_clear_snapshot()")
    (count,) = store._conn.execute(
        "SELECT idx_scan FROM pg_stat_user_indexes WHERE indexrelname = %s", (QUICK_HNSW,)
    ).fetchone()
    return int(count)


def use_the_index(store: PostgresStore) -> None:
    """3,000 rows are cheaper to scan exactly, as the planner knows; at scale it takes the
    index (as for the full vectors' index, tests/indexing/test_store_postgres.py), here it
    is told to: no sequential scan, and no sort of a filter's chunks read by their
    document's index (`chunks_unencoded`)."""
    store._conn.execute("SET enable_seqscan = off")
    store._conn.execute("SET enable_sort = off")


def test_a_run_makes_the_index_and_the_quick_list_searches_it(pg_url: str, root: Path) -> None:
    quick_pass(pg_url, root)
    with open_pg(pg_url) as store:
        assert indexed(store) and column_dim(store._conn, "quick") == QUICK_DIM
        (definition,) = store._conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = %s", (QUICK_HNSW,)
        ).fetchone()
        assert "halfvec_ip_ops" in definition and "WHERE (embedding IS NULL)" in definition
        use_the_index(store)
        before = index_scans(store)
        got = found(store, QUERIES, 10)
        assert index_scans(store) >= before + len(QUERIES)  # one index scan a query
        assert all(len(hits) == 10 for hits in got)
        assert_recall(got, exact(store, QUERIES, 10))
        # scores are inner products, best first, ties by id
        for hits in store.quick(QUERIES, 10):
            assert [(-s, c) for c, s in hits] == sorted((-s, c) for c, s in hits)
        # a beam narrower than n is widened to n
        store.ef_search = 1
        assert all(len(hits) == 50 for hits in found(store, QUERIES[:3], 50))
        assert store._conn.execute("SHOW hnsw.ef_search").fetchone()[0] == "40"


def test_below_the_threshold_the_quick_list_is_exact_and_has_no_index(
    pg_url: str, root: Path
) -> None:
    quick_pass(pg_url, root, SOURCES[:1])  # 750 chunks, under THRESHOLD
    with open_pg(pg_url) as store:
        assert not indexed(store)
        assert found(store, QUERIES, 10) == exact(store, QUERIES, 10)


def test_a_filtered_quick_list_gives_n_allowed_chunks(pg_url: str, root: Path) -> None:
    quick_pass(pg_url, root)
    with open_pg(pg_url) as store:
        use_the_index(store)
        allowed = {
            r[0]
            for r in store._conn.execute(
                "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id "
                "WHERE d.source = 'a/1.txt'"
            )
        }
        where = SearchFilter.of(path="a/1.txt")
        before = index_scans(store)
        got = found(store, QUERIES, 10, where)
        assert index_scans(store) > before
        assert all(len(hits) == 10 and set(hits) <= allowed for hits in got)
        assert_recall(got, exact(store, QUERIES, 10, among=allowed))
        # more than the beam: the scan goes on past it (or the query is answered exactly)
        wide = found(store, QUERIES[:2], 300, where)
        assert all(len(hits) == 300 and set(hits) <= allowed for hits in wide)


def test_chunks_that_get_a_full_vector_leave_the_quick_list(pg_url: str, root: Path) -> None:
    quick_pass(pg_url, root)
    with open_pg(pg_url) as store:
        use_the_index(store)
        first = found(store, QUERIES, 10)
        encoded = sorted({cid for hits in first for cid in hits[:3]})
        with open_pg(pg_url) as writer:  # another connection (a search's fill)
            fill(writer, encoded)
        second = found(store, QUERIES, 10)
        assert not set(encoded) & {cid for hits in second for cid in hits}
        assert all(len(hits) == 10 for hits in second)
        assert_recall(second, exact(store, QUERIES, 10))


def test_the_index_goes_when_every_chunk_has_its_full_vector(pg_url: str, root: Path) -> None:
    quick_pass(pg_url, root)
    with open_pg(pg_url) as store:
        assert indexed(store)
        run = store.begin_run(root)
        fill(store, [r[0] for r in store._conn.execute("SELECT id FROM chunks")])
        store.finish_run(run)
        assert not indexed(store)
        assert found(store, QUERIES, 10) == [[] for _ in QUERIES]


def test_quick_vectors_of_another_dimension_are_refused_while_some_are_stored(
    pg_url: str, root: Path
) -> None:
    quick_pass(pg_url, root, SOURCES[:1])
    (doc,) = [d for d in ingest(root) if d.source == SOURCES[1]]
    chunks = [ChunkRecord("x", 1, 0, 1), ChunkRecord("y", 1, 1, 2)]
    with open_pg(pg_url) as store:
        # another process named a static model of another dimension without dropping the
        # stored quick vectors (only `set_quick_model` drops them)
        store.set_meta("quick", json.dumps({"fingerprint": "other", "dim": 24}))
        with pytest.raises(
            StoreInputError,
            match=r"^quick: expected dimension 16 \(this store's quick vectors\), got 24: ",
        ):
            store.write_document(doc, chunks, None, quick=np.ones((2, 24)))
        assert column_dim(store._conn, "quick") == QUICK_DIM
        assert store.count() == PER_DOC  # nothing written
    # `set_quick_model` drops them first: the column takes the new dimension
    with open_pg(pg_url) as store:
        store.set_quick_model("other-model", 24)
        assert column_dim(store._conn, "quick") == 24
        store.write_document(doc, chunks, None, quick=np.eye(2, 24))
        ((best, score),) = store.quick(np.eye(1, 24, dtype=np.float32), 1)[0]
        assert store.chunks([best])[best].text == "x" and score == pytest.approx(1)
        assert store.coverage().quick == 2  # the 16-d ones were dropped


def test_an_untyped_quick_column_is_typed_when_opened(pg_url: str, root: Path) -> None:
    """A store made before the index (schema 10 to 12: `quick halfvec`, untyped) gets the
    recorded model's dimension when opened; a stray vector of another dimension goes."""
    quick_pass(pg_url, root, SOURCES[:2])
    with open_pg(pg_url) as store:
        conn = store._conn
        conn.execute(f"DROP INDEX {QUICK_HNSW}")
        conn.execute("ALTER TABLE chunks ALTER COLUMN quick TYPE halfvec")
        (stray,) = conn.execute("SELECT MIN(id) FROM chunks").fetchone()
        conn.execute("UPDATE chunks SET quick = '[1,0,0]'::halfvec WHERE id = %s", (stray,))
        assert column_dim(conn, "quick") is None
    with open_pg(pg_url) as store:
        assert column_dim(store._conn, "quick") == QUICK_DIM
        assert store.coverage().quick == 2 * PER_DOC - 1
        assert stray not in {cid for hits in found(store, QUERIES, 2000) for cid in hits}
        assert found(store, QUERIES, 10) == exact(store, QUERIES, 10)  # exact: no index yet
        run = store.begin_run(root)
        store.finish_run(run)  # a run's end makes it
        assert indexed(store)
