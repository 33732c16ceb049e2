"""What both stores do the same way (`StoreBase`): runs and the run lock, skips, copies,
moves and forgetting, the jobs table's repository (`jobs_table`), over each store's own
connection and hooks; and the checks and conversions of what is written and read
(`chunk_rows`, `checked_vectors`, `stored_form`, `unpack_vectors`, `unpack_vector`):
vectors are checked and L2-normalised in float32, stored in float16
(`records.VECTOR_DTYPE`) and read back as float32.
`store_sqlite.SQLiteStore` and `store_postgres.PostgresStore` extend it."""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import json
import os
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar, Self, TypeVar

import numpy as np

from attnswitch.documents.ingest import Document
from attnswitch.indexing import analyzer
from attnswitch.indexing.jobs_sql import JobsTable, SQLJobsTable
from attnswitch.indexing.records import (
    RUN_LOCK_WAIT_S,
    RUN_STATUSES,
    VECTOR_DTYPE,
    ChunkLike,
    RunRecord,
    StoredDocument,
    check_ef_search,
    root_key,
    vector_key,
)
from attnswitch.indexing.store_access import StoreAccess
from attnswitch.indexing.store_errors import (
    REBUILD,
    StoreBusyError,
    StoreCorruptError,
    StoreDeadlineError,
    StoreInputError,
)

T = TypeVar("T")

# A `StoredDocument`'s columns, of the documents table as `d`.
DOCUMENT_SELECT = (
    "d.id, d.root, d.source, d.sha256, d.size, d.mtime_ns, d.status, d.reason, d.config, d.n_chunks"
)
# Content and chunk dedup: a document found by its hash, a stored vector by its key (the
# same statements for both stores, made once the chunks have their vector key column).
DEDUP_INDEXES = (
    "CREATE INDEX IF NOT EXISTS documents_sha256 ON documents (sha256)",
    "CREATE INDEX IF NOT EXISTS chunks_vector_key ON chunks (vector_key)",
)
# The chunks' languages (`StoreBase.languages`), made once the column exists (version 7).
LANGUAGE_INDEX = "CREATE INDEX IF NOT EXISTS chunks_language ON chunks (language)"
# A stored vector's element (`records.VECTOR_DTYPE`), little-endian: a SQLite BLOB is the
# vector's elements in this form, `dim` of them.
STORED_ELEMENT = np.dtype(VECTOR_DTYPE).newbyteorder("<")
# A row whose norm is 1 within this is not divided by it again (`checked_vectors`): a
# stored vector read back (float16 rounding moves a unit vector's norm by at most 2^-11)
# and written again, as a run does with a vector it reuses, is stored bit for bit the same.
NORM_KEPT = 2.0**-10


class StoreBase(StoreAccess, abc.ABC):
    """What every store does the same way on top of its own hooks: the bulk lookups a plan
    makes (`writer.IndexWriter.plan` plans), skips, copies, moves, forgetting, the runs
    table and the run lock, the jobs table's repository, and the documents' recorded
    permissions (`store_access.StoreAccess`).

    A store subclass provides
    - `_conn`: its connection, whose `execute(sql, params)` takes `_mark` placeholders and
      returns a cursor with `fetchone`/`fetchall`; `_mark`: the placeholder ("?" unless set);
    - `ef_search`: the ANN search beam of a dense search that names none;
    - `_transaction()`: a context manager giving a connection inside one transaction;
    - `_lock_run()` / `_unlock_run()`: take and release the store's one-run-at-a-time lock;
    - `_upsert(conn, doc, status, config, run_id, *, n_chunks, n_tokens) -> int`: write a
      document row (`_document_values`), return its id;
    - `close` of the `Store` protocol;
    - `_arm_deadline(at)` / `_disarm_deadline()` and `_deadline_passed(exc)`: make the
      connection's statements stop at `at`, undo that, and tell the error an interrupted
      statement raises (see `deadline`).
    """

    _mark: ClassVar[str] = "?"
    _deadline: float | None = None  # set by `deadline` (time.monotonic()), else None
    _vector_column: ClassVar[str] = "vector"  # the chunks' column holding the vector
    # the chunks' columns a copy of a document takes besides the text, vectors and places
    _copied_columns: ClassVar[str] = "vector_key, language"
    _conn: Any
    ef_search: int

    @abc.abstractmethod
    def _transaction(self) -> contextlib.AbstractContextManager[Any]: ...

    @abc.abstractmethod
    def _lock_run(self) -> None: ...

    @abc.abstractmethod
    def _unlock_run(self) -> None: ...

    @abc.abstractmethod
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
    ) -> int: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- runs and the run lock (`writer.IndexWriter` holds it) ---------------------------

    def begin_run(self, root: str | os.PathLike[str] | None = None, config: str = "") -> int:
        """Take the store's run lock (`exclusive`'s wait) and record a run (`open_run`);
        `finish_run` ends both. A run without a writer (another process holding the lock,
        in tests); `writer.IndexWriter.begin_run` is the runs' way."""
        self._wait_for_run_lock()
        try:
            return self.open_run(root, config)
        except BaseException:
            self._unlock_run()
            raise

    def finish_run(
        self,
        run_id: int,
        status: str = "completed",
        *,
        counts: dict[str, Any] | None = None,
        summary: dict[str, Any] | None = None,
    ) -> None:
        """`close_run`, then release the run lock `begin_run` took."""
        try:
            self.close_run(run_id, status, counts=counts, summary=summary)
        finally:
            self._unlock_run()

    def open_run(self, root: str | os.PathLike[str] | None = None, config: str = "") -> int:
        """Record a run of `root` under `config` in the runs table, marking the runs left
        "running" by a killed process as "interrupted"; the new run's id. Call with the
        run lock held by this store object (`exclusive`, `begin_run`)."""
        m = self._mark
        with self._transaction() as conn:
            conn.execute("UPDATE runs SET status = 'interrupted' WHERE status = 'running'")
            return int(
                conn.execute(
                    f"INSERT INTO runs (root, config, pid, started_at, status) "
                    f"VALUES ({m}, {m}, {m}, {m}, 'running') RETURNING id",
                    (
                        root_key(root) if root is not None else None,
                        config,
                        os.getpid(),
                        time.time(),
                    ),
                ).fetchone()[0]
            )

    def close_run(
        self,
        run_id: int,
        status: str = "completed",
        *,
        counts: dict[str, Any] | None = None,
        summary: dict[str, Any] | None = None,
    ) -> None:
        """Close run `run_id` with its status, counts and a JSON-serialisable summary, then
        do the store's end-of-run work (`_run_finished`: a completed run's `sync_index`).
        Under the run lock; it stays held."""
        if status not in RUN_STATUSES or status == "running":
            raise StoreInputError("status", f"one of {RUN_STATUSES[1:]}", repr(status))
        m = self._mark
        with self._transaction() as conn:
            conn.execute(
                f"UPDATE runs SET status = {m}, ended_at = {m}, counts = {m}, "
                f"summary = {m} WHERE id = {m}",
                (
                    status,
                    time.time(),
                    json.dumps(counts or {}, sort_keys=True),
                    json.dumps(summary or {}, sort_keys=True, default=str),
                    run_id,
                ),
            )
            if status == "completed":
                self.prune_access(conn)
        self._run_finished(status)

    def _run_finished(self, status: str) -> None:
        """What the store does when a run ends with `status`, still under the run lock."""

    def sync_index(self) -> None:
        """Bring what the store derives from its committed chunks outside its transactions
        up to date, under the run lock (the SQLite store's HNSW graph beside its file,
        `SQLiteStore.sync_index`); nothing here (PostgreSQL's index is transactional)."""

    def check_unlocked(self, wait_s: float = 0.0) -> None:
        """Raise `StoreBusyError` when another process holds this store's run lock for
        longer than `wait_s` seconds (takes the lock and lets go of it at once; a run may
        still start right after)."""
        self._wait_for_run_lock(wait_s)
        self._unlock_run()

    def _wait_for_run_lock(self, wait_s: float = RUN_LOCK_WAIT_S) -> None:
        """Take the run lock, trying again for up to `wait_s` seconds while another process
        holds it; at once `StoreBusyError` when this store object holds it already."""
        deadline = time.monotonic() + wait_s
        while True:
            try:
                self._lock_run()
                return
            except StoreBusyError:
                if self._holds_run_lock() or time.monotonic() >= deadline:
                    raise
            time.sleep(0.1)

    def _holds_run_lock(self) -> bool:
        """Whether this store object holds its run lock (a run in progress here)."""
        return False

    @contextlib.contextmanager
    def exclusive(self, wait_s: float = RUN_LOCK_WAIT_S) -> Iterator[None]:
        """Hold the store's run lock for the block: no run, here or in another process,
        writes meanwhile. Another process's lock is waited for up to `wait_s` seconds,
        then `StoreBusyError`; held by this store object already (a writer, a run):
        `StoreBusyError` at once."""
        self._wait_for_run_lock(wait_s)
        try:
            yield
        finally:
            self._unlock_run()

    # -- the jobs table (`jobs_sql`) ----------------------------------------------------

    def jobs_table(self) -> JobsTable:
        """The service's jobs table in this store, as a repository (`jobs_sql.JobsTable`):
        its SQL over this store's connection, transactions and run lock."""
        return SQLJobsTable(self._mark, self._transaction, self._read, self.exclusive)

    # -- deadlines ------------------------------------------------------------------

    @contextlib.contextmanager
    def deadline(self, at: float | None) -> Iterator[None]:
        """Stop this store's work inside the block by `at` (a `time.monotonic()` time; None:
        no deadline): a statement still running then is interrupted (SQLite: its progress
        handler; PostgreSQL: its statement timeout), and loops in Python over rows stop at
        their next look at the clock; either raises `StoreDeadlineError`, also at once when
        `at` has passed. Only reads should run under a deadline (an interrupted write is
        rolled back). Nested: the earlier deadline holds."""
        if at is None:
            yield
            return
        outer = self._deadline
        self._deadline = at if outer is None else min(outer, at)
        try:
            self._check_deadline()
            self._arm_deadline(self._deadline)
            yield
        except Exception as exc:
            if isinstance(exc, StoreDeadlineError) or not self._deadline_passed(exc):
                raise
            raise StoreDeadlineError() from None
        finally:
            self._deadline = outer
            self._disarm_deadline()
            if outer is not None:
                self._arm_deadline(outer)

    def _check_deadline(self) -> None:
        """Raise `StoreDeadlineError` when the deadline of `deadline` has passed."""
        if self._deadline is not None and time.monotonic() >= self._deadline:
            raise StoreDeadlineError()

    def _arm_deadline(self, at: float) -> None:
        """Make the connection's statements stop at `at` (`deadline`)."""

    def _disarm_deadline(self) -> None:
        """Let the connection's statements run without a deadline again."""

    def _deadline_passed(self, exc: BaseException) -> bool:
        """Whether `exc` is the error of a statement the deadline interrupted."""
        return False

    def beam(self, ef: int | None) -> int:
        """The ANN search beam of one dense search: `ef`, checked, or the store's
        `ef_search` when None."""
        return self.ef_search if ef is None else check_ef_search(ef)

    def has_chunks(self) -> bool:
        """Whether any chunk is stored (one index seek)."""
        ((found,),) = self._read("SELECT EXISTS (SELECT 1 FROM chunks)")
        return bool(found)

    def indexed_bytes(self) -> int:
        """The bytes of the indexed documents' files, as recorded when they were read."""
        ((total,),) = self._read(
            "SELECT COALESCE(SUM(size), 0) FROM documents WHERE status = 'indexed'"
        )
        return int(total)

    def data_version(self) -> int | None:
        """A number that changes when another connection commits to the store (SQLite's
        `PRAGMA data_version` on this connection), or None where the store cannot tell
        (a server written by other processes at any time)."""
        return None

    def languages(self) -> list[str]:
        """The languages of the stored chunks (`analyzer.detect_language`; "" for chunks
        of none), each once, sorted: one index seek a language (a loose index scan)."""
        return [
            r[0]
            for r in self._read(
                "WITH RECURSIVE seen(language) AS (SELECT min(language) FROM chunks UNION ALL "
                "SELECT (SELECT min(language) FROM chunks WHERE language > seen.language) FROM "
                "seen WHERE seen.language IS NOT NULL) SELECT language FROM seen WHERE "
                "language IS NOT NULL"
            )
        ]

    # -- the stored state ---------------------------------------------------------------

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one read-only query (`_mark` placeholders); a store whose connection
        can be lost reads again on a new one (`PostgresStore`)."""
        rows: list[Any] = self._conn.execute(sql, params).fetchall()
        return rows

    def lookup(self, root: str | os.PathLike[str], source: str) -> StoredDocument | None:
        """The row of `source` under `root`, or None when it is not stored."""
        m = self._mark
        rows = self._read(
            "SELECT id, root, source, sha256, size, mtime_ns, status, reason, config, n_chunks"
            f" FROM documents WHERE root = {m} AND source = {m}",
            (root_key(root), source),
        )
        return StoredDocument(*rows[0]) if rows else None

    def lookup_many(
        self, places: Iterable[tuple[str | os.PathLike[str], str]]
    ) -> dict[tuple[str, str], StoredDocument]:
        """(root, source) -> its row, for those of `places` that are stored (what `lookup`
        gives each), in one query whatever their number. Each root is given as stored
        (`root_key`'s form: the callers hold stored rows or keys), so none is resolved
        again on the file system here."""
        wanted = sorted({(os.fspath(root), source) for root, source in places})
        if not wanted:
            return {}
        table, params = self._pairs(wanted)
        rows = self._read(
            f"SELECT {DOCUMENT_SELECT} FROM documents d JOIN {table} p "
            "ON d.root = p.a AND d.source = p.b",
            params,
        )
        return {(r[1], r[2]): StoredDocument(*r) for r in rows}

    def copies_of_many(
        self, keys: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], list[StoredDocument]]:
        """(sha256, config) -> what `copies_of(sha256, config)` gives (the documents
        indexed under that config with that content hash, oldest first), for each of
        `keys` that has any, in one query whatever their number."""
        wanted = sorted(set(keys))
        if not wanted:
            return {}
        table, params = self._pairs(wanted)
        rows = self._read(
            f"SELECT {DOCUMENT_SELECT} FROM documents d JOIN {table} p "
            "ON d.sha256 = p.a AND d.config = p.b WHERE d.status = 'indexed' "
            "ORDER BY d.id",
            params,
        )
        out: dict[tuple[str, str], list[StoredDocument]] = {}
        for r in rows:
            doc = StoredDocument(*r)
            out.setdefault((doc.sha256 or "", doc.config), []).append(doc)
        return out

    def _pairs(self, pairs: Sequence[tuple[str, str]]) -> tuple[str, tuple[Any, ...]]:
        """A row source of `pairs` as text columns `a` and `b`, to join with (SQL, its
        parameters): one parameter for any number of pairs, so no statement outgrows the
        driver's limit on them. SQLite's form (`json_each`); `PostgresStore` has its own."""
        return (
            "(SELECT json_extract(value, '$[0]') AS a, json_extract(value, '$[1]') AS b "
            f"FROM json_each({self._mark}))",
            (json.dumps(pairs),),
        )

    def roots(self) -> list[str]:
        """Every root with a stored document, sorted."""
        return [r[0] for r in self._read("SELECT DISTINCT root FROM documents ORDER BY root")]

    def sources(self, root: str | os.PathLike[str]) -> set[str]:
        """Every source stored under `root`, indexed or skipped."""
        rows = self._read(
            f"SELECT source FROM documents WHERE root = {self._mark}", (root_key(root),)
        )
        return {r[0] for r in rows}

    def root_counts(self, root: str | os.PathLike[str]) -> tuple[int, int]:
        """(indexed documents, their chunks) stored under `root`."""
        ((docs, chunks),) = self._read(
            "SELECT COUNT(*), COALESCE(SUM(n_chunks), 0) FROM documents WHERE root = "
            f"{self._mark} AND status = 'indexed'",
            (root_key(root),),
        )
        return int(docs), int(chunks)

    def record_skip(self, doc: Document, *, config: str = "", run_id: int | None = None) -> int:
        """Record that `doc` was skipped, with its reason; any chunks it had go."""
        if doc.ok:
            raise StoreInputError("doc", "a skipped document", f"{doc.source!r} with text")
        with self._transaction() as conn:
            doc_id = self._upsert(conn, doc, "skipped", config, run_id)
            conn.execute(f"DELETE FROM chunks WHERE doc_id = {self._mark}", (doc_id,))
        return doc_id

    # -- content dedup, moves and forgetting --------------------------------------------

    def _retrying(self, fn: Callable[[], T]) -> T:
        """`fn()`; a store whose connection can be lost does it again on a new one."""
        return fn()

    def indexed_sizes(self, config: str) -> set[int]:
        """The sizes of the documents indexed under `config`: only a file of one of these
        sizes can be a copy of one of them (what a run hashes before reading)."""
        return {
            int(r[0])
            for r in self._read(
                f"SELECT DISTINCT size FROM documents WHERE config = {self._mark} AND "
                "status = 'indexed' AND sha256 IS NOT NULL",
                (config,),
            )
        }

    def copies_of(self, sha256: str, config: str) -> list[StoredDocument]:
        """The documents indexed under `config` whose content hash is `sha256`, oldest
        first: a file with these bytes has their chunks and vectors already."""
        m = self._mark
        rows = self._read(
            "SELECT id, root, source, sha256, size, mtime_ns, status, reason, config, n_chunks"
            f" FROM documents WHERE sha256 = {m} AND config = {m} AND status = 'indexed' "
            "ORDER BY id",
            (sha256, config),
        )
        return [StoredDocument(*r) for r in rows]

    def copy_document(
        self, original: StoredDocument, doc: Document, *, run_id: int | None = None
    ) -> int:
        """Index `doc` (a file with the same bytes as `original`, at another path) with a
        copy of `original`'s chunks and vectors, in one transaction: nothing is read,
        chunked or encoded. Returns the new document's id."""
        if (root_key(original.root), original.source) == (root_key(doc.root), doc.source):
            raise StoreInputError(
                "doc", "another path than the original's", f"{doc.source!r} itself"
            )
        m, vector = self._mark, self._vector_column
        columns = (
            "ordinal, text, n_tokens, char_start, char_end, heading_path, location, "
            f"{self._copied_columns}, {vector}"
        )

        def copy() -> int:
            with self._transaction() as conn:
                row = conn.execute(
                    f"SELECT kind, encoding, n_chunks, n_tokens FROM documents "
                    f"WHERE id = {m} AND status = 'indexed'",
                    (original.id,),
                ).fetchone()
                if row is None:
                    raise StoreInputError(
                        "original", "an indexed document", f"{original.source!r}, no longer stored"
                    )
                kind, encoding, n_chunks, n_tokens = row
                doc_id = self._upsert(
                    conn,
                    dataclasses.replace(doc, kind=kind, encoding=encoding),
                    "indexed",
                    original.config,
                    run_id,
                    n_chunks=n_chunks,
                    n_tokens=n_tokens,
                )
                conn.execute(f"DELETE FROM chunks WHERE doc_id = {m}", (doc_id,))
                conn.execute(
                    f"INSERT INTO chunks (doc_id, {columns}) SELECT {m}, {columns} "
                    f"FROM chunks WHERE doc_id = {m}",
                    (doc_id, original.id),
                )
                return int(doc_id)

        return self._retrying(copy)

    def move_document(self, root: str | os.PathLike[str], old_source: str, doc: Document) -> bool:
        """Give the stored document `old_source` of `root` the path (and size and mtime) of
        `doc`: a file moved or renamed within the root keeps its chunks and vectors. False
        when `old_source` is not stored."""
        m = self._mark

        def move() -> bool:
            with self._transaction() as conn:
                access = self._keep_access(conn, doc.access)
                return bool(
                    conn.execute(
                        f"UPDATE documents SET source = {m}, size = {m}, mtime_ns = {m}, "
                        f"updated_at = {m}, access = COALESCE({m}, access) "
                        f"WHERE root = {m} AND source = {m}",
                        (
                            doc.source,
                            doc.size,
                            doc.mtime_ns,
                            time.time(),
                            access,
                            root_key(root),
                            old_source,
                        ),
                    ).rowcount
                    == 1
                )

        return bool(self._retrying(move))

    def forget(self, root: str | os.PathLike[str], source: str = "") -> int:
        """Remove from the index the document `source` of `root`, or every document below
        it when `source` is a folder ("": the whole root), with their chunks and vectors,
        in one transaction; returns how many documents went. Under the run lock
        (`writer.IndexWriter.forget` takes it)."""
        m, key = self._mark, root_key(root)
        prefix = source.strip("/")

        def forget() -> int:
            with self._transaction() as conn:
                if not prefix:
                    return int(
                        conn.execute(f"DELETE FROM documents WHERE root = {m}", (key,)).rowcount
                    )
                return int(
                    conn.execute(
                        f"DELETE FROM documents WHERE root = {m} AND (source = {m} OR "
                        f"substr(source, 1, {m}) = {m})",
                        (key, prefix, len(prefix) + 1, prefix + "/"),
                    ).rowcount
                )

        return self._retrying(forget)

    def _copies(self) -> int:
        """Indexed documents whose content another indexed document has too."""
        ((n,),) = self._read(
            "SELECT COUNT(*) - COUNT(DISTINCT sha256) FROM documents "
            "WHERE status = 'indexed' AND sha256 IS NOT NULL"
        )
        return int(n)

    def runs(self, limit: int | None = None) -> list[RunRecord]:
        """Runs, newest first."""
        sql = (
            "SELECT id, root, config, pid, started_at, ended_at, status, counts, summary"
            " FROM runs ORDER BY id DESC"
        )
        rows = self._read(
            sql + (f" LIMIT {self._mark}" if limit else ""), (limit,) if limit else ()
        )
        return [
            RunRecord(
                int(r[0]),
                r[1],
                r[2],
                int(r[3]),
                float(r[4]),
                r[5],
                r[6],
                json.loads(r[7]),
                json.loads(r[8]),
            )
            for r in rows
        ]

    @staticmethod
    def _document_values(
        doc: Document, status: str, config: str, run_id: int | None, n_chunks: int, n_tokens: int
    ) -> dict[str, Any]:
        """A document row's columns, as `_upsert` writes them."""
        return dict(
            root=doc.root,
            source=doc.source,
            sha256=doc.sha256,
            size=doc.size,
            mtime_ns=doc.mtime_ns,
            kind=doc.kind,
            encoding=doc.encoding,
            status=status,
            skip=doc.skip.value if doc.skip else None,
            reason=doc.reason,
            config=config,
            n_chunks=n_chunks,
            n_tokens=n_tokens,
            run_id=run_id,
            updated_at=time.time(),
            access=doc.access.signature if doc.access is not None else None,
        )


def fill_vector_keys(conn: Any, mark: str, key_sql: str) -> None:
    """Set the vector key of the chunks stored before vector keys existed: for the
    documents indexed under the store's config (meta "index", whose chunk text is what the
    encoder read: no heading path was embedded then), `key_sql` computes it from the
    vector fingerprint and the text in SQL. Others keep NULL (their vectors are not
    reused)."""
    row = conn.execute(f"SELECT value FROM meta WHERE key = {mark}", ("index",)).fetchone()
    if row is None:
        return
    from attnswitch.indexing.config import IndexConfig

    try:
        stored = IndexConfig.from_json(row[0])
    except (TypeError, ValueError):  # a config this version cannot read: keys stay NULL
        return
    if stored.embed_headings:
        return
    conn.execute(
        f"UPDATE chunks SET vector_key = {key_sql} "
        f"WHERE vector_key IS NULL AND doc_id IN (SELECT id FROM documents WHERE "
        f"config = {mark})",
        (stored.vector_fingerprint, stored.fingerprint),
    )


def unpack_vectors(
    rows: Sequence[tuple[int, bytes]], dim: int, where: Any
) -> tuple[np.ndarray, np.ndarray]:
    """(ids int64 `[N]`, float32 `[N, dim]`) of (id, stored vector) rows, each vector `dim`
    little-endian float16 elements (`STORED_ELEMENT`); `StoreCorruptError` naming `where`
    (the store) for a vector of another length, or a missing dimension."""
    if not rows:
        return np.zeros(0, np.int64), np.zeros((0, dim), np.float32)
    ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
    if not dim:
        raise StoreCorruptError(
            f"{where}: expected the vectors' dimension in its "
            f"meta table, got none beside {len(rows)} chunks; {REBUILD}"
        )
    size = STORED_ELEMENT.itemsize * dim
    bad = [r[0] for r in rows if not isinstance(r[1], bytes) or len(r[1]) != size]
    if bad:
        lengths = sorted(
            {len(r[1]) if isinstance(r[1], bytes) else -1 for r in rows if r[0] in set(bad[:5])}
        )
        raise StoreCorruptError(
            f"{where}: expected vectors of {size} bytes (dimension {dim}, {VECTOR_DTYPE}), "
            f"got {len(bad)} chunk(s) of another length (ids {bad[:5]}: "
            f"{', '.join('not bytes' if n < 0 else f'{n} bytes' for n in lengths)}); "
            f"{REBUILD}"
        )
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=STORED_ELEMENT)
    return ids, matrix.reshape(len(rows), dim).astype(np.float32)


def unpack_vector(blob: Any, dim: int) -> np.ndarray | None:
    """One stored vector (`dim` little-endian float16 elements) as float32 `[dim]`, or None
    when `blob` is not one (another length: `unpack_vectors` names such rows when all
    vectors are read)."""
    if not dim or not isinstance(blob, bytes) or len(blob) != STORED_ELEMENT.itemsize * dim:
        return None
    return np.frombuffer(blob, dtype=STORED_ELEMENT).astype(np.float32)


def stored_form(matrix: np.ndarray) -> np.ndarray:
    """`checked_vectors`' rows as stored: float16 (`STORED_ELEMENT`), each element rounded to
    nearest (a unit vector's elements are at most 1: none overflows)."""
    return np.ascontiguousarray(matrix, dtype=STORED_ELEMENT)


# A chunk's values as a store writes them (`chunk_rows`): text, n_tokens, start, end,
# heading path JSON, location JSON, vector key, language, prefix.
ChunkValues = tuple[str, int, int, int, str, str, str | None, str, str]


def _count(name: str, value: Any) -> int:
    """`value` (a chunk's `name`) as an int >= 0, else `StoreInputError`."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise StoreInputError(name, "an int >= 0", repr(value))
    return int(value)


def token_total(chunks: Sequence[ChunkLike]) -> int:
    """The model tokens of `chunks` (each `n_tokens` checked as `chunk_rows` checks it)."""
    total = 0
    for i, c in enumerate(chunks):
        if not hasattr(c, "n_tokens"):
            raise StoreInputError(
                f"chunks[{i}]", "attributes text, n_tokens, start, end", type(c).__name__
            )
        total += _count(f"chunks[{i}].n_tokens", c.n_tokens)
    return total


def chunk_rows(
    chunks: Sequence[ChunkLike], vector_fingerprint: str | None = None, *, first: int = 0
) -> list[ChunkValues]:
    """Each chunk's (text, n_tokens, start, end, heading path JSON, location JSON, vector
    key, language, prefix), checked; the language is `analyzer.detect_language`'s, the
    prefix what the encoder reads before the text (`embed_prefix`, "" when none). `first`:
    the ordinal of `chunks[0]` in its document (errors name `chunks[first + i]`)."""
    rows = []
    for i, c in enumerate(chunks, start=first):
        try:
            text, n_tokens, start, end = c.text, c.n_tokens, c.start, c.end
        except AttributeError as exc:
            raise StoreInputError(
                f"chunks[{i}]",
                "attributes text, n_tokens, start, end",
                f"{type(c).__name__} ({exc})",
            ) from None
        if not isinstance(text, str):
            raise StoreInputError(f"chunks[{i}].text", "str", type(text).__name__)
        for name, value in (("n_tokens", n_tokens), ("start", start), ("end", end)):
            _count(f"chunks[{i}].{name}", value)
        if end < start:
            raise StoreInputError(f"chunks[{i}].end", f">= start {start}", end)
        path = tuple(getattr(c, "heading_path", None) or ())
        if not all(isinstance(h, str) for h in path):
            raise StoreInputError(f"chunks[{i}].heading_path", "a tuple of str", repr(path))
        location = getattr(c, "location", None)
        where = (
            location.to_dict()
            if location is not None and hasattr(location, "to_dict")
            else dict(location or {})
        )
        encoder_text = getattr(c, "encoder_text", text)
        if not isinstance(encoder_text, str) or not encoder_text.endswith(text):
            raise StoreInputError(
                f"chunks[{i}].encoder_text",
                "a prefix followed by the chunk's text",
                repr(encoder_text)[:80],
            )
        prefix = encoder_text[: len(encoder_text) - len(text)]
        key = vector_key(vector_fingerprint, encoder_text) if vector_fingerprint else None
        rows.append(
            (
                text,
                int(n_tokens),
                int(start),
                int(end),
                json.dumps(list(path), ensure_ascii=False),
                json.dumps(where, sort_keys=True),
                key,
                analyzer.detect_language(text),
                prefix,
            )
        )
    return rows


def checked_vectors(vectors: Any, n: int) -> np.ndarray:
    """`vectors` as float32 `[n, dim]`, each row L2-normalised (a row whose norm is already
    1 within `NORM_KEPT` is kept as it is); `StoreInputError` for another shape, a value
    that is not finite or a zero row."""
    try:
        matrix = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise StoreInputError(
            "vectors", "a numeric array", f"{type(vectors).__name__} ({exc})"
        ) from None
    if n == 0 and matrix.size == 0:
        return matrix.reshape(0, matrix.shape[-1] if matrix.ndim == 2 else 0)
    if matrix.ndim != 2 or matrix.shape[0] != n or matrix.shape[1] == 0:
        raise StoreInputError(
            "vectors", f"shape [{n}, dim] (one row per chunk)", list(matrix.shape)
        )
    if not np.isfinite(matrix).all():
        raise StoreInputError("vectors", "finite values", "NaN or inf")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if (norms == 0).any():
        raise StoreInputError(
            "vectors",
            "non-zero rows",
            f"zero vector at rows {np.flatnonzero(norms[:, 0] == 0)[:5]}",
        )
    norms[np.abs(norms - 1.0) <= NORM_KEPT] = 1.0
    return np.ascontiguousarray(matrix / norms, dtype="<f4")
