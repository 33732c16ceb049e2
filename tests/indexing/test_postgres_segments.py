"""The PostgreSQL store's full vectors in HNSW segments (`postgres_segments`): a full pass
writes to the tail and seals it every `seal_at` vectors, the segments tile the generations
and merge `FANIN` at a time, and dense search over segments and tail is the exact answer at
every stage, walking each segment's graph; a vector written with an old generation is
found in its segment's graph; a seal that fails leaves what it found; a build asks for the
memory its graph needs, for its own transaction; a store from before segments gets its
vectors as one; another dimension drops them."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from quick_testing import (
    FILL_BATCH,
    FULL_DIM,
    SEAL_AT,
    SEGMENTS_PER_DOC,
    SOURCES,
    full_queries,
    make_folder,
    unit,
    write_quick,
)

from attnswitch.indexing.records import MAX_EF_SEARCH
from attnswitch.indexing.segment_tiers import FANIN, LARGEST
from attnswitch.indexing.writer import IndexWriter

pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")

from attnswitch.indexing.postgres_segments import (  # noqa: E402
    BUILD_MEMORY_LIMIT,
    LEGACY_INDEX,
    build_memory_kb,
    drop_all,
    layout,
)
from attnswitch.indexing.store_postgres import PostgresStore  # noqa: E402

PER_DOC, BATCH = SEGMENTS_PER_DOC, FILL_BATCH
QUERIES = full_queries()


@pytest.fixture
def root(tmp_path: Path) -> Path:
    return make_folder(tmp_path)


def open_pg(url: str) -> PostgresStore:
    return PostgresStore(url, seal_at=SEAL_AT)


def exact(store: PostgresStore, n: int) -> list[list[int]]:
    """The exact top `n` of `QUERIES` by inner product with the stored (float16) full
    vectors, ties by id."""
    ids, matrix = store.vectors()
    q = QUERIES.astype(np.float16).astype(np.float32)  # pgvector rounds the query too
    out = []
    for v in q:
        scores = matrix @ v
        out.append([int(ids[j]) for j in np.lexsort((ids, -scores))[:n]])
    return out


def dense(store: PostgresStore, n: int) -> list[list[int]]:
    return [[c for c, _ in hits] for hits in store.dense(QUERIES, n, ef=MAX_EF_SEARCH)]


def segment_scans(store: PostgresStore) -> int:
    """How many scans of the segments' indexes the server has counted."""
    store._conn.execute("SELECT pg_stat_force_next_flush()")
    store._conn.execute("SELECT pg_stat_clear_snapshot()")
    (count,) = store._conn.execute(
        "SELECT COALESCE(SUM(idx_scan), 0) FROM pg_stat_user_indexes "
        "WHERE indexrelname LIKE 'chunks\\_full\\_%'"
    ).fetchone()
    return int(count)


def generations(store: PostgresStore) -> dict[int, int]:
    """Full vectors by generation."""
    return dict(
        store._conn.execute(
            "SELECT full_gen, COUNT(*) FROM chunks WHERE embedding IS NOT NULL GROUP BY full_gen"
        ).fetchall()
    )


def assert_tiled(store: PostgresStore) -> tuple[int, list]:
    """The segments tile [0, G), and the tail holds fewer than `SEAL_AT` vectors."""
    generation, segments = layout(store._conn)
    edges = [0] + [s.hi for s in segments]
    assert [s.lo for s in segments] == edges[:-1] and edges[-1] == generation, segments
    tail = sum(n for g, n in generations(store).items() if g >= generation)
    assert tail < SEAL_AT
    return generation, segments


def full_pass(
    store: PostgresStore, writer: IndexWriter, *, tiled: bool = True
) -> list[tuple[int, list]]:
    """Fill every chunk's full vector, `BATCH` at a time under the writer's lock, as the
    full pass does; the layout after each fill (`tiled`: checked by `assert_tiled`)."""
    rng = np.random.default_rng(3)
    seen = []
    while todo := store.unencoded(BATCH):
        vectors = rng.normal(size=(len(todo), FULL_DIM))
        assert writer.fill_vectors([u.id for u in todo], [u.vector_key for u in todo], vectors)
        seen.append(assert_tiled(store) if tiled else layout(store._conn))
    return seen


def test_a_full_pass_seals_its_tail_into_segments_that_merge_and_search_exactly(
    pg_url: str, root: Path
) -> None:
    with open_pg(pg_url) as store, IndexWriter(store) as writer:
        write_quick(writer, root, PER_DOC)
        store._conn.execute("SET enable_seqscan = off")  # the graphs walked, not scanned
        store._conn.execute("SET enable_sort = off")
        seen = full_pass(store, writer)
        # 600 vectors, 100 a seal: four of tier 0 merged into one of 400, then two more
        assert [len(s) for _, s in seen] == [0, 1, 1, 2, 2, 3, 3, 1, 1, 2, 2, 3]
        generation, segments = seen[-1]
        assert generation == 6
        assert [(s.lo, s.hi, s.rows) for s in segments] == [(0, 4, 400), (4, 5, 100), (5, 6, 100)]
        assert FANIN == 4
        before = segment_scans(store)
        assert dense(store, 10) == exact(store, 10)
        assert segment_scans(store) >= before + len(QUERIES) * len(segments)


def test_segments_that_would_merge_past_the_largest_stay_apart(
    pg_url: str, root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from attnswitch.indexing import postgres_segments

    monkeypatch.setattr(postgres_segments, "LARGEST", 3 * SEAL_AT)
    with open_pg(pg_url) as store, IndexWriter(store) as writer:
        write_quick(writer, root, PER_DOC)
        generation, segments = full_pass(store, writer)[-1]
        assert generation == 6
        assert [(s.lo, s.hi, s.rows) for s in segments] == [(g, g + 1, SEAL_AT) for g in range(6)]
        assert dense(store, 10) == exact(store, 10)


def test_dense_search_is_exact_with_a_tail_and_with_a_filter(pg_url: str, root: Path) -> None:
    from attnswitch.indexing.filters import SearchFilter

    with open_pg(pg_url) as store, IndexWriter(store) as writer:
        write_quick(writer, root, PER_DOC)
        todo = store.unencoded(250)  # two seals and a tail of 50
        vectors = np.random.default_rng(4).normal(size=(len(todo), FULL_DIM))
        for i in range(0, len(todo), BATCH):
            part = todo[i : i + BATCH]
            writer.fill_vectors(
                [u.id for u in part], [u.vector_key for u in part], vectors[i : i + BATCH]
            )
        generation, segments = assert_tiled(store)
        assert len(segments) == 2 and generations(store)[generation] == 50
        store._conn.execute("SET enable_seqscan = off")
        assert dense(store, 10) == exact(store, 10)
        (source,) = store._conn.execute(  # a document the fills reached
            "SELECT d.source FROM chunks c JOIN documents d ON d.id = c.doc_id WHERE c.id = %s",
            (todo[0].id,),
        ).fetchone()
        where = SearchFilter.of(path=source)
        allowed = {
            r[0]
            for r in store._conn.execute(
                "SELECT c.id FROM chunks c JOIN documents d ON d.id = c.doc_id "
                "WHERE d.source = %s AND c.embedding IS NOT NULL",
                (source,),
            )
        }
        assert allowed
        for hits in store.dense(QUERIES, 10, ef=MAX_EF_SEARCH, where=where):
            assert {c for c, _ in hits} <= allowed and len(hits) == min(10, len(allowed))


def test_a_vector_written_with_an_older_generation_is_found_in_its_segment(
    pg_url: str, root: Path
) -> None:
    """A search's fill that read G before a seal committed writes an older generation:
    PostgreSQL puts the vector in that generation's segment."""
    from pgvector import HalfVector

    with open_pg(pg_url) as store, IndexWriter(store) as writer:
        write_quick(writer, root, PER_DOC)
        todo = store.unencoded(SEAL_AT)
        vectors = np.random.default_rng(5).normal(size=(len(todo), FULL_DIM))
        writer.fill_vectors([u.id for u in todo], [u.vector_key for u in todo], vectors)
        generation, segments = assert_tiled(store)
        assert generation == 1 and len(segments) == 1
        (late,) = store.unencoded(1)
        v = unit(np.random.default_rng(6).normal(size=(1, FULL_DIM)))
        store._conn.execute(
            "UPDATE chunks SET embedding = %s, full_gen = 0 WHERE id = %s",
            (HalfVector(v[0]), late.id),
        )
        store._conn.execute("SET enable_seqscan = off")
        before = segment_scans(store)
        ((best, score),) = store.dense(v, 1)[0]
        assert best == late.id and score == pytest.approx(1, abs=2.0**-10)
        assert segment_scans(store) == before + 1


def test_a_seal_that_fails_leaves_the_segments_and_generation_it_found(
    pg_url: str, root: Path
) -> None:
    import psycopg

    with open_pg(pg_url) as store, IndexWriter(store) as writer:
        write_quick(writer, root, PER_DOC)
        store.seal_at = 10_000  # no seal while filling
        todo = store.unencoded(SEAL_AT)
        vectors = np.random.default_rng(8).normal(size=(len(todo), FULL_DIM))
        writer.fill_vectors([u.id for u in todo], [u.vector_key for u in todo], vectors)
        assert layout(store._conn) == (0, [])
        store.seal_at = SEAL_AT
        want = exact(store, 5)
        with psycopg.connect(pg_url, autocommit=True) as other, other.transaction():
            other.execute("LOCK TABLE chunks IN ROW EXCLUSIVE MODE")  # as a writer would
            store._conn.execute("SET lock_timeout = '200ms'")
            with pytest.raises(psycopg.errors.LockNotAvailable):
                store.sync_index()
        store._conn.execute("RESET lock_timeout")
        assert layout(store._conn) == (0, [])
        assert generations(store) == {0: SEAL_AT}
        assert dense(store, 5) == want
        store.sync_index()  # the next seal makes it
        generation, segments = layout(store._conn)
        assert generation == 1 and [(s.lo, s.hi, s.rows) for s in segments] == [(0, 1, SEAL_AT)]


def test_the_memory_a_build_asks_for_covers_its_graph_up_to_the_largest_segment() -> None:
    # pgvector spilled a build of 384 dimensions at 64 MB after 43,391 vectors
    assert build_memory_kb(43_391, 384) > 64 * 1024
    assert build_memory_kb(43_391, 384) < 1.5 * 64 * 1024
    assert build_memory_kb(2_000, 768) > build_memory_kb(2_000, 384) > build_memory_kb(1_000, 384)
    assert build_memory_kb(4 * LARGEST, 384) == build_memory_kb(LARGEST, 384)


SPILL = "no longer fits into maintenance_work_mem"


@pytest.mark.parametrize("limit", [None, "1MB"])
@pytest.mark.parametrize("column", ["embedding", "quick"])
def test_a_build_asks_for_the_memory_its_graph_needs_for_its_own_transaction(
    pg_url: str, root: Path, column: str, limit: str | None
) -> None:
    """Under a session's 1 MB, pgvector builds 2,400 vectors partly on disk; the store's
    build (a seal of the full vectors' tail, or the quick list's index) asks for room for
    them for its transaction only, up to the limit a database or role sets."""
    import psycopg

    with PostgresStore(pg_url, seal_at=10_000, quick_exact_below=10**6) as store:
        with IndexWriter(store) as writer:
            write_quick(writer, root, 600)
            if column == "embedding":
                full_pass(store, writer, tiled=False)
        conn = store._conn
        notices: list[str] = []
        conn.add_notice_handler(lambda notice: notices.append(notice.message_primary or ""))
        conn.execute("SET maintenance_work_mem = '1MB'")
        with conn.transaction() as probe:  # the same build under the session's setting
            conn.execute(f"CREATE INDEX spill_probe ON chunks USING hnsw ({column} halfvec_ip_ops)")
            raise psycopg.Rollback(probe)
        assert any(SPILL in n for n in notices), notices
        notices.clear()
        if limit:
            conn.execute(f"SET {BUILD_MEMORY_LIMIT} = '{limit}'")
        store.seal_at, store.quick_exact_below = 1, 1
        store.sync_index()
        assert any(SPILL in n for n in notices) == bool(limit), notices
        if column == "embedding":
            assert [(s.lo, s.hi, s.rows) for s in layout(conn)[1]] == [(0, 1, 2_400)]
        else:
            assert store._quick_indexed()
        (setting,) = conn.execute("SHOW maintenance_work_mem").fetchone()
        assert setting == "1MB"


def to_layout_before_segments(url: str) -> None:
    """Take a store back to the layout before segments: no `full_gen` column, one HNSW
    index of every full vector (`LEGACY_INDEX`)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        drop_all(conn)
        conn.execute("ALTER TABLE chunks DROP COLUMN full_gen")
        conn.execute("DELETE FROM meta WHERE key = 'full_gen'")
        conn.execute(
            f"CREATE INDEX {LEGACY_INDEX} ON chunks USING hnsw (embedding halfvec_ip_ops) "
            "WITH (m = 16, ef_construction = 128)"
        )


def test_a_store_from_before_segments_gets_its_vectors_as_one(
    pg_url: str, root: Path, caplog
) -> None:
    with open_pg(pg_url) as store, IndexWriter(store) as writer:
        write_quick(writer, root, PER_DOC)
        store.seal_at = 10_000  # every vector in the tail
        assert full_pass(store, writer, tiled=False)[-1] == (0, [])
        want = exact(store, 10)
    to_layout_before_segments(pg_url)
    with caplog.at_level("INFO"), open_pg(pg_url) as store:
        assert any(
            "from before segments made chunks_full_0_1" in r.getMessage() for r in caplog.records
        )
        generation, segments = layout(store._conn)
        assert generation == 1
        assert [(s.lo, s.hi, s.rows) for s in segments] == [(0, 1, len(SOURCES) * PER_DOC)]
        (legacy,) = store._conn.execute(
            "SELECT COUNT(*) FROM pg_indexes WHERE indexname = %s", (LEGACY_INDEX,)
        ).fetchone()
        assert legacy == 0
        store._conn.execute("SET enable_seqscan = off")
        assert dense(store, 10) == want


def test_another_dimension_once_every_vector_is_gone_drops_the_segments(
    pg_url: str, root: Path
) -> None:
    from attnswitch.documents.ingest import ingest
    from attnswitch.indexing.store import ChunkRecord

    with open_pg(pg_url) as store, IndexWriter(store) as writer:
        write_quick(writer, root, PER_DOC)
        full_pass(store, writer)
        assert layout(store._conn)[1]
        writer.forget(root)
        doc = next(iter(ingest(root)))
        v = unit(np.random.default_rng(9).normal(size=(3, 8)))
        writer.write_document(doc, [ChunkRecord(f"c{i}", 1, i, i + 1) for i in range(3)], v)
        assert layout(store._conn)[1] == [] and store.dim == 8
        ((best, _),) = store.dense(v[1:2], 1)[0]
        assert store.chunks([best])[best].text == "c1"
