"""The PostgreSQL store's HNSW index of the full vectors, kept in segments
(docs/architecture.md, "The full vectors' segments in PostgreSQL").

pgvector maintains an HNSW index row by row, and that bound a full pass: 124 chunks/s at
100,000 chunks, against 3,234/s written with no graph to maintain (16x, at 20,000), where
one CREATE INDEX over rows already in builds about 3,000 rows/s
(docs/results/amd-epyc-avx512bf16/store_two_speed.md). So the full vectors are indexed as
a log-structured merge tree indexes its writes:

- every full vector is written with the store's current generation G (the chunks'
  `full_gen`, `GENERATION_SQL`: meta "full_gen", 0 when unset);
- the chunks of generations below G are covered, each once, by segments: partial HNSW
  indexes named `chunks_full_<lo>_<hi>` (`WHERE embedding IS NOT NULL AND full_gen >= lo
  AND full_gen < hi`) whose ranges tile [0, G), each with its rows when it was built as
  its comment (`COMMENT ON INDEX`: PostgreSQL's own count, `pg_class.reltuples`, is
  overwritten by each ANALYZE with an estimate from a sample);
- the chunks of generation G and above, the tail, are in no graph: PostgreSQL writes them
  without touching one, and a search ranks them exactly (`parts`), found by a b-tree of
  their own (`chunks_tail_<G>`, `WHERE ... full_gen >= G`, made again empty at each seal:
  a b-tree over every generation misled the planner into ranking a whole segment exactly
  instead of walking its graph, when its statistics were older than the segment).
  `seal` makes the tail a segment of its own once it holds `SEAL_AT` chunks (one CREATE
  INDEX, and G moves on), so an exact scan never ranks more;
- after a seal, the newest segments are merged into one while `FANIN` of them share a tier
  and hold at most `segment_tiers.LARGEST` rows together (`segment_tiers.merge_count`: rows
  in powers of `FANIN` past `SEAL_AT`), so a store holds O(log n) segments and each vector
  is built into a graph O(log n) times;
- each build asks for the memory its graph needs (`build_memory_kb`, for its transaction
  only, never less than the server's own `maintenance_work_mem`): past that setting
  pgvector goes on building on disk, several times slower, and a server's default (64 MB)
  holds some 43,000 vectors of 384 dimensions.

A vector written with a generation below G (a search's fill that read G before a seal
committed) satisfies a segment's predicate, so PostgreSQL adds it to that segment's graph
itself: no full vector is ever outside both a segment and the tail. Each seal and merge is
one transaction (the new index made, the old ones dropped, G moved): a process killed
during one leaves the segments it found.
"""

from __future__ import annotations

import logging
import math
import re
import time
from dataclasses import dataclass
from typing import Any

from attnswitch.indexing import postgres_statistics
from attnswitch.indexing.segment_tiers import LARGEST, merge_count

log = logging.getLogger("attnswitch.indexing.store_postgres")  # the store's own log

# HNSW graph parameters (the quick list's index has the same): pgvector's default m=16,
# and ef_construction 128, not its default 64: at 1M chunks and a beam of 128, a graph
# built with 64 gave recall@10 0.79, with 128 0.96 (docs/results/search.md).
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 128
# The tail is sealed into a segment once it holds this many chunks. Its exact scan reads
# each row: 34 ms for 10,000 rows written by the full pass's UPDATEs (new row versions,
# scattered), against 1.4 ms for a segment of 20,000 walked by its graph.
SEAL_AT = 5_000
# What pgvector's HNSW build (m = 16) holds a vector: its value, 2 bytes a dimension as
# halfvec, and about 780 bytes of element and neighbour lists: 43,391 vectors of 384
# dimensions filled 64 MB (1,547 bytes each: "hnsw graph no longer fits into
# maintenance_work_mem after 43391 tuples"). A build asks for `BUILD_MARGIN` times that.
BUILD_BYTES_A_VECTOR = 780
BUILD_MARGIN = 1.2
# The setting (a database's or role's, in PostgreSQL's units) that bounds what a build asks.
BUILD_MEMORY_LIMIT = "attnswitch.build_memory_limit"
# The generation new full vectors are written with, as SQL (one row, one integer).
GENERATION_SQL = "SELECT COALESCE((SELECT value::bigint FROM meta WHERE key = 'full_gen'), 0)"
# The one HNSW index of the full vectors of a store made before segments.
LEGACY_INDEX = "chunks_embedding_hnsw"
_NAME = re.compile(r"chunks_full_(\d+)_(\d+)")
_TAIL = re.compile(r"chunks_tail_(\d+)")


@dataclass(frozen=True)
class Segment:
    """One partial HNSW index of the full vectors: generations [lo, hi); `rows`: its
    entries when it was built (its comment; for a segment made before comments,
    PostgreSQL's count now, `pg_class.reltuples`)."""

    lo: int
    hi: int
    rows: int

    @property
    def name(self) -> str:
        return f"chunks_full_{self.lo}_{self.hi}"

    @property
    def condition(self) -> str:
        """Its generations, as SQL."""
        return f"full_gen >= {self.lo} AND full_gen < {self.hi}"

    @property
    def predicate(self) -> str:
        """Its index's predicate, which a search's WHERE repeats (`parts`) for PostgreSQL
        to use the index (literals: a parameter's generic plan could not)."""
        return f"embedding IS NOT NULL AND {self.condition}"


def layout(conn: Any) -> tuple[int, list[Segment]]:
    """The generation G new full vectors get and the segments (oldest first), read in one
    statement (one snapshot: a seal or merge committing meanwhile is seen whole or not)."""
    generation, indexes = _catalog(conn)
    segments = []
    for name, rows in indexes:
        found = _NAME.fullmatch(name)
        if found:
            segments.append(Segment(int(found[1]), int(found[2]), rows))
    return generation, sorted(segments, key=lambda s: s.lo)


def _catalog(conn: Any) -> tuple[int, list[tuple[str, int]]]:
    """G, and each index of the chunks with its entries: a segment's comment (`build`),
    else PostgreSQL's count (`pg_class.reltuples`)."""
    row = conn.execute(
        f"SELECT ({GENERATION_SQL}), ARRAY(SELECT c.relname || ' ' || COALESCE(substring("
        "obj_description(c.oid, 'pg_class') FROM '^[0-9]+$'), GREATEST(c.reltuples, 0)::bigint"
        "::text) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE i.indrelid = 'chunks'::regclass)"
    ).fetchone()
    return int(row[0]), [(name, int(rows)) for name, rows in (e.split(" ") for e in row[1])]


def keep_tail_index(conn: Any) -> None:
    """Make the tail's b-tree for the current generation when it is missing, and drop
    those of other generations, inside the caller's transaction (the catalog read first:
    CREATE INDEX takes a SHARE lock on the chunks even when the index exists)."""
    generation, indexes = _catalog(conn)
    tails = {int(found[1]) for name, _ in indexes if (found := _TAIL.fullmatch(name))}
    if generation not in tails:
        conn.execute(
            f"CREATE INDEX chunks_tail_{generation} ON chunks (id) WHERE embedding IS NOT "
            f"NULL AND full_gen >= {generation}"
        )
    for stale in tails - {generation}:
        conn.execute(f"DROP INDEX IF EXISTS chunks_tail_{stale}")


def parts(generation: int, segments: list[Segment]) -> list[tuple[str, bool]]:
    """The conditions a dense search ranks the full vectors under, each with whether an
    HNSW index serves it: one per segment, then the tail (exactly)."""
    return [(s.predicate, True) for s in segments] + [
        (f"embedding IS NOT NULL AND full_gen >= {generation}", False)
    ]


def tail_size(conn: Any, generation: int, limit: int) -> int:
    """How many full vectors of generation `generation` or later there are, counted up
    to `limit`."""
    (count,) = conn.execute(
        "SELECT COUNT(*) FROM (SELECT 1 FROM chunks WHERE embedding IS NOT NULL AND "
        "full_gen >= %s LIMIT %s) t",
        (generation, limit),
    ).fetchone()
    return int(count)


def build_memory_kb(rows: int, dim: int) -> int:
    """The `maintenance_work_mem` (kB) under which pgvector builds a graph of `rows`
    vectors of `dim` dimensions in memory, for at most `segment_tiers.LARGEST` rows (a
    store from before segments may build more in one, `prepare`)."""
    need = min(rows, LARGEST) * (2 * dim + BUILD_BYTES_A_VECTOR) * BUILD_MARGIN
    return math.ceil(need / 1024)


def fit_build_memory(conn: Any, column: str, rows: int) -> None:
    """Raise `maintenance_work_mem` for the caller's transaction to `build_memory_kb` of
    `rows` vectors of the chunks' `column`, when the server's own setting is lower (past it
    pgvector goes on building on disk: docs/architecture.md, "The full vectors' segments in
    PostgreSQL"), and at most to `BUILD_MEMORY_LIMIT` where the database or role sets it
    (`ALTER DATABASE ... SET attnswitch.build_memory_limit = '1GB'`)."""
    dim, have_kb, limit_kb = conn.execute(
        "SELECT (SELECT atttypmod FROM pg_attribute WHERE attrelid = 'chunks'::regclass "
        "AND attname = %s), (SELECT setting::bigint FROM pg_settings WHERE name = "
        "'maintenance_work_mem'), pg_size_bytes(NULLIF(current_setting(%s, true), '')) / 1024",
        (column, BUILD_MEMORY_LIMIT),
    ).fetchone()
    if dim is None or int(dim) < 1:  # untyped: pgvector builds no graph of it
        return
    want_kb = build_memory_kb(rows, int(dim))
    if limit_kb is not None:
        want_kb = min(want_kb, int(limit_kb))
    if want_kb > int(have_kb):
        conn.execute("SELECT set_config('maintenance_work_mem', %s, true)", (f"{want_kb}kB",))


def build(conn: Any, lo: int, hi: int, rows: int) -> Segment:
    """Make the segment of generations [lo, hi), which holds about `rows` vectors (one
    CREATE INDEX, given the memory for them: it holds a SHARE lock on the chunks until the
    caller's transaction ends, so searches read on and writes wait), its entries (counted
    by the build) kept as its comment."""
    segment = Segment(lo, hi, 0)
    fit_build_memory(conn, "embedding", rows)
    conn.execute(
        f"CREATE INDEX {segment.name} ON chunks USING hnsw (embedding halfvec_ip_ops) WITH "
        f"(m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION}) "
        f"WHERE {segment.predicate}"
    )
    (rows,) = conn.execute(
        "SELECT GREATEST(reltuples, 0)::bigint FROM pg_class WHERE relname = %s "
        "AND relnamespace = current_schema()::regnamespace",
        (segment.name,),
    ).fetchone()
    conn.execute(f"COMMENT ON INDEX {segment.name} IS '{int(rows)}'")
    return Segment(lo, hi, int(rows))


def set_generation(conn: Any, generation: int) -> None:
    conn.execute(
        "INSERT INTO meta VALUES ('full_gen', %s) ON CONFLICT (key) DO UPDATE SET "
        "value = excluded.value",
        (str(generation),),
    )


def seal(conn: Any, *, at: int = SEAL_AT) -> bool:
    """Make the tail a segment when it holds at least `at` full vectors (`at` 1: whenever
    it holds any), then merge the newest segments while `FANIN` of them share a tier; each
    step one transaction on `conn` (autocommit), under the caller's run lock. Then analyse
    the chunks when the planner's statistics count too few or too many full vectors
    (`postgres_statistics.keep`: the builds' locks starve autovacuum). Whether it sealed."""
    started = time.monotonic()
    with conn.transaction():
        generation, segments = layout(conn)
        tail = tail_size(conn, generation, max(at, LARGEST))
        if tail < max(1, at):
            return False
        sealed = build(conn, generation, generation + 1, tail)
        set_generation(conn, generation + 1)
        keep_tail_index(conn)
    segments.append(sealed)
    log.info(
        "full vectors' segment %s made (%s chunks, %.1f s)",
        sealed.name,
        f"{sealed.rows:,}",
        time.monotonic() - started,
    )
    while count := merge_count([s.rows for s in segments], at, LARGEST):
        merged = segments[-count:]
        started = time.monotonic()
        with conn.transaction():
            into = build(conn, merged[0].lo, merged[-1].hi, sum(s.rows for s in merged))
            for segment in merged:
                conn.execute(f"DROP INDEX IF EXISTS {segment.name}")
        segments[-count:] = [into]
        log.info(
            "full vectors' segments %s merged into %s (%s chunks, %.1f s)",
            ", ".join(s.name for s in merged),
            into.name,
            f"{into.rows:,}",
            time.monotonic() - started,
        )
    postgres_statistics.keep(conn, sum(s.rows for s in segments))
    return True


def drop_all(conn: Any) -> None:
    """Drop every segment (and a store's index from before segments), inside the caller's
    transaction: the column is typed again for another dimension (no vector is stored)."""
    conn.execute(f"DROP INDEX IF EXISTS {LEGACY_INDEX}")
    for segment in layout(conn)[1]:
        conn.execute(f"DROP INDEX IF EXISTS {segment.name}")


def prepare(conn: Any, *, converted: bool) -> None:
    """Make an opened store's full vectors ready for `parts`, inside the caller's
    transaction: a store made before segments (one HNSW index, `LEGACY_INDEX`, over every
    full vector, maintained row by row; or its float32 vectors just `converted` to float16,
    that index dropped) gets its vectors as the segment of generation 0, and generation 1
    next; and the tail's b-tree is made when missing (`keep_tail_index`)."""
    legacy = any(name == LEGACY_INDEX for name, _ in _catalog(conn)[1])
    if legacy or converted:
        generation, segments = layout(conn)
        if generation == 0 and not segments and (rows := tail_size(conn, 0, LARGEST)):
            started = time.monotonic()
            segment = build(conn, 0, 1, rows)
            set_generation(conn, 1)
            log.info(
                "full vectors of a store from before segments made %s (%s chunks, %.1f s)",
                segment.name,
                f"{segment.rows:,}",
                time.monotonic() - started,
            )
        conn.execute(f"DROP INDEX IF EXISTS {LEGACY_INDEX}")
    keep_tail_index(conn)
