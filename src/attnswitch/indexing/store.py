"""Store: documents, chunks, vectors and run state, behind one protocol (`Store`), and the
names its callers use, re-exported from the modules that define them: the records
(`records.py`), the errors (`store_errors.py`), the SQLite store and its paths
(`store_sqlite.py`). What both stores share is `store_base.StoreBase`; the SQLite file's
schema and upgrades are `sqlite_schema.py`.

`Store` is storage, in two halves and a few members of its own:

- `StoreReading`: what a search reads (chunks, vectors, dense and keyword search, filters
  and who may read what (`may_read`, a reader's `allowed_documents`: store_access.py),
  the stored documents' rows, status and runs, a deadline on reads);
- `StoreWriting`: what `writer.IndexWriter` needs underneath (the bulk lookups a plan
  makes, the writes and deletes of documents, the content-dedup queries, the run lock and
  the runs table). Callers write through the writer, which plans, holds the run lock (one
  writer at a time) and refuses writes without it; the stores' own members are its
  primitives;
- `Store` itself: both, plus opening and closing, the key-value meta table and
  `jobs_table()`, the service's jobs table as a repository of its own
  (`jobs_sql.JobsTable`; no caller writes SQL against a store).

Two implementations, opened by `location.open_store(location)`:

- `SQLiteStore` (`store_sqlite`): one SQLite file (stdlib sqlite3, WAL), the default.
  Keyword search by FTS5 (BM25); dense search exact below `EXACT_BELOW` chunks, else by
  an HNSW graph kept beside the file (`ann.HnswIndex`).
- `PostgresStore` (`store_postgres`, for `postgresql://...` locations): a PostgreSQL
  server with pgvector. Keyword search by PostgreSQL full-text search; dense search by
  pgvector's HNSW index. Other processes and nodes may write to it (`url`).

The store is what makes a run resumable and idempotent:

- A document's row (its content hash, its config) and all its chunks and vectors are
  written in one transaction (`write_document`). A run killed at any moment, `kill -9`
  included, leaves each document either fully at its old state or fully at its new one;
  the next run's plan sees the old hash and redoes exactly the documents not committed.
- The writer's plan (`writer.IndexWriter.plan(root, listing, config)`) compares an
  ingested listing with the stored state: new, changed (other hash, other config, or previously skipped), unchanged, skipped
  (by ingest, with its reason) and deleted (stored under `root`, absent from the listing).
  `config` is a fingerprint of whatever makes vectors differ (model, chunking): a document
  indexed under another config is changed.
- Documents are keyed by (root, source): one store may index several folders, and a plan
  only ever deletes within the root it was given.

Vectors go in and come out as float32, L2-normalised, so cosine similarity is a dot
product; each is stored with its chunk in float16 (`records.VECTOR_DTYPE`: half the bytes,
the same search quality, docs/results/vector_precision.md), so what comes out is what went
in rounded to float16 (each element to within 2^-11 of itself, the norm to within 1e-4
of 1 at dimension 384). Every vector in a store has the store's one dimension (`dim`).
Bad input (wrong dimension, non-finite or zero vectors, a skipped document passed as
indexable, chunks and vectors of different counts) raises `StoreInputError` before
anything is written. A stored vector of the wrong length raises `StoreCorruptError` when
the vectors are read (see `store_errors` for every error about the file itself).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from attnswitch.documents.ingest import Document
from attnswitch.documents.permissions import Access
from attnswitch.indexing.access import Reader
from attnswitch.indexing.filters import SearchFilter
from attnswitch.indexing.jobs_sql import JobsTable
from attnswitch.indexing.records import (
    CHUNK_SELECT,
    CHUNK_STRUCTURE_COLUMNS,
    EF_SEARCH,
    MAX_EF_SEARCH,
    MAX_QUERY_TERMS,
    RUN_LOCK_WAIT_S,
    RUN_STATUSES,
    SCHEMA_VERSION,
    VECTOR_DTYPE,
    ChunkLike,
    ChunkRecord,
    ChunkRow,
    Coverage,
    DocumentTotals,
    RunRecord,
    StoredDocument,
    StoreStatus,
    SyncPlan,
    Unencoded,
    check_ef_search,
    indexed_sha,
    is_fresh_row,
    keyword_terms,
    root_key,
    vector_key,
)
from attnswitch.indexing.sqlite_file import (
    DB_NAME,
    DEFAULT_DATA_DIR,
    check_index_file,
    resolve_path,
)
from attnswitch.indexing.store_base import StoreBase
from attnswitch.indexing.store_errors import (
    REBUILD,
    StoreBusyError,
    StoreConnectError,
    StoreCorruptError,
    StoreDeadlineError,
    StoreInputError,
    check_schema,
)
from attnswitch.indexing.store_sqlite import EXACT_BELOW, SQLiteStore

__all__ = [
    "CHUNK_SELECT",
    "CHUNK_STRUCTURE_COLUMNS",
    "DB_NAME",
    "DEFAULT_DATA_DIR",
    "EF_SEARCH",
    "EXACT_BELOW",
    "MAX_EF_SEARCH",
    "MAX_QUERY_TERMS",
    "REBUILD",
    "RUN_LOCK_WAIT_S",
    "RUN_STATUSES",
    "SCHEMA_VERSION",
    "VECTOR_DTYPE",
    "ChunkLike",
    "ChunkRecord",
    "ChunkRow",
    "Coverage",
    "DocumentTotals",
    "RunRecord",
    "SQLiteStore",
    "is_own",
    "Store",
    "StoreBase",
    "StoreReading",
    "StoreWriting",
    "StoreBusyError",
    "StoreConnectError",
    "StoreCorruptError",
    "StoreDeadlineError",
    "StoreInputError",
    "StoreStatus",
    "StoredDocument",
    "SyncPlan",
    "Unencoded",
    "check_ef_search",
    "check_index_file",
    "check_schema",
    "indexed_sha",
    "is_fresh_row",
    "keyword_terms",
    "resolve_path",
    "root_key",
    "vector_key",
]


class StoreReading(Protocol):
    """What a search reads of a store (the searcher's side).

    `location` names the store for people (a file path, or a URL without its password).
    `ef_search` is the ANN search beam of a dense search that names none.
    Vectors out are float32 `[N, dim]`, L2-normalised (stored in float16: out is in
    rounded to it); ids are chunk ids.
    `deadline(at)` stops the reads inside its block at the `time.monotonic()` time `at`
    (`StoreDeadlineError`; the service's search, `store_base.StoreBase.deadline`).
    """

    location: str
    ef_search: int

    @property
    def dim(self) -> int | None: ...
    def meta(self, key: str) -> str | None: ...
    def lookup(self, root: str | os.PathLike[str], source: str) -> StoredDocument | None: ...
    def lookup_many(
        self, places: Iterable[tuple[str | os.PathLike[str], str]]
    ) -> dict[tuple[str, str], StoredDocument]: ...
    def copies_of_many(
        self, keys: Iterable[tuple[str, str]]
    ) -> dict[tuple[str, str], list[StoredDocument]]: ...
    def sources(self, root: str | os.PathLike[str]) -> set[str]: ...
    def roots(self) -> list[str]: ...
    def root_counts(self, root: str | os.PathLike[str]) -> tuple[int, int]: ...
    def runs(self, limit: int | None = None) -> list[RunRecord]: ...
    def status(self) -> StoreStatus: ...
    def count(self) -> int: ...
    def has_chunks(self) -> bool: ...
    def vectors(self) -> tuple[np.ndarray, np.ndarray]: ...
    def chunks(self, ids: Iterable[int]) -> dict[int, ChunkRow]: ...
    def document_chunks(self, root: str | os.PathLike[str], source: str) -> list[ChunkRow]: ...
    def dense(
        self, queries: np.ndarray, n: int, ef: int | None = None, where: SearchFilter | None = None
    ) -> list[list[tuple[int, float]]]: ...
    def keyword(
        self, text: str, n: int, where: SearchFilter | None = None
    ) -> list[tuple[int, float]]: ...
    def quick(
        self,
        queries: np.ndarray,
        n: int,
        where: SearchFilter | None = None,
        ef: int | None = None,
    ) -> list[list[tuple[int, float]]]: ...
    def quick_model(self) -> dict[str, Any] | None: ...
    def coverage(self) -> Coverage: ...
    def totals_of(self, documents: Sequence[int]) -> DocumentTotals: ...
    def unencoded_count(self) -> int: ...
    def unencoded_among(self, ids: Sequence[int]) -> list[Unencoded]: ...
    def fill_vectors(self, ids: Sequence[int], keys: Sequence[str | None], vectors: Any) -> int: ...
    def allowed_documents(self, where: SearchFilter) -> list[int]: ...
    def may_read(self, reader: Reader | None, document_id: int) -> bool: ...
    def languages(self) -> list[str]: ...
    def indexed_bytes(self) -> int: ...
    def data_version(self) -> int | None: ...
    def deadline(self, at: float | None) -> contextlib.AbstractContextManager[None]: ...


class StoreWriting(Protocol):
    """What `writer.IndexWriter` needs of a store underneath: its primitives. The writer
    plans with the bulk lookups (`lookup_many`, `sources`), holds the run lock for its
    writes (`exclusive`: one holder per store at a time, here or in another process;
    `StoreBusyError` otherwise) and records runs in it (`open_run`, `close_run`).

    `url` is how another process or node opens the store for writing (`open_store(url)`),
    None when only this process may write (SQLite: one writer, kept with the driver).
    Vectors in are float32 `[N, dim]`, any array numpy reads; each is L2-normalised.
    `forget`, the writes and `sync_index` are to be called under the run lock; a run's
    `close_run` keeps it (the writer releases it).
    """

    location: str
    url: str | None

    def set_meta(self, key: str, value: str) -> None: ...
    def lookup(self, root: str | os.PathLike[str], source: str) -> StoredDocument | None: ...
    def lookup_many(
        self, places: Iterable[tuple[str | os.PathLike[str], str]]
    ) -> dict[tuple[str, str], StoredDocument]: ...
    def sources(self, root: str | os.PathLike[str]) -> set[str]: ...
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
    ) -> int: ...
    def record_skip(self, doc: Document, *, config: str = "", run_id: int | None = None) -> int: ...
    def touch(self, doc: Document) -> None: ...
    def refresh_access(
        self, root: str | os.PathLike[str], accesses: Mapping[str, Access | None]
    ) -> int: ...
    def remove(self, root: str | os.PathLike[str], sources: Iterable[str]) -> int: ...
    def forget(self, root: str | os.PathLike[str], source: str = "") -> int: ...
    def indexed_sizes(self, config: str) -> set[int]: ...
    def copies_of(self, sha256: str, config: str) -> list[StoredDocument]: ...
    def copy_document(
        self, original: StoredDocument, doc: Document, *, run_id: int | None = None
    ) -> int: ...
    def move_document(
        self, root: str | os.PathLike[str], old_source: str, doc: Document
    ) -> bool: ...
    def vectors_by_key(self, keys: Iterable[str]) -> dict[str, np.ndarray]: ...
    def expect_dim(self, dim: int) -> None: ...
    def set_quick_model(self, fingerprint: str, dim: int) -> None: ...
    def unencoded(self, limit: int) -> list[Unencoded]: ...
    def unencoded_of(self, doc_id: int) -> list[Unencoded]: ...
    def unencoded_count(self) -> int: ...
    def fill_vectors(self, ids: Sequence[int], keys: Sequence[str | None], vectors: Any) -> int: ...
    def exclusive(
        self, wait_s: float = RUN_LOCK_WAIT_S
    ) -> contextlib.AbstractContextManager[None]: ...
    def check_unlocked(self, wait_s: float = 0.0) -> None: ...
    def open_run(self, root: str | os.PathLike[str] | None = None, config: str = "") -> int: ...
    def close_run(
        self,
        run_id: int,
        status: str = "completed",
        *,
        counts: dict[str, Any] | None = None,
        summary: dict[str, Any] | None = None,
    ) -> None: ...
    def sync_index(self) -> None: ...


class Store(StoreReading, StoreWriting, Protocol):
    """A store: `StoreReading` and `StoreWriting` (see the module doc), opened and closed,
    with its key-value meta table and the service's jobs table (`jobs_table()`, a
    repository of its own). `SQLiteStore` and `store_postgres.PostgresStore` implement it;
    tests/indexing/test_store_contract.py holds both to its behaviour.
    """

    def own_files(self) -> set[Path]:
        """The files and folders this store keeps (everything in such a folder is its own
        too: `is_own`)."""
        ...

    def close(self) -> None: ...
    def __enter__(self) -> Store: ...
    def __exit__(self, *exc: object) -> None: ...
    def jobs_table(self) -> JobsTable: ...


def is_own(path: Path, own: set[Path]) -> bool:
    """Whether `path` is one of a store's own files or lies in one of its own folders
    (`own`: `Store.own_files`)."""
    return path in own or not own.isdisjoint(path.parents)
