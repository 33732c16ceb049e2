"""The planner's statistics of the PostgreSQL store's chunks, kept true through a full pass
(docs/architecture.md, "The full vectors' segments in PostgreSQL").

Every seal and merge of the full vectors' segments is a CREATE INDEX, whose SHARE lock
cancels autovacuum's work on the chunks, and a full pass seals every few seconds: through a
long pass nothing analyses the chunks, and PostgreSQL keeps the quick pass's statistics, in
which no chunk has a full vector. It then estimates a segment's predicate at one row and
ranks that segment by a sequential scan of the whole table and a sort instead of walking
its graph: at 1,000,000 chunks a warm dense search took 652 ms after the pass, and at
500,000 half filled one ANALYZE took it from about 230 ms to 33
(docs/results/amd-epyc-avx512bf16/store_two_speed.md).

So the writer analyses the chunks itself (`keep`, after each seal) when the statistics'
count of full vectors is off from the segments' rows by more than `DRIFT` either way, or
the column has no statistics: O(log n) times in a pass (each time the count has doubled:
at 10,000, 20,000, 40,000 and 80,000 of 100,000 full vectors sealed 10,000 at a time),
each reading a sample of the table (`default_statistics_target` x 300 rows, 30,000 at the
server's default: 0.3 to 0.7 s at 100,000 chunks).
"""

from __future__ import annotations

import logging
import time
from typing import Any

log = logging.getLogger("attnswitch.indexing.store_postgres")  # the store's own log

# How far (a ratio, either way) the statistics' count of full vectors may drift from the
# store's before the chunks are analysed again.
DRIFT = 2.0
# The chunks the planner's statistics count (rows: `pg_class.reltuples`, -1 where never
# counted) and the fraction of them whose `embedding` is null (none where the column was
# never analysed, or made again: `postgres_columns.type_full_column`).
PLANNED_SQL = (
    "SELECT GREATEST(c.reltuples, 0), s.null_frac FROM pg_class c LEFT JOIN pg_stats s ON "
    "s.schemaname = current_schema() AND s.tablename = 'chunks' AND s.attname = 'embedding' "
    "WHERE c.oid = 'chunks'::regclass"
)


def planned_full(conn: Any) -> float | None:
    """How many chunks with a full vector the planner's statistics count; None where they
    have no statistics of the column (the planner then takes almost every chunk to have
    one)."""
    rows, null_frac = conn.execute(PLANNED_SQL).fetchone()
    return None if null_frac is None else float(rows) * (1 - float(null_frac))


def drifted(planned: float | None, full: int) -> bool:
    """Whether a count of `planned` full vectors (None: unknown) is off from the `full`
    stored by more than `DRIFT` either way (counts below 1 taken as 1)."""
    if planned is None:
        return True
    planned, stored = max(planned, 1.0), max(float(full), 1.0)
    return stored > DRIFT * planned or planned > DRIFT * stored


def keep(conn: Any, full: int) -> bool:
    """ANALYZE the chunks when the planner's statistics count of full vectors has
    `drifted` from the `full` vectors stored (on `conn`, autocommit: its own transaction,
    whose SHARE UPDATE EXCLUSIVE lock lets searches and fills go on). Whether it did."""
    planned = planned_full(conn)
    if not drifted(planned, full):
        return False
    started = time.monotonic()
    conn.execute("ANALYZE chunks")
    log.info(
        "chunks analysed: the statistics counted %s full vectors of %s (%.1f s)",
        "no" if planned is None else f"{planned:,.0f}",
        f"{full:,}",
        time.monotonic() - started,
    )
    return True
