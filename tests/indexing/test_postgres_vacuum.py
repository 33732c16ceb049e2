"""The PostgreSQL store's chunks vacuumed through a full pass (`postgres_vacuum`): with
autovacuum kept off the chunks (as each seal's lock keeps it off through a long pass), the
dead row versions the fills leave stay within autovacuum's rule at every seal when the
quick list has no graph, and are all removed when the `sync_index` that ends the pass drops
it; no VACUUM runs while the graph is there, inside a transaction, or for dead versions
that came with no seal."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from quick_testing import FILL_BATCH, SEAL_AT, SEGMENTS_PER_DOC, make_folder, write_quick
from test_postgres_statistics import chunks_stat, fill_some

from attnswitch.indexing import analyzer
from attnswitch.indexing.writer import IndexWriter

pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")

from attnswitch.indexing.postgres_vacuum import due, keep  # noqa: E402
from attnswitch.indexing.store_postgres import PostgresStore  # noqa: E402

CHUNKS = 4 * SEGMENTS_PER_DOC  # write_quick's four documents, each chunk's text naming "txt"


@pytest.mark.parametrize(
    ("dead", "rows", "want"),
    [
        (0, 0.0, False),
        (50, 0.0, False),
        (51, 0.0, True),
        (250, 1000.0, False),
        (251, 1000.0, True),
        (10, 1_000_000.0, False),
    ],
)
def test_due_is_autovacuums_rule(dead: int, rows: float, want: bool) -> None:
    assert due(dead, rows, 50.0, 0.2) is want


def versions_found(store: PostgresStore) -> tuple[int, int]:
    """(row versions, live chunks) a keyword search for a term of every chunk reads: the
    terms' GIN holds an entry for each version until a VACUUM removes the dead ones."""
    literal = analyzer.tsquery_literal(*analyzer.query_terms("txt", ("en",)))
    conn = store._conn
    with conn.transaction():
        conn.execute("SET LOCAL enable_seqscan = off")
        (plan,) = conn.execute(
            "EXPLAIN (ANALYZE, FORMAT JSON) SELECT id FROM chunks WHERE terms @@ CAST(%s AS tsquery)",
            (literal,),
        ).fetchone()
    doc = plan if isinstance(plan, list) else json.loads(plan)
    heap = doc[0]["Plan"]
    assert heap["Node Type"] == "Bitmap Heap Scan", heap["Node Type"]
    (index,) = heap["Plans"]
    return int(index["Actual Rows"]), int(heap["Actual Rows"])


def vacuums(store: PostgresStore) -> int:
    """How many times the chunks were vacuumed by hand (not by autovacuum)."""
    return chunks_stat(store, "vacuum_count")


def starved(store: PostgresStore, root: Path, writer: IndexWriter) -> None:
    """The quick pass's chunks written and analysed (and the quick list's graph made where
    the store's `quick_exact_below` asks for one), then autovacuum kept off them."""
    write_quick(writer, root, SEGMENTS_PER_DOC)
    store.sync_index()
    store._conn.execute("ANALYZE chunks")
    store._conn.execute("ALTER TABLE chunks SET (autovacuum_enabled = off)")


def test_without_the_quick_graph_dead_versions_stay_within_autovacuums_rule(
    pg_url: str, tmp_path: Path
) -> None:
    with (
        PostgresStore(pg_url, seal_at=SEAL_AT, quick_exact_below=10 * CHUNKS) as store,
        IndexWriter(store) as writer,
    ):
        starved(store, make_folder(tmp_path), writer)
        assert versions_found(store) == (CHUNKS, CHUNKS)
        before = vacuums(store)
        filled = 0
        while filled < CHUNKS:
            fill_some(store, writer, FILL_BATCH, filled)
            filled += FILL_BATCH
            if filled % SEAL_AT:
                continue  # the dead versions are looked at when the tail is sealed
            versions, live = versions_found(store)
            assert live == CHUNKS
            assert versions - live <= 50 + 0.2 * CHUNKS, (filled, versions)
        # each time past 170 dead versions of 600 rows: at 200, 400 and 600 filled
        assert vacuums(store) - before == CHUNKS // 200


def test_with_the_quick_graph_the_pass_is_vacuumed_when_it_is_dropped(
    pg_url: str, tmp_path: Path
) -> None:
    with (
        PostgresStore(pg_url, seal_at=SEAL_AT, quick_exact_below=CHUNKS // 2) as store,
        IndexWriter(store) as writer,
    ):
        starved(store, make_folder(tmp_path), writer)
        assert store._quick_indexed()
        before = vacuums(store)
        fill_some(store, writer, CHUNKS, 0)  # sealed in one: the graph holds every old version
        assert store._quick_indexed()
        assert vacuums(store) == before
        assert versions_found(store) == (2 * CHUNKS, CHUNKS)
        store.sync_index()  # no chunk without a full vector: the graph is dropped
        assert not store._quick_indexed()
        assert vacuums(store) == before + 1
        assert versions_found(store) == (CHUNKS, CHUNKS)


def test_no_vacuum_inside_a_transaction(pg_url: str, tmp_path: Path) -> None:
    with (
        PostgresStore(pg_url, seal_at=10 * CHUNKS, quick_exact_below=10 * CHUNKS) as store,
        IndexWriter(store) as writer,
    ):
        starved(store, make_folder(tmp_path), writer)
        fill_some(store, writer, CHUNKS, 0)
        store._conn.execute("SELECT pg_stat_force_next_flush()")
        with store._conn.transaction():
            assert not keep(store._conn, quick_graph=False)
        assert keep(store._conn, quick_graph=False)
        assert versions_found(store) == (CHUNKS, CHUNKS)


def test_dead_versions_no_seal_starved_are_left_to_autovacuum(pg_url: str, tmp_path: Path) -> None:
    # a forget's dead versions (some in the segments' graphs, whose repair a VACUUM pays)
    # came with no seal to cancel autovacuum: the writer leaves them to it
    with (
        PostgresStore(pg_url, seal_at=SEAL_AT, quick_exact_below=10 * CHUNKS) as store,
        IndexWriter(store) as writer,
    ):
        root = make_folder(tmp_path)
        starved(store, root, writer)
        before = vacuums(store)
        assert writer.forget(root, "a") == 2
        store.sync_index()
        assert vacuums(store) == before
        assert versions_found(store) == (CHUNKS, CHUNKS // 2)
