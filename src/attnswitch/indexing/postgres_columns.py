"""The PostgreSQL store's full-vector column and its dimension (docs/architecture.md, "The
full vectors' segments in PostgreSQL"): pgvector builds a graph only over a typed column
(`halfvec(384)`, not `halfvec`), so the store types `embedding` with the dimension of its
vectors, each step inside the caller's transaction under the dimension lock (`DIM_LOCK`).

- `fix_full_dim`: the first full vectors set the store's dimension (meta "dim"), and
  another is refused while vectors of this one are stored.
- `expect_full_dim`: a run that knows its model types the column before it writes a chunk
  (the quick pass), so the full pass's first vector finds it typed.
- `type_full_column`: with no full vector stored the column is made again (dropped and
  added) rather than altered: `ALTER COLUMN ... TYPE` rewrites the table and builds every
  index again (the keyword terms' GIN and the quick list's graph included) under an
  exclusive lock that stalls every search: the full pass's first half over 100,000 chunks
  took 145.3 s that way against 39.7 with the column typed ahead (`benchmarks/
  store_scale.py --two-speed`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from attnswitch.indexing.postgres_schema import (
    DIM_LOCK,
    QUICK_HNSW,
    QUICK_HNSW_INDEX,
    QUICK_ONLY_COUNT,
    UNENCODED_INDEX,
    column_dim,
)
from attnswitch.indexing.postgres_segments import drop_all, fit_build_memory, keep_tail_index
from attnswitch.indexing.segment_tiers import LARGEST
from attnswitch.indexing.store_errors import StoreInputError

log = logging.getLogger("attnswitch.indexing.store_postgres")  # the store's own log


def stored_dim(conn: Any) -> int | None:
    """The store's full-vector dimension (meta "dim", written with its first full vector),
    or None before one."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()
    return int(row[0]) if row else None


def full_stored(conn: Any) -> bool:
    """Whether any chunk has a full vector."""
    sql = "SELECT EXISTS (SELECT 1 FROM chunks WHERE embedding IS NOT NULL)"
    return bool(conn.execute(sql).fetchone()[0])


def fix_full_dim(conn: Any, dim: int) -> None:
    """Hold the store to one full-vector dimension, as its vectors of `dim` are written:
    the first set it (meta "dim", the column typed by `type_full_column` when it is not
    typed so already); another is refused (`StoreInputError` naming `vectors`) while
    vectors of the stored one exist."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (DIM_LOCK,))
    stored = stored_dim(conn)
    if stored == dim:
        return
    if stored is not None and full_stored(conn):
        raise StoreInputError(
            "vectors",
            f"dimension {stored} (this store's)",
            f"{dim}: a model with another dimension needs another store",
        )
    if column_dim(conn, "embedding") != dim:
        type_full_column(conn, dim)
    conn.execute(
        "INSERT INTO meta VALUES ('dim', %s) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        (str(dim),),
    )


def expect_full_dim(conn: Any, dim: int) -> None:
    """Type the full-vector column `halfvec(dim)` ahead of the vectors, while the store has
    none (no meta "dim"); nothing to do when it is typed so, or when the store holds
    vectors (their dimension is checked as they are written: `fix_full_dim`)."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (DIM_LOCK,))
    if stored_dim(conn) is None and column_dim(conn, "embedding") != dim:
        type_full_column(conn, dim)


def type_full_column(conn: Any, dim: int) -> None:
    """Type the chunks' `embedding` column `halfvec(dim)`, its segments dropped first (no
    graph is of another dimension). With no full vector stored the column is dropped and
    added again, no row rewritten, and the indexes whose predicate names it are made again:
    the full pass's queue (`UNENCODED_INDEX`), the tail's b-tree and the quick list's HNSW
    index where there was one (given its build memory). With vectors stored (a store from
    before the dimension was recorded) its type is changed in place, every row rewritten."""
    started = time.monotonic()
    drop_all(conn)
    if full_stored(conn):
        conn.execute(f"ALTER TABLE chunks ALTER COLUMN embedding TYPE halfvec({int(dim)})")
        how = "in place, every chunk rewritten"
    else:
        quick_indexed = conn.execute("SELECT to_regclass(%s)", (QUICK_HNSW,)).fetchone()[0]
        conn.execute(
            f"ALTER TABLE chunks DROP COLUMN embedding, ADD COLUMN embedding halfvec({int(dim)})"
        )
        conn.execute(UNENCODED_INDEX)
        keep_tail_index(conn)
        if quick_indexed is not None:
            (rows,) = conn.execute(QUICK_ONLY_COUNT, (LARGEST,)).fetchone()
            fit_build_memory(conn, "quick", int(rows))
            conn.execute(QUICK_HNSW_INDEX)
        how = "made again, no chunk rewritten"
    log.info(
        "full vectors' column typed halfvec(%d) (%s): %.1f s", dim, how, time.monotonic() - started
    )


__all__ = ["expect_full_dim", "fix_full_dim", "full_stored", "stored_dim", "type_full_column"]
