"""The PostgreSQL store's chunks vacuumed through a full pass (docs/architecture.md, "The
full vectors' segments in PostgreSQL").

A fill updates its chunk: PostgreSQL writes a new version of the row, with an entry in
every index of the chunks (the terms' GIN included), and leaves the old one dead until a
VACUUM removes it. Autovacuum would, once the dead versions pass its threshold, but every
seal and merge is a CREATE INDEX whose SHARE lock cancels it, and a full pass seals every
few seconds: through a long pass the dead versions pile up, one a filled chunk. A keyword
search reads each match's versions, dead ones included: right after a pass over 1,000,000
chunks the terms' GIN gave 65,672 versions for 32,836 live matches, the search read twice
the heap pages and took 202 ms p50 against 93 after the quick pass; one VACUUM (9.1 s)
took it to 113 (docs/results/intel-xeon-amx/store_dead_versions.md).

So the writer does autovacuum's work, on autovacuum's own rule (`keep`, after its seals
and at each `sync_index` after one: `PostgresStore._vacuum`): it vacuums the chunks once
their dead versions pass the server's `autovacuum_vacuum_threshold` +
`autovacuum_vacuum_scale_factor` x their rows (50 + 0.2 x rows by default), but not while
the quick list's HNSW graph is there. A filled chunk's old version is in that graph, and
pgvector's VACUUM repairs the graph around every element it removes, at about the rate it
inserts row by row: at 20,000 chunks half filled, one VACUUM took 89.0 s with the graph
and 0.2 s without it. The graph is dropped at the `sync_index` that finds fewer than
`quick_exact_below` chunks without a full vector, which ends a full pass, so a pass's dead
versions are removed there, in one VACUUM of the pages the pass changed and of every index
of the chunks once. Dead versions that came with no seal (a `forget`'s, say, some of them
in the segments' graphs) are left to autovacuum, in the background.
"""

from __future__ import annotations

import logging
import time
from typing import Any

log = logging.getLogger("attnswitch.indexing.store_postgres")  # the store's own log

# The chunks' dead row versions as the server's statistics count them, their rows
# (`pg_class.reltuples`, -1 where never counted), and autovacuum's threshold and scale.
DEAD_SQL = (
    "SELECT pg_stat_get_dead_tuples(c.oid), GREATEST(c.reltuples, 0), "
    "current_setting('autovacuum_vacuum_threshold')::float8, "
    "current_setting('autovacuum_vacuum_scale_factor')::float8 "
    "FROM pg_class c WHERE c.oid = 'chunks'::regclass"
)


def due(dead: int, rows: float, threshold: float, scale: float) -> bool:
    """Whether `dead` row versions of a table of `rows` pass autovacuum's rule: more than
    `threshold` + `scale` x `rows`."""
    return dead > threshold + scale * rows


def keep(conn: Any, quick_graph: bool) -> bool:
    """VACUUM the chunks when their dead row versions are `due` and the quick list's graph
    is not there (`quick_graph`, as `PostgresStore._quick_indexed` finds it), on `conn`
    (autocommit) outside a transaction: a VACUUM cannot run inside one; its SHARE UPDATE
    EXCLUSIVE lock lets searches and fills go on. Whether it did."""

    from psycopg.pq import TransactionStatus

    if quick_graph or conn.info.transaction_status != TransactionStatus.IDLE:
        return False
    if conn.info.server_version >= 150000:  # this session's own fills counted first
        conn.execute("SELECT pg_stat_force_next_flush()")
    dead, rows, threshold, scale = conn.execute(DEAD_SQL).fetchone()
    if not due(int(dead), float(rows), float(threshold), float(scale)):
        return False
    started = time.monotonic()
    conn.execute("VACUUM chunks")
    log.info(
        "chunks vacuumed: %s dead row versions of %s rows (%.1f s)",
        f"{int(dead):,}",
        f"{float(rows):,.0f}",
        time.monotonic() - started,
    )
    return True
