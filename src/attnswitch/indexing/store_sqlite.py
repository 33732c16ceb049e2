"""The SQLite store (`SQLiteStore`), the default: one file (stdlib sqlite3, WAL), keyword
search by FTS5 over the analyzer's terms, dense search exact below `EXACT_BELOW` chunks and
above by HNSW graphs kept beside the file, in segments sealed as the full vectors are
written (`sqlite_segments`), the quick list the same way over the quick vectors of the
chunks still without a full one (`quick_graph`, one graph per segment of chunk ids); and
where a location's file is (`resolve_path`, `check_index_file`). Each chunk's vector is a BLOB of float16 elements
(`records.VECTOR_DTYPE`; a file of schema version 7 or older, float32, is converted when
opened, then compacted), read back as float32."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from attnswitch.documents.ingest import Document
from attnswitch.indexing import analyzer
from attnswitch.indexing.ann import nearest
from attnswitch.indexing.filters import SearchFilter
from attnswitch.indexing.quick_graph import GRAPH_DIR as QUICK_GRAPH
from attnswitch.indexing.quick_graph import QuickVectors, remove_graph, remove_single_graph
from attnswitch.indexing.records import (
    CHUNK_SELECT,
    CHUNKS_CHANGED_IN,
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
from attnswitch.indexing.segment_graph import SegmentGraph
from attnswitch.indexing.sqlite_allowed import (
    Allowed,
    AllowedChunks,
    FullVectors,
    QuickOnly,
    keyword_within,
    nearest_within,
)
from attnswitch.indexing.sqlite_file import (
    check_index_file,
    resolve_path,
)
from attnswitch.indexing.sqlite_schema import (
    ADDED_COLUMNS,
    FLOAT16_SINCE,
    SCHEMA,
    SEGMENTS_SINCE,
    migrate,
)
from attnswitch.indexing.sqlite_segments import GRAPH_DIR as FULL_GRAPH
from attnswitch.indexing.sqlite_segments import (
    LAYOUT,
    SEAL_AT,
    FullGraph,
    FullSegments,
    convert_single_graph,
    remove_graphs,
    seal,
    unseal,
)
from attnswitch.indexing.sqlite_terms import apply_pending, pending, reanalyze, remove_orphans
from attnswitch.indexing.sqlite_vectors import BATCH, FULL
from attnswitch.indexing.store_base import (
    StoreBase,
    unpack_vector,
    unpack_vectors,
)
from attnswitch.indexing.store_errors import (
    StoreBusyError,
    StoreInputError,
    check_schema,
)
from attnswitch.indexing.store_passes import VectorPasses
from attnswitch.indexing.write_groups import document_rows

log = logging.getLogger(__name__)

# Below this many chunks the SQLite store's dense search is exact (all vectors in memory,
# read back as float32: 20,000 x 384 is 29 MiB and a query ~2 ms); from it on, the HNSW
# graph answers.
EXACT_BELOW = 20_000
# SQLite virtual-machine instructions between two looks at the clock while a deadline is
# set (`StoreBase.deadline`): a fraction of a millisecond of a statement's work.
PROGRESS_EVERY = 10_000


class SQLiteStore(StoreBase, VectorPasses):
    """One SQLite database. Open with `SQLiteStore(path)` (see `resolve_path`), use as a
    context manager or call `close()`. Reads never block on a running writer (WAL).
    `exact_below`: chunks below which dense search is exact (`EXACT_BELOW`); `ef_search`:
    the HNSW search beam above it (`EF_SEARCH`); `seal_at`: full vectors in the tail
    before it becomes a segment of their graph (`sqlite_segments.SEAL_AT`)."""

    url = None  # one writer: this process
    _copied_columns = "vector_key, language, quick, prefix"

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        exact_below: int = EXACT_BELOW,
        ef_search: int | None = None,
        seal_at: int = SEAL_AT,
    ):
        self.path = resolve_path(path)
        self.exact_below = exact_below
        self.seal_at = seal_at
        # full vectors this process wrote under the run lock since it last sealed (`_written`)
        self._unsealed = 0
        self.ef_search = check_ef_search(EF_SEARCH if ef_search is None else ef_search)
        if self.path.exists():
            check_index_file(self.path)  # before anything may write to it
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
        self._lock_fh: TextIO | None = None
        self._dense: tuple[int, Any] | None = None  # (log position, exact matrix or graph)
        self._counted: tuple[int, int] | None = None  # (log position, chunks)
        self._encoded: tuple[int, int] | None = None  # (log position, with a full vector)
        self._quick: tuple[int, Any] | None = None  # (log position, exact matrix or graph)
        self.quick_vectors = QuickVectors(self)
        self.full_vectors = FullSegments(self)
        self._allowed = AllowedChunks()  # what recent filters keep (sqlite_allowed)
        try:
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreInputError(
                    "store",
                    f"schema version <= {SCHEMA_VERSION}",
                    f"{version} in {self.path} (made by a newer attnswitch)",
                )
            check_schema(self._conn, SCHEMA, self.path, ADDED_COLUMNS)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")  # WAL: durable across crashes
            self._conn.execute("PRAGMA foreign_keys=ON")
            self.location = str(self.path.resolve())
            self.migrated: str | None = None
            if version < SCHEMA_VERSION:
                with self._transaction():
                    migrate(self._conn, version)
                if 0 < version < CHUNKS_CHANGED_IN:
                    self.migrated = MIGRATED.format(where=self.location, version=SCHEMA_VERSION)
                    log.info("%s", self.migrated)
                if 0 < version < FLOAT16_SINCE:
                    self._compact_float16()
                if 0 < version < SEGMENTS_SINCE:
                    convert_single_graph(self.path)
            if self.meta("analyzer") != analyzer.fingerprint():
                with self._transaction() as conn:
                    reanalyze(conn, self.location)
            self._take_pending()
            self.store_id = self.meta("store_id")
        except BaseException:
            self._conn.close()
            raise

    def _compact_float16(self) -> None:
        """After the upgrade to float16 vectors: drop the float32 HNSW graph (made again
        when next needed) and VACUUM, so the file shrinks to its new rows (two chunks share
        a 4 KiB page where one did). Not done while another process holds the file: the
        space freed is then reused by the next chunks written."""
        remove_graphs(self.path)
        remove_graph(self.path)
        before = self.path.stat().st_size
        try:
            self._conn.execute("VACUUM")
        except sqlite3.OperationalError as exc:
            log.warning(
                "%s: vectors converted to float16; the file was not compacted (%s): "
                "its free space is reused by the next chunks written",
                self.location,
                exc,
            )
            return
        log.info(
            "%s: vectors converted to float16 (schema version %d); file compacted from "
            "%.1f MB to %.1f MB",
            self.location,
            SCHEMA_VERSION,
            before / 1e6,
            self.path.stat().st_size / 1e6,
        )

    # -- lifecycle ------------------------------------------------------------------

    def close(self) -> None:
        self._unlock_run()
        self._conn.close()

    def data_version(self) -> int | None:
        """SQLite's `PRAGMA data_version` on this connection: it changes when another
        connection commits to the file."""
        ((version,),) = self._read("PRAGMA data_version")
        return int(version)

    def own_files(self) -> set[Path]:
        """The files this store keeps (a run over a folder holding them leaves them out):
        the graphs' folders' files are its own too."""
        db = self.path.resolve()
        ends = ("-wal", "-shm", "-journal", ".lock", ".hnsw", ".hnsw.json", FULL_GRAPH, QUICK_GRAPH)
        return {db, *(db.with_name(db.name + end) for end in ends)}

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """One read snapshot for the statements inside (nested: the outer one's)."""
        if self._conn.in_transaction:
            yield
            return
        self._conn.execute("BEGIN")
        try:
            yield
        finally:
            self._conn.execute("COMMIT")

    @contextlib.contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: all of it commits, or none of it (also on kill -9). The
        keyword index takes the chunks' changes before the commit (`apply_pending`)."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
            apply_pending(self._conn)
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def _take_pending(self) -> None:
        """Give the keyword index the chunk changes that another program wrote to the file
        (its own writes leave none: `_transaction`), and say so. Not inside a transaction
        of the caller's; a file this process cannot write keeps them queued (a search then
        leaves out the chunks they removed: `search.distinct_documents`)."""
        if self._conn.in_transaction or not pending(self._conn):
            return
        try:
            with self._without_deadline(), self._transaction() as conn:
                n = apply_pending(conn)
        except sqlite3.OperationalError as exc:
            if self._deadline_passed(exc):
                raise
            log.warning("%s: the keyword index could not take changes (%s)", self.location, exc)
            return
        if n:
            log.info(
                "%s: the keyword index took %d chunk changes written by another program",
                self.location,
                n,
            )

    # -- deadlines (`StoreBase.deadline`) --------------------------------------------

    def _arm_deadline(self, at: float) -> None:
        # SQLite calls this every PROGRESS_EVERY instructions of a statement; true
        # interrupts the statement ("interrupted")
        self._conn.set_progress_handler(lambda: time.monotonic() >= at, PROGRESS_EVERY)

    def _disarm_deadline(self) -> None:
        self._conn.set_progress_handler(None, 0)

    def _deadline_passed(self, exc: BaseException) -> bool:
        return isinstance(exc, sqlite3.OperationalError) and str(exc) == "interrupted"

    @contextlib.contextmanager
    def _without_deadline(self) -> Iterator[None]:
        """The block runs to its end whatever the deadline; the deadline is checked after
        it (for loading the dense index, which every later search reuses: cut at each
        request's deadline, a graph that takes longer than that to rebuild would never be
        searched)."""
        at, self._deadline = self._deadline, None
        if at is not None:
            self._disarm_deadline()
        try:
            yield
        finally:
            self._deadline = at
            if at is not None:
                self._arm_deadline(at)
        self._check_deadline()

    # -- reading the stored state ---------------------------------------------------

    @property
    def dim(self) -> int | None:
        """The vector dimension of this store, or None before the first vector."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = 'dim'").fetchone()
        return int(row[0]) if row else None

    def meta(self, key: str) -> str | None:
        """A value of the store's key-value table (e.g. the index config), or None."""
        row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        """Set one key of the store's key-value table (one statement: atomic)."""
        if key == "dim":
            raise StoreInputError("key", "a key other than 'dim' (the store keeps it)", "'dim'")
        self._conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, value))

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
        """Replace `doc`'s stored chunks and vectors with these, in one transaction.

        `vectors`: the full vectors `[len(chunks), dim]`, any array numpy can read (a CPU
        torch tensor too), L2-normalised and stored in float16 (`store_base.stored_form`);
        None: the chunks are stored without them (the quick pass: `fill_vectors` writes
        them later). `quick`: their quick vectors `[len(chunks), quick dim]` (the static
        model's, `set_quick_model`), or None. With `vector_fingerprint` each chunk's vector
        key is stored (`vector_key`; else NULL). Returns the document's id.
        """
        if not doc.ok:
            raise StoreInputError(
                "doc",
                "a document with text (use record_skip)",
                f"{doc.source!r} skipped: {doc.reason}",
            )
        model = self.quick_model() if quick is not None else None
        prepared = document_rows(
            chunks, vectors, quick, None if model is None else model["dim"], vector_fingerprint
        )
        with self._transaction() as conn:
            if prepared.vectors is not None and len(chunks):
                self._hold_dim(conn, prepared.vectors.shape[1])
            doc_id = self._upsert(
                conn,
                doc,
                "indexed",
                config,
                run_id,
                n_chunks=len(chunks),
                n_tokens=prepared.n_tokens,
            )
            conn.execute("DELETE FROM chunks WHERE doc_id = ?", (doc_id,))
            for group in prepared.groups():
                conn.executemany(
                    "INSERT INTO chunks (doc_id, ordinal, text, n_tokens, char_start, char_end,"
                    " heading_path, location, vector_key, language, prefix, vector, quick) "
                    "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (
                        (
                            doc_id,
                            group.first + i,
                            *row,
                            None if group.vectors is None else group.vectors[i].tobytes(),
                            None if group.quick is None else group.quick[i].tobytes(),
                        )
                        for i, row in enumerate(group.rows)
                    ),
                )
        if prepared.vectors is not None:
            self._written(len(chunks))
        return doc_id

    def _packed(self, row: np.ndarray) -> Any:
        return row.tobytes()

    def _hold_dim(self, conn: Any, dim: int) -> None:
        stored_dim = self.dim
        if dim == stored_dim:
            return
        if stored_dim is not None:
            if conn.execute(
                "SELECT EXISTS (SELECT 1 FROM chunks WHERE vector IS NOT NULL)"
            ).fetchone()[0]:
                raise StoreInputError(
                    "vectors",
                    f"dimension {stored_dim} (this store's)",
                    f"{dim}: a model with another dimension needs another store",
                )
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('dim', ?)", (str(dim),))
        conn.execute("DELETE FROM meta WHERE key = ?", (LAYOUT,))  # graphs of no vector

    def touch(self, doc: Document) -> None:
        """Record the size, mtime and access of an unchanged document, so `is_fresh`
        sees it."""
        with self._transaction() as conn:
            access = self._keep_access(conn, doc.access)
            conn.execute(
                "UPDATE documents SET size = ?, mtime_ns = ?, access = COALESCE(?, access) "
                "WHERE root = ? AND source = ? AND sha256 IS ?",
                (doc.size, doc.mtime_ns, access, doc.root, doc.source, doc.sha256),
            )

    def remove(self, root: str | os.PathLike[str], sources: Iterable[str]) -> int:
        """Delete these documents of `root` and their chunks, in one transaction; returns
        how many documents were removed."""
        key = root_key(root)
        with self._transaction() as conn:
            cur = conn.executemany(
                "DELETE FROM documents WHERE root = ? AND source = ?", ((key, s) for s in sources)
            )
            return cur.rowcount

    def _upsert(
        self,
        conn: sqlite3.Connection,
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
        marks = ", ".join(f":{c}" for c in values)
        updates = ", ".join(f"{c} = excluded.{c}" for c in values if c not in ("root", "source"))
        conn.execute(
            f"INSERT INTO documents ({cols}) VALUES ({marks}) "
            f"ON CONFLICT (root, source) DO UPDATE SET {updates}",
            values,
        )
        return int(
            conn.execute(
                "SELECT id FROM documents WHERE root = ? AND source = ?", (doc.root, doc.source)
            ).fetchone()[0]
        )

    # -- runs -----------------------------------------------------------------------

    def _run_finished(self, status: str) -> None:
        if status == "completed":  # else the next search replays the log, or rebuilds
            with self._transaction() as conn:
                if orphans := remove_orphans(conn):
                    log.warning(
                        "%s: %d chunks whose document row another program replaced removed",
                        self.location,
                        orphans,
                    )
            self.sync_index()

    def sync_index(self) -> None:
        """Bring the HNSW graphs beside the file up to the committed chunks and save them,
        then drop the log neither set needs:
        - the full vectors: the tail sealed into a segment and every segment caught up
          (`sqlite_segments.seal`: searches between runs rank no tail; a run seals while
          it writes, each `seal_at`), or no segment kept below `exact_below` of them
          (`sqlite_segments.unseal`);
        - the quick-only chunks' quick vectors: their segments (none below `exact_below`
          such chunks).
        Called when a run completes (`close_run`) and when a writer's block that
        wrote ends (`writer.IndexWriter`), under the run lock (one writer of the graphs at
        a time)."""
        full = None
        if self.encoded() < self.exact_below or self.dim is None:
            unseal(self)
        else:
            self._seal(1)
            full = SegmentGraph.sync(self.full_vectors)
        self._dense = None
        quick = self._synced_quick()
        if quick is not None:
            self._quick = (quick.seq, quick)
        upto = min(self._log_position() if g is None else g.seq for g in (full, quick))
        self._conn.execute("DELETE FROM chunk_log WHERE seq <= ?", (upto,))

    def _written(self, count: int) -> None:
        """Note `count` full vectors written; under the run lock, seal the tail when this
        process alone may have written `seal_at` since it last looked (a full pass keeps
        its searches' exact scan of the tail bounded)."""
        if not self._holds_run_lock():
            return
        self._unsealed += count
        if self._unsealed >= self.seal_at:
            self._seal(self.seal_at)

    def _seal(self, at: int) -> None:
        self._unsealed = 0
        seal(self, at=at)

    def fill_vectors(self, ids: Sequence[int], keys: Sequence[str | None], vectors: Any) -> int:
        written = super().fill_vectors(ids, keys, vectors)
        self._written(written)
        return written

    def _synced_quick(self) -> SegmentGraph | None:
        """The quick graph's segments caught up and saved, one at a time
        (`SegmentGraph.sync`), and the graph mapped; or None, its files removed, below
        `exact_below` quick-only chunks or before the first quick vector."""
        vectors = self.quick_vectors
        if vectors.count() < self.exact_below or vectors.dim is None:
            remove_graph(self.path)
            return None
        remove_single_graph(self.path)
        return SegmentGraph.sync(vectors)

    def _lock_run(self) -> None:
        if self._lock_fh is not None:
            raise StoreBusyError(f"{self.path}: this Store already has a run in progress")
        try:
            import fcntl
        except ImportError:  # no advisory locks here: one run at a time is on the user
            return
        fh = open(f"{self.path}.lock", "a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            raise StoreBusyError(
                f"{self.path}: another attnswitch run is writing this "
                "store; wait for it or use another --db"
            ) from None
        self._lock_fh = fh

    def _holds_run_lock(self) -> bool:
        return self._lock_fh is not None

    def _unlock_run(self) -> None:
        if self._lock_fh is not None:
            self._lock_fh.close()  # closing drops the flock
            self._lock_fh = None

    # -- summaries and search input -------------------------------------------------

    def status(self) -> StoreStatus:
        conn = self._conn
        docs, tokens = conn.execute(
            "SELECT COUNT(*), COALESCE(SUM(n_tokens), 0) FROM documents WHERE status = 'indexed'"
        ).fetchone()
        n_chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        skipped = conn.execute(
            "SELECT root, source, reason, skip FROM documents WHERE "
            "status = 'skipped' ORDER BY root, source"
        ).fetchall()
        roots = tuple(
            r[0] for r in conn.execute("SELECT DISTINCT root FROM documents ORDER BY root")
        )
        runs = self.runs(limit=1)
        return StoreStatus(
            path=self.location,
            documents=docs,
            chunks=n_chunks,
            tokens=tokens,
            skipped=len(skipped),
            skipped_by_reason=dict(Counter(r[3] or "unknown" for r in skipped)),
            skipped_files=tuple((r[0], r[1], r[2] or "") for r in skipped),
            dim=self.dim,
            roots=roots,
            last_run=runs[0] if runs else None,
            copies=self._copies(),
        )

    def vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """All vectors as (chunk ids int64 `[N]`, float32 `[N, dim]`), ordered by id."""
        rows = self._conn.execute(
            "SELECT id, vector FROM chunks WHERE vector IS NOT NULL ORDER BY id"
        ).fetchall()
        return unpack_vectors(rows, self.dim or 0, self.path)

    def count(self) -> int:
        """How many chunks are stored. Counted once per log position (every insert and
        delete of a chunk, and every full vector written, moves it), by a scan of the small
        (doc_id, ordinal) index."""
        with self.reading():
            position = self._log_position()
            if self._counted is None or self._counted[0] != position:
                chunks = int(self._conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0])
                self._counted = (position, chunks)
            return self._counted[1]

    def encoded(self) -> int:
        """How many chunks have a full vector: `count` less those without one (the index
        of those only), once per log position."""
        with self.reading():
            position = self._log_position()
            if self._encoded is None or self._encoded[0] != position:
                self._encoded = (position, self.count() - self.unencoded_count())
            return self._encoded[1]

    def max_chunk_id(self) -> int:
        """The largest chunk id stored (0 when none): one descent of the rowid b-tree."""
        return int(self._conn.execute("SELECT COALESCE(MAX(id), 0) FROM chunks").fetchone()[0])

    def chunk_log_state(self) -> tuple[int | None, int, int]:
        """(first logged position or None when the log is empty, last position ever
        logged, chunk count): what `ann.HnswIndex` checks its saved graph against."""
        first = self._conn.execute("SELECT MIN(seq) FROM chunk_log").fetchone()[0]
        return first, self._log_position(), self.encoded()

    def _log_position(self) -> int:
        row = self._conn.execute(
            "SELECT seq FROM sqlite_sequence WHERE name = 'chunk_log'"
        ).fetchone()
        return int(row[0]) if row else 0

    def chunk_log_ids(self, after: int, upto: int) -> list[int]:
        """The chunk ids inserted or deleted at log positions (after, upto]."""
        return [
            r[0]
            for r in self._conn.execute(
                "SELECT DISTINCT chunk_id FROM chunk_log WHERE seq > ? AND seq <= ?", (after, upto)
            )
        ]

    def allowed_chunks(self, where: SearchFilter) -> Allowed:
        """What `where` keeps (its documents; their chunks and vectors once read), kept
        until the store changes (`sqlite_allowed.AllowedChunks`)."""
        return self._allowed.of(self, where)

    def vectors_of(self, ids: Iterable[int]) -> tuple[np.ndarray, np.ndarray]:
        """(ids, vectors) of those of these chunk ids that are stored, by id."""
        return FULL.of(self._conn, ids, self.dim or 0, self.path)

    def iter_vectors(self, batch: int = BATCH) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """All (ids, vectors) in batches of `batch` rows, by id."""
        return FULL.batches(self._conn, self.dim or 0, self.path, batch)

    def dense(
        self, queries: np.ndarray, n: int, ef: int | None = None, where: SearchFilter | None = None
    ) -> list[list[tuple[int, float]]]:
        """The `n` nearest (chunk id, cosine) per row of `queries` `[Q, dim]` (normalised):
        exact below `exact_below` chunks, else from the segments' HNSW graphs and the tail
        (`sqlite_segments.FullGraph`) with a search beam of `ef` (default `ef_search`); the
        searcher is opened once and caught up when a write has been committed since. With `where`, among the chunks of the
        documents it keeps only (`sqlite_allowed.nearest_within`)."""
        ef = self.beam(ef)
        if where is not None:
            return nearest_within(self, FullVectors(self), queries, n, ef, where)
        vectors = self.full_vectors
        self._dense = self._current(self._dense, vectors, self.encoded, FullGraph.open)
        return nearest(self._dense[1], queries, n, ef)

    def _current(
        self,
        cached: tuple[int, Any] | None,
        vectors: Any,
        count: Callable[[], int],
        open_graph: Callable[[Any], Any],
    ) -> tuple[int, Any]:
        """(log position, searcher) of a vector set (the full vectors: `full_vectors`,
        `FullGraph.open`; the quick ones: `quick_vectors`, `SegmentGraph.open`)
        as committed now: `cached` while the log has not moved; else below `exact_below`
        chunks its vectors (ids, matrix), above them its graph, the one `cached` holds when
        it can replay what was logged since (`catch_up`), else opened again (and kept:
        `_keep`)."""
        position = self._log_position()
        if cached is not None and cached[0] == position:
            return cached
        with self._without_deadline(), self.reading():
            position = self._log_position()
            if count() < self.exact_below:
                return position, vectors.vectors()
            if cached is not None and not isinstance(cached[1], tuple):
                if cached[1].catch_up(vectors):
                    return position, cached[1]
            cached = None  # the old graph is garbage before the new one loads
            graph = open_graph(vectors)
            if not graph.mapped:
                self._keep(vectors, graph)
            return position, graph

    def quick(
        self,
        queries: np.ndarray,
        n: int,
        where: SearchFilter | None = None,
        ef: int | None = None,
    ) -> list[list[tuple[int, float]]]:
        """The `n` nearest (chunk id, cosine) per row of `queries` `[Q, quick dim]`
        (normalised) among the chunks that have a quick vector and no full one (with
        `where`, of the documents it keeps), as `dense` ranks the full vectors: exact below
        `exact_below` such chunks, else from their own HNSW graphs, one per segment of ids
        (`quick_graph`), which a full vector written takes its chunk out of."""
        if self.quick_model() is None:
            return [[] for _ in range(len(queries))]
        ef = self.beam(ef)
        vectors = self.quick_vectors
        if where is not None:
            return nearest_within(self, QuickOnly(self), queries, n, ef, where)
        self._quick = self._current(self._quick, vectors, vectors.count, SegmentGraph.open)
        return nearest(self._quick[1], queries, n, ef)

    def _keep(self, vectors: Any, graph: Any) -> None:
        """Save a graph this search rebuilt or caught up, so that the next search maps it
        instead of paying the same again; only when no run holds the store (a run saves its
        own when it ends) and the folder is writable."""
        try:
            self._lock_run()
        except (StoreBusyError, OSError):
            return
        try:
            graph.save(vectors)
        except OSError:
            pass
        finally:
            self._unlock_run()

    def keyword(
        self, text: str, n: int, where: SearchFilter | None = None
    ) -> list[tuple[int, float]]:
        """The `n` best (chunk id, BM25 score, higher is better) for the terms of `text`
        (`analyzer.query_terms` for the stored languages: its words among the chunks'
        words, its stems among their stems, any of them; FTS5's BM25 ranks those with more
        and rarer ones first, a stem's match weighing `analyzer.STEM_WEIGHT`); with
        `where`, among the chunks of the documents it keeps only."""
        terms, stems = analyzer.query_terms(text, self.languages())
        if not terms and not stems:
            return []
        self._take_pending()
        # Each term a quoted FTS5 string in its column: no query syntax can leak in.
        match = " OR ".join(
            f'{column} : "' + t.replace('"', '""') + '"'
            for column, items in (
                ("terms", terms[:MAX_QUERY_TERMS]),
                ("stems", stems[:MAX_QUERY_TERMS]),
            )
            for t in items
        )
        rank = f"bm25(chunks_terms, 1.0, {analyzer.STEM_WEIGHT})"
        ranked = (
            f"SELECT rowid, {rank} FROM chunks_terms WHERE chunks_terms "
            f"MATCH ? ORDER BY {rank}, rowid LIMIT ?"
        )
        if where is None:
            rows = self._conn.execute(ranked, (match, int(n))).fetchall()
        else:
            rows = keyword_within(self, ranked, match, rank, int(n), where)
        return [(int(r[0]), -float(r[1])) for r in rows]

    def chunks(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        """The chunk rows (with their document's root and source) for these ids."""
        # One statement for any number of ids (a search reads its lists' chunks at once).
        rows = self._conn.execute(
            f"SELECT {CHUNK_SELECT} FROM chunks c JOIN documents d ON d.id = c.doc_id "
            "WHERE c.id IN (SELECT value FROM json_each(?))",
            (json.dumps(sorted({int(i) for i in ids})),),
        )
        return {row[0]: ChunkRow.from_row(row) for row in rows}

    def document_chunks(self, root: str | os.PathLike[str], source: str) -> list[ChunkRow]:
        """One document's chunks in order."""
        rows = self._conn.execute(
            f"SELECT {CHUNK_SELECT} FROM chunks c JOIN documents d ON d.id = c.doc_id "
            "WHERE d.root = ? AND d.source = ? ORDER BY c.ordinal",
            (root_key(root), source),
        )
        return [ChunkRow.from_row(r) for r in rows]

    def vectors_by_key(self, keys: Iterable[str]) -> dict[str, np.ndarray]:
        """vector key -> stored vector (float32 `[dim]`) of those of `keys` that any
        stored chunk has (of any document): what a run reuses instead of encoding."""
        keys, dim, out = sorted(set(keys)), self.dim or 0, {}
        for start in range(0, len(keys), 500):
            part = keys[start : start + 500]
            for k, v in self._conn.execute(
                "SELECT vector_key, vector FROM chunks WHERE vector_key IN "
                f"({', '.join('?' * len(part))})",
                part,
            ):
                if (vector := unpack_vector(v, dim)) is not None:
                    out[k] = vector
        return out

    def stored_vectors(
        self, root: str | os.PathLike[str], source: str, keys: Iterable[str]
    ) -> dict[str, np.ndarray]:
        """vector key -> stored vector (float32 `[dim]`) of those of `keys` that one of
        the document's stored chunks has: what a run reuses instead of encoding."""
        wanted = set(keys)
        rows = self._conn.execute(
            "SELECT c.vector_key, c.vector FROM chunks c JOIN documents d ON d.id = c.doc_id "
            "WHERE d.root = ? AND d.source = ? AND c.vector_key IS NOT NULL",
            (root_key(root), source),
        ).fetchall()
        dim = self.dim or 0
        vectors = {k: unpack_vector(v, dim) for k, v in rows if k in wanted}
        return {k: v for k, v in vectors.items() if v is not None}
