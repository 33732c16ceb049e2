"""How both stores keep vectors (`records.VECTOR_DTYPE`, float16; docs/architecture.md,
"Stores and search"): the bytes stored, what is read back (float32, L2-normalised), a
vector read back and written again stored bit for bit, a store of the float32 layout
(SQLite schema version 7, pgvector `vector(dim)`) upgraded in place with every chunk, vector
and search answer kept, the SQLite store's HNSW graph in float16 (a float32 graph rebuilt),
bad stored data named, and a server whose pgvector has no `halfvec` refused. On SQLite and
on PostgreSQL wherever both apply."""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path

import numpy as np
import pytest

from attnswitch.documents.ingest import ingest
from attnswitch.indexing import ann
from attnswitch.indexing.ann import HnswIndex
from attnswitch.indexing.hnsw_file import graph_damage
from attnswitch.indexing.location import is_url, open_store
from attnswitch.indexing.records import SCHEMA_VERSION, VECTOR_DTYPE, vector_key
from attnswitch.indexing.search import search
from attnswitch.indexing.sqlite_segments import FullSegment
from attnswitch.indexing.store import ChunkRecord, SQLiteStore, StoreConnectError
from attnswitch.indexing.store_errors import StoreCorruptError
from store_testing import FIRST_SEGMENT, as_float32_blobs

DIM = 24
PER_DOC = 20
WORDS = ("vacuum", "index", "table", "query", "update", "views", "rows", "join")


def write(
    store, root: Path, *, dim: int = DIM, seed: int = 0, fingerprint: str | None = None
) -> dict[int, np.ndarray]:
    """Three documents of `PER_DOC` chunks with random vectors (far from unit length);
    returns chunk id -> the vector written, L2-normalised in float64."""
    rng = np.random.default_rng(seed)
    written = {}
    for doc in sorted(ingest(root), key=lambda d: d.source):
        chunks = [
            ChunkRecord(f"{doc.source} {WORDS[i % len(WORDS)]} part {i}", 4, i, i + 1)
            for i in range(PER_DOC)
        ]
        vectors = rng.normal(size=(PER_DOC, dim)) * 3.0
        store.write_document(doc, chunks, vectors, config="cfg", vector_fingerprint=fingerprint)
        for row, v in zip(store.document_chunks(root, doc.source), vectors, strict=True):
            written[row.id] = v / np.linalg.norm(v)
    return written


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "docs"
    folder.mkdir()
    for name in ("a.txt", "b.txt", "c.txt"):
        (folder / name).write_text(f"document {name} about tables and rows\n")
    return folder


def by_place(store, root: Path) -> dict[tuple[str, int], bytes]:
    """(source, ordinal) -> the stored vector's bytes (`stored_bytes`)."""
    raw = stored_bytes(store)
    return {
        (s, c.ordinal): raw[c.id]
        for s in sorted(store.sources(root))
        for c in store.document_chunks(root, s)
    }


def stored_bytes(store) -> dict[int, bytes]:
    """chunk id -> the stored vector's bytes as the database holds them (PostgreSQL: its
    `halfvec` in binary, pgvector's send format)."""
    if isinstance(store, SQLiteStore):
        return dict(store._conn.execute("SELECT id, vector FROM chunks").fetchall())
    rows = store._conn.execute("SELECT id, halfvec_send(embedding) FROM chunks").fetchall()
    return {int(i): bytes(b) for i, b in rows}


def column_type(store) -> str:
    return store._conn.execute(
        "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = "
        "'chunks'::regclass AND attname = 'embedding'"
    ).fetchone()[0]


def hnsw_definition(store) -> str:
    """The definition of the full vectors' first HNSW segment (`postgres_segments`)."""
    row = store._conn.execute(
        "SELECT indexdef FROM pg_indexes WHERE indexname = 'chunks_full_0_1'"
    ).fetchone()
    return row[0] if row else ""


def test_vectors_are_stored_in_float16_and_read_back_as_float32(location, root: Path) -> None:
    assert VECTOR_DTYPE == "float16"
    with open_store(location) as store:
        written = write(store, root)
        ids, matrix = store.vectors()
        assert matrix.dtype == np.float32 and matrix.shape == (3 * PER_DOC, DIM)
        want = np.stack([written[int(i)] for i in ids])
        # each element is a float16, the one nearest the normalised input's
        np.testing.assert_array_equal(matrix.astype(np.float16).astype(np.float32), matrix)
        assert (np.abs(matrix - want) <= np.abs(want) * 2.0**-11 + 2.0**-25).all()
        np.testing.assert_allclose(np.linalg.norm(matrix, axis=1), 1.0, atol=2.0**-10)
        if is_url(str(location)):
            assert column_type(store) == f"halfvec({DIM})"
            store.seal_at = 1  # the tail made a segment at once
            store.sync_index()
            assert "halfvec_ip_ops" in hnsw_definition(store)
            # pgvector's binary halfvec: u16 dimension, u16 unused, big-endian float16s
            assert {len(b) for b in stored_bytes(store).values()} == {4 + 2 * DIM}
        else:
            assert {len(b) for b in stored_bytes(store).values()} == {2 * DIM}
            blob = stored_bytes(store)[int(ids[0])]
            np.testing.assert_array_equal(np.frombuffer(blob, "<f2").astype(np.float32), matrix[0])


@pytest.mark.parametrize("dim", [3, DIM, 384])
def test_a_vector_read_back_and_written_again_is_stored_bit_for_bit(
    location, root: Path, dim: int
) -> None:
    """A run writes the vectors it reuses (`vectors_by_key`) again: rounded to float16 and
    normalised again, they must not move (`store_base.NORM_KEPT`), in any dimension."""
    with open_store(location) as store:
        write(store, root, dim=dim, fingerprint="fp")
        before = by_place(store, root)
        for doc in ingest(root):
            chunks = store.document_chunks(root, doc.source)
            reused = store.vectors_by_key([vector_key("fp", c.text) for c in chunks])
            assert len(reused) == len(chunks)
            store.write_document(
                doc,
                [ChunkRecord(c.text, c.n_tokens, c.start, c.end) for c in chunks],
                np.stack([reused[vector_key("fp", c.text)] for c in chunks]),
                config="cfg",
                vector_fingerprint="fp",
            )
        after = by_place(store, root)
    assert after == before  # new chunk ids, the same bytes


def test_a_float16_unit_vector_is_stored_as_it_is(location, root: Path) -> None:
    """A vector read back from a store (float16 elements, its norm 1 within float16's
    rounding: here 1 - 0.00034) is not divided by its norm again, which would round this
    one to other float16s: written again, it stays what it was."""
    h = np.array([[0.75439453, -0.625, 0.19897461]], np.float32)
    assert (h.astype(np.float16).astype(np.float32) == h).all()
    moved = (h / np.linalg.norm(h)).astype(np.float16).astype(np.float32)
    assert (moved != h).any()  # what normalising it again would store
    with open_store(location) as store:
        doc = next(iter(ingest(root)))
        store.write_document(doc, [ChunkRecord("one chunk", 2, 0, 9)], h)
        np.testing.assert_array_equal(store.vectors()[1], h)


def test_the_upgraded_file_is_compacted(root: Path, tmp_path: Path) -> None:
    """Vectors of dimension 384 in float32 fill two chunks a 4 KiB page; in float16 about
    four fit: after the upgrade the file is VACUUMed down to its new rows."""
    db = tmp_path / "index.sqlite3"
    with SQLiteStore(db) as store:
        for seed in range(3):
            write(store, root, dim=384, seed=seed)  # three rounds: documents rewritten
        originals = float32_near(*store.vectors())
    to_float32_layout(db, originals)
    with contextlib.closing(sqlite3.connect(db)) as conn:  # closed: its WAL folded in
        conn.execute("VACUUM")  # the float32 file at its smallest
    before = db.stat().st_size
    with SQLiteStore(db) as store:
        ids, matrix = store.vectors()
        assert len(ids) == 3 * PER_DOC and matrix.shape[1] == 384
    assert db.stat().st_size < 0.75 * before, (db.stat().st_size, before)


def to_float32_layout(location, originals: dict[int, np.ndarray]) -> None:
    """Take a store written by this version back to the layout before float16 (SQLite
    schema version 7: float32 blobs; PostgreSQL: pgvector `vector(dim)` with a
    `vector_ip_ops` HNSW index and no segments), each chunk holding its float32 vector as
    written then."""
    if is_url(str(location)):
        import psycopg
        from pgvector.psycopg import register_vector

        from attnswitch.indexing.postgres_segments import drop_all

        with psycopg.connect(str(location), autocommit=True) as conn:
            register_vector(conn)
            drop_all(conn)
            conn.execute("ALTER TABLE chunks DROP COLUMN full_gen")
            conn.execute("DELETE FROM meta WHERE key = 'full_gen'")
            conn.execute(
                f"ALTER TABLE chunks ALTER COLUMN embedding TYPE vector({DIM}) "
                f"USING embedding::vector({DIM})"
            )
            for cid, v in originals.items():
                conn.execute(
                    "UPDATE chunks SET embedding = %s WHERE id = %s", (v.astype(np.float32), cid)
                )
            conn.execute(
                "CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw "
                "(embedding vector_ip_ops) WITH (m = 16, ef_construction = 128)"
            )
        return
    with contextlib.closing(sqlite3.connect(location)) as conn, conn:
        as_float32_blobs(conn)
        conn.executemany(
            "UPDATE chunks SET vector = ? WHERE id = ?",
            [(v.astype("<f4").tobytes(), cid) for cid, v in originals.items()],
        )
        conn.execute("PRAGMA user_version = 7")


def float32_near(ids: np.ndarray, matrix: np.ndarray) -> dict[int, np.ndarray]:
    """chunk id -> a float32 vector (not a float16 one) that rounds to the stored one: each
    element moved by 2^-14 of itself, under half a float16 step (at least 2^-12 of it)."""
    signs = np.random.default_rng(9).choice([-1.0, 1.0], size=matrix.shape)
    near = (matrix * (1.0 + signs * 2.0**-14)).astype(np.float32)
    assert (near.astype(np.float16).astype(np.float32) != near).any()
    return {int(i): v for i, v in zip(ids, near, strict=True)}


def answers(store, queries: np.ndarray) -> list:
    """Dense and hybrid hits (chunk id, score) of each query, and its keyword hits."""
    out = []
    for i, q in enumerate(queries):
        text = WORDS[i % len(WORDS)]
        out.append(
            [
                [(h.chunk_id, h.score) for h in search(store, q, 10, text=text, mode=m)]
                for m in ("dense", "hybrid")
            ]
            + [store.keyword(text, 10)]
        )
    return out


def test_a_float32_store_is_upgraded_in_place_keeping_chunks_vectors_and_answers(
    location, root: Path, tmp_path: Path, caplog
) -> None:
    """Opening a store of the float32 layout converts its vectors in place (no encoding,
    every chunk and id kept): they read back as the float32 ones rounded to float16, and
    every dense, hybrid and keyword answer is the one a store written in float16 gives."""
    queries = np.random.default_rng(5).normal(size=(8, DIM))
    with open_store(location) as store:
        write(store, root)
        chunks = {
            c.id: c.text
            for s in sorted(store.sources(root))
            for c in store.document_chunks(root, s)
        }
        want = answers(store, queries)
        ids, matrix = store.vectors()
    originals = float32_near(ids, matrix)
    to_float32_layout(location, originals)
    if not is_url(str(location)):
        old_size = Path(location).stat().st_size
    with caplog.at_level("INFO"), open_store(location) as store:
        ids, matrix = store.vectors()
        assert sorted(ids.tolist()) == sorted(chunks)
        assert {
            c.id: c.text
            for s in sorted(store.sources(root))
            for c in store.document_chunks(root, s)
        } == chunks
        expected = np.stack([originals[int(i)] for i in ids]).astype(np.float16)
        np.testing.assert_array_equal(matrix, expected.astype(np.float32))
        assert answers(store, queries) == want
        if is_url(str(location)):
            assert column_type(store) == f"halfvec({DIM})"
            assert "halfvec_ip_ops" in hnsw_definition(store)
        else:
            assert {len(b) for b in stored_bytes(store).values()} == {2 * DIM}
    assert any(
        "converted" in r.getMessage() and "float16" in r.getMessage() for r in caplog.records
    )
    if not is_url(str(location)):
        with contextlib.closing(sqlite3.connect(location)) as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION == 13
        assert Path(location).stat().st_size <= old_size  # compacted (VACUUM)
    with open_store(location) as store:  # opened again: nothing left to convert
        assert stored_bytes(store) and answers(store, queries) == want


def test_a_float32_graph_beside_an_upgraded_store_is_replaced_by_a_float16_one(
    root: Path, tmp_path: Path, monkeypatch
) -> None:
    db = tmp_path / "index.sqlite3"
    with SQLiteStore(db, exact_below=0) as store:
        written = write(store, root)
        originals = float32_near(*store.vectors())
    graph, header = HnswIndex.paths(db, FIRST_SEGMENT)
    with monkeypatch.context() as m:  # the graph as the version before saved it
        m.setattr(ann, "DTYPE", "f32")
        m.setattr(ann, "INDEX_FORMAT", 3)
        with SQLiteStore(db, exact_below=0) as store, store.exclusive():
            store.sync_index()
    assert json.loads(header.read_text())["format"] == 3
    assert graph_damage(graph, DIM, 4) is None
    to_float32_layout(db, originals)
    with SQLiteStore(db, exact_below=0) as store:
        assert not graph.exists()  # dropped by the upgrade: it held float32 vectors
        q = np.stack([written[cid] for cid in sorted(written)[:5]]).astype(np.float32)
        found = store.dense(q, 3)
        assert [hits[0][0] for hits in found] == sorted(written)[:5]
        with store.exclusive():
            store.sync_index()
        index = HnswIndex.open(FullSegment(store, 0, 1))
        assert not index.rebuilt and str(index.index.dtype).lower().endswith("f16")
        ids, matrix = store.vectors()
        got = np.asarray(index.index.get(ids.astype(np.uint64)), np.float32)
        np.testing.assert_array_equal(got, matrix)  # the stored values, exactly
    meta = json.loads(header.read_text())
    assert (meta["format"], meta["dtype"]) == (ann.INDEX_FORMAT, "f16") == (4, "f16")
    assert graph_damage(graph, DIM, ann.ITEM_BYTES) is None
    assert graph_damage(graph, DIM, 4) == f"vectors of {2 * DIM} bytes, expected {4 * DIM}"


@pytest.mark.parametrize("length", [2 * DIM - 1, 4 * DIM])
def test_a_stored_vector_of_another_length_is_named(
    root: Path, tmp_path: Path, length: int
) -> None:
    """A blob that is not `dim` float16 elements (a torn one, or a float32 vector written
    into a float16 store) is named with its length, not read as another vector."""
    with SQLiteStore(tmp_path / "index.sqlite3") as store:
        write(store, root, fingerprint="fp")
        last = store.max_chunk_id()
        keys = {cid: vector_key("fp", c.text) for cid, c in store.chunks([1, last]).items()}
        store._conn.execute("UPDATE chunks SET vector = ? WHERE id = ?", (bytes(length), last))
        with pytest.raises(
            StoreCorruptError,
            match=(
                rf"expected vectors of {2 * DIM} bytes \(dimension {DIM}, float16\), got 1 "
                rf"chunk\(s\) of another length \(ids \[{last}\]: {length} bytes\); move the "
                r"file aside"
            ),
        ):
            store.vectors()
        # a run never reuses it: only the sound vector comes back
        assert set(store.vectors_by_key(keys.values())) == {keys[1]}


def test_an_old_vector_of_the_wrong_length_stays_named_after_the_upgrade(
    root: Path, tmp_path: Path
) -> None:
    db = tmp_path / "index.sqlite3"
    with SQLiteStore(db) as store:
        written = write(store, root)
    to_float32_layout(db, {cid: v.astype(np.float32) for cid, v in written.items()})
    last = max(written)
    with contextlib.closing(sqlite3.connect(db)) as conn, conn:  # one element short
        conn.execute(
            "UPDATE chunks SET vector = substr(vector, 1, ?) WHERE id = ?", (4 * DIM - 4, last)
        )
    with SQLiteStore(db) as store:
        with pytest.raises(StoreCorruptError, match=rf"\(ids \[{last}\]: {2 * DIM - 2} bytes\)"):
            store.vectors()


def test_a_server_whose_pgvector_has_no_halfvec_is_refused(pg_url: str) -> None:
    import psycopg

    with open_store(pg_url):
        pass
    with psycopg.connect(pg_url, autocommit=True) as conn:
        version = conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()[0]
        conn.execute("UPDATE pg_extension SET extversion = '0.6.2' WHERE extname = 'vector'")
    try:
        with pytest.raises(
            StoreConnectError,
            match=(
                r"expected pgvector 0\.7 or later in the database at postgresql://.*\(its "
                r"halfvec type holds the vectors\), got 0\.6\.2; .*ALTER EXTENSION vector "
                "UPDATE"
            ),
        ):
            open_store(pg_url)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(
                "UPDATE pg_extension SET extversion = %s WHERE extname = 'vector'", (version,)
            )
    with open_store(pg_url) as store:
        assert store.dim is None
