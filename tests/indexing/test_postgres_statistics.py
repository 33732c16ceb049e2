"""The PostgreSQL store's chunks analysed through a full pass (`postgres_statistics`): with
autovacuum kept off the chunks (as each seal's lock keeps it off through a long pass), the
planner's count of full vectors follows the store's within `DRIFT` at every seal, from
O(log n) ANALYZEs; a segment's rows are its build's count, whatever ANALYZE estimates."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
from quick_testing import FILL_BATCH, FULL_DIM, SEAL_AT, SEGMENTS_PER_DOC, make_folder, write_quick

from attnswitch.indexing.writer import IndexWriter

pytest.importorskip("psycopg", reason="the postgres extra (psycopg) is not installed")

from attnswitch.indexing.postgres_segments import layout  # noqa: E402
from attnswitch.indexing.postgres_statistics import DRIFT, drifted, planned_full  # noqa: E402
from attnswitch.indexing.store_postgres import PostgresStore  # noqa: E402

CHUNKS = 4 * SEGMENTS_PER_DOC  # write_quick's four documents


@pytest.mark.parametrize(
    ("planned", "full", "want"),
    [
        (0.0, 0, False),
        (0.0, 1, False),  # counts below 1 are 1
        (0.0, 3, True),
        (100.0, 200, False),
        (100.0, 201, True),
        (200.0, 100, False),
        (201.0, 100, True),
        (0.4, 2, False),
        (None, 0, True),  # no statistics of the column
    ],
)
def test_drift_is_a_ratio_either_way(planned: float | None, full: int, want: bool) -> None:
    assert DRIFT == 2.0
    assert drifted(planned, full) is want


def starved(store: PostgresStore, root: Path, writer: IndexWriter, typed_ahead: bool) -> None:
    """The quick pass's chunks written and analysed, then autovacuum kept off them;
    `typed_ahead`: the full vectors' column typed first, as a run's quick pass does (else
    the first fill types it, and the column loses its statistics)."""
    if typed_ahead:
        writer.expect_dim(FULL_DIM)
    write_quick(writer, root, SEGMENTS_PER_DOC)
    store._conn.execute("ANALYZE chunks")
    store._conn.execute("ALTER TABLE chunks SET (autovacuum_enabled = off)")


def fill_some(store: PostgresStore, writer: IndexWriter, count: int, seed: int) -> None:
    """Write `count` full vectors as the full pass does (the store's next unencoded)."""
    todo = store.unencoded(count)
    vectors = np.random.default_rng(seed).normal(size=(len(todo), FULL_DIM))
    assert writer.fill_vectors([u.id for u in todo], [u.vector_key for u in todo], vectors)


def planned_rows(store: PostgresStore, where: str) -> float:
    """The planner's estimate of the chunks that satisfy `where`."""
    (plan,) = store._conn.execute(f"EXPLAIN (FORMAT JSON) SELECT id FROM chunks WHERE {where}")
    doc = plan[0] if isinstance(plan[0], list) else json.loads(plan[0])
    return float(doc[0]["Plan"]["Plan Rows"])


def chunks_stat(store: PostgresStore, column: str) -> int:
    """One of the chunks' counters in `pg_stat_user_tables` (`analyze_count`,
    `vacuum_count`: by hand, not by autovacuum), this session's own counts flushed first."""
    store._conn.execute("SELECT pg_stat_force_next_flush()")
    store._conn.execute("SELECT pg_stat_clear_snapshot()")
    (count,) = store._conn.execute(
        f"SELECT {column} FROM pg_stat_user_tables WHERE relname = 'chunks'"
    ).fetchone()
    return int(count)


def analyses(store: PostgresStore) -> int:
    """How many times the chunks were analysed by hand (not by autovacuum)."""
    return chunks_stat(store, "analyze_count")


@pytest.mark.parametrize("typed_ahead", [True, False], ids=["typed-ahead", "typed-by-fill"])
def test_a_full_pass_keeps_the_planners_count_of_full_vectors(
    pg_url: str, tmp_path: Path, typed_ahead: bool
) -> None:
    with PostgresStore(pg_url, seal_at=SEAL_AT) as store, IndexWriter(store) as writer:
        starved(store, make_folder(tmp_path), writer, typed_ahead)
        before = analyses(store)
        assert planned_full(store._conn) == 0  # analysed: every chunk without one
        filled = 0
        while filled < CHUNKS:
            fill_some(store, writer, FILL_BATCH, filled)
            filled += FILL_BATCH
            if filled == FILL_BATCH and not typed_ahead:  # the column made again
                assert planned_full(store._conn) is None
            if filled % SEAL_AT:
                continue  # the statistics are looked at when the tail is sealed
            planned = planned_rows(store, "embedding IS NOT NULL")
            assert not drifted(planned, filled), (planned, filled)
        # at 100 and 300 of 600 sealed (past twice the count analysed), no more
        made = analyses(store) - before
        assert 1 <= made <= math.ceil(math.log2(CHUNKS / SEAL_AT)) + 1, made


def test_a_segments_rows_are_its_builds_count_after_analyze(pg_url: str, tmp_path: Path) -> None:
    with PostgresStore(pg_url, seal_at=SEAL_AT) as store, IndexWriter(store) as writer:
        starved(store, make_folder(tmp_path), writer, typed_ahead=True)
        fill_some(store, writer, SEAL_AT, 1)
        fill_some(store, writer, SEAL_AT, 2)
        conn = store._conn
        # PostgreSQL's own count of an index's entries is an ANALYZE's estimate after one
        conn.execute("ANALYZE chunks")
        conn.execute("UPDATE pg_class SET reltuples = 12345 WHERE relname LIKE 'chunks\\_full\\_%'")
        _, segments = layout(conn)
        assert len(segments) == 2
        for segment in segments:
            (count,) = conn.execute(
                f"SELECT COUNT(*) FROM chunks WHERE embedding IS NOT NULL AND {segment.condition}"
            ).fetchone()
            assert segment.rows == count == SEAL_AT, segment
        # a segment's predicate names only chunks with a full vector: the quick pass's
        # chunks of generation 0 that still have none are not counted in segment [0, 1)
        (predicate,) = conn.execute(
            "SELECT pg_get_expr(indpred, indrelid) FROM pg_index "
            "WHERE indexrelid = 'chunks_full_0_1'::regclass"
        ).fetchone()
        assert "embedding IS NOT NULL" in predicate
