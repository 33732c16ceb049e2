"""The PostgreSQL + pgvector store: `--db postgresql://USER[:PASSWORD]@HOST[:PORT]/DBNAME`.

The same contract as `store.SQLiteStore` (see `store.Store`), on a server many processes
and nodes can write to at once (Ray's encoder actors write their own documents):

- Each document is written in one transaction (its row upserted, which locks it; its
  chunks deleted and copied in with `COPY`), so a writer killed at any moment leaves it
  whole, and two writers of one document are serialised.
- Vectors are pgvector `halfvec(dim)` columns (float16, `records.VECTOR_DTYPE`, as the
  SQLite store keeps them; pgvector 0.7 or later), L2-normalised; dense search is
  pgvector's HNSW indexes on inner product (`halfvec_ip_ops`; `hnsw.ef_search`: the call's
  beam, else the store's `ef_search`, default `store.EF_SEARCH`), the query rounded to
  float16 too. The full vectors' index is kept in segments, each built in one piece, and
  the latest vectors (the tail, fewer than `seal_at` between runs) are ranked exactly
  (`postgres_segments`: pgvector maintaining one index row by row bound a full pass to
  124 chunks/s at 100,000 chunks). A store made with `vector(dim)` (float32) is converted
  when opened (`upgrade`: the column's type changed in place, its vectors made one
  segment).
- The quick list (`quick`: the static model's vectors of the chunks still without a full
  vector) is searched as the dense list is, by a partial HNSW index of its own
  (`chunks_quick_hnsw`, `WHERE embedding IS NULL`), made when a run ends with at least
  `quick_exact_below` such chunks (`sync_index`; maintained row by row it made the quick
  pass's inserts 8 to 19 times slower) and dropped below; without it the list is an exact scan.
- Keyword search is PostgreSQL full-text search over the analyzer's terms (`analyzer`,
  the same terms as the SQLite store's): a `tsvector` column written with each chunk (a
  literal, so PostgreSQL's parser never re-splits a term) with a GIN index, ranked by
  `ts_rank` (how often and how many of the query's terms a chunk holds), any query term
  matching. Not `ts_rank_cd` (cover
  density), which ranks on spans holding the words close together: for queries of any
  word it lost 0.19 to 0.40 of keyword MRR@10 against `ts_rank` on headings, partial
  sentences and questions (docs/results/search_quality.md).
- One run at a time per database: a session advisory lock (released when the run ends or
  its process dies, `kill -9` included).
- A connection lost under a write, a run's end or a single read (the server restarting) is
  opened again with backoff for up to `RECONNECT_FOR_S` seconds (`$ATTNSWITCH_PG_RECONNECT_S`
  where set: a failover that takes longer; the run lock taken again),
  and the write, whose transaction was rolled back, is done again; past that the store
  raises `StoreConnectError`, and the next run finishes what was not committed.

Needs psycopg 3 and pgvector's Python adapter (`pip install 'attnswitch[postgres]'`) and
the pgvector extension, 0.7 or later, on the server (Debian: postgresql-NN-pgvector).
Connection problems, a missing or older extension and a wrong URL raise
`StoreConnectError` with one line.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from attnswitch.documents.ingest import Document
from attnswitch.indexing import analyzer, postgres_vacuum
from attnswitch.indexing.filters import SearchFilter
from attnswitch.indexing.postgres_columns import expect_full_dim, fix_full_dim
from attnswitch.indexing.postgres_nearest import NearestVectors
from attnswitch.indexing.postgres_schema import (
    DIM_LOCK,
    QUICK_EXACT_BELOW,
    QUICK_HNSW,
    QUICK_HNSW_INDEX,
    QUICK_ONLY_COUNT,
    RUN_LOCK,
    column_dim,
    connect,
    describe,
    first_line,
    upgrade,
)
from attnswitch.indexing.postgres_segments import (
    GENERATION_SQL,
    SEAL_AT,
    fit_build_memory,
    seal,
)
from attnswitch.indexing.postgres_upgrades import type_quick_column
from attnswitch.indexing.records import (
    CHUNK_SELECT,
    EF_SEARCH,
    MAX_QUERY_TERMS,
    MIGRATED,
    SCHEMA_VERSION,
    ChunkLike,
    ChunkRow,
    StoreStatus,
    check_ef_search,
    root_key,
)
from attnswitch.indexing.segment_tiers import LARGEST
from attnswitch.indexing.store_base import StoreBase
from attnswitch.indexing.store_errors import (
    StoreBusyError,
    StoreConnectError,
    StoreDeadlineError,
    StoreInputError,
)
from attnswitch.indexing.store_passes import VectorPasses
from attnswitch.indexing.write_groups import document_rows

log = logging.getLogger(__name__)
T = TypeVar("T")
# How long a run waits for another's run lock before it is refused as busy.
RUN_LOCK_WAIT_S = 2.0
# A lost connection (the server restarting, a network cut) is opened again, with a backoff
# from RECONNECT_FIRST_S doubling to RECONNECT_MAX_S between tries, for up to RECONNECT_FOR_S
# seconds; then the store raises `StoreConnectError` (every document is committed whole or
# not at all, so the next run finishes the job).
RECONNECT_FOR_S = 30.0
RECONNECT_ENV = "ATTNSWITCH_PG_RECONNECT_S"
RECONNECT_FIRST_S = 0.25
RECONNECT_MAX_S = 4.0
# Under a deadline, a statement's `statement_timeout` is set again to the time left when
# that has shrunk by more than this since it was last set (`_DeadlineConnection`).
TIMEOUT_SLACK_MS = 50


def reconnect_window(environ: Mapping[str, str]) -> float:
    """Seconds a lost connection is tried again for: `$ATTNSWITCH_PG_RECONNECT_S` where
    set (0 or more; 0: never), else `RECONNECT_FOR_S`."""
    raw = environ.get(RECONNECT_ENV, "").strip()
    if not raw:
        return RECONNECT_FOR_S
    try:
        seconds = float(raw)
    except ValueError:
        seconds = -1.0
    if not 0 <= seconds < float("inf"):
        raise StoreInputError(f"${RECONNECT_ENV}", "seconds, 0 or more", repr(raw))
    return seconds


def _array(value: Any) -> np.ndarray:
    """A stored vector as float32 `[dim]` (pgvector's adapter gives a `HalfVector`)."""
    return np.asarray(value.to_numpy() if hasattr(value, "to_numpy") else value, np.float32)


class _DeadlineConnection:
    """A psycopg connection whose statements (`execute`) each run with PostgreSQL's
    `statement_timeout` at most the time left until `at` (a `time.monotonic()` time), plus
    `TIMEOUT_SLACK_MS`: the server cancels a statement still running then. A statement
    asked for after `at` is not sent (`StoreDeadlineError`). Every other attribute is the
    connection's (`raw`)."""

    def __init__(self, raw: Any, at: float):
        self.raw = raw
        self.at = at
        self._timeout_ms: int | None = None  # as last set on the session

    def execute(self, query: Any, params: Any = None, **kwargs: Any) -> Any:
        left_ms = int((self.at - time.monotonic()) * 1000)
        if left_ms <= 0:
            raise StoreDeadlineError()
        if self._timeout_ms is None or self._timeout_ms - left_ms > TIMEOUT_SLACK_MS:
            self.raw.execute(f"SET statement_timeout = {left_ms}")
            self._timeout_ms = left_ms
        return self.raw.execute(query, params, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.raw, name)


class PostgresStore(StoreBase, VectorPasses, NearestVectors):
    """A PostgreSQL database with pgvector (see the module doc). `url` is a libpq URL;
    use as a context manager or call `close()`."""

    _mark = "%s"
    _differs = "IS DISTINCT FROM"
    _vector_column = "embedding"
    _copied_columns = "vector_key, language, terms, quick, prefix, full_gen"
    _filled_with = f", full_gen = ({GENERATION_SQL})"

    def __init__(
        self,
        url: str,
        *,
        ef_search: int | None = None,
        quick_exact_below: int = QUICK_EXACT_BELOW,
        seal_at: int = SEAL_AT,
    ):
        self.url = url
        self.quick_exact_below = quick_exact_below
        self.seal_at = seal_at
        # full vectors this process wrote under the run lock since it last sealed (`_written`)
        self._unsealed = 0
        # whether this process sealed since it last vacuumed the chunks (`_vacuum`)
        self._starved = False
        self.location = describe(url)
        self.ef_search = check_ef_search(EF_SEARCH if ef_search is None else ef_search)
        self._conn = connect(url)
        self.migrated: str | None = None
        try:
            if upgrade(self._conn):
                self.migrated = MIGRATED.format(where=self.location, version=SCHEMA_VERSION)
                log.info("%s", self.migrated)
        except BaseException:
            self._conn.close()
            raise
        self._run_locked = False
        self._in_transaction = 0
        self._scan_on: bool | None = None  # pgvector's iterative index scan (`dense`)
        # the vectors' dimension once known: the column's type is fixed by the first
        # vectors (`_fix_dim`), so a search reads it once, not twice a search
        self._dim: int | None = None
        self._quick_dim: int | None = None  # the quick column's, once typed (`_fix_quick_dim`)
        # seconds a lost connection is tried again for (a server's search sets 0: it
        # answers 503 at once rather than holding the request)
        self.reconnect_for_s = reconnect_window(os.environ)
        self._gone = False  # reconnecting failed for RECONNECT_FOR_S: no more waiting
        self.store_id = self.meta("store_id")
        if self.store_id is None:
            import uuid

            self._conn.execute(
                "INSERT INTO meta VALUES ('store_id', %s) ON CONFLICT (key) DO NOTHING",
                (uuid.uuid4().hex,),
            )
            self.store_id = self.meta("store_id")

    # -- lifecycle ------------------------------------------------------------------

    def close(self) -> None:
        self._conn.close()

    def own_files(self) -> set[Path]:
        return set()  # it keeps everything on its server

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[Any]:
        self._in_transaction += 1
        try:
            with self._conn.transaction():
                yield self._conn
        finally:
            self._in_transaction -= 1

    # -- deadlines (`StoreBase.deadline`) --------------------------------------------

    def _arm_deadline(self, at: float) -> None:
        if isinstance(self._conn, _DeadlineConnection):  # a nested deadline: the earlier
            self._conn.at = at
        else:
            self._conn = _DeadlineConnection(self._conn, at)

    def _disarm_deadline(self) -> None:
        import psycopg

        if not isinstance(self._conn, _DeadlineConnection):
            return  # opened again meanwhile (`_reconnect`): no timeout was set on it
        self._conn = conn = self._conn.raw
        if not (conn.closed or conn.broken):
            with contextlib.suppress(psycopg.Error):
                conn.execute("RESET statement_timeout")

    def _deadline_passed(self, exc: BaseException) -> bool:
        import psycopg

        return isinstance(exc, psycopg.errors.QueryCanceled)

    def _one(self, sql: str, params: Sequence[Any] = ()) -> Any:
        return self._retrying(lambda: self._conn.execute(sql, params).fetchone())

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        return self._retrying(lambda: self._conn.execute(sql, params).fetchall())

    def _in_list(self, column: str, values: Sequence[str]) -> tuple[str, list[Any]]:
        return f"{column} = ANY(%s)", [list(values)]

    def _pairs(self, pairs: Sequence[tuple[str, str]]) -> tuple[str, tuple[Any, ...]]:
        """`StoreBase._pairs` as two text arrays unnested side by side."""
        return (
            "(SELECT * FROM unnest(%s::text[], %s::text[]) AS u(a, b))",
            ([a for a, _ in pairs], [b for _, b in pairs]),
        )

    # -- lost connections -----------------------------------------------------------

    def _retrying(self, fn: Callable[[], T]) -> T:
        """`fn()`, done again on a new connection when the connection is lost (see the
        module doc); inside a transaction it is left to the outer call to do it again."""
        import psycopg

        if self._in_transaction:
            return fn()
        delay, deadline = RECONNECT_FIRST_S, None
        while True:
            try:
                return fn()
            except (psycopg.OperationalError, psycopg.InterfaceError) as exc:
                if not (self._conn.closed or self._conn.broken):
                    raise  # the server answered: not a lost connection
                deadline = deadline or time.monotonic() + (
                    0 if self._gone else self.reconnect_for_s
                )
                delay = self._reconnect(exc, delay, deadline)

    def _reconnect(self, lost: BaseException, delay: float, deadline: float) -> float:
        """Open a new connection (taking the run lock again if this store held it),
        waiting `delay` s before each try until `deadline`; the next delay."""
        while True:
            if time.monotonic() >= deadline:
                self._gone = True
                raise StoreConnectError(
                    f"{self.location}: expected the PostgreSQL server to answer, got no "
                    f"connection for {self.reconnect_for_s:g} s ({first_line(lost)}); every "
                    "document is committed whole or not at all: run again when it is back "
                    "to finish"
                ) from None
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(2 * delay, RECONNECT_MAX_S)
            try:
                conn = connect(self.url)
            except StoreConnectError:
                continue
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn, self._gone = conn, False
            if (
                self._run_locked
                and not self._one("SELECT pg_try_advisory_lock(%s)", (RUN_LOCK,))[0]
            ):
                self._run_locked = False
                raise StoreBusyError(
                    f"{self.location}: another attnswitch run took this "
                    "store while the server was away; run again to finish"
                )
            return delay

    def record_skip(self, doc: Document, *, config: str = "", run_id: int | None = None) -> int:
        return self._retrying(
            lambda: super(PostgresStore, self).record_skip(doc, config=config, run_id=run_id)
        )

    def open_run(self, root: str | os.PathLike[str] | None = None, config: str = "") -> int:
        return self._retrying(lambda: super(PostgresStore, self).open_run(root, config))

    def fill_vectors(self, ids: Sequence[int], keys: Sequence[str | None], vectors: Any) -> int:
        written = self._retrying(
            lambda: super(PostgresStore, self).fill_vectors(ids, keys, vectors)
        )
        self._written(written)
        return written

    def close_run(
        self,
        run_id: int,
        status: str = "completed",
        *,
        counts: dict[str, Any] | None = None,
        summary: dict[str, Any] | None = None,
    ) -> None:
        self._retrying(
            lambda: super(PostgresStore, self).close_run(
                run_id, status, counts=counts, summary=summary
            )
        )

    # -- reading the stored state ---------------------------------------------------

    @property
    def dim(self) -> int | None:
        if self._dim is None:
            value = self.meta("dim")
            self._dim = int(value) if value is not None else None
        return self._dim

    def meta(self, key: str) -> str | None:
        row = self._one("SELECT value FROM meta WHERE key = %s", (key,))
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        if key == "dim":
            raise StoreInputError("key", "a key other than 'dim' (the store keeps it)", "'dim'")
        self._retrying(
            lambda: self._conn.execute(
                "INSERT INTO meta VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET "
                "value = excluded.value",
                (key, value),
            )
        )

    # -- writing --------------------------------------------------------------------

    def write_document(
        self,
        doc: Document,
        chunks: Sequence[ChunkLike],
        vectors: Any,
        *,
        quick: Any = None,
        config: str = "",
        run_id: int | None = None,
        vector_fingerprint: str | None = None,
    ) -> int:
        """Replace `doc`'s chunks and vectors with these, in one transaction (see
        `SQLiteStore.write_document`), done again on a new connection if it is lost."""
        doc_id = self._retrying(
            lambda: self._write_document(
                doc,
                chunks,
                vectors,
                quick=quick,
                config=config,
                run_id=run_id,
                vector_fingerprint=vector_fingerprint,
            )
        )
        if vectors is not None:
            self._written(len(chunks))
        return int(doc_id)

    def _write_document(
        self,
        doc: Document,
        chunks: Sequence[ChunkLike],
        vectors: Any,
        *,
        quick: Any = None,
        config: str = "",
        run_id: int | None = None,
        vector_fingerprint: str | None = None,
    ) -> int:
        if not doc.ok:
            raise StoreInputError(
                "doc",
                "a document with text (use record_skip)",
                f"{doc.source!r} skipped: {doc.reason}",
            )
        from pgvector import HalfVector

        model = self.quick_model() if quick is not None else None
        prepared = document_rows(
            chunks, vectors, quick, None if model is None else model["dim"], vector_fingerprint
        )
        with self._transaction() as conn:
            if prepared.vectors is not None and len(chunks):
                self._fix_dim(conn, prepared.vectors.shape[1])
            if prepared.quick is not None and len(chunks):
                self._fix_quick_dim(conn, prepared.quick.shape[1])
            doc_id = self._upsert(
                conn,
                doc,
                "indexed",
                config,
                run_id,
                n_chunks=len(chunks),
                n_tokens=prepared.n_tokens,
            )
            conn.execute("DELETE FROM chunks WHERE doc_id = %s", (doc_id,))
            (generation,) = conn.execute(GENERATION_SQL).fetchone()
            with conn.cursor().copy(
                "COPY chunks (doc_id, ordinal, text, n_tokens, char_start, char_end, "
                "heading_path, location, vector_key, language, prefix, terms, embedding, "
                "quick, full_gen) FROM STDIN"
            ) as copy:
                for group in prepared.groups():
                    for i, row in enumerate(group.rows):
                        terms = analyzer.tsvector_literal(
                            analyzer.document_terms(row[0], row[7]),
                            analyzer.document_stems(row[0], row[7]),
                        )
                        copy.write_row(
                            (
                                doc_id,
                                group.first + i,
                                *row,
                                terms,
                                None if group.vectors is None else HalfVector(group.vectors[i]),
                                None if group.quick is None else HalfVector(group.quick[i]),
                                generation,
                            )
                        )
        return doc_id

    def _fix_dim(self, conn: Any, dim: int) -> None:
        """Hold the store to one dimension: the first vectors set it (`fix_full_dim`)."""
        if self.dim == dim:
            return
        self._dim = None  # read again, once committed
        fix_full_dim(conn, dim)

    def expect_dim(self, dim: int) -> None:
        """The full vectors' column typed `halfvec(dim)` while the store holds none
        (`postgres_columns.expect_full_dim`), so that their first fill does not type it."""

        def typed() -> None:
            with self._transaction() as conn:
                expect_full_dim(conn, int(dim))

        self._retrying(typed)

    def set_quick_model(self, fingerprint: str, dim: int) -> None:
        """`VectorPasses.set_quick_model` (quick vectors of another model dropped), then the
        quick column typed `halfvec(dim)` (`_fix_quick_dim`)."""

        def typed() -> None:
            with self._transaction() as conn:
                self._fix_quick_dim(conn, int(dim))

        self._retrying(lambda: super(PostgresStore, self).set_quick_model(fingerprint, dim))
        self._retrying(typed)

    def _fix_quick_dim(self, conn: Any, dim: int) -> None:
        """Type the quick column `halfvec(dim)` (what the quick list's HNSW index needs),
        under the dimension lock, its index dropped first (`type_quick_column`); refused
        (`StoreInputError` naming `quick`) while quick vectors of another dimension are
        stored, which only `set_quick_model` drops."""
        if self._quick_dim == dim:
            return
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (DIM_LOCK,))
        typed = column_dim(conn, "quick")
        if typed == dim:
            self._quick_dim = dim  # committed: kept (an ALTER below is checked again)
            return
        if (
            typed is not None
            and conn.execute(
                "SELECT EXISTS (SELECT 1 FROM chunks WHERE quick IS NOT NULL)"
            ).fetchone()[0]
        ):
            raise StoreInputError(
                "quick",
                f"dimension {typed} (this store's quick vectors)",
                f"{dim}: quick vectors of a static model of another dimension are "
                "written after set_quick_model names it (which drops the stored ones)",
            )
        conn.execute(f"DROP INDEX IF EXISTS {QUICK_HNSW}")
        type_quick_column(conn, int(dim))

    def _id_list(self, ids: list[int]) -> tuple[str, tuple[Any, ...]]:
        return "= ANY(%s)", (ids,)

    def _packed(self, row: np.ndarray) -> Any:
        from pgvector import HalfVector

        return HalfVector(row)

    def _hold_dim(self, conn: Any, dim: int) -> None:
        self._fix_dim(conn, dim)

    def touch(self, doc: Document) -> None:
        def touch() -> None:
            with self._transaction() as conn:
                access = self._keep_access(conn, doc.access)
                conn.execute(
                    "UPDATE documents SET size = %s, mtime_ns = %s, access = "
                    "COALESCE(%s, access) WHERE root = %s AND source = %s AND "
                    "sha256 IS NOT DISTINCT FROM %s",
                    (doc.size, doc.mtime_ns, access, doc.root, doc.source, doc.sha256),
                )

        self._retrying(touch)

    def remove(self, root: str | os.PathLike[str], sources: Iterable[str]) -> int:
        key, sources = root_key(root), list(sources)

        def remove() -> int:
            with self._transaction() as conn:
                return int(
                    conn.execute(
                        "DELETE FROM documents WHERE root = %s AND source = ANY(%s)", (key, sources)
                    ).rowcount
                )

        return self._retrying(remove)

    def _upsert(
        self,
        conn: Any,
        doc: Document,
        status: str,
        config: str,
        run_id: int | None,
        *,
        n_chunks: int = 0,
        n_tokens: int = 0,
    ) -> int:
        values = self._document_values(doc, status, config, run_id, n_chunks, n_tokens)
        self._keep_access(conn, doc.access)
        cols = ", ".join(values)
        marks = ", ".join(f"%({c})s" for c in values)
        updates = ", ".join(f"{c} = excluded.{c}" for c in values if c not in ("root", "source"))
        return int(
            conn.execute(
                f"INSERT INTO documents ({cols}) VALUES ({marks}) "
                f"ON CONFLICT (root, source) DO UPDATE SET {updates} RETURNING id",
                values,
            ).fetchone()[0]
        )

    # -- runs -----------------------------------------------------------------------

    def _lock_run(self) -> None:
        """Take the run lock, waiting up to `RUN_LOCK_WAIT_S` for it: the server session of
        a run killed a moment ago (kill -9) holds it until the server has noticed the
        closed connection."""
        if self._run_locked:
            raise StoreBusyError(f"{self.location}: this store already has a run in progress")
        deadline = time.monotonic() + RUN_LOCK_WAIT_S
        while not self._one("SELECT pg_try_advisory_lock(%s)", (RUN_LOCK,))[0]:
            if time.monotonic() >= deadline:
                raise StoreBusyError(
                    f"{self.location}: another attnswitch run is writing "
                    "this store; wait for it or use another --db"
                )
            time.sleep(0.05)
        self._run_locked = True

    def _holds_run_lock(self) -> bool:
        return self._run_locked

    def _run_finished(self, status: str) -> None:
        if status == "completed":
            self.sync_index()

    def sync_index(self) -> None:
        """Bring the store's HNSW indexes up to date: the full vectors' tail sealed into a
        segment once it holds `seal_at` of them (`postgres_segments.seal`), and the quick
        list's index made or dropped (`_sync_quick`). Called when a run completes
        (`close_run`) and when a writer's block that wrote ends (`writer.IndexWriter`),
        under the run lock. Each build holds a SHARE lock on the chunks: searches read on,
        writes wait for it. Then, after seals, the chunks are vacuumed when autovacuum's
        rule says so and the quick list's graph is gone (`_vacuum`)."""
        self._seal()
        self._sync_quick()
        self._vacuum()

    def _written(self, count: int) -> None:
        """Note `count` full vectors written; under the run lock, seal the tail when this
        process alone may have written `seal_at` since it last looked (a full pass keeps
        its searches' exact scan bounded; another process's writes are sealed by the run
        that ends after them)."""
        if not self._holds_run_lock():
            return
        self._unsealed += count
        if self._unsealed >= self.seal_at:
            self._seal()
            self._vacuum()

    def _seal(self) -> None:
        self._unsealed = 0
        if self._retrying(lambda: seal(self._conn, at=self.seal_at)):
            self._starved = True

    def _vacuum(self) -> None:
        """`postgres_vacuum.keep` once this process sealed (its seals cancel autovacuum)."""
        if self._starved and self._retrying(
            lambda: postgres_vacuum.keep(self._conn, self._quick_indexed())
        ):
            self._starved = False

    def _sync_quick(self) -> None:
        """Make the quick list's HNSW index (`QUICK_HNSW_INDEX`) when at least
        `quick_exact_below` chunks have a quick vector and no full one and it is missing;
        drop it when fewer have."""
        model = self.quick_model()
        wanted = self.quick_exact_below
        (count,) = self._one(QUICK_ONLY_COUNT, (wanted,))
        have = self._quick_indexed()
        if model is None or count < wanted:
            if have:
                self._retrying(lambda: self._conn.execute(f"DROP INDEX IF EXISTS {QUICK_HNSW}"))
            return
        if have:
            return
        started = time.monotonic()

        def build() -> None:
            self._quick_dim = None  # the catalog read again
            with self._transaction() as conn:
                self._fix_quick_dim(conn, int(model["dim"]))
                (rows,) = conn.execute(QUICK_ONLY_COUNT, (LARGEST,)).fetchone()
                fit_build_memory(conn, "quick", int(rows))  # its graph built in memory
                conn.execute(QUICK_HNSW_INDEX)

        self._retrying(build)
        log.info(
            "%s: quick list's HNSW index made (%s or more chunks without a full vector, %.1f s)",
            self.location,
            f"{wanted:,}",
            time.monotonic() - started,
        )

    def _unlock_run(self) -> None:
        if self._run_locked:
            if not (self._conn.closed or self._conn.broken):  # else its session is gone
                self._conn.execute("SELECT pg_advisory_unlock(%s)", (RUN_LOCK,))
            self._run_locked = False

    # -- summaries and search -------------------------------------------------------

    def status(self) -> StoreStatus:
        docs, tokens = self._one(
            "SELECT COUNT(*), COALESCE(SUM(n_tokens), 0) FROM documents WHERE status = 'indexed'"
        )
        skipped = self._read(
            "SELECT root, source, reason, skip FROM documents WHERE "
            "status = 'skipped' ORDER BY root, source"
        )
        roots = tuple(r[0] for r in self._read("SELECT DISTINCT root FROM documents ORDER BY root"))
        runs = self.runs(limit=1)
        return StoreStatus(
            path=self.location,
            documents=int(docs),
            chunks=self.count(),
            tokens=int(tokens),
            skipped=len(skipped),
            skipped_by_reason=dict(Counter(r[3] or "unknown" for r in skipped)),
            skipped_files=tuple((r[0], r[1], r[2] or "") for r in skipped),
            dim=self.dim,
            roots=roots,
            last_run=runs[0] if runs else None,
            copies=self._copies(),
        )

    def count(self) -> int:
        return int(self._one("SELECT COUNT(*) FROM chunks")[0])

    def vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """All vectors as (chunk ids int64 `[N]`, float32 `[N, dim]`), ordered by id."""
        rows = self._read(
            "SELECT id, embedding FROM chunks WHERE embedding IS NOT NULL ORDER BY id"
        )
        dim = self.dim or 0
        if not rows:
            return np.zeros(0, np.int64), np.zeros((0, dim), np.float32)
        return (
            np.fromiter((r[0] for r in rows), np.int64, len(rows)),
            np.stack([_array(r[1]) for r in rows]),
        )

    def chunks(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        rows = self._read(
            f"SELECT {CHUNK_SELECT} FROM chunks c JOIN documents d ON d.id = c.doc_id "
            "WHERE c.id = ANY(%s)",
            ([int(i) for i in ids],),
        )
        return {r[0]: ChunkRow.from_row(r) for r in rows}

    def document_chunks(self, root: str | os.PathLike[str], source: str) -> list[ChunkRow]:
        rows = self._read(
            f"SELECT {CHUNK_SELECT} FROM chunks c JOIN documents d ON d.id = c.doc_id "
            "WHERE d.root = %s AND d.source = %s ORDER BY c.ordinal",
            (root_key(root), source),
        )
        return [ChunkRow.from_row(r) for r in rows]

    def vectors_by_key(self, keys: Iterable[str]) -> dict[str, np.ndarray]:
        """vector key -> stored vector of those of `keys` that any stored chunk has (see
        `SQLiteStore.vectors_by_key`)."""
        rows = self._read(
            "SELECT DISTINCT ON (vector_key) vector_key, embedding FROM chunks "
            "WHERE vector_key = ANY(%s) AND embedding IS NOT NULL",
            (sorted(set(keys)),),
        )
        return {k: _array(v) for k, v in rows}

    def stored_vectors(
        self, root: str | os.PathLike[str], source: str, keys: Iterable[str]
    ) -> dict[str, np.ndarray]:
        """vector key -> stored vector of those of `keys` that one of the document's
        stored chunks has (see `SQLiteStore.stored_vectors`)."""
        rows = self._read(
            "SELECT c.vector_key, c.embedding FROM chunks c JOIN documents d ON "
            "d.id = c.doc_id WHERE d.root = %s AND d.source = %s AND c.vector_key = ANY(%s) "
            "AND c.embedding IS NOT NULL",
            (root_key(root), source, list(set(keys))),
        )
        return {k: _array(v) for k, v in rows}

    def keyword(
        self, text: str, n: int, where: SearchFilter | None = None
    ) -> list[tuple[int, float]]:
        """The `n` best (chunk id, `ts_rank`, higher is better) for any of the terms of
        `text` (`analyzer.query_terms` for the stored languages); with `where`, among the
        chunks of the documents it keeps only."""
        terms, stems = analyzer.query_terms(text, self.languages())
        if not terms and not stems:
            return []
        docs = None if where is None else self.allowed_documents(where)
        # ts_rank's weights of D, C, B, A: stems are D, words as written A
        weights = f"'{{{analyzer.STEM_WEIGHT}, 0, 0, 1}}'::float4[]"
        rows = self._read(
            f"SELECT id, ts_rank({weights}, terms, q) AS r FROM chunks, "
            "CAST(%s AS tsquery) q WHERE terms @@ q "
            + ("" if docs is None else "AND doc_id = ANY(%s) ")
            + "ORDER BY r DESC, id LIMIT %s",
            (
                analyzer.tsquery_literal(terms[:MAX_QUERY_TERMS], stems[:MAX_QUERY_TERMS]),
                *(() if docs is None else (docs,)),
                int(n),
            ),
        )
        return [(int(r[0]), float(r[1])) for r in rows]
