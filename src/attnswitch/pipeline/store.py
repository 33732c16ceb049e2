"""Store: documents, chunks, vectors and run state, behind one protocol (`Store`).

Two implementations, opened by `location.open_store(location)`:

- `SQLiteStore`: one SQLite file (stdlib sqlite3, WAL), the default. Keyword search by
  FTS5 (BM25); dense search exact below `EXACT_BELOW` chunks, else by an HNSW graph kept
  beside the file (`ann.HnswIndex`).
- `PostgresStore` (`store_postgres`, for `postgresql://...` locations): a PostgreSQL
  server with pgvector. Keyword search by PostgreSQL full-text search; dense search by
  pgvector's HNSW index. Other processes and nodes may write to it (`url`).

The store is what makes a run resumable and idempotent:

- A document's row (its content hash, its config) and all its chunks and vectors are
  written in one transaction (`write_document`). A run killed at any moment, `kill -9`
  included, leaves each document either fully at its old state or fully at its new one;
  the next run's plan sees the old hash and redoes exactly the documents not committed.
- `plan(root, documents, config)` compares an ingested listing with the stored state:
  new, changed (other hash, other config, or previously skipped), unchanged, skipped
  (by ingest, with its reason) and deleted (stored under `root`, absent from the listing).
  `config` is a fingerprint of whatever makes vectors differ (model, chunking): a document
  indexed under another config is changed.
- Documents are keyed by (root, source): one store may index several folders, and a plan
  only ever deletes within the root it was given.

Vectors are float32, stored L2-normalised with their chunk, so cosine similarity is a dot
product; every vector in a store has the store's one dimension (`dim`). Bad input (wrong
dimension, non-finite or zero vectors, a skipped document passed as indexable, chunks and
vectors of different counts) raises `StoreInputError` before anything is written. A
stored vector of the wrong length raises `StoreCorruptError` when the vectors are read
(see `store_errors` for every error about the file itself).
"""

from __future__ import annotations

import abc
import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import re
import sqlite3
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar, Protocol, Self

import numpy as np

from attnswitch.pipeline import analyzer
from attnswitch.pipeline.filters import SearchFilter
from attnswitch.pipeline.ingest import Document, SourceFile
from attnswitch.pipeline.store_errors import (  # noqa: F401 (the store's errors, re-exported)
    REBUILD,
    StoreBusyError,
    StoreConnectError,
    StoreCorruptError,
    StoreInputError,
    check_schema,
)

DEFAULT_DATA_DIR = ".attnswitch"
DB_NAME = "index.sqlite3"
SCHEMA_VERSION = 7
# Below this many chunks the SQLite store's dense search is exact (all vectors in memory:
# 20,000 x 384 float32 is 29 MiB and a query ~2 ms); from it on, the HNSW graph answers.
EXACT_BELOW = 20_000
# The ANN search beam (`ef_search`, the candidates a graph search keeps) of both stores'
# HNSW indexes by default: at 1M clustered 384-d chunks it gives recall@10 0.99 against
# exact search in each (docs/results/search.md, "The search beam"); 128 gave 0.96.
EF_SEARCH = 512
# The widest beam a store or a request may ask for: pgvector's own limit, kept for both
# stores so that one request's cost stays bounded.
MAX_EF_SEARCH = 1000
# A keyword query uses at most this many of its words.
MAX_QUERY_TERMS = 64
RUN_STATUSES = ("running", "completed", "failed", "interrupted")
# Seconds a run waits for another process's run lock before it is refused as busy.
RUN_LOCK_WAIT_S = 5.0
# A job's statuses; "cancelled" (a client cancelled it) is never resumed, "interrupted" is.
JOB_STATUSES = ("queued", "running", "completed", "failed", "interrupted", "cancelled")
log = logging.getLogger(__name__)

_JOBS_TABLE = """CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    path TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'completed', 'failed',
                                           'interrupted', 'cancelled')),
    created_at REAL NOT NULL,
    started_at REAL,
    finished_at REAL,
    progress TEXT NOT NULL DEFAULT '{}',
    summary TEXT,
    error TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    resume INTEGER NOT NULL DEFAULT 0
)"""

# Content and chunk dedup: a document found by its hash, a stored vector by its key (the
# same statements for both stores, made once the chunks have their vector key column).
_DEDUP_INDEXES = (
    "CREATE INDEX IF NOT EXISTS documents_sha256 ON documents (sha256)",
    "CREATE INDEX IF NOT EXISTS chunks_vector_key ON chunks (vector_key)",
)
# The chunks' languages (`StoreBase.languages`), made once the column exists (version 7).
_LANGUAGE_INDEX = "CREATE INDEX IF NOT EXISTS chunks_language ON chunks (language)"

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS documents (
    id INTEGER PRIMARY KEY,
    root TEXT NOT NULL,
    source TEXT NOT NULL,
    sha256 TEXT,
    size INTEGER NOT NULL,
    mtime_ns INTEGER NOT NULL,
    kind TEXT,
    encoding TEXT,
    status TEXT NOT NULL CHECK (status IN ('indexed', 'skipped')),
    skip TEXT,
    reason TEXT,
    config TEXT NOT NULL,
    n_chunks INTEGER NOT NULL DEFAULT 0,
    n_tokens INTEGER NOT NULL DEFAULT 0,
    run_id INTEGER,
    updated_at REAL NOT NULL,
    UNIQUE (root, source)
)""",
    """CREATE TABLE IF NOT EXISTS chunks (
    id INTEGER PRIMARY KEY,
    doc_id INTEGER NOT NULL REFERENCES documents(id) ON DELETE CASCADE,
    ordinal INTEGER NOT NULL,
    text TEXT NOT NULL,
    n_tokens INTEGER NOT NULL,
    char_start INTEGER NOT NULL,
    char_end INTEGER NOT NULL,
    vector BLOB NOT NULL,
    heading_path TEXT NOT NULL DEFAULT '[]',
    location TEXT NOT NULL DEFAULT '{}',
    vector_key TEXT,
    language TEXT,
    UNIQUE (doc_id, ordinal)
)""",
    """CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY,
    root TEXT,
    config TEXT,
    pid INTEGER NOT NULL,
    started_at REAL NOT NULL,
    ended_at REAL,
    status TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed', 'interrupted')),
    counts TEXT NOT NULL DEFAULT '{}',
    summary TEXT NOT NULL DEFAULT '{}'
)""",
    # The service's indexing jobs (`service.jobs`): one row a job, kept across restarts;
    # `resume` marks an interrupted job that the next `serve` on this store finishes.
    _JOBS_TABLE,
    # Keyword search: a contentless FTS5 index of the chunks' terms (`analyzer`: the
    # text is stored once, in chunks; the terms are made from it by the function
    # `attnswitch_terms` that every connection of `SQLiteStore` registers, as FTS5 takes
    # no tokenizer from Python; it splits the terms on spaces only), and a log of chunk
    # inserts and deletes that the HNSW graph replays (ann.HnswIndex); triggers keep both
    # in the writing transaction. A delete gives FTS5 the terms the insert gave: the same
    # function of the same text and language, while the analyzer's fingerprint (meta
    # "analyzer") is unchanged; `_reanalyze` makes them all again when it changes.
    """CREATE VIRTUAL TABLE IF NOT EXISTS chunks_terms USING fts5(
    terms, stems, content='',
    tokenize="unicode61 remove_diacritics 0 categories 'L* M* N* Co Pc'")""",
    """CREATE TABLE IF NOT EXISTS chunk_log (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    chunk_id INTEGER NOT NULL
)""",
)
# The triggers: made after the upgrades, once the chunks have a language (SQLite's ALTER
# TABLE refuses to add a column while a trigger names a column the table lacks).
_CHUNK_TRIGGERS = (
    """CREATE TRIGGER IF NOT EXISTS chunks_indexed AFTER INSERT ON chunks BEGIN
    INSERT INTO chunks_terms (rowid, terms, stems) VALUES (new.id,
        attnswitch_terms(new.text, new.language), attnswitch_stems(new.text, new.language));
    INSERT INTO chunk_log (chunk_id) VALUES (new.id);
END""",
    """CREATE TRIGGER IF NOT EXISTS chunks_unindexed AFTER DELETE ON chunks BEGIN
    INSERT INTO chunks_terms (chunks_terms, rowid, terms, stems) VALUES ('delete', old.id,
        attnswitch_terms(old.text, old.language), attnswitch_stems(old.text, old.language));
    INSERT INTO chunk_log (chunk_id) VALUES (old.id);
END""",
)


# The chunk columns that schema version 3 added: heading path (a JSON array of the
# headings' titles, outermost first), location (a JSON object, `Location.to_dict`) and
# vector key (`vector_key`, NULL when not known).
CHUNK_STRUCTURE_COLUMNS = ("heading_path", "location", "vector_key")


class ChunkLike(Protocol):
    """What the store needs of a chunk (`chunk.Chunk` has it): its text, its token count
    and its character span `[start, end)` in its document's text. A chunk's ordinal is
    its position in the sequence given to `write_document`. Optional: `heading_path`
    (tuple of str), `location` (`readers.blocks.Location`) and `encoder_text` (what the
    encoder read, for the vector key; `text` when absent)."""

    text: str
    n_tokens: int
    start: int
    end: int


@dataclass(frozen=True)
class ChunkRecord:
    """A plain chunk, for callers without a chunk type of their own."""

    text: str
    n_tokens: int
    start: int
    end: int
    heading_path: tuple[str, ...] = ()
    location: Any = None


def vector_key(vector_fingerprint: str, encoder_text: str) -> str:
    """What identifies a stored vector: the SHA-256 (hex) of the config's vector
    fingerprint (`config.IndexConfig.vector_fingerprint`), a newline and the exact text
    the encoder read. A chunk whose key is stored has its vector already: a run reuses
    it rather than encode the text again."""
    return hashlib.sha256(f"{vector_fingerprint}\n{encoder_text}".encode()).hexdigest()


@dataclass(frozen=True)
class StoredDocument:
    """A document row as stored."""

    id: int
    root: str
    source: str
    sha256: str | None
    size: int
    mtime_ns: int
    status: str
    reason: str | None
    config: str
    n_chunks: int


@dataclass(frozen=True)
class SyncPlan:
    """What a run must do for `root`, from a listing of its files (`ingest.scan`): the files
    to read (`to_read`, with their stored rows in `stored`, None where not stored), the fresh
    ones it leaves alone (`fresh`, see `is_fresh_row`) and the stored sources that left the
    root (`deleted`). A file read is then `classify`-ed: new, changed, unchanged or skipped."""

    root: str
    to_read: tuple[SourceFile, ...] = ()
    fresh: tuple[SourceFile, ...] = ()
    deleted: tuple[str, ...] = ()
    stored: dict[str, StoredDocument | None] = field(default_factory=dict)


def is_fresh_row(row: StoredDocument | None, entry: SourceFile, config: str) -> bool:
    """The freshness rule: `entry` need not be read again when its stored `row` is indexed
    under `config` at the file's current size and mtime (a skipped file is read again: its
    reason may be gone). A False only means "read and hash it"; `classify` decides then."""
    return (row is not None and row.status == "indexed" and row.config == config
            and row.size == entry.size and row.mtime_ns == entry.mtime_ns
            and entry.error is None)


def indexed_sha(row: StoredDocument | None, config: str) -> str | None:
    """The content hash a read document must have to be "unchanged": the stored one when
    `row` is indexed under `config`, else None (nothing matches)."""
    indexed = row is not None and row.status == "indexed" and row.config == config
    return row.sha256 if indexed else None


@dataclass(frozen=True)
class RunRecord:
    """A row of the runs table: one `run.run` (or Ray run) on this store and its outcome."""

    id: int
    root: str | None
    config: str | None
    pid: int
    started_at: float
    ended_at: float | None
    status: str
    counts: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class JobRecord:
    """A row of the jobs table: one indexing job of the service (`service.jobs`). `path`
    is the folder as the service shows it (relative to its jobs root); `progress` and
    `summary` are JSON objects; `attempts` counts its starts (a resumed job has more than
    one); `resume`: interrupted, to be finished by the next server on this store."""

    id: str
    path: str
    status: str
    created_at: float
    started_at: float | None = None
    finished_at: float | None = None
    progress: dict[str, Any] = field(default_factory=dict)
    summary: dict[str, Any] | None = None
    error: str | None = None
    attempts: int = 0
    resume: bool = False


_JOB_COLUMNS = tuple(f.name for f in dataclasses.fields(JobRecord))


@dataclass(frozen=True)
class StoreStatus:
    """`skipped_by_reason` counts skipped files per category; `skipped_files` lists
    (root, source, reason) for each, sorted. `copies`: indexed documents whose content
    (hash) another indexed document has too, stored once more without being encoded."""

    path: str
    documents: int
    chunks: int
    tokens: int
    skipped: int
    skipped_by_reason: dict[str, int]
    skipped_files: tuple[tuple[str, str, str], ...]
    dim: int | None
    roots: tuple[str, ...]
    last_run: RunRecord | None
    copies: int = 0


@dataclass(frozen=True)
class ChunkRow:
    """A stored chunk with its document's root and source. `heading_path`: the titles of
    the headings it lies under, outermost first; `location`: where it lies in its file
    (`Location.to_dict`: page, page_end, slide, sheet, rows, part, cell; {} when not
    known); `language`: its language (`analyzer.detect_language`, "" for none)."""

    id: int
    root: str
    source: str
    ordinal: int
    text: str
    n_tokens: int
    start: int
    end: int
    heading_path: tuple[str, ...] = ()
    location: dict[str, Any] = field(default_factory=dict)
    language: str = ""

    @classmethod
    def from_row(cls, row: Sequence[Any]) -> ChunkRow:
        """A row of `CHUNK_SELECT` (the JSON columns parsed)."""
        *head, path, location, language = row
        return cls(*head, tuple(json.loads(path or "[]")), json.loads(location or "{}"),
                   language or "")


# The columns a ChunkRow is read from (chunks c joined with documents d).
CHUNK_SELECT = ("c.id, d.root, d.source, c.ordinal, c.text, c.n_tokens, c.char_start, "
                "c.char_end, c.heading_path, c.location, c.language")


class Store(Protocol):
    """What the pipeline, the search and the service use of a store: the one seam between
    them and a database. `SQLiteStore` and `store_postgres.PostgresStore` implement it.

    `location` names the store for people (a file path, or a URL without its password);
    `url` is how another process or node opens it for writing (`open_store(url)`), None
    when only this process may write (SQLite: one writer, kept with the driver).
    `ef_search` is the ANN search beam of a dense search that names none.
    Vectors in and out are float32 `[N, dim]`, L2-normalised; ids are chunk ids.
    """

    location: str
    url: str | None
    ef_search: int

    @property
    def dim(self) -> int | None: ...
    def own_files(self) -> set[Path]: ...
    def close(self) -> None: ...
    def __enter__(self) -> Store: ...
    def __exit__(self, *exc: object) -> None: ...
    def meta(self, key: str) -> str | None: ...
    def set_meta(self, key: str, value: str) -> None: ...
    def lookup(self, root: str | os.PathLike, source: str) -> StoredDocument | None: ...
    def sources(self, root: str | os.PathLike) -> set[str]: ...
    def roots(self) -> list[str]: ...
    def root_counts(self, root: str | os.PathLike) -> tuple[int, int]: ...
    def is_fresh(self, entry: SourceFile, config: str = "") -> bool: ...
    def classify(self, doc: Document, config: str = "") -> str: ...
    def plan(self, root: str | os.PathLike, entries: Iterable[SourceFile],
             config: str = "") -> SyncPlan: ...
    def write_document(self, doc: Document, chunks: Sequence[ChunkLike], vectors: Any, *,
                       config: str = "", run_id: int | None = None,
                       vector_fingerprint: str | None = None) -> int: ...
    def record_skip(self, doc: Document, *, config: str = "",
                    run_id: int | None = None) -> int: ...
    def touch(self, doc: Document) -> None: ...
    def remove(self, root: str | os.PathLike, sources: Iterable[str]) -> int: ...
    def indexed_sizes(self, config: str) -> set[int]: ...
    def copies_of(self, sha256: str, config: str) -> list[StoredDocument]: ...
    def copy_document(self, original: StoredDocument, doc: Document, *,
                      run_id: int | None = None) -> int: ...
    def move_document(self, root: str | os.PathLike, old_source: str,
                      doc: Document) -> bool: ...
    def forget(self, root: str | os.PathLike, source: str = "") -> int: ...
    def vectors_by_key(self, keys: Iterable[str]) -> dict[str, np.ndarray]: ...
    def begin_run(self, root: str | os.PathLike | None = None, config: str = "") -> int: ...
    def finish_run(self, run_id: int, status: str = "completed", *,
                   counts: dict[str, Any] | None = None,
                   summary: dict[str, Any] | None = None) -> None: ...
    def runs(self, limit: int | None = None) -> list[RunRecord]: ...
    def check_unlocked(self, wait_s: float = 0.0) -> None: ...
    def save_job(self, job: JobRecord) -> None: ...
    def jobs(self, limit: int | None = None) -> list[JobRecord]: ...
    def job(self, job_id: str) -> JobRecord | None: ...
    def interrupt_jobs(self, error: str) -> list[str]: ...
    def status(self) -> StoreStatus: ...
    def count(self) -> int: ...
    def vectors(self) -> tuple[np.ndarray, np.ndarray]: ...
    def chunks(self, ids: Iterable[int]) -> dict[int, ChunkRow]: ...
    def document_chunks(self, root: str | os.PathLike, source: str) -> list[ChunkRow]: ...
    def dense(self, queries: np.ndarray, n: int, ef: int | None = None,
              where: SearchFilter | None = None) -> list[list[tuple[int, float]]]: ...
    def keyword(self, text: str, n: int,
                where: SearchFilter | None = None) -> list[tuple[int, float]]: ...
    def allowed_documents(self, where: SearchFilter) -> list[int]: ...
    def languages(self) -> list[str]: ...


def keyword_terms(text: str) -> list[str]:
    """The words of a keyword query (letters, digits, underscores), at most
    `MAX_QUERY_TERMS`; each store turns them into its own query syntax."""
    return [t for t in re.findall(r"\w+", text) if any(c.isalnum() for c in t)][
        :MAX_QUERY_TERMS]


class StoreBase(abc.ABC):
    """What every store does the same way on top of its own hooks: freshness,
    classification, plans, skips and the runs table.

    A store subclass provides
    - `_conn`: its connection, whose `execute(sql, params)` takes `_mark` placeholders and
      returns a cursor with `fetchone`/`fetchall`; `_mark`: the placeholder ("?" unless set);
    - `ef_search`: the ANN search beam of a dense search that names none;
    - `_transaction()`: a context manager giving a connection inside one transaction;
    - `_lock_run()` / `_unlock_run()`: take and release the store's one-run-at-a-time lock;
    - `_upsert(conn, doc, status, config, run_id, *, n_chunks, n_tokens) -> int`: write a
      document row (`_document_values`), return its id;
    - `close` of the `Store` protocol.
    """

    _mark: ClassVar[str] = "?"
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
    def _upsert(self, conn: Any, doc: Document, status: str, config: str,
                run_id: int | None, *, n_chunks: int = 0, n_tokens: int = 0) -> int: ...

    @abc.abstractmethod
    def close(self) -> None: ...

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- runs -----------------------------------------------------------------------

    def begin_run(self, root: str | os.PathLike | None = None, config: str = "") -> int:
        """Start a run: take the store's run lock (one run per store at a time; another
        process's is waited for up to `RUN_LOCK_WAIT_S`, then `StoreBusyError`), mark runs
        left "running" by a killed process as "interrupted", and return the new run id."""
        self._wait_for_run_lock()
        m = self._mark
        try:
            with self._transaction() as conn:
                conn.execute("UPDATE runs SET status = 'interrupted' WHERE status = 'running'")
                return int(conn.execute(
                    f"INSERT INTO runs (root, config, pid, started_at, status) "
                    f"VALUES ({m}, {m}, {m}, {m}, 'running') RETURNING id",
                    (root_key(root) if root is not None else None, config, os.getpid(),
                     time.time())).fetchone()[0])
        except BaseException:
            self._unlock_run()
            raise

    def finish_run(self, run_id: int, status: str = "completed", *,
                   counts: dict[str, Any] | None = None,
                   summary: dict[str, Any] | None = None) -> None:
        """Close a run with its status, counts and a JSON-serialisable summary, then release
        the run lock (after the store's own end-of-run work, `_run_finished`)."""
        if status not in RUN_STATUSES or status == "running":
            raise StoreInputError("status", f"one of {RUN_STATUSES[1:]}", repr(status))
        m = self._mark
        try:
            with self._transaction() as conn:
                conn.execute(f"UPDATE runs SET status = {m}, ended_at = {m}, counts = {m}, "
                             f"summary = {m} WHERE id = {m}",
                             (status, time.time(), json.dumps(counts or {}, sort_keys=True),
                              json.dumps(summary or {}, sort_keys=True, default=str), run_id))
            self._run_finished(status)
        finally:
            self._unlock_run()

    def _run_finished(self, status: str) -> None:
        """What the store does when a run ends with `status`, still under the run lock."""

    def check_unlocked(self, wait_s: float = 0.0) -> None:
        """Raise `StoreBusyError` when another process holds this store's run lock for
        longer than `wait_s` seconds (takes the lock and lets go of it at once; a run may
        still start right after)."""
        self._wait_for_run_lock(wait_s)
        self._unlock_run()

    def _wait_for_run_lock(self, wait_s: float = RUN_LOCK_WAIT_S) -> None:
        """Take the run lock, trying again for up to `wait_s` seconds while another process
        holds it."""
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

    # -- jobs -----------------------------------------------------------------------

    def save_job(self, job: JobRecord) -> None:
        """Insert or replace the row of `job` (one statement: atomic)."""
        if job.status not in JOB_STATUSES:
            raise StoreInputError("status", f"one of {JOB_STATUSES}", repr(job.status))
        values = [getattr(job, c) for c in _JOB_COLUMNS]
        values[_JOB_COLUMNS.index("progress")] = json.dumps(job.progress, sort_keys=True)
        values[_JOB_COLUMNS.index("summary")] = (
            None if job.summary is None else json.dumps(job.summary, sort_keys=True,
                                                        default=str))
        values[_JOB_COLUMNS.index("resume")] = int(job.resume)
        marks = ", ".join([self._mark] * len(values))
        updates = ", ".join(f"{c} = excluded.{c}" for c in _JOB_COLUMNS if c != "id")
        with self._transaction() as conn:
            conn.execute(f"INSERT INTO jobs ({', '.join(_JOB_COLUMNS)}) VALUES ({marks}) "
                         f"ON CONFLICT (id) DO UPDATE SET {updates}", values)

    def jobs(self, limit: int | None = None) -> list[JobRecord]:
        """Jobs, newest first (by creation time)."""
        sql = f"SELECT {', '.join(_JOB_COLUMNS)} FROM jobs ORDER BY created_at DESC, id"
        rows = self._conn.execute(sql + (f" LIMIT {self._mark}" if limit else ""),
                                  (limit,) if limit else ()).fetchall()
        return [_job_record(r) for r in rows]

    def job(self, job_id: str) -> JobRecord | None:
        row = self._conn.execute(f"SELECT {', '.join(_JOB_COLUMNS)} FROM jobs WHERE id = "
                                 f"{self._mark}", (job_id,)).fetchone()
        return _job_record(row) if row else None

    def interrupt_jobs(self, error: str) -> list[str]:
        """Mark the jobs left queued or running by a server that died as interrupted, with
        `error`, to be resumed; the ids of every job to resume, oldest first.

        Only when no other process runs on this store: a job that is running holds the
        store's run lock, so while another process holds it (a second server on the same
        store, or `attnswitch run`), its rows are its own, and this raises
        `StoreBusyError` without marking any (after `RUN_LOCK_WAIT_S`: the lock of a
        process killed a moment ago may take that long to go)."""
        self._wait_for_run_lock()
        m = self._mark
        try:
            with self._transaction() as conn:
                conn.execute(f"UPDATE jobs SET status = 'interrupted', error = {m}, "
                             f"resume = 1, finished_at = {m} WHERE status IN ('queued', "
                             f"'running')", (error, time.time()))
                return [r[0] for r in conn.execute(
                    "SELECT id FROM jobs WHERE status = 'interrupted' AND resume = 1 "
                    "ORDER BY created_at, id").fetchall()]
        finally:
            self._unlock_run()

    def beam(self, ef: int | None) -> int:
        """The ANN search beam of one dense search: `ef`, checked, or the store's
        `ef_search` when None."""
        return self.ef_search if ef is None else check_ef_search(ef)

    def languages(self) -> list[str]:
        """The languages of the stored chunks (`analyzer.detect_language`; "" for chunks
        of none), each once, sorted: one index seek a language (a loose index scan)."""
        return [r[0] for r in self._conn.execute(
            "WITH RECURSIVE seen(language) AS (SELECT min(language) FROM chunks UNION ALL "
            "SELECT (SELECT min(language) FROM chunks WHERE language > seen.language) FROM "
            "seen WHERE seen.language IS NOT NULL) SELECT language FROM seen WHERE "
            "language IS NOT NULL").fetchall()]

    def allowed_documents(self, where: SearchFilter) -> list[int]:
        """The ids of the indexed documents `where` keeps (`filters.SearchFilter`): kinds
        and times checked by SQL, paths and extensions here, on the rows SQL kept."""
        conditions, params = where.sql(self._mark)
        rows = self._read(f"SELECT d.id, d.root, d.source, d.kind FROM documents d "
                          f"WHERE {conditions} ORDER BY d.id", params)
        return [int(r[0]) for r in rows if where.matches(r[1], r[2], r[3])]

    # -- the stored state ---------------------------------------------------------------

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        """The rows of one read-only query (`_mark` placeholders); a store whose connection
        can be lost reads again on a new one (`PostgresStore`)."""
        return self._conn.execute(sql, params).fetchall()

    def lookup(self, root: str | os.PathLike, source: str) -> StoredDocument | None:
        """The row of `source` under `root`, or None when it is not stored."""
        m = self._mark
        rows = self._read(
            "SELECT id, root, source, sha256, size, mtime_ns, status, reason, config, n_chunks"
            f" FROM documents WHERE root = {m} AND source = {m}", (root_key(root), source))
        return StoredDocument(*rows[0]) if rows else None

    def roots(self) -> list[str]:
        """Every root with a stored document, sorted."""
        return [r[0] for r in self._read("SELECT DISTINCT root FROM documents ORDER BY root")]

    def sources(self, root: str | os.PathLike) -> set[str]:
        """Every source stored under `root`, indexed or skipped."""
        rows = self._read(f"SELECT source FROM documents WHERE root = {self._mark}",
                          (root_key(root),))
        return {r[0] for r in rows}

    def root_counts(self, root: str | os.PathLike) -> tuple[int, int]:
        """(indexed documents, their chunks) stored under `root`."""
        ((docs, chunks),) = self._read(
            "SELECT COUNT(*), COALESCE(SUM(n_chunks), 0) FROM documents WHERE root = "
            f"{self._mark} AND status = 'indexed'", (root_key(root),))
        return int(docs), int(chunks)

    def is_fresh(self, entry: SourceFile, config: str = "") -> bool:
        """`is_fresh_row` of `entry`'s stored row: True when a run may skip reading it."""
        return is_fresh_row(self.lookup(entry.root, entry.source), entry, config)

    def classify(self, doc: Document, config: str = "") -> str:
        """"skipped", "new", "changed" or "unchanged" for one ingested document."""
        if not doc.ok:
            return "skipped"
        row = self.lookup(doc.root, doc.source)
        if row is None:
            return "new"
        return "unchanged" if indexed_sha(row, config) == doc.sha256 else "changed"

    def plan(self, root: str | os.PathLike, entries: Iterable[SourceFile],
             config: str = "") -> SyncPlan:
        """Compare a complete listing of `root` (`ingest.scan(root)`) with the stored state
        (`SyncPlan`). Every entry must belong to `root`, each source once."""
        key = root_key(root)
        to_read: list[SourceFile] = []
        fresh: list[SourceFile] = []
        stored: dict[str, StoredDocument | None] = {}
        for entry in entries:
            if entry.root != key:
                raise StoreInputError("entries", f"files under root {key!r}",
                                      f"{entry.source!r} under {entry.root!r}")
            if entry.source in stored:
                raise StoreInputError("entries", "each source once", f"{entry.source!r} twice")
            stored[entry.source] = row = self.lookup(key, entry.source)
            (fresh if is_fresh_row(row, entry, config) else to_read).append(entry)
        deleted = tuple(sorted(self.sources(key) - set(stored)))
        return SyncPlan(key, tuple(to_read), tuple(fresh), deleted,
                        {e.source: stored[e.source] for e in to_read})

    def record_skip(self, doc: Document, *, config: str = "",
                    run_id: int | None = None) -> int:
        """Record that `doc` was skipped, with its reason; any chunks it had go."""
        if doc.ok:
            raise StoreInputError("doc", "a skipped document", f"{doc.source!r} with text")
        with self._transaction() as conn:
            doc_id = self._upsert(conn, doc, "skipped", config, run_id)
            conn.execute(f"DELETE FROM chunks WHERE doc_id = {self._mark}", (doc_id,))
        return doc_id

    # -- content dedup, moves and forgetting --------------------------------------------

    def _retrying(self, fn: Any) -> Any:
        """`fn()`; a store whose connection can be lost does it again on a new one."""
        return fn()

    def indexed_sizes(self, config: str) -> set[int]:
        """The sizes of the documents indexed under `config`: only a file of one of these
        sizes can be a copy of one of them (what a run hashes before reading)."""
        return {int(r[0]) for r in self._read(
            f"SELECT DISTINCT size FROM documents WHERE config = {self._mark} AND "
            "status = 'indexed' AND sha256 IS NOT NULL", (config,))}

    def copies_of(self, sha256: str, config: str) -> list[StoredDocument]:
        """The documents indexed under `config` whose content hash is `sha256`, oldest
        first: a file with these bytes has their chunks and vectors already."""
        m = self._mark
        rows = self._read(
            "SELECT id, root, source, sha256, size, mtime_ns, status, reason, config, n_chunks"
            f" FROM documents WHERE sha256 = {m} AND config = {m} AND status = 'indexed' "
            "ORDER BY id", (sha256, config))
        return [StoredDocument(*r) for r in rows]

    def copy_document(self, original: StoredDocument, doc: Document, *,
                      run_id: int | None = None) -> int:
        """Index `doc` (a file with the same bytes as `original`, at another path) with a
        copy of `original`'s chunks and vectors, in one transaction: nothing is read,
        chunked or encoded. Returns the new document's id."""
        if (root_key(original.root), original.source) == (root_key(doc.root), doc.source):
            raise StoreInputError("doc", "another path than the original's",
                                  f"{doc.source!r} itself")
        m, vector = self._mark, self._vector_column
        columns = ("ordinal, text, n_tokens, char_start, char_end, heading_path, location, "
                   f"{self._copied_columns}, {vector}")

        def copy() -> int:
            with self._transaction() as conn:
                row = conn.execute(f"SELECT kind, encoding, n_chunks, n_tokens FROM documents "
                                   f"WHERE id = {m} AND status = 'indexed'",
                                   (original.id,)).fetchone()
                if row is None:
                    raise StoreInputError("original", "an indexed document",
                                          f"{original.source!r}, no longer stored")
                kind, encoding, n_chunks, n_tokens = row
                doc_id = self._upsert(conn, dataclasses.replace(doc, kind=kind,
                                                                encoding=encoding),
                                      "indexed", original.config, run_id,
                                      n_chunks=n_chunks, n_tokens=n_tokens)
                conn.execute(f"DELETE FROM chunks WHERE doc_id = {m}", (doc_id,))
                conn.execute(f"INSERT INTO chunks (doc_id, {columns}) SELECT {m}, {columns} "
                             f"FROM chunks WHERE doc_id = {m}", (doc_id, original.id))
                return int(doc_id)
        return self._retrying(copy)

    def move_document(self, root: str | os.PathLike, old_source: str, doc: Document) -> bool:
        """Give the stored document `old_source` of `root` the path (and size and mtime) of
        `doc`: a file moved or renamed within the root keeps its chunks and vectors. False
        when `old_source` is not stored."""
        m = self._mark

        def move() -> bool:
            with self._transaction() as conn:
                return conn.execute(
                    f"UPDATE documents SET source = {m}, size = {m}, mtime_ns = {m}, "
                    f"updated_at = {m} WHERE root = {m} AND source = {m}",
                    (doc.source, doc.size, doc.mtime_ns, time.time(), root_key(root),
                     old_source)).rowcount == 1
        return self._retrying(move)

    def forget(self, root: str | os.PathLike, source: str = "") -> int:
        """Remove from the index the document `source` of `root`, or every document below
        it when `source` is a folder ("": the whole root), with their chunks and vectors;
        returns how many documents went. Waits for a run on this store to end first (the
        run lock), like a run."""
        m, key = self._mark, root_key(root)
        prefix = source.strip("/")
        self._wait_for_run_lock()
        try:
            def forget() -> int:
                with self._transaction() as conn:
                    if not prefix:
                        return conn.execute(f"DELETE FROM documents WHERE root = {m}",
                                            (key,)).rowcount
                    return conn.execute(
                        f"DELETE FROM documents WHERE root = {m} AND (source = {m} OR "
                        f"substr(source, 1, {m}) = {m})",
                        (key, prefix, len(prefix) + 1, prefix + "/")).rowcount
            removed = self._retrying(forget)
            self._run_finished("completed")
            return removed
        finally:
            self._unlock_run()

    def _copies(self) -> int:
        """Indexed documents whose content another indexed document has too."""
        ((n,),) = self._read("SELECT COUNT(*) - COUNT(DISTINCT sha256) FROM documents "
                             "WHERE status = 'indexed' AND sha256 IS NOT NULL")
        return int(n)

    def runs(self, limit: int | None = None) -> list[RunRecord]:
        """Runs, newest first."""
        sql = ("SELECT id, root, config, pid, started_at, ended_at, status, counts, summary"
               " FROM runs ORDER BY id DESC")
        rows = self._conn.execute(sql + (f" LIMIT {self._mark}" if limit else ""),
                                  (limit,) if limit else ()).fetchall()
        return [RunRecord(*r[:7], json.loads(r[7]), json.loads(r[8])) for r in rows]

    @staticmethod
    def _document_values(doc: Document, status: str, config: str, run_id: int | None,
                         n_chunks: int, n_tokens: int) -> dict[str, Any]:
        """A document row's columns, as `_upsert` writes them."""
        return dict(root=doc.root, source=doc.source, sha256=doc.sha256, size=doc.size,
                    mtime_ns=doc.mtime_ns, kind=doc.kind, encoding=doc.encoding,
                    status=status, skip=doc.skip.value if doc.skip else None,
                    reason=doc.reason, config=config, n_chunks=n_chunks,
                    n_tokens=n_tokens, run_id=run_id, updated_at=time.time())



# What each schema version adds to a file of the version before, beyond the tables and
# triggers `_SCHEMA` creates (IF NOT EXISTS) for every version.
# 2: keyword search (FTS5) and the chunk log: a version-1 file's stored text is indexed.
# 3: the jobs table (created by `_SCHEMA`; nothing to convert).
# 4: the chunks' heading path, location and vector key (`CHUNK_STRUCTURE_COLUMNS`); the
#    stored chunks' vector keys are filled in (`_fill_vector_keys`), so the next run
#    re-chunks every document (its config changed) and reuses each vector whose text
#    it finds again.
# 5: a job may be "cancelled": the jobs table is made again with the wider CHECK (SQLite
#    cannot change a constraint in place), its rows copied over.
# 6: indexes on the documents' hash and the chunks' vector key (`_DEDUP_INDEXES`, made
#    after every upgrade: the vector key column is version 4's).
# 7: keyword search by the analyzer's terms (`analyzer`): each chunk's language, and the
#    index of terms in place of FTS5's own words of the text (filled by `_reanalyze`, as
#    the index of a version-1 file, which had none, is).
_UPGRADES: Mapping[int, tuple[str, ...]] = MappingProxyType({
    4: ("ALTER TABLE chunks ADD COLUMN heading_path TEXT NOT NULL DEFAULT '[]'",
        "ALTER TABLE chunks ADD COLUMN location TEXT NOT NULL DEFAULT '{}'",
        "ALTER TABLE chunks ADD COLUMN vector_key TEXT"),
    5: ("ALTER TABLE jobs RENAME TO jobs_before_cancel",
        _JOBS_TABLE,
        f"INSERT INTO jobs ({', '.join(_JOB_COLUMNS)}) SELECT {', '.join(_JOB_COLUMNS)} "
        "FROM jobs_before_cancel",
        "DROP TABLE jobs_before_cancel"),
    7: ("DROP TRIGGER IF EXISTS chunks_inserted", "DROP TRIGGER IF EXISTS chunks_deleted",
        "DROP TABLE IF EXISTS chunks_fts", "ALTER TABLE chunks ADD COLUMN language TEXT",
        "DELETE FROM meta WHERE key = 'analyzer'"),
})
# The last version whose upgrade changes the chunks (what `MIGRATED` tells).
CHUNKS_CHANGED_IN = 4
# The columns a table may lack in a file of an older schema version (its upgrade adds them).
_ADDED_COLUMNS = frozenset(("chunks", c) for c in (*CHUNK_STRUCTURE_COLUMNS, "language"))
MIGRATED = ("{where}: index upgraded to schema version {version} (chunks get a heading "
            "path and a location); the next run re-chunks its documents and reuses every "
            "vector whose text is unchanged")


def _job_record(row: Sequence[Any]) -> JobRecord:
    values = dict(zip(_JOB_COLUMNS, row))
    values["progress"] = json.loads(values["progress"] or "{}")
    values["summary"] = None if values["summary"] is None else json.loads(values["summary"])
    values["resume"] = bool(values["resume"])
    return JobRecord(**values)


def _migrate(conn: sqlite3.Connection, version: int) -> None:
    """Bring a file of schema `version` (0: a new file) to SCHEMA_VERSION, inside the
    caller's transaction: create what is missing, then each upgrade after `version` in
    order; the stored documents, chunks, vectors and runs are kept."""
    for statement in _SCHEMA:
        conn.execute(statement)
    if version > 0:
        for step in range(version + 1, SCHEMA_VERSION + 1):
            for statement in _UPGRADES.get(step, ()):
                added = re.match(r"ALTER TABLE (\w+) ADD COLUMN (\w+)", statement)
                if added and added.group(2) in {
                        row[1] for row in conn.execute(f"PRAGMA table_info({added.group(1)})")}:
                    continue  # a file that already has it (made by a later version's DDL)
                conn.execute(statement)
            if step == 4:
                conn.create_function("attnswitch_vector_key", 2, vector_key,
                                     deterministic=True)
                _fill_vector_keys(conn, "?", "attnswitch_vector_key(?, text)")
    for statement in (*_DEDUP_INDEXES, _LANGUAGE_INDEX, *_CHUNK_TRIGGERS):
        conn.execute(statement)
    conn.execute("INSERT OR IGNORE INTO meta VALUES ('store_id', ?)", (uuid.uuid4().hex,))
    conn.execute(f"PRAGMA user_version={SCHEMA_VERSION}")


def _register_analyzer(conn: sqlite3.Connection) -> None:
    """Give `conn` the functions the keyword index's triggers call: `attnswitch_terms(text,
    language)` and `attnswitch_stems(text, language)` (the analyzer's words and stems of a
    chunk, joined by spaces) and `attnswitch_language(text)`."""
    conn.create_function(
        "attnswitch_terms", 2,
        lambda text, language: " ".join(analyzer.document_terms(text, language or "")),
        deterministic=True)
    conn.create_function(
        "attnswitch_stems", 2,
        lambda text, language: " ".join(analyzer.document_stems(text, language or "")),
        deterministic=True)
    conn.create_function("attnswitch_language", 1, analyzer.detect_language,
                         deterministic=True)


def _reanalyze(conn: sqlite3.Connection, where: str) -> None:
    """Make the keyword index again with this analyzer (`analyzer.fingerprint`), inside
    the caller's transaction: the chunks stored without a language get theirs, every
    chunk's terms are indexed again; no vector changes."""
    row = conn.execute("SELECT value FROM meta WHERE key = 'analyzer'").fetchone()
    if row is not None and row[0] == analyzer.fingerprint():
        return  # another process made it meanwhile
    started = time.monotonic()
    conn.execute("UPDATE chunks SET language = attnswitch_language(text) "
                 "WHERE language IS NULL")
    conn.execute("INSERT INTO chunks_terms (chunks_terms) VALUES ('delete-all')")
    conn.execute("INSERT INTO chunks_terms (rowid, terms, stems) SELECT id, "
                 "attnswitch_terms(text, language), attnswitch_stems(text, language) "
                 "FROM chunks")
    conn.execute("INSERT OR REPLACE INTO meta VALUES ('analyzer', ?)",
                 (analyzer.fingerprint(),))
    if (n := conn.execute("SELECT count(*) FROM chunks").fetchone()[0]):
        log.info("%s: keyword index made again by analyzer %s (%d chunks, %.1f s)",
                 where, analyzer.fingerprint(), n, time.monotonic() - started)


def _fill_vector_keys(conn: Any, mark: str, key_sql: str) -> None:
    """Set the vector key of the chunks stored before vector keys existed: for the
    documents indexed under the store's config (meta "index", whose chunk text is what the
    encoder read: no heading path was embedded then), `key_sql` computes it from the
    vector fingerprint and the text in SQL. Others keep NULL (their vectors are not
    reused)."""
    row = conn.execute(f"SELECT value FROM meta WHERE key = {mark}", ("index",)).fetchone()
    if row is None:
        return
    from attnswitch.pipeline.config import IndexConfig

    try:
        stored = IndexConfig.from_json(row[0])
    except (TypeError, ValueError):  # a config this version cannot read: keys stay NULL
        return
    if stored.embed_headings:
        return
    conn.execute(f"UPDATE chunks SET vector_key = {key_sql} "
                 f"WHERE vector_key IS NULL AND doc_id IN (SELECT id FROM documents WHERE "
                 f"config = {mark})", (stored.vector_fingerprint, stored.fingerprint))


def check_ef_search(ef: object) -> int:
    """`ef` as an ANN search beam: an integer from 1 to `MAX_EF_SEARCH`, else
    `StoreInputError` naming it."""
    if isinstance(ef, bool) or not isinstance(ef, int | np.integer) or not (
            1 <= ef <= MAX_EF_SEARCH):
        raise StoreInputError("ef_search", f"an integer from 1 to {MAX_EF_SEARCH}", repr(ef))
    return int(ef)


def resolve_path(path: str | os.PathLike | None = None) -> Path:
    """The database file `path` names (the one rule for the library, the CLI's `--db` and the
    service): `./.attnswitch/index.sqlite3` when None; an existing file as is; `<dir>/
    index.sqlite3` for an existing folder, a path ending with a separator, or a new path
    without a file suffix (a data folder to create); a new path with a suffix (`x.db`) is
    the file itself."""
    if path is None:
        return Path(DEFAULT_DATA_DIR) / DB_NAME
    p = Path(path)
    if p.is_file():
        return p
    if p.is_dir() or str(path).endswith(("/", os.sep)) or not p.suffix:
        return p / DB_NAME
    return p


def check_index_file(path: Path) -> None:
    """Raise `StoreCorruptError` unless the existing file at `path` is an attnswitch index
    (a SQLite database with the index's `meta` and `documents` tables), looking at it
    read-only: another program's database, an empty file or a file of another kind is
    refused untouched, never turned into an index. A table of the index's with other
    columns is refused by `check_schema`; a file of a newer schema version is left to the
    constructor's version check (which refuses it, untouched too)."""
    # Through SQLite only: closing a descriptor of our own on the file would drop the locks
    # that this process's other connections hold on it (POSIX advisory locks are per
    # process and per file).
    if path.is_dir():
        raise StoreCorruptError(f"{path}: expected an index file, got a folder; use another "
                                "--db", path=path)
    if path.stat().st_size == 0:
        raise StoreCorruptError(f"{path}: not a readable attnswitch index (an empty file); it "
                                f"is left as it is: use another --db, or {REBUILD}", path=path)
    try:
        conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=30.0)
    except sqlite3.Error as exc:
        raise StoreCorruptError(f"{path}: cannot be opened for reading ({exc}); check its "
                                "permissions, or use another --db", path=path) from None
    try:
        try:
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            tables = {r[0] for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        except sqlite3.DatabaseError as exc:
            if "not a database" not in str(exc):
                raise  # locked, malformed...: `store_errors.describe` says what to do
            raise StoreCorruptError(f"{path}: not a readable attnswitch index (not a SQLite "
                                    f"database); it is left as it is: use another --db, or "
                                    f"{REBUILD}", path=path) from None
        # a table of the index's with other columns
        check_schema(conn, _SCHEMA, path, _ADDED_COLUMNS)
    finally:
        conn.close()
    if version <= SCHEMA_VERSION and not {"meta", "documents"} <= tables:
        shown = ", ".join(sorted(tables)[:5]) or "none"
        raise StoreCorruptError(f"{path}: not an attnswitch index of a schema this version "
                                f"knows (a SQLite database with tables: {shown}; made by "
                                f"another program?); it is left as it is: use another --db, "
                                f"or {REBUILD}", path=path)


def root_key(root: str | os.PathLike) -> str:
    """How a root is stored: its absolute, resolved path (as `ingest.scan` records it)."""
    return str(Path(root).resolve())


class SQLiteStore(StoreBase):
    """One SQLite database. Open with `SQLiteStore(path)` (see `resolve_path`), use as a
    context manager or call `close()`. Reads never block on a running writer (WAL).
    `exact_below`: chunks below which dense search is exact (`EXACT_BELOW`); `ef_search`:
    the HNSW search beam above it (`EF_SEARCH`)."""

    url = None  # one writer: this process

    def __init__(self, path: str | os.PathLike | None = None, *,
                 exact_below: int = EXACT_BELOW, ef_search: int | None = None):
        self.path = resolve_path(path)
        self.exact_below = exact_below
        self.ef_search = check_ef_search(EF_SEARCH if ef_search is None else ef_search)
        if self.path.exists():
            check_index_file(self.path)  # before anything may write to it
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(self.path, isolation_level=None, timeout=30.0)
        _register_analyzer(self._conn)
        self._lock_fh = None
        self._dense: tuple[int, Any] | None = None  # (log position, exact matrix or graph)
        self._counted: tuple[int, int] | None = None  # (log position, chunk count)
        try:
            version = self._conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise StoreInputError("store", f"schema version <= {SCHEMA_VERSION}",
                                      f"{version} in {self.path} (made by a newer attnswitch)")
            check_schema(self._conn, _SCHEMA, self.path, _ADDED_COLUMNS)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")  # WAL: durable across crashes
            self._conn.execute("PRAGMA foreign_keys=ON")
            self.location = str(self.path.resolve())
            self.migrated: str | None = None
            if version < SCHEMA_VERSION:
                with self._transaction():
                    _migrate(self._conn, version)
                if 0 < version < CHUNKS_CHANGED_IN:
                    self.migrated = MIGRATED.format(where=self.location, version=SCHEMA_VERSION)
                    log.info("%s", self.migrated)
            if self.meta("analyzer") != analyzer.fingerprint():
                with self._transaction() as conn:
                    _reanalyze(conn, self.location)
            self.store_id = self.meta("store_id")
        except BaseException:
            self._conn.close()
            raise

    # -- lifecycle ------------------------------------------------------------------

    def close(self) -> None:
        self._unlock_run()
        self._conn.close()

    def own_files(self) -> set[Path]:
        """The files this store keeps (a run over a folder holding them leaves them out)."""
        from attnswitch.pipeline.ann import HnswIndex

        db = self.path.resolve()
        return {db, *(db.with_name(db.name + end) for end in ("-wal", "-shm", "-journal",
                                                              ".lock")),
                *HnswIndex.paths(db)}

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
        """One write transaction: all of it commits, or none of it (also on kill -9)."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

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

    def write_document(self, doc: Document, chunks: Sequence[ChunkLike], vectors: Any, *,
                       config: str = "", run_id: int | None = None,
                       vector_fingerprint: str | None = None) -> int:
        """Replace `doc`'s stored chunks and vectors with these, in one transaction.

        `vectors` is `[len(chunks), dim]`, any array numpy can read (a CPU torch tensor
        too); it is stored as float32, L2-normalised. With `vector_fingerprint` each
        chunk's vector key is stored (`vector_key`; else NULL). Returns the document's id.
        """
        if not doc.ok:
            raise StoreInputError("doc", "a document with text (use record_skip)",
                                  f"{doc.source!r} skipped: {doc.reason}")
        rows = _chunk_rows(chunks, vector_fingerprint)
        matrix = _vectors(vectors, len(rows))
        dim = matrix.shape[1] if len(rows) else None
        with self._transaction() as conn:
            stored_dim = self.dim
            if dim is not None and stored_dim is not None and dim != stored_dim:
                if conn.execute("SELECT EXISTS (SELECT 1 FROM chunks)").fetchone()[0]:
                    raise StoreInputError(
                        "vectors", f"dimension {stored_dim} (this store's)",
                        f"{dim}: a model with another dimension needs another store")
            if dim is not None and dim != stored_dim:
                conn.execute("INSERT OR REPLACE INTO meta VALUES ('dim', ?)", (str(dim),))
            doc_id = self._upsert(conn, doc, "indexed", config, run_id,
                                  n_chunks=len(rows), n_tokens=sum(r[1] for r in rows))
            conn.execute("DELETE FROM chunks WHERE doc_id = ?", (doc_id,))
            conn.executemany(
                "INSERT INTO chunks (doc_id, ordinal, text, n_tokens, char_start, char_end,"
                " heading_path, location, vector_key, language, vector) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                ((doc_id, i, *row, matrix[i].tobytes()) for i, row in enumerate(rows)),
            )
        return doc_id

    def touch(self, doc: Document) -> None:
        """Record the size and mtime of an unchanged document, so `is_fresh` sees it."""
        self._conn.execute("UPDATE documents SET size = ?, mtime_ns = ? WHERE root = ? AND "
                           "source = ? AND sha256 IS ?",
                           (doc.size, doc.mtime_ns, doc.root, doc.source, doc.sha256))

    def remove(self, root: str | os.PathLike, sources: Iterable[str]) -> int:
        """Delete these documents of `root` and their chunks, in one transaction; returns
        how many documents were removed."""
        key = root_key(root)
        with self._transaction() as conn:
            cur = conn.executemany("DELETE FROM documents WHERE root = ? AND source = ?",
                                   ((key, s) for s in sources))
            return cur.rowcount

    def _upsert(self, conn: sqlite3.Connection, doc: Document, status: str, config: str,
                run_id: int | None, *, n_chunks: int = 0, n_tokens: int = 0) -> int:
        values = self._document_values(doc, status, config, run_id, n_chunks, n_tokens)
        cols = ", ".join(values)
        marks = ", ".join(f":{c}" for c in values)
        updates = ", ".join(f"{c} = excluded.{c}" for c in values if c not in ("root",
                                                                               "source"))
        conn.execute(f"INSERT INTO documents ({cols}) VALUES ({marks}) "
                     f"ON CONFLICT (root, source) DO UPDATE SET {updates}", values)
        return conn.execute("SELECT id FROM documents WHERE root = ? AND source = ?",
                            (doc.root, doc.source)).fetchone()[0]

    # -- runs -----------------------------------------------------------------------

    def _run_finished(self, status: str) -> None:
        if status == "completed":  # else the next search replays the log, or rebuilds
            self.sync_index()

    def sync_index(self) -> None:
        """Bring the HNSW graph beside the file up to the committed chunks and save it, then
        drop the log it no longer needs; below `exact_below` chunks there is no graph.
        Called by `finish_run`, under the run lock (one writer of the graph at a time)."""
        from attnswitch.pipeline.ann import HnswIndex

        if self.count() < self.exact_below:
            HnswIndex.remove_files(self.path)
            upto = self.chunk_log_state()[1]
        else:
            graph = HnswIndex.open(self, writable=True)
            graph.save(self)
            upto = graph.seq
            self._dense = (upto, graph)
        self._conn.execute("DELETE FROM chunk_log WHERE seq <= ?", (upto,))

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
            raise StoreBusyError(f"{self.path}: another attnswitch run is writing this "
                                 "store; wait for it or use another --db") from None
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
        docs, tokens = conn.execute("SELECT COUNT(*), COALESCE(SUM(n_tokens), 0) FROM "
                                    "documents WHERE status = 'indexed'").fetchone()
        n_chunks = conn.execute("SELECT COUNT(*) FROM chunks").fetchone()[0]
        skipped = conn.execute("SELECT root, source, reason, skip FROM documents WHERE "
                               "status = 'skipped' ORDER BY root, source").fetchall()
        roots = tuple(r[0] for r in conn.execute("SELECT DISTINCT root FROM documents "
                                                 "ORDER BY root"))
        runs = self.runs(limit=1)
        return StoreStatus(
            path=self.location, documents=docs, chunks=n_chunks, tokens=tokens,
            skipped=len(skipped),
            skipped_by_reason=dict(Counter(r[3] or "unknown" for r in skipped)),
            skipped_files=tuple((r[0], r[1], r[2] or "") for r in skipped),
            dim=self.dim, roots=roots, last_run=runs[0] if runs else None,
            copies=self._copies(),
        )

    def vectors(self) -> tuple[np.ndarray, np.ndarray]:
        """All vectors as (chunk ids int64 `[N]`, float32 `[N, dim]`), ordered by id."""
        rows = self._conn.execute("SELECT id, vector FROM chunks ORDER BY id").fetchall()
        return _unpack(rows, self.dim or 0, self.path)

    def count(self) -> int:
        """How many chunks are stored. Counted once per log position (every insert and
        delete of a chunk moves it), by a scan of the small (doc_id, ordinal) index."""
        with self.reading():
            position = self._log_position()
            if self._counted is None or self._counted[0] != position:
                self._counted = (position, int(self._conn.execute(
                    "SELECT COUNT(*) FROM chunks").fetchone()[0]))
            return self._counted[1]

    def max_chunk_id(self) -> int:
        """The largest chunk id stored (0 when none): one descent of the rowid b-tree."""
        return int(self._conn.execute("SELECT COALESCE(MAX(id), 0) FROM chunks"
                                      ).fetchone()[0])

    def chunk_log_state(self) -> tuple[int | None, int, int]:
        """(first logged position or None when the log is empty, last position ever
        logged, chunk count): what `ann.HnswIndex` checks its saved graph against."""
        first = self._conn.execute("SELECT MIN(seq) FROM chunk_log").fetchone()[0]
        return first, self._log_position(), self.count()

    def _log_position(self) -> int:
        row = self._conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'chunk_log'"
                                 ).fetchone()
        return int(row[0]) if row else 0

    def chunk_log_ids(self, after: int, upto: int) -> list[int]:
        """The chunk ids inserted or deleted at log positions (after, upto]."""
        return [r[0] for r in self._conn.execute(
            "SELECT DISTINCT chunk_id FROM chunk_log WHERE seq > ? AND seq <= ?",
            (after, upto))]

    def vectors_of(self, ids: Iterable[int]) -> tuple[np.ndarray, np.ndarray]:
        """(ids, vectors) of those of these chunk ids that are stored, by id."""
        ids = sorted({int(i) for i in ids})
        found: list[tuple[int, bytes]] = []
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500]
            found += self._conn.execute(
                f"SELECT id, vector FROM chunks WHERE id IN ({', '.join('?' * len(part))}) "
                "ORDER BY id", part).fetchall()
        return _unpack(found, self.dim or 0, self.path)

    def iter_vectors(self, batch: int = 65536) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """All (ids, vectors) in batches of `batch` rows, by id."""
        last = -1
        while True:
            rows = self._conn.execute("SELECT id, vector FROM chunks WHERE id > ? ORDER BY id"
                                      " LIMIT ?", (last, batch)).fetchall()
            if not rows:
                return
            last = rows[-1][0]
            yield _unpack(rows, self.dim or 0, self.path)

    def dense(self, queries: np.ndarray, n: int, ef: int | None = None,
              where: SearchFilter | None = None) -> list[list[tuple[int, float]]]:
        """The `n` nearest (chunk id, cosine) per row of `queries` `[Q, dim]` (normalised):
        exact below `exact_below` chunks, else from the HNSW graph (`ann.HnswIndex`) with a
        search beam of `ef` (default `ef_search`); the graph is loaded once and reloaded
        when a write has been committed since. With `where`, among the chunks of the
        documents it keeps only (`_dense_within`)."""
        from attnswitch.pipeline.ann import HnswIndex, exact_top_k

        ef = self.beam(ef)
        if where is not None:
            return self._dense_within(queries, n, ef, where)
        position = self._log_position()
        if self._dense is None or self._dense[0] != position:
            self._dense = None  # the old one is garbage before the new one loads
            if self.count() < self.exact_below:
                searcher: Any = self.vectors()
            else:
                searcher = HnswIndex.open(self)
                if not searcher.mapped:
                    self._keep(searcher)
            self._dense = (position, searcher)
        searcher = self._dense[1]
        if isinstance(searcher, tuple):
            return exact_top_k(*searcher, queries, n)
        return searcher.search(queries, n, ef)

    def _dense_within(self, queries: np.ndarray, n: int, ef: int,
                      where: SearchFilter) -> list[list[tuple[int, float]]]:
        """`dense` among the chunks of the documents `where` keeps. Few of them (below
        `exact_below`): an exact search of their vectors. Many: the graph searched for
        more candidates than `n`, as many more as the filter is selective, doubled until
        every query has `n` allowed chunks or the whole graph is returned; so `n` hits
        come back whenever `n` chunks pass (hand-written: usearch's Python search takes
        no predicate)."""
        from attnswitch.pipeline.ann import exact_top_k

        allowed = {int(r[0]) for r in self._conn.execute(
            "SELECT id FROM chunks WHERE doc_id IN (SELECT value FROM json_each(?))",
            (json.dumps(self.allowed_documents(where)),))}
        if not allowed:
            return [[] for _ in range(len(queries))]
        total = self.count()
        if len(allowed) < self.exact_below or total < self.exact_below:
            return exact_top_k(*self.vectors_of(allowed), queries, n)
        want = min(int(n), len(allowed))
        wide = min(total, max(2 * want, int(2 * want * total / len(allowed))))
        while True:
            found = self.dense(queries, wide, ef)
            kept = [[hit for hit in hits if hit[0] in allowed][:want] for hits in found]
            if all(len(hits) == want for hits in kept) or wide >= total:
                return kept
            wide = min(total, 2 * wide)

    def _keep(self, graph: Any) -> None:
        """Save a graph this search rebuilt or caught up, so that the next search maps it
        instead of paying the same again; only when no run holds the store (a run saves its
        own when it ends) and the folder is writable."""
        try:
            self._lock_run()
        except (StoreBusyError, OSError):
            return
        try:
            graph.save(self)
        except OSError:
            pass
        finally:
            self._unlock_run()

    def keyword(self, text: str, n: int,
                where: SearchFilter | None = None) -> list[tuple[int, float]]:
        """The `n` best (chunk id, BM25 score, higher is better) for the terms of `text`
        (`analyzer.query_terms` for the stored languages: its words among the chunks'
        words, its stems among their stems, any of them; FTS5's BM25 ranks those with more
        and rarer ones first, a stem's match weighing `analyzer.STEM_WEIGHT`); with
        `where`, among the chunks of the documents it keeps only."""
        terms, stems = analyzer.query_terms(text, self.languages())
        if not terms and not stems:
            return []
        # Each term a quoted FTS5 string in its column: no query syntax can leak in.
        match = " OR ".join(f'{column} : "' + t.replace('"', '""') + '"'
                            for column, items in (("terms", terms[:MAX_QUERY_TERMS]),
                                                  ("stems", stems[:MAX_QUERY_TERMS]))
                            for t in items)
        rank = f"bm25(chunks_terms, 1.0, {analyzer.STEM_WEIGHT})"
        if where is None:
            rows = self._conn.execute(
                f"SELECT rowid, {rank} FROM chunks_terms WHERE chunks_terms "
                f"MATCH ? ORDER BY {rank}, rowid LIMIT ?", (match, int(n))).fetchall()
        else:
            rows = self._conn.execute(
                f"SELECT chunks_terms.rowid, {rank} FROM chunks_terms JOIN "
                "chunks c ON c.id = chunks_terms.rowid WHERE chunks_terms MATCH ? AND "
                f"c.doc_id IN (SELECT value FROM json_each(?)) ORDER BY {rank}, "
                "chunks_terms.rowid LIMIT ?",
                (match, json.dumps(self.allowed_documents(where)), int(n))).fetchall()
        return [(int(r[0]), -float(r[1])) for r in rows]

    def chunks(self, ids: Iterable[int]) -> dict[int, ChunkRow]:
        """The chunk rows (with their document's root and source) for these ids."""
        ids = [int(i) for i in ids]
        out: dict[int, ChunkRow] = {}
        for start in range(0, len(ids), 500):
            part = ids[start:start + 500]
            marks = ", ".join("?" * len(part))
            for row in self._conn.execute(
                    f"SELECT {CHUNK_SELECT} FROM chunks c JOIN documents d "
                    f"ON d.id = c.doc_id WHERE c.id IN ({marks})", part):
                out[row[0]] = ChunkRow.from_row(row)
        return out

    def document_chunks(self, root: str | os.PathLike, source: str) -> list[ChunkRow]:
        """One document's chunks in order."""
        rows = self._conn.execute(
            f"SELECT {CHUNK_SELECT} FROM chunks c JOIN documents d ON d.id = c.doc_id "
            "WHERE d.root = ? AND d.source = ? ORDER BY c.ordinal",
            (root_key(root), source))
        return [ChunkRow.from_row(r) for r in rows]

    def vectors_by_key(self, keys: Iterable[str]) -> dict[str, np.ndarray]:
        """vector key -> stored vector (float32 `[dim]`) of those of `keys` that any
        stored chunk has (of any document): what a run reuses instead of encoding."""
        keys, dim, out = sorted(set(keys)), self.dim or 0, {}
        for start in range(0, len(keys), 500):
            part = keys[start:start + 500]
            for k, v in self._conn.execute(
                    "SELECT vector_key, vector FROM chunks WHERE vector_key IN "
                    f"({', '.join('?' * len(part))})", part):
                if len(v) == 4 * dim:
                    out[k] = np.frombuffer(v, "<f4").astype(np.float32)
        return out

    def stored_vectors(self, root: str | os.PathLike, source: str,
                       keys: Iterable[str]) -> dict[str, np.ndarray]:
        """vector key -> stored vector (float32 `[dim]`) of those of `keys` that one of
        the document's stored chunks has: what a run reuses instead of encoding."""
        wanted = set(keys)
        rows = self._conn.execute(
            "SELECT c.vector_key, c.vector FROM chunks c JOIN documents d ON d.id = c.doc_id "
            "WHERE d.root = ? AND d.source = ? AND c.vector_key IS NOT NULL",
            (root_key(root), source)).fetchall()
        dim = self.dim or 0
        return {k: np.frombuffer(v, "<f4").astype(np.float32) for k, v in rows
                if k in wanted and len(v) == 4 * dim}


def _unpack(rows: Sequence[tuple[int, bytes]], dim: int,
            where: Any) -> tuple[np.ndarray, np.ndarray]:
    """(ids int64 `[N]`, float32 `[N, dim]`) of (id, little-endian float32 bytes) rows;
    `StoreCorruptError` naming `where` (the store) for a vector of another length."""
    if not rows:
        return np.zeros(0, np.int64), np.zeros((0, dim), np.float32)
    ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
    if not dim:
        raise StoreCorruptError(f"{where}: expected the vectors' dimension in its "
                                f"meta table, got none beside {len(rows)} chunks; {REBUILD}")
    bad = [r[0] for r in rows if not isinstance(r[1], bytes) or len(r[1]) != 4 * dim]
    if bad:
        raise StoreCorruptError(
            f"{where}: expected vectors of {dim * 4} bytes (dimension {dim}), got "
            f"{len(bad)} chunk(s) of another length (ids {bad[:5]}); {REBUILD}")
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4")
    return ids, matrix.reshape(len(rows), dim).astype(np.float32, copy=False)


def _chunk_rows(chunks: Sequence[ChunkLike], vector_fingerprint: str | None = None
                ) -> list[tuple[str, int, int, int, str, str, str | None, str]]:
    """Each chunk's (text, n_tokens, start, end, heading path JSON, location JSON, vector
    key, language), checked; the language is `analyzer.detect_language`'s."""
    rows = []
    for i, c in enumerate(chunks):
        try:
            text, n_tokens, start, end = c.text, c.n_tokens, c.start, c.end
        except AttributeError as exc:
            raise StoreInputError(f"chunks[{i}]", "attributes text, n_tokens, start, end",
                                  f"{type(c).__name__} ({exc})") from None
        if not isinstance(text, str):
            raise StoreInputError(f"chunks[{i}].text", "str", type(text).__name__)
        for name, value in (("n_tokens", n_tokens), ("start", start), ("end", end)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) \
                    or value < 0:
                raise StoreInputError(f"chunks[{i}].{name}", "an int >= 0", repr(value))
        if end < start:
            raise StoreInputError(f"chunks[{i}].end", f">= start {start}", end)
        path = tuple(getattr(c, "heading_path", None) or ())
        if not all(isinstance(h, str) for h in path):
            raise StoreInputError(f"chunks[{i}].heading_path", "a tuple of str", repr(path))
        location = getattr(c, "location", None)
        where = location.to_dict() if hasattr(location, "to_dict") else dict(location or {})
        key = (vector_key(vector_fingerprint, getattr(c, "encoder_text", text))
               if vector_fingerprint else None)
        rows.append((text, int(n_tokens), int(start), int(end),
                     json.dumps(list(path), ensure_ascii=False),
                     json.dumps(where, sort_keys=True), key,
                     analyzer.detect_language(text)))
    return rows


def _vectors(vectors: Any, n: int) -> np.ndarray:
    try:
        matrix = np.asarray(vectors, dtype=np.float32)
    except (TypeError, ValueError) as exc:
        raise StoreInputError("vectors", "a numeric array", f"{type(vectors).__name__} "
                              f"({exc})") from None
    if n == 0 and matrix.size == 0:
        return matrix.reshape(0, matrix.shape[-1] if matrix.ndim == 2 else 0)
    if matrix.ndim != 2 or matrix.shape[0] != n or matrix.shape[1] == 0:
        raise StoreInputError("vectors", f"shape [{n}, dim] (one row per chunk)",
                              list(matrix.shape))
    if not np.isfinite(matrix).all():
        raise StoreInputError("vectors", "finite values", "NaN or inf")
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    if (norms == 0).any():
        raise StoreInputError("vectors", "non-zero rows",
                              f"zero vector at rows {np.flatnonzero(norms[:, 0] == 0)[:5]}")
    return np.ascontiguousarray(matrix / norms, dtype="<f4")
